/*
 * node.c
 *	  gibbs_nb.blocked_node: a node of a blocked chain (worker/nodes.h) in
 *	  the backend that calls it.  Its first call reads its part of the
 *	  source (gnb_read_part) and keeps it, with the node's labels and sums,
 *	  in the backend's memory; each later call of the job answers one of the
 *	  chain's calls from that memory, without reading again;
 *	  gibbs_nb.blocked_node_fold and gibbs_nb.blocked_node_combined combine
 *	  the chains' estimates of its documents where they are, and
 *	  gibbs_nb.blocked_node_scores scores them by a labels-only model and
 *	  keeps the scores; gibbs_nb.blocked_node_label gives one document's
 *	  label by its id in the version (by those scores, or the chains'
 *	  means).
 *
 * A node is part `part` of `parts` of one relation of its own server (the
 * source, or on Citus every shard of the source this server owns, reached
 * through one of them, named by the OID the calling query found it under),
 * and the calling role's: the cache is keyed by (job, relation, part, role),
 * and it reads the relations as that role, which must be allowed to, so a
 * role reaches no node and no document it could not read itself.  It lasts until the chain releases it (a NULL call),
 * another job's first call in this backend, an error in one of its calls
 * (its state would be half changed), or the backend's end.  A query may
 * reach a node twice with one call (two rows of its relation matched the
 * query's condition): the repeat is answered NULL.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/nodes.h"
#include "security/security.h"
#include "store/store.h"
#include "gnb_label_check.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "catalog/pg_class.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "storage/lmgr.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

typedef struct NodeKey
{
	int64		job;
	Oid			relid;
	int32		part;
	Oid			role;
} NodeKey;

typedef struct NodeEntry
{
	NodeKey		key;			/* the hash key: first */
	MemoryContext cxt;			/* everything the node holds */
	GnbJobParams params;		/* the source and the sampler, as reading takes them */
	GnbCorpus	part;
	gnb_corpus	core;
	gnb_hooks	hooks;
	gnb_node   *node;
	/* the last call it answered, and what it gave since: a call again is a repeat */
	bool		answered;
	int32		folded_chain;	/* the last chain folded (-1: none) */
	bool		combined;		/* the chains combined (their mass given) */
	/* the labels-only model's scores, when the label check fell back to it */
	double	   *scores_prob;
	/* the documents by key, for their labels by id (made at the first), and which were */
	uint64	   *sorted_keys;
	int32	   *doc_of_key;
	bool	   *labelled;
	int32		last_what;
	int32		last_chain;
	int32		last_sweep;
} NodeEntry;

static HTAB *node_cache = NULL;

static void
forget_node(NodeEntry *entry)
{
	NodeKey		key = entry->key;

	if (entry->cxt)
		MemoryContextDelete(entry->cxt);
	hash_search(node_cache, &key, HASH_REMOVE, NULL);
}

/* every node of other jobs than job: one job at a time in a backend */
static void
forget_other_jobs(int64 job)
{
	HASH_SEQ_STATUS seq;
	NodeEntry  *entry;

	hash_seq_init(&seq, node_cache);
	while ((entry = hash_seq_search(&seq)) != NULL)
		if (entry->key.job != job)
			forget_node(entry);
}

/*
 * What every node of this backend holds, and `more` on top, within the
 * job's budget: one budget for them all, however many a role starts.
 */
static void
check_node_memory(const GnbJobParams *params, double more, const char *what)
{
	HASH_SEQ_STATUS seq;
	NodeEntry  *e;
	double		in_use = 0.0;

	hash_seq_init(&seq, node_cache);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->cxt)
			in_use += (double) MemoryContextMemAllocated(e->cxt, true);
	gnb_check_job_memory(params, in_use, more, what);
}

