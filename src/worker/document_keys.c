/*
 * document_keys.c
 *	  A document's key from its id (the blocked sampler's draws are keyed by
 *	  it: corpus_doc_keys), sums of documents' ids by their keys, by which
 *	  publishing checks that the rows it wrote from the source are those of
 *	  the documents the job read, and the order rows are read in by id.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/typcache.h"

/*
 * The key of a document whose id is id, a value of the source's id type
 * (corpus_doc_keys says what it is).  What a hash function allocates is
 * left in the current memory context.
 */
uint64
gnb_id_key(const GnbSourceDesc *src, Datum id)
{
	TypeCacheEntry *tc;

	if (src->id_type == INT8OID)
		return (uint64) DatumGetInt64(id);
	if (src->id_type == INT4OID)
		return (uint64) (int64) DatumGetInt32(id);
	if (src->id_type == INT2OID)
		return (uint64) (int64) DatumGetInt16(id);
	tc = lookup_type_cache(src->id_type, TYPECACHE_HASH_EXTENDED_PROC_FINFO);
	/* refused by the call (train.c); the type is the one it checked */
	if (!OidIsValid(tc->hash_extended_proc))
		elog(ERROR, "id type %s has no extended hash function", format_type_be(src->id_type));
	return DatumGetUInt64(FunctionCall2Coll(&tc->hash_extended_proc_finfo, src->id_collation,
											id, Int64GetDatum(0)));
}

/*
 * A document's term in a sum of documents' ids (mod 2^64): its key (the
 * same id, the same key), mixed (splitmix64's finalizer) so that other ids
 * hardly ever make the same sum.  Publishing compares the sum of the ids of
 * the rows it wrote with that of the ids the job read (GnbCorpus.
 * source_ids_sum): a count alone would let a row deleted and another added
 * since, or a label moved from one document to another, through.  (A sum,
 * not a proof: a change made to keep it, by whoever writes the source, is
 * not seen.)
 */
uint64
gnb_id_sum_term(const GnbSourceDesc *src, Datum id)
{
	return gnb_key_sum_term(gnb_id_key(src, id));
}

/* The same, of a document's key. */
uint64
gnb_key_sum_term(uint64 key)
{
	uint64		z = key;

	z = (z ^ (z >> 30)) * UINT64CONST(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * The order a job reads its rows in by their ids, as SQL: " ORDER BY 1"
 * (the id first) where the id type has one, else none.  The held-out rows
 * are read in it wherever they are read (their metrics' sums add alike).
 */
const char *
gnb_id_order_by(const GnbSourceDesc *src)
{
	TypeCacheEntry *tc = lookup_type_cache(src->id_type, TYPECACHE_LT_OPR);

	return OidIsValid(tc->lt_opr) ? " ORDER BY 1" : "";
}

/* A GnbEachIdFn: id's term added to a GnbIdSum (arg). */
void
gnb_id_sum_add(void *arg, Datum id)
{
	GnbIdSum   *s = arg;

	s->sum += gnb_id_sum_term(s->source, id);
}