static void *
node_alloc(size_t size, void *arg)
{
	NodeEntry  *entry = arg;

	check_node_memory(&entry->params, (double) size, "a node of the chain");
	return MemoryContextAllocExtended(entry->cxt, size, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static void
node_release(void *ptr, void *arg)
{
	pfree(ptr);
}

static void
node_interrupts(void *arg)
{
	CHECK_FOR_INTERRUPTS();
}

/*
 * May the caller read the relation, or some of its columns (as a source's
 * reader may: its query then reads only those)?
 */
static bool
may_read(Oid relid)
{
	return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ANY) == ACLCHECK_OK;
}

/*
 * What a node reads, as SQL for a FROM clause: the relation itself, or when
 * it is a shard of a Citus table, every shard of that table this server owns
 * (gnb_citus_owned_shards: a node on each server, not on each shard, so that
 * a call reaches each server once), each of them readable by the caller.
 */
static char *
node_relations(Oid relid, const GnbNodeSetup *setup)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *shards;
	StringInfoData sql;
	ListCell   *lc;

	SPI_connect();
	shards = gnb_citus_owned_shards(relid);
	MemoryContextSwitchTo(cxt);
	shards = list_copy(shards);
	SPI_finish();
	MemoryContextSwitchTo(cxt);
	if (shards == NIL)
		return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										  get_rel_name(relid));
	initStringInfo(&sql);
	appendStringInfoChar(&sql, '(');
	foreach(lc, shards)
	{
		Oid			shard = lfirst_oid(lc);

		LockRelationOid(shard, AccessShareLock);
		gnb_lock_namespace_name(get_rel_namespace(shard), true);
		if (!may_read(shard))
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(shard));
		/* the columns read, not *: the caller may read only those */
		appendStringInfo(&sql, "%sSELECT %s, %s%s%s FROM %s",
						 foreach_current_index(lc) > 0 ? " UNION ALL " : "",
						 quote_identifier(setup->id_column), quote_identifier(setup->tokens_column),
						 setup->label_column[0] ? ", " : "",
						 setup->label_column[0] ? quote_identifier(setup->label_column) : "",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(shard)),
													get_rel_name(shard)));
	}
	appendStringInfoString(&sql, ") AS gnb_shards");
	return sql.data;
}

/*
 * A warm start's first labels of the node's documents: those the job's
 * worker found in the version (the setup's, by document key), -1 for the
 * others.
 */
static int32 *
warm_labels(const NodeEntry *entry, const GnbNodeSetup *setup)
{
	int32	   *init = palloc_extended(sizeof(int32) * ((Size) entry->part.n_docs + 1),
									   MCXT_ALLOC_HUGE);

	for (int32 d = 0; d < entry->part.n_docs; d++)
	{
		int64		at = gnb_key_position(setup->warm_keys, setup->n_warm, entry->part.doc_key[d]);

		if ((d & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		init[d] = at >= 0 ? setup->warm_labels[at] : -1;
	}
	return init;
}

/*
 * A new node for key from its setup: its relation (or shards, node_relations)
 * described as gibbs_nb_train describes a source, its part read as the
 * calling role.
 */
static NodeEntry *
start_node(const NodeKey *key, int32 parts, bytea *setup_value)
{
	NodeEntry  *entry;
	bool		found;
	GnbNodeSetup setup;
	MemoryContext old = CurrentMemoryContext;
	Oid			relid;
	const char *problem;
	char	   *source_sql;

	forget_other_jobs(key->job);
	/* a node of this key already: gone first, so that no entry outlives its memory */
	entry = hash_search(node_cache, key, HASH_FIND, NULL);
	if (entry != NULL)
		forget_node(entry);
	entry = hash_search(node_cache, key, HASH_ENTER, &found);
	entry->cxt = NULL;
	entry->node = NULL;
	entry->answered = false;
	entry->folded_chain = -1;
	entry->combined = false;
	entry->scores_prob = NULL;
	entry->sorted_keys = NULL;
	entry->doc_of_key = NULL;
	entry->labelled = NULL;
	PG_TRY();
	{
		entry->cxt = AllocSetContextCreate(TopMemoryContext, "gibbs_nb node",
										   ALLOCSET_DEFAULT_SIZES);
		/* the relation, readable by the caller, before anything else */
		relid = key->relid;
		LockRelationOid(relid, AccessShareLock);
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation with OID %u does not exist", relid)));
		/* its name, which the reading's query gives, leads to it until the end */
		gnb_lock_namespace_name(get_rel_namespace(relid), true);
		if (!may_read(relid))
			aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
						   get_rel_name(relid));
		MemoryContextSwitchTo(entry->cxt);
		/*
		 * the setup decoded takes about twice its size (a pointer and a chunk
		 * a token): within this backend's budget first, then the job's too
		 * (the setup's is the caller's word)
		 */
		memset(&entry->params, 0, sizeof(entry->params));
		entry->params.job_id = key->job;
		entry->params.max_job_memory = (int64) gnb_max_job_memory_kb * 1024;
		check_node_memory(&entry->params, 3.0 * VARSIZE_ANY(setup_value), "a node's setup");
		gnb_node_setup_decode(setup_value, &setup);
		source_sql = node_relations(relid, &setup);
		entry->params.max_job_memory = Min(setup.max_job_memory, entry->params.max_job_memory);
		entry->params.sampler = setup.sampler;
		check_node_memory(&entry->params, 0.0, "a node's setup");
		gnb_describe_source(relid, setup.tokens_column,
							setup.label_column[0] ? setup.label_column : NULL,
							setup.id_column, &entry->params.source);
		gnb_read_part(&entry->params, source_sql, key->part, parts, setup.tokens, setup.n_words,
					  entry->cxt, &entry->part);
		memset(&entry->core, 0, sizeof(entry->core));
		entry->core.n_docs = entry->part.n_docs;
		entry->core.n_words = setup.n_words;
		entry->core.n_classes = setup.n_classes;
		entry->core.doc_start = entry->part.doc_start;
		entry->core.word = entry->part.word;
		entry->core.count = entry->part.count;
		entry->core.label = entry->part.label;
		entry->core.doc_key = entry->part.doc_key;
		entry->core.extra_word_counts = setup.extra_word_counts;
		entry->core.extra_doc_counts = setup.extra_doc_counts;
		entry->core.all_unlabeled_count = setup.all_unlabeled_count;
		entry->core.all_n_unlabeled = setup.all_n_unlabeled;
		if (setup.warm)
			entry->core.init_label = warm_labels(entry, &setup);
		/* what only the start needed: the vocabulary, the warm start's table */
		for (int32 w = 0; w < setup.n_words; w++)
			pfree(setup.tokens[w]);
		pfree(setup.tokens);
		pfree(setup.warm_keys);
		pfree(setup.warm_labels);
		if ((problem = gnb_check(&entry->core, &entry->params.sampler)) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a node of gibbs_nb job " INT64_FORMAT " cannot train: %s",
							key->job, problem)));
		entry->hooks = gnb_default_hooks;
		entry->hooks.alloc = node_alloc;
		entry->hooks.release = node_release;
		entry->hooks.check_interrupts = node_interrupts;
		entry->hooks.arg = entry;
		entry->node = gnb_node_begin(&entry->core, &entry->params.sampler, &entry->hooks);
		MemoryContextSwitchTo(old);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		forget_node(entry);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return entry;
}

static NodeEntry *
find_node(const NodeKey *key, int32 parts)
{
	NodeEntry  *entry = hash_search(node_cache, key, HASH_FIND, NULL);

	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb job " INT64_FORMAT " has no node %d of %d of %s in this session",
						key->job, key->part, parts,
						get_rel_name(key->relid) ? get_rel_name(key->relid) :
						psprintf("relation %u", key->relid)),
				 errhint("A node starts with a call that carries its setup.")));
	return entry;
}

static void
node_key(FunctionCallInfo fcinfo, NodeKey *key, int32 *parts)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a node's job, relation, part and parts must not be NULL")));
	memset(key, 0, sizeof(*key));
	key->job = PG_GETARG_INT64(0);
	key->relid = PG_GETARG_OID(1);
	key->part = PG_GETARG_INT32(2);
	key->role = GetUserId();
	*parts = PG_GETARG_INT32(3);
	if (*parts < 1 || *parts > 65536 || key->part < 0 || key->part >= *parts)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node %d of %d is not a part of a job", key->part, *parts)));
	if (node_cache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(NodeKey);
		ctl.entrysize = sizeof(NodeEntry);
		ctl.hcxt = TopMemoryContext;
		node_cache = hash_create("gibbs_nb nodes", 16, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
}

PG_FUNCTION_INFO_V1(gibbs_nb_blocked_node);

/*
 * gibbs_nb.blocked_node(job bigint, relation oid, part int, parts int,
 *						 setup bytea, call bytea) RETURNS bytea
 *
 * Answer a call of job's blocked chain (gnb_node_call_encode) as part `part`
 * of `parts` of relation (an OID of this server), with the changes of its
 * documents' counts (gnb_count_changes_encode); NULL if it answered that
 * call already.  With a setup (node_setup.c) the node starts anew: it reads
 * its part of the relation.  A NULL call releases the node and returns
 * NULL.  Internal: the job's worker calls it, in whatever backend holds the
 * relation.
 */
Datum
gibbs_nb_blocked_node(PG_FUNCTION_ARGS)
{
	NodeKey		key;
	int32		parts;
	NodeEntry  *volatile entry;
	bytea	   *call_value;
	bytea	   *answer;
	gnb_node_call call;
	const gnb_count_changes *changes;
	const char *err;
	Size		size;
	int32		what,
				chain,
				sweep;
	MemoryContext caller_cxt = CurrentMemoryContext;

	node_key(fcinfo, &key, &parts);
	if (PG_ARGISNULL(5))
	{
		entry = hash_search(node_cache, &key, HASH_FIND, NULL);
		if (entry != NULL)
			forget_node(entry);
		PG_RETURN_NULL();
	}
	call_value = PG_GETARG_BYTEA_PP(5);
	err = gnb_node_call_peek((const uint8 *) VARDATA_ANY(call_value),
							 VARSIZE_ANY_EXHDR(call_value), &what, &chain, &sweep);
	if (err != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid gibbs_nb node call: %s", err)));
	/* the same call again, through another row of the relation */
	entry = hash_search(node_cache, &key, HASH_FIND, NULL);
	if (entry != NULL && entry->answered && entry->last_what == what &&
		entry->last_chain == chain && entry->last_sweep == sweep)
		PG_RETURN_NULL();
	entry = PG_ARGISNULL(4) ? find_node(&key, parts) :
		start_node(&key, parts, PG_GETARG_BYTEA_P(4));
	PG_TRY();
	{
		err = gnb_node_call_decode(entry->node, (const uint8 *) VARDATA_ANY(call_value),
								   VARSIZE_ANY_EXHDR(call_value), &call);
		if (err != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("invalid gibbs_nb node call: %s", err)));
		changes = gnb_node_run(entry->node, &call);
	}
	PG_CATCH();
	{
		/* a call cut short leaves the node half changed: it cannot go on */
		MemoryContextSwitchTo(caller_cxt);
		forget_node(entry);
		PG_RE_THROW();
	}
	PG_END_TRY();
	entry->answered = true;
	entry->last_what = what;
	entry->last_chain = chain;
	entry->last_sweep = sweep;
	size = gnb_count_changes_size(changes, entry->core.n_classes);
	if (size > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a node's answer of %zu bytes is too large", size)));
	answer = palloc(VARHDRSZ + size);
	SET_VARSIZE(answer, VARHDRSZ + size);
	gnb_count_changes_encode(changes, entry->core.n_classes, (uint8 *) VARDATA(answer));
	PG_RETURN_BYTEA_P(answer);
}

/*
 * The probabilities the version gives the node's documents (n_docs x K):
 * the labels-only model's scores if the label check fell back to it, else
 * the chains' means (the node has combined them).
 */
static void
version_estimates(const NodeEntry *entry, const double **prob)
{
	const int32 *last;

	if (entry->scores_prob != NULL)
	{
		*prob = entry->scores_prob;
		return;
	}
	if (!entry->combined)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a node of gibbs_nb job " INT64_FORMAT " has not combined its chains",
						entry->key.job)));
	gnb_node_combined(entry->node, prob, &last);
}

/* perm as an int array: a permutation of the node's K classes */
static int32 *
class_permutation(ArrayType *perm, int32 K)
{
	int32	   *p;
	bool	   *seen;

	if (ARR_NDIM(perm) != 1 || ARR_ELEMTYPE(perm) != INT4OID || ARR_HASNULL(perm) ||
		ArrayGetNItems(ARR_NDIM(perm), ARR_DIMS(perm)) != K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a node's class permutation must be %d integers without NULLs", K)));
	p = (int32 *) ARR_DATA_PTR(perm);
	seen = palloc0(sizeof(bool) * K);
	for (int32 k = 0; k < K; k++)
	{
		if (p[k] < 0 || p[k] >= K || seen[p[k]])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a node's class permutation must name each of its %d classes once", K)));
		seen[p[k]] = true;
	}
	pfree(seen);
	return p;
}

/* A step of the chains' combination on a node, and what it needs. */
typedef const char *(*CombineStep) (gnb_node *node, void *arg);

typedef struct FoldArgs
{
	int32		chain;
	const int32 *perm;
	gnb_exact_sum *distance;
} FoldArgs;

typedef struct CombineArgs
{
	int32		chains;
	gnb_exact_sum *mass;
} CombineArgs;

static const char *
fold_step(gnb_node *node, void *arg)
{
	FoldArgs   *a = arg;

	return gnb_node_fold(node, a->chain, a->perm, a->distance);
}

static const char *
combine_step(gnb_node *node, void *arg)
{
	CombineArgs *a = arg;

	return gnb_node_combine_end(node, a->chains, a->mass);
}

/*
 * Run a step of the chains' combination on the node: one cut short (an
 * error, a cancel) leaves its sums half changed, and the node goes; one
 * the node refuses (out of order) is an error.  what: the step, for it.
 */
static void
combine_on_node(NodeEntry *entry, int32 parts, CombineStep step, void *arg, const char *what)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	const NodeKey key = entry->key;
	const char *err = NULL;

	PG_TRY();
	{
		err = step(entry->node, arg);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller_cxt);
		forget_node(entry);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (err != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %d of %d of gibbs_nb job " INT64_FORMAT " cannot %s: %s",
						key.part, parts, key.job, what, err)));
}

PG_FUNCTION_INFO_V1(gibbs_nb_blocked_node_fold);

/*
 * gibbs_nb.blocked_node_fold(job bigint, relation oid, part int, parts int,
 *							  chain int, perm int[]) RETURNS bytea
 *
 * Fold the ended chain's estimates of the node's documents into their sums
 * over the job's chains, its class k as the model's perm[k] (the job's
 * alignment of the chain: gnb_node_fold), and answer the sum of their
 * distances from the chains' before (one exact sum,
 * gnb_exact_sums_encode); NULL if it folded that chain already.  Internal,
 * as gibbs_nb.blocked_node.
 */
Datum
gibbs_nb_blocked_node_fold(PG_FUNCTION_ARGS)
{
	NodeKey		key;
	int32		parts;
	NodeEntry  *entry;
	FoldArgs	args;
	gnb_exact_sum distance = {0};

	node_key(fcinfo, &key, &parts);
	if (PG_ARGISNULL(4) || PG_ARGISNULL(5))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a node's chain and class permutation must not be NULL")));
	entry = find_node(&key, parts);
	args.chain = PG_GETARG_INT32(4);
	if (entry->folded_chain == args.chain)
		PG_RETURN_NULL();
	args.perm = class_permutation(PG_GETARG_ARRAYTYPE_P(5), entry->core.n_classes);
	args.distance = &distance;
	combine_on_node(entry, parts, fold_step, &args, psprintf("fold chain %d", args.chain));
	entry->folded_chain = args.chain;
	PG_RETURN_BYTEA_P(gnb_exact_sums_encode(&distance, 1));
}

PG_FUNCTION_INFO_V1(gibbs_nb_blocked_node_combined);

/*
 * gibbs_nb.blocked_node_combined(job bigint, relation oid, part int,
 *								  parts int, chains int) RETURNS bytea
 *
 * The node's sums over the job's chains, all folded, made means
 * (gnb_node_combine_end), and their mass answered: 2K exact sums
 * (gnb_exact_sums_encode), of each class's probability and of its products
 * with the documents' lengths; NULL if it answered already.  Internal, as
 * gibbs_nb.blocked_node.
 */
Datum
gibbs_nb_blocked_node_combined(PG_FUNCTION_ARGS)
{
	NodeKey		key;
	int32		parts;
	NodeEntry  *entry;
	CombineArgs args;

	node_key(fcinfo, &key, &parts);
	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a node's number of chains must not be NULL")));
	entry = find_node(&key, parts);
	if (entry->combined)
		PG_RETURN_NULL();
	args.chains = PG_GETARG_INT32(4);
	args.mass = palloc0(sizeof(gnb_exact_sum) * 2 * entry->core.n_classes);
	combine_on_node(entry, parts, combine_step, &args, "combine its chains");
	entry->combined = true;
	PG_RETURN_BYTEA_P(gnb_exact_sums_encode(args.mass, 2 * entry->core.n_classes));
}

PG_FUNCTION_INFO_V1(gibbs_nb_blocked_node_scores);

/*
 * gibbs_nb.blocked_node_scores(job bigint, relation oid, part int, parts int,
 *								model bytea) RETURNS bigint
 *
 * Score the node's documents by the labels-only model the job's label check
 * fell back to (gnb_labels_only_doc), and keep the scores: the version's
 * estimates are theirs from now on (gibbs_nb.blocked_node_label).  model is K, V, pi (K) and theta-hat
 * class-major (K x V) as float8s in network order.  Returns how many
 * documents it scored; NULL if it scored them already.  Internal, as
 * gibbs_nb.blocked_node.
 */
Datum
gibbs_nb_blocked_node_scores(PG_FUNCTION_ARGS)
{
	NodeKey		key;
	int32		parts;
	NodeEntry  *entry;
	bytea	   *model;
	int32		K,
				V;
	double	   *pi;
	double	   *theta;
	double	   *prob;
	double	   *s;
	const GnbCorpus *part;

	node_key(fcinfo, &key, &parts);
	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a node's model must not be NULL")));
	entry = find_node(&key, parts);
	if (entry->scores_prob != NULL)
		PG_RETURN_NULL();
	K = entry->core.n_classes;
	V = entry->core.n_words;
	part = &entry->part;
	model = PG_GETARG_BYTEA_PP(4);
	gnb_node_model_check(model, K, V);
	/* the model detoasted and decoded, and the documents' scores, kept */
	check_node_memory(&entry->params,
					  2.0 * VARSIZE_ANY(model) + 8.0 * K * part->n_docs + 16.0 * K + 1024.0,
					  "a node's scores");
	pi = palloc(sizeof(double) * K);
	s = palloc(sizeof(double) * K);
	theta = palloc_extended(sizeof(double) * ((Size) K * V + 1), MCXT_ALLOC_HUGE);
	gnb_node_model_read(model, K, V, pi, theta);
	prob = MemoryContextAllocExtended(entry->cxt, sizeof(double) * ((Size) part->n_docs * K + 1),
									  MCXT_ALLOC_HUGE);
	for (int32 d = 0; d < part->n_docs; d++)
	{
		if ((d & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		(void) gnb_labels_only_doc(theta, pi, entry->core.extra_word_counts, K, V,
								   part->word + part->doc_start[d],
								   part->count + part->doc_start[d],
								   part->doc_start[d + 1] - part->doc_start[d], s,
								   prob + (int64) d * K);
	}
	entry->scores_prob = prob;
	PG_RETURN_INT64(part->n_docs);
}

/*
 * The node of the job, among this backend's nodes of the calling role, that
 * holds the document of id (a value of the source's id type); its place
 * there in *doc; NULL if none holds it (or there is none: a server that had
 * no rows when the job started has none).  Each node's documents are put in
 * order of their keys at the first lookup, with a mark for each document
 * labelled (13 bytes a document; 29 while they are sorted).
 */
static NodeEntry *
node_of_document(int64 job, Datum id, Oid id_type, int32 *doc)
{
	HASH_SEQ_STATUS seq;
	NodeEntry  *entry;
	NodeEntry  *holder = NULL;
	bool		keyed = false;
	uint64		key = 0;

	if (node_cache != NULL)
		hash_seq_init(&seq, node_cache);
	while (node_cache != NULL && (entry = hash_seq_search(&seq)) != NULL)
	{
		int64		at;

		if (entry->key.job != job || entry->key.role != GetUserId() || entry->node == NULL)
			continue;
		if (!keyed)
		{
			if (id_type != entry->params.source.id_type)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("the ids of gibbs_nb job " INT64_FORMAT " are of type %s, not %s",
								job, format_type_be(entry->params.source.id_type),
								format_type_be(id_type))));
			key = gnb_id_key(&entry->params.source, id);
			keyed = true;
		}
		if (entry->sorted_keys == NULL)
		{
			MemoryContext old;

			check_node_memory(&entry->params, 29.0 * entry->part.n_docs + 64.0,
							  "a node's documents by key");
			old = MemoryContextSwitchTo(entry->cxt);
			gnb_documents_by_key(entry->part.doc_key, entry->part.n_docs, &entry->sorted_keys,
								 &entry->doc_of_key);
			entry->labelled = palloc_extended((Size) entry->part.n_docs + 1,
											  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			MemoryContextSwitchTo(old);
		}
		at = gnb_key_position(entry->sorted_keys, entry->part.n_docs, key);
		if (at >= 0)
		{
			holder = entry;
			*doc = entry->doc_of_key[at];
		}
	}
	return holder;
}

/*
 * The row gibbs_nb.blocked_node_label returns, made and blessed once for
 * the backend: the function is called once a row of the source.
 */
static TupleDesc
label_row_desc(FunctionCallInfo fcinfo)
{
	static TupleDesc desc = NULL;

	if (desc == NULL)
	{
		TupleDesc	made;
		MemoryContext old;

		if (get_call_result_type(fcinfo, NULL, &made) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		old = MemoryContextSwitchTo(TopMemoryContext);
		desc = BlessTupleDesc(CreateTupleDescCopy(made));
		MemoryContextSwitchTo(old);
	}
	return desc;
}

PG_FUNCTION_INFO_V1(gibbs_nb_blocked_node_label);

/*
 * gibbs_nb.blocked_node_label(job bigint, id anyelement)
 *	  RETURNS TABLE (class_number int, probability float8, probabilities float8[])
 *
 * The label the version gives the document of id, if a node of the job in
 * this backend holds it (else no row): its most probable class's number
 * (1 for the first; ties to the earlier), that probability, and all K
 * (version_estimates).  Its job's publishing writes the labels table with
 * it, in a query that reaches each node where its documents are.  Only the
 * calling role's nodes answer; a document's label is given once (a second
 * row of it is an error).  Internal, as gibbs_nb.blocked_node.
 */
Datum
gibbs_nb_blocked_node_label(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	NodeEntry  *entry;
	int32		doc;
	const double *prob;
	int32		K;
	int32		best;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (SRF_IS_FIRSTCALL())
	{
		funcctx = SRF_FIRSTCALL_INIT();
		/* (STRICT in SQL; a NULL id is no document either way) */
		if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
			SRF_RETURN_DONE(funcctx);
		entry = node_of_document(PG_GETARG_INT64(0), PG_GETARG_DATUM(1),
								 get_fn_expr_argtype(fcinfo->flinfo, 1), &doc);
		if (entry == NULL)
			SRF_RETURN_DONE(funcctx);
		/*
		 * each document once: with as many rows as documents, every one
		 * (a row's id changed to another's since the read is not a second
		 * row of that document)
		 */
		if (entry->labelled[doc])
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the source of gibbs_nb job " INT64_FORMAT " has two rows of one of its documents",
							entry->key.job),
					 errdetail("Its ids changed while the job ran."),
					 errhint("Train again.")));
		entry->labelled[doc] = true;
		version_estimates(entry, &prob);
		K = entry->core.n_classes;
		prob += (int64) doc * K;
		for (int32 k = 0; k < K; k++)
			if (!isfinite(prob[k]))
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("gibbs_nb job " INT64_FORMAT " produced estimates that are not finite; nothing was published",
								entry->key.job)));
		best = gnb_argmax(prob, K);
		values[0] = Int32GetDatum(best + 1);
		values[1] = Float8GetDatum(prob[best]);
		values[2] = PointerGetDatum(gnb_float8_array(prob, K));
		funcctx->user_fctx = heap_form_tuple(label_row_desc(fcinfo), values, nulls);
		SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum((HeapTuple) funcctx->user_fctx));
	}
	funcctx = SRF_PERCALL_SETUP();
	SRF_RETURN_DONE(funcctx);
}
