/*
 * corpus.c
 *	  Read the source into the sampler's input, in one short transaction.
 *
 * Runs in the worker, as the caller, with one snapshot for its queries:
 * every row's id and label (tokens are not read), the labelled rows' class x
 * word counts through gibbs_nb_class_counts (which the planner may run in
 * parallel workers; labelled documents enter the samplers only through their
 * counts, so they are not kept one by one), and the unlabelled documents with
 * their tokens, as compressed sparse rows of word ids and counts.  With
 * holdout, the labelled rows gnb_holdout_condition selects are left out of
 * the first two, and a fourth query reads them as they are (ids, tokens,
 * labels), for the published version to score: training never sees them.
 * When nodes will hold the unlabelled documents (worker/nodes.h), the third
 * reads only their ids, and the same aggregate their words' counts: their
 * tokens do not come to the job's worker.  Labels
 * become class ids in byte order of the labels, tokens word ids in byte
 * order of the tokens, and rows are read in id order when the id type has
 * one: the same seed and data give the same model whatever the scan order
 * or parallel plan.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/corpus_builder.h"
#include "worker/nodes.h"
#include "store/store.h"
#include "security/security.h"
#include "counts/counts.h"
#include "counts/tokens.h"

#include "access/detoast.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include <math.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
static void
null_id_error(const GnbJobParams *params)
{
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("id column \"%s\" of %s has NULL values",
					params->source.id_column, params->source_display)));
}

static int	cmp_uint64(const void *a, const void *b);
static bool id_is_integer(Oid type);
static void check_distinct_keys(const uint64 *sorted, int64 n);

/*
 * Run a read-only query, calling fn for every row as the executor produces
 * it: no batch of rows is ever held, and what fn allocates (detoasted
 * values) is freed after each row, so that what reading holds beyond the
 * corpus is one row, however large the rows (a view may make each of them a
 * 1 GB value).  The query's columns must have the types in `types` (ncols of
 * them): fn takes their values as such.
 */
typedef void (*row_fn) (CorpusBuilder *b, const GnbJobParams *params, Datum *values,
						bool *nulls);

typedef struct RowReceiver
{
	DestReceiver pub;
	CorpusBuilder *b;
	const GnbJobParams *params;
	int			ncols;
	const Oid  *types;
	row_fn		fn;
	MemoryContext row_cxt;
} RowReceiver;

static void
row_receiver_startup(DestReceiver *self, int operation, TupleDesc desc)
{
	RowReceiver *r = (RowReceiver *) self;

	for (int c = 0; c < r->ncols; c++)
		gnb_check_result_column(desc, c + 1, r->types[c], c == 0 ? "id" : "tokens or label");
}

static bool
row_receiver_receive(TupleTableSlot *slot, DestReceiver *self)
{
	RowReceiver *r = (RowReceiver *) self;
	MemoryContext old;

	slot_getallattrs(slot);
	old = MemoryContextSwitchTo(r->row_cxt);
	r->fn(r->b, r->params, slot->tts_values, slot->tts_isnull);
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->row_cxt);
	CHECK_FOR_INTERRUPTS();
	return true;
}

static void
row_receiver_noop(DestReceiver *self)
{
}

static void
for_each_row_with(CorpusBuilder *b, const GnbJobParams *params, const char *sql,
				  ParamListInfo args, int ncols, const Oid *types, row_fn fn)
{
	RowReceiver r;
	SPIExecuteOptions options;
	int			rc;
	int			nestlevel;

	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = row_receiver_receive;
	r.pub.rStartup = row_receiver_startup;
	r.pub.rShutdown = row_receiver_noop;
	r.pub.rDestroy = row_receiver_noop;
	r.pub.mydest = DestNone;
	r.b = b;
	r.params = params;
	r.ncols = ncols;
	r.types = types;
	r.fn = fn;
	r.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb read row",
									  ALLOCSET_DEFAULT_SIZES);
	memset(&options, 0, sizeof(options));
	options.read_only = true;
	options.dest = &r.pub;
	options.params = args;

	/*
	 * In this process alone: it is the one whose memory is watched while it
	 * reads (gnb_watch_source_memory), and a source's expressions in a
	 * parallel worker (the role's settings can force a parallel plan) would
	 * run unwatched.  Planner settings are read when the query is planned,
	 * before any of the source's code runs.
	 */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("max_parallel_workers_per_gather", "0",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* a receiver that is not SPI's makes a SELECT return SPI_OK_UTILITY */
	rc = SPI_execute_extended(sql, &options);
	AtEOXact_GUC(true, nestlevel);
	if (rc < 0)
		elog(ERROR, "gibbs_nb: reading the source failed (%s): %s", SPI_result_code_string(rc), sql);
	MemoryContextDelete(r.row_cxt);
}

static void
for_each_row(CorpusBuilder *b, const GnbJobParams *params, const char *sql,
			 int ncols, const Oid *types, row_fn fn)
{
	for_each_row_with(b, params, sql, NULL, ncols, types, fn);
}

/*
 * Before a value of the row is detoasted (or, computed by a view, used):
 * its size must fit the job's budget on top of what the corpus holds.
 */
static void
check_value_size(CorpusBuilder *b, const GnbJobParams *params, Datum value)
{
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) toast_raw_datum_size(value), "reading the source");
}

/*
 * An unlabelled document's row begins: its id must not be NULL; a row
 * without tokens is skipped (false); else the document's pairs start here.
 */
static bool
document_begins(CorpusBuilder *b, const GnbJobParams *params, bool id_null, bool no_tokens)
{
	if (id_null)
		null_id_error(params);
	if (no_tokens)
	{
		b->n_skipped++;
		return false;
	}
	if (b->n_docs == PG_INT32_MAX - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many documents")));
	if (b->n_docs == b->docs_cap)
		corpus_grow_docs(b);
	b->doc_start[b->n_docs] = b->n_pairs;
	return true;
}

/* A row's id kept: its size within the job's budget, copied into cxt. */
static Datum
keep_id(CorpusBuilder *b, const GnbJobParams *params, Datum id, MemoryContext cxt)
{
	MemoryContext old;
	Datum		copy;

	if (b->id_typlen == -1)
		check_value_size(b, params, id);
	old = MemoryContextSwitchTo(cxt);
	/*
	 * An id stored out of line is fetched now: the pointer would lead to
	 * nothing once the row is deleted and vacuumed while the job samples
	 * (publishing failed with XX001, "missing chunk number 0")
	 */
	if (b->id_typlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(id)))
		copy = PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(id)));
	else
		copy = datumCopy(id, b->id_typbyval, b->id_typlen);
	MemoryContextSwitchTo(old);
	return copy;
}

/* ... and ends, unlabelled, with its id. */
static void
document_ends(CorpusBuilder *b, const GnbJobParams *params, Datum id)
{
	b->label[b->n_docs] = -1;
	b->ids[b->n_docs] = keep_id(b, params, id, b->ids_cxt);
	b->n_docs++;
}

/*
 * A warm start's list of the previous version's ids (gnb_store_warm_list)
 * must fit the job's memory beside what cxt holds.  SPI connected.
 */
void
gnb_check_warm_start_memory(const GnbJobParams *params, MemoryContext cxt)
{
	gnb_check_job_memory_hint(params, (double) MemoryContextMemAllocated(cxt, true),
							  gnb_store_warm_start_memory(params->warm_version_id),
							  "the previous version's labels, for a warm start",
							  "Retrain without warm => true, or have a superuser raise gibbs_nb.max_job_memory (it can be set per role).");
}

/* A key into one of the builder's growing arrays of keys, within the job's budget. */
static void
append_key(CorpusBuilder *b, const GnbJobParams *params, uint64 **keys, int64 *n, int64 *cap,
		   int32 **labels, uint64 key, int32 label, const char *what)
{
	if (*n == *cap)
	{
		int64		more = Max(1024, *cap);

		gnb_check_job_memory(params, (double) MemoryContextMemAllocated(b->cxt, true),
							 (labels ? 12.0 : 8.0) * more, what);
		*keys = *keys ? repalloc_huge(*keys, sizeof(uint64) * (*cap + more)) :
			MemoryContextAllocExtended(b->cxt, sizeof(uint64) * more, MCXT_ALLOC_HUGE);
		if (labels)
			*labels = *labels ? repalloc_huge(*labels, sizeof(int32) * (*cap + more)) :
				MemoryContextAllocExtended(b->cxt, sizeof(int32) * more, MCXT_ALLOC_HUGE);
		*cap += more;
	}
	if (labels)
		(*labels)[*n] = label;
	(*keys)[(*n)++] = key;
}

/*
 * The held documents' ids of the batch, under the pinned text formats
 * publishing writes them under (gnb_pin_id_text_format; set here, between
 * the read's rows, not around the read, whose expressions must see the
 * caller's): the longest as dump text, and in a warm start the previous
 * label of each the previous version had, with its key.
 */
static void
flush_held(CorpusBuilder *b, const GnbJobParams *params)
{
	int			level;
	MemoryContext old;

	if (b->n_batch == 0)
		return;
	level = gnb_pin_id_text_format();
	old = MemoryContextSwitchTo(b->held_cxt);
	for (int32 i = 0; i < b->n_batch; i++)
	{
		char	   *text = OutputFunctionCall(&b->id_output, b->held_batch[i]);
		int32		was;

		b->held_id_dump_bytes = Max(b->held_id_dump_bytes, gnb_id_dump_bytes(text));
		was = b->warm && !b->held_batch_labeled[i] ? gnb_warm_list_class(b->warm, text) : -1;
		pfree(text);
		if (was < 0)
			continue;
		append_key(b, params, &b->warm_keys, &b->n_warm, &b->warm_cap, &b->warm_classes,
				   gnb_id_key(&params->source, b->held_batch[i]), was,
				   "a warm start's first labels");
	}
	MemoryContextSwitchTo(old);
	AtEOXact_GUC(true, level);
	MemoryContextReset(b->held_cxt);
	b->n_batch = 0;
}

/*
 * The id of a document whose row publishing writes from the source, not
 * from here (an unlabelled one nodes hold, or with them a labelled or a
 * held-out one; labeled says it is not unlabelled): added to the sum of
 * their ids (gnb_id_sum_term), kept (within the job's budget) until its
 * batch is (flush_held), checked against the labels table's key, and for an
 * unlabelled one with check_keys its key kept.  The caller counts it.
 */
static void
held_id(CorpusBuilder *b, const GnbJobParams *params, Datum id, bool labeled)
{
	Datum		kept;
	MemoryContext old;
	uint64		key;

	/* (a version's n_documents is an int4) */
	if ((int64) b->n_held + b->n_labeled + b->n_holdout >= PG_INT32_MAX - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many documents")));
	kept = keep_id(b, params, id, b->held_cxt);
	gnb_id_fits_labels_table(b->id_fit, kept);
	old = MemoryContextSwitchTo(b->held_cxt);
	key = gnb_id_key(&params->source, kept);
	MemoryContextSwitchTo(old);
	b->source_ids_sum += gnb_key_sum_term(key);
	if (b->check_keys && !labeled)
		append_key(b, params, &b->keys, &b->n_keys, &b->keys_cap, NULL, key, 0,
				   "the documents' keys, to check");
	b->held_batch_labeled[b->n_batch] = labeled;
	b->held_batch[b->n_batch++] = kept;
	if (b->n_batch == GNB_HELD_BATCH)
		flush_held(b, params);
}

/* An unlabelled document nodes hold, of id: counted, its id checked (held_id). */
static void
held_document(CorpusBuilder *b, const GnbJobParams *params, Datum id)
{
	held_id(b, params, id, false);
	b->n_held++;
}

/*
 * A held-out document of a job whose nodes hold the unlabelled ones, of id
 * and label: counted, its id checked (held_id), its label as a held-out
 * row's is (add_holdout_row); it is read and scored when the job publishes
 * (gnb_score_holdout_rows).
 */
static void
held_out_document(CorpusBuilder *b, const GnbJobParams *params, Datum id, Datum label)
{
	check_value_size(b, params, label);
	gnb_check_label_length((int) (toast_raw_datum_size(label) - VARHDRSZ));
	held_id(b, params, id, true);
	b->n_holdout++;
}

/*
 * Before the ids query of a job whose nodes hold its unlabelled documents
 * (held_document): the labels table's indexes the ids must fit, in a warm
 * start the previous version's list, within the job's memory, and whether
 * the documents' keys must be checked here.  Each node checks its own
 * documents' keys (gnb_read_part); two that collide are in one node when
 * the ids are integers (their own keys, distinct), the parts go by key
 * (gibbs_nb.blocked_nodes, add_part_row), or Citus places the rows by the
 * id (a type's 32-bit hash, by which Citus places a row, is the low half of
 * its 64-bit one at seed 0); else (a source distributed by another column)
 * this worker checks them all.  SPI connected.
 */
static void
begin_held(CorpusBuilder *b, const GnbJobParams *params)
{
	MemoryContext old = MemoryContextSwitchTo(b->scratch);
	Oid			output;
	bool		varlena;

	b->unlabeled_ids_only = true;
	b->held_cxt = AllocSetContextCreate(b->cxt, "gibbs_nb held ids", ALLOCSET_DEFAULT_SIZES);
	b->held_batch = palloc(sizeof(Datum) * GNB_HELD_BATCH);
	b->held_batch_labeled = palloc(sizeof(bool) * GNB_HELD_BATCH);
	b->labeled_value_docs = MemoryContextAllocZero(b->cxt, sizeof(int64) * GNB_MAX_CLASSES);
	getTypeOutputInfo(params->source.id_type, &output, &varlena);
	fmgr_info(output, &b->id_output);
	b->id_fit = gnb_id_fit_begin(params);
	if (!id_is_integer(params->source.id_type) && params->blocked_nodes == 0)
	{
		char	   *column = gnb_citus_nodes_column(params->source.relid);

		b->check_keys = column == NULL || strcmp(column, params->source.id_column) != 0;
	}
	if (params->warm_version_id != 0)
	{
		gnb_check_warm_start_memory(params, b->cxt);
		/* (in scratch, which SPI_finish leaves, not in SPI's context) */
		MemoryContextSwitchTo(b->scratch);
		b->warm = gnb_store_warm_list(params->warm_version_id);
	}
	MemoryContextSwitchTo(old);
}

/*
 * After it: the last batch, the keys checked, and the warm start's first
 * labels in the corpus's classes (those it has), by key.
 */
static void
end_held(CorpusBuilder *b, const GnbJobParams *params, GnbCorpus *corpus)
{
	int32	   *class_map;
	uint64	   *sorted_keys;
	int32	   *entry_of_key;
	int64		n = 0;

	flush_held(b, params);
	MemoryContextDelete(b->held_cxt);
	b->held_cxt = NULL;
	corpus->n_held = b->n_held;
	corpus->source_ids_sum = b->source_ids_sum;
	corpus->held_id_dump_bytes = b->held_id_dump_bytes;
	corpus->n_warm = 0;
	corpus->warm_keys = NULL;
	corpus->warm_labels = NULL;
	if (b->check_keys && b->n_keys > 0)
	{
		qsort(b->keys, b->n_keys, sizeof(uint64), cmp_uint64);
		check_distinct_keys(b->keys, b->n_keys);
		pfree(b->keys);
		b->keys = NULL;
	}
	if (b->warm == NULL || b->n_warm == 0)
		return;
	class_map = gnb_warm_class_map(b->warm, corpus->classes, corpus->n_classes);
	/* by key (and while they are sorted, pairs of key and entry) */
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(b->cxt, true),
						 28.0 * b->n_warm, "a warm start's first labels");
	gnb_documents_by_key(b->warm_keys, (int32) b->n_warm, &sorted_keys, &entry_of_key);
	/* two documents of one key would share their draws (corpus_doc_keys) */
	check_distinct_keys(sorted_keys, b->n_warm);
	for (int64 i = 0; i < b->n_warm; i++)
	{
		int32		label = class_map[b->warm_classes[entry_of_key[i]]];

		if (label < 0)
			continue;
		b->warm_keys[n] = sorted_keys[i];
		entry_of_key[n++] = label;
	}
	memcpy(b->warm_classes, entry_of_key, sizeof(int32) * n);
	pfree(sorted_keys);
	pfree(entry_of_key);
	corpus->n_warm = n;
	corpus->warm_keys = b->warm_keys;
	corpus->warm_labels = b->warm_classes;
}

/*
 * A labelled document of a job whose nodes hold the unlabelled ones, of id
 * and label: counted by its label, its id checked (held_id), not kept.
 */
static void
labeled_document(CorpusBuilder *b, const GnbJobParams *params, Datum id, Datum label)
{
	text	   *t;

	check_value_size(b, params, label);
	t = DatumGetTextPP(label);
	b->labeled_value_docs[corpus_intern_label(b, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t))]++;
	if ((Pointer) t != DatumGetPointer(label))
		pfree(t);
	held_id(b, params, id, true);
	b->n_labeled++;
}

/*
 * A row of the ids query: (id, label, tokens IS NULL, held out).  When
 * nodes hold the unlabelled documents, an unlabelled row is one they hold
 * (held_document), its id all the job's worker reads of it, of a
 * labelled one its id and label (labeled_document), of a held-out one its
 * id (held_out_document).
 */
static void
add_labeled_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	bool		id_null = nulls[0],
				label_null = nulls[1];
	Datum		id = values[0];
	Datum		label = values[1];
	bool		no_tokens = DatumGetBool(values[2]);
	bool		held_out = DatumGetBool(values[3]);
	text	   *t;

	if (id_null)
		null_id_error(params);
	if (no_tokens)
	{
		b->n_skipped++;
		if (held_out)
			b->n_holdout_skipped++;
		return;
	}
	if (b->unlabeled_ids_only)
	{
		if (label_null)
			held_document(b, params, id);
		else if (held_out)
			held_out_document(b, params, id, label);
		else
			labeled_document(b, params, id, label);
		return;
	}
	if (label_null || held_out)
		return;					/* read with its tokens */
	if (b->n_labeled == b->labeled_cap)
	{
		int32		cap = b->labeled_cap * 2;

		b->labeled_ids = corpus_grow(b->cxt, b->labeled_ids, sizeof(Datum), cap);
		b->labeled_value = corpus_grow(b->cxt, b->labeled_value, sizeof(int32), cap);
		b->labeled_cap = cap;
	}
	check_value_size(b, params, label);
	t = DatumGetTextPP(label);
	b->labeled_value[b->n_labeled] = corpus_intern_label(b, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	b->labeled_ids[b->n_labeled] = keep_id(b, params, id, b->cxt);
	b->n_labeled++;
}

/* A row of the documents query: (id, tokens), an unlabelled document. */
static void
add_document_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	Datum		tokens = values[1];

	if (!document_begins(b, params, nulls[0], nulls[1]))
		return;
	check_value_size(b, params, tokens);
	b->token_doc = b->n_docs;
	gnb_each_token(tokens, params->source.tokens_base == TSVECTOROID, corpus_add_token, b);
	document_ends(b, params, values[0]);
}

/*
 * A row of a node's query (gnb_read_part): (id, tokens), an unlabelled
 * document, the part's if its key is part modulo parts.  By the key, not
 * by another hash: documents whose keys collide are in one part, whose
 * check (corpus_doc_keys) finds them.
 */
static void
add_part_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	if (!nulls[0] && b->parts > 1 &&
		gnb_id_key(&params->source, values[0]) % (uint64) b->parts != (uint64) b->part)
		return;
	add_document_row(b, params, values, nulls);
}

/*
 * A row of the checked query: (id, label, tokens), a labelled document
 * whose words are already counted.  Its pairs go after the unlabelled
 * documents'; the sampler never sees them.
 */
static void
add_checked_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	text	   *t;

	if (nulls[1] || nulls[2])
		elog(ERROR, "the labelled documents changed while they were read");
	if (b->n_checked == b->checked_cap)
		elog(ERROR, "the labelled documents changed while they were read");
	check_value_size(b, params, values[1]);
	t = DatumGetTextPP(values[1]);
	b->checked_value[b->n_checked] = corpus_intern_label(b, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	if (b->checked_value[b->n_checked] >= b->n_count_values)
		elog(ERROR, "the labelled documents changed while they were read");
	b->checked_start[b->n_checked] = b->n_pairs;
	check_value_size(b, params, values[2]);
	b->token_doc = -2 - b->n_checked;
	gnb_each_token(values[2], params->source.tokens_base == TSVECTOROID, corpus_add_token, b);
	b->n_checked++;
	b->checked_start[b->n_checked] = b->n_pairs;
}

/*
 * A row of the held-out query: (id, tokens, label).  The document is kept as
 * it is, for the published version to score; its words do not enter the
 * vocabulary.
 */
static void
add_holdout_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	bool		id_null = nulls[0],
				tokens_null = nulls[1],
				label_null = nulls[2];
	Datum		id = values[0];
	Datum		tokens = values[1];
	Datum		label = values[2];
	MemoryContext old;

	if (id_null)
		null_id_error(params);
	if (tokens_null || label_null)
		elog(ERROR, "the held-out documents changed while they were read");
	if (b->n_holdout == b->holdout_cap)
	{
		int32		cap = b->holdout_cap * 2;

		b->holdout_ids = corpus_grow(b->cxt, b->holdout_ids, sizeof(Datum), cap);
		b->holdout_tokens = corpus_grow(b->cxt, b->holdout_tokens, sizeof(Datum), cap);
		b->holdout_labels = corpus_grow(b->cxt, b->holdout_labels, sizeof(char *), cap);
		b->holdout_cap = cap;
	}
	check_value_size(b, params, tokens);
	check_value_size(b, params, label);
	gnb_check_label_length((int) (toast_raw_datum_size(label) - VARHDRSZ));
	b->holdout_ids[b->n_holdout] = keep_id(b, params, id, b->cxt);
	old = MemoryContextSwitchTo(b->cxt);
	b->holdout_tokens[b->n_holdout] = PointerGetDatum(PG_DETOAST_DATUM_COPY(tokens));
	b->holdout_labels[b->n_holdout] = TextDatumGetCString(label);
	MemoryContextSwitchTo(old);
	b->n_holdout++;
}

/*
 * The class x word counts of the rows that meet condition, each counted in
 * the class label_sql gives it (SQL over the source's columns), by
 * gibbs_nb_class_counts: the planner may count them in parallel workers,
 * Citus on its workers.  Returns the value, parsed.
 * The aggregate is called as gibbs_nb.labelled_counts, in the extension's
 * own schema, where no other role can create an overload that makes the
 * call ambiguous (the extension's schema, often public, is not such a
 * place), with arguments of exactly its argument types (a domain over
 * text[] is cast to text[]), so that no aggregate another role created, in
 * any schema, can match better.
 */
static void
read_counts(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
			const char *label_sql, const char *condition, MemoryContext parse_cxt,
			GnbParsedCounts *pc)
{
	const GnbSourceDesc *src = &params->source;
	char	   *sql;
	bool		isnull;
	MemoryContext old;
	bytea	   *value;
	int64		budget_kb;
	char		budget[32];
	int			nestlevel;

	/*
	 * The aggregate's state, in this process and in each parallel worker, is
	 * bounded by what is left of the job's budget: without it, millions of
	 * distinct tokens would build a state of gigabytes before anything here
	 * could check the value.  The budget is the aggregate's third argument,
	 * a constant of the plan the parallel workers run: nothing the source
	 * runs can lift it (a function of the source's view that ran RESET ALL
	 * reset gibbs_nb.class_counts_budget, and the worker reached 2 GB under
	 * a 64 MB cap).  The setting is set too, for the leader's combining; the
	 * query's own GUC level restores it.
	 */
	budget_kb = Max((params->max_job_memory - (int64) MemoryContextMemAllocated(b->cxt, true)) / 1024, 1);
	snprintf(budget, sizeof(budget), INT64_FORMAT "kB", budget_kb);
	sql = psprintf("SELECT gibbs_nb.labelled_counts(%s::pg_catalog.text, %s::pg_catalog.%s, "
				   "(" INT64_FORMAT ")::pg_catalog.int8) "
				   "FROM %s WHERE %s",
				   label_sql,
				   quote_identifier(src->tokens_column),
				   src->tokens_base == TSVECTOROID ? "tsvector" : "text[]",
				   budget_kb,
				   source_sql,
				   condition);
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("gibbs_nb.class_counts_budget", budget,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	/*
	 * Parallel workers count, the leader only combines their states: a
	 * leader that also counts holds its own state beside each worker's as
	 * it combines them, twice the memory of counting in one process (at 1x
	 * SpamAssassin, 26 MB against 13 MB).  With no worker launched the
	 * leader counts all the same.
	 */
	(void) set_config_option("parallel_leader_participation", "off",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* no row limit: a limit turns parallel execution off (ExecutePlan) */
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not count the documents of %s", source_sql);
	AtEOXact_GUC(true, nestlevel);
	gnb_check_result_column(SPI_tuptable->tupdesc, 1, BYTEAOID, "class counts");
	value = (bytea *) DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	/* rows the ids query saw (on Citus, in a statement of its own) are gone */
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed while it was read",
						params->job_id),
				 errdetail("The counting query found none of the rows the first query found.")));
	check_value_size(b, params, PointerGetDatum(value));
	/*
	 * Parsed where it is, into parse_cxt: the caller takes what it needs
	 * and frees both, with SPI's result, before the documents are read.  A
	 * token or class twice is checked by the caller as it interns them.
	 */
	old = MemoryContextSwitchTo(parse_cxt);
	value = DatumGetByteaPP(PointerGetDatum(value));
	gnb_counts_parse(value, pc, false);
	MemoryContextSwitchTo(old);
}

static void
counts_twice(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid gibbs_nb_class_counts value: a %s occurs twice", what)));
}

/*
 * The labelled documents' counts (step 2 of read_source): the words of the
 * count value are the first of the vocabulary, ids 0 .. n_words - 1 in its
 * order, its classes labels the ids query saw; the counts held by word and
 * label id, 32-bit while they fit.
 */
static void
take_labeled_counts(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
					const char *held_out)
{
	bool		found;
	bool	   *class_seen;
	MemoryContext parse_cxt = AllocSetContextCreate(b->scratch, "gibbs_nb counts",
													ALLOCSET_DEFAULT_SIZES);
	int32		n_values = b->n_label_values;
	GnbParsedCounts counts;
	GnbCountsIter cells;
	int32		cls,
				word;
	int64		n;
	int32	   *count_class;

	memset(&counts, 0, sizeof(counts));
	read_counts(b, params, source_sql, quote_identifier(params->source.label_column),
				psprintf("%s IS NOT NULL%s%s", quote_identifier(params->source.label_column),
						 held_out ? " AND NOT " : "", held_out ? held_out : ""),
				parse_cxt, &counts);
	/*
	 * The word table at its size for them at once, not doubled step by step
	 * with the old table beside the new each time
	 */
	{
		uint64		cap = (uint64) b->slots_mask + 1;

		while ((uint64) counts.n_words > WORD_TABLE_FILL(cap))
			cap *= 2;
		if (cap > (uint64) b->slots_mask + 1)
			corpus_resize_word_table(b, cap);
	}
	/* the counts' words are the first in the vocabulary: none twice */
	for (int32 i = 0; i < counts.n_words; i++)
	{
		(void) corpus_word_slot(b, counts.word_str[i], counts.word_len[i], &found);
		if (found)
			counts_twice("token");
	}
	/* the counts' classes are labels seen by the ids query: one snapshot */
	count_class = MemoryContextAlloc(parse_cxt, sizeof(int32) * (counts.n_classes + 1));
	class_seen = MemoryContextAllocZero(parse_cxt, sizeof(bool) * (n_values + 1));
	for (int32 c = 0; c < counts.n_classes; c++)
	{
		VocabEntry *e = vocab_lookup(b->labels, token_key(counts.class_str[c],
														  counts.class_len[c]));

		if (e == NULL)
			elog(ERROR, "gibbs_nb_class_counts saw a label the ids query did not");
		if (class_seen[e->id])
			counts_twice("class");
		class_seen[e->id] = true;
		count_class[c] = e->id;
	}
	/* the counts by word and label, the value and its parse gone */
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) sizeof(uint32) * ((double) counts.n_words * n_values + 1),
						 "the labelled documents' counts");
	b->labeled_counts32 = MemoryContextAllocExtended(b->scratch,
													 sizeof(uint32) * ((Size) counts.n_words * n_values + 1),
													 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	Assert(b->n_words == counts.n_words);
	b->n_count_words = counts.n_words;
	b->n_count_values = n_values;
	gnb_counts_iter_init(&cells, &counts);
	while (gnb_counts_next(&cells, &cls, &word, &n))
	{
		int64		at = (int64) word * n_values + count_class[cls];

		if (b->labeled_counts32 != NULL &&
			(uint64) n > (uint64) PG_UINT32_MAX - b->labeled_counts32[at])
			corpus_widen_labeled_counts(b);
		if (b->labeled_counts32 != NULL)
			b->labeled_counts32[at] += (uint32) n;
		else
			b->labeled_counts[at] += n;
		b->labeled_tokens += n;
	}
	MemoryContextDelete(parse_cxt);

	/*
	 * The counting query's states and plan are gone, its result read: give
	 * their memory back to the system before the documents' arrays grow,
	 * which glibc maps apart from its heap once they are large.
	 */
	SPI_freetuptable(SPI_tuptable);
#ifdef __GLIBC__
	(void) malloc_trim(0);
#endif
}

/*
 * Step 3 of read_source when nodes hold the unlabelled documents (the
 * rows meeting condition): their words' counts, by the same aggregate,
 * each word in the vocabulary (after the labelled documents' words) with
 * its count.  Their tokens never come here.
 */
static void
take_unlabeled_counts(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
					  const char *condition)
{
	MemoryContext parse_cxt = AllocSetContextCreate(b->scratch, "gibbs_nb counts",
													ALLOCSET_DEFAULT_SIZES);
	GnbParsedCounts counts;
	GnbCountsIter cells;
	int32		cls,
				word;
	int64		n;
	int32	   *slot_id;

	memset(&counts, 0, sizeof(counts));
	/* one class: the label is a constant */
	read_counts(b, params, source_sql, "''", condition, parse_cxt, &counts);
	if (counts.n_classes > 1)
		elog(ERROR, "gibbs_nb_class_counts gave %d classes for one", counts.n_classes);
	{
		uint64		cap = (uint64) b->slots_mask + 1;

		while ((uint64) b->n_words + counts.n_words > WORD_TABLE_FILL(cap))
			cap *= 2;
		if (cap > (uint64) b->slots_mask + 1)
			corpus_resize_word_table(b, cap);
	}
	slot_id = MemoryContextAlloc(parse_cxt, sizeof(int32) * ((Size) counts.n_words + 1));
	for (int32 i = 0; i < counts.n_words; i++)
	{
		bool		found;

		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		slot_id[i] = corpus_word_slot(b, counts.word_str[i], counts.word_len[i], &found)->id;
	}
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) sizeof(int64) * ((double) b->n_words + 1),
						 "the unlabelled documents' counts");
	b->n_unlabeled_count_words = b->n_words;
	b->unlabeled_counts = MemoryContextAllocExtended(b->scratch,
													 sizeof(int64) * ((Size) b->n_words + 1),
													 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	gnb_counts_iter_init(&cells, &counts);
	while (gnb_counts_next(&cells, &cls, &word, &n))
	{
		if (b->unlabeled_counts[slot_id[word]] > 0)
			counts_twice("token");
		b->unlabeled_counts[slot_id[word]] += n;
		b->unlabeled_tokens += n;
	}
	MemoryContextDelete(parse_cxt);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * A row of the ids query of documents held by nodes: (id, tokens IS NULL),
 * an unlabelled document they hold (held_document).
 */
static void
add_document_id_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	if (nulls[0])
		null_id_error(params);
	if (DatumGetBool(values[1]))
		b->n_skipped++;
	else
		held_document(b, params, values[0]);
}

/*
 * Step 3 of read_source: the unlabelled documents (the rows without a label,
 * or every row without a label column: label NULL), in order, with their
 * tokens; or, when nodes hold them, their words' counts only, their ids
 * having come with the ids query (add_labeled_row), or without a label
 * column from a query of their own.
 */
static void
read_unlabeled(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
			   const char *label, const char *order, bool on_nodes)
{
	const GnbSourceDesc *src = &params->source;
	const char *id = quote_identifier(src->id_column);
	const char *tokens = quote_identifier(src->tokens_column);
	Oid			document_types[2] = {src->id_type, src->tokens_type};
	Oid			id_types[2] = {src->id_type, BOOLOID};
	char	   *unlabeled = label ?
		psprintf("%s IS NULL AND %s IS NOT NULL", label, tokens) : NULL;

	if (!on_nodes)
		for_each_row(b, params,
					 psprintf("SELECT %s, %s FROM %s%s%s%s", id, tokens, source_sql,
							  label ? " WHERE " : "", label ? unlabeled : "", order),
					 2, document_types, add_document_row);
	else
	{
		if (label == NULL)
			for_each_row(b, params,
						 psprintf("SELECT %s, %s IS NULL FROM %s%s", id, tokens, source_sql, order),
						 2, id_types, add_document_id_row);
		if (b->n_held > 0)
			take_unlabeled_counts(b, params, source_sql,
								  label ? unlabeled : psprintf("%s IS NOT NULL", tokens));
	}
	b->doc_start[b->n_docs] = b->n_pairs;
}

/* A row of the checked ids query: (id), one of the documents to check. */
static void
add_checked_id(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	if (nulls[0] || b->n_checked_ids == b->checked_cap)
		elog(ERROR, "the labelled documents changed while they were read");
	b->checked_ids[b->n_checked_ids] = keep_id(b, params, values[0], b->scratch);
	b->n_checked_ids++;
}

/*
 * The id type's equality as SQL, OPERATOR(schema.name), for a condition
 * id = ANY(array): found by OID in the type's cache and named with its
 * schema.  (gibbs_nb_train refuses an id type without an equality or an
 * array type.)
 */
static char *
id_equality(Oid id_type)
{
	TypeCacheEntry *tc = lookup_type_cache(id_type, TYPECACHE_EQ_OPR);
	HeapTuple	tup;
	Form_pg_operator op;
	char	   *sql;

	if (!OidIsValid(tc->eq_opr) || !OidIsValid(get_array_type(id_type)))
		elog(ERROR, "id type %s has no equality or no array type", format_type_be(id_type));
	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(tc->eq_opr));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", tc->eq_opr);
	op = (Form_pg_operator) GETSTRUCT(tup);
	sql = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)),
				   NameStr(op->oprname));
	ReleaseSysCache(tup);
	return sql;
}

/*
 * Step 3b of read_source: with both kinds, up to GNB_CHECKED_DOCS labelled
 * documents with their tokens, for the label check: all of them, or those
 * first by a hash of their id keyed by the seed (as holdout chooses), the id
 * breaking ties where it has an order: the same ones for the same seed and
 * data, whatever order the ids follow.  Those are chosen by their ids first
 * and then read by id, where the id type has an equality: on Citus each
 * shard's first ones would otherwise come with their tokens, up to
 * GNB_CHECKED_DOCS a shard.
 */
static void
read_checked_documents(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
					   const char *held_out, bool ordered)
{
	const GnbSourceDesc *src = &params->source;
	const char *id = quote_identifier(src->id_column);
	const char *label = quote_identifier(src->label_column);
	const char *tokens = quote_identifier(src->tokens_column);
	Oid			checked_types[3] = {src->id_type, TEXTOID, src->tokens_type};
	int32		n = Min(b->n_labeled, GNB_CHECKED_DOCS);
	char	   *equality;
	char	   *first;
	ParamListInfo args;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	b->checked_start = MemoryContextAlloc(b->cxt, sizeof(int64) * (n + 1));
	b->checked_value = MemoryContextAlloc(b->cxt, sizeof(int32) * (n + 1));
	b->checked_start[0] = b->n_pairs;
	b->checked_cap = n;
	/* all of them: in any order (the check's counts do not depend on it) */
	if (n == b->n_labeled)
	{
		for_each_row(b, params,
					 psprintf("SELECT %s, %s::pg_catalog.text, %s FROM %s "
							  "WHERE %s IS NOT NULL AND %s IS NOT NULL AND NOT (%s)",
							  id, label, tokens, source_sql, label, tokens,
							  held_out ? held_out : "false"),
					 3, checked_types, add_checked_row);
		return;
	}
	first = psprintf("FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL AND NOT (%s) "
					 "ORDER BY pg_catalog.hashtextextended(%s::pg_catalog.text "
					 "COLLATE pg_catalog.\"C\", (" INT64_FORMAT ")::pg_catalog.int8)%s "
					 "LIMIT %d",
					 source_sql, label, tokens, held_out ? held_out : "false", id,
					 (int64) params->sampler.seed, ordered ? ", 1" : "", n);
	equality = id_equality(src->id_type);
	/* their ids, then the documents of those ids (in any order) */
	b->checked_ids = MemoryContextAlloc(b->scratch, sizeof(Datum) * (n + 1));
	b->n_checked_ids = 0;
	for_each_row(b, params, psprintf("SELECT %s %s", id, first), 1, &src->id_type,
				 add_checked_id);
	args = makeParamList(1);
	get_typlenbyvalalign(src->id_type, &typlen, &typbyval, &typalign);
	args->params[0].ptype = get_array_type(src->id_type);
	args->params[0].isnull = false;
	args->params[0].pflags = PARAM_FLAG_CONST;
	args->params[0].value =
		PointerGetDatum(construct_array(b->checked_ids, b->n_checked_ids, src->id_type,
										typlen, typbyval, typalign));
	for_each_row_with(b, params,
					  psprintf("SELECT %s, %s::pg_catalog.text, %s FROM %s "
							   "WHERE %s %s ANY ($1) AND %s IS NOT NULL AND %s IS NOT NULL",
							   id, label, tokens, source_sql, id, equality, label, tokens),
					  args, 3, checked_types, add_checked_row);
	if (b->n_checked != b->n_checked_ids)
		elog(ERROR, "the labelled documents changed while they were read");
}

/*
 * The queries of a job's reading, over SPI, as the file's comment says:
 * 1. every row's id and label, without its tokens; 2. the labelled
 * documents' counts, by the parallel aggregate; 3. the unlabelled documents,
 * with their tokens (or, held by nodes, their ids and by the aggregate their
 * words' counts); 3b. the labelled documents of the label check; 4. the
 * held-out documents, with their tokens and labels.  Without a label
 * column, every row is an unlabelled document.
 */
static void
read_source(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
			const char *held_out, bool on_nodes)
{
	const GnbSourceDesc *src = &params->source;
	const char *order = gnb_id_order_by(src);
	const char *id = quote_identifier(src->id_column);
	const char *tokens = quote_identifier(src->tokens_column);
	Oid			labeled_types[4] = {src->id_type, TEXTOID, BOOLOID, BOOLOID};
	Oid			holdout_types[3] = {src->id_type, src->tokens_type, TEXTOID};

	SPI_connect();
	if (on_nodes)
		begin_held(b, params);
	if (src->label_attnum == 0)
	{
		read_unlabeled(b, params, source_sql, NULL, order, on_nodes);
		SPI_finish();
		return;
	}
	{
		const char *label = quote_identifier(src->label_column);

		for_each_row(b, params,
					 psprintf("SELECT %s, %s::pg_catalog.text, %s IS NULL, %s FROM %s%s",
							  id, label, tokens, held_out ? held_out : "false", source_sql, order),
					 4, labeled_types, add_labeled_row);
		if (b->n_labeled > 0)
			take_labeled_counts(b, params, source_sql, held_out);
		read_unlabeled(b, params, source_sql, label, order, on_nodes);
		if (b->n_labeled > 0 && (b->n_docs > 0 || b->n_held > 0))
			read_checked_documents(b, params, source_sql, held_out, *order != '\0');
		/* (with nodes: read and scored when the job publishes) */
		if (held_out && !on_nodes)
			for_each_row(b, params,
						 psprintf("SELECT %s, %s, %s::pg_catalog.text FROM %s WHERE %s AND %s IS NOT NULL%s",
								  id, tokens, label, source_sql, held_out, tokens, order),
						 3, holdout_types, add_holdout_row);
	}
	SPI_finish();
}

/*
 * Classes: the distinct labels in byte order (a fixed order that does not
 * depend on the database's collation), or 1..n_classes without labels.
 * Returns each first-seen label id's class (NULL without labels).
 */
static int32 *
corpus_classes(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
			   GnbCorpus *corpus)
{
	MemoryContext cxt = b->cxt;
	int32	   *class_of_value = NULL;
	int32		K;

	gnb_check_label_values(b->n_label_values, params->n_classes, source_sql);
	if (b->n_label_values == 0)
	{
		K = params->n_classes;
		corpus->classes = MemoryContextAlloc(cxt, sizeof(char *) * K);
		for (int32 k = 0; k < K; k++)
			corpus->classes[k] = MemoryContextStrdup(cxt, psprintf("%d", k + 1));
	}
	else
	{
		K = b->n_label_values;
		corpus->classes = MemoryContextAlloc(cxt, sizeof(char *) * K);
		memcpy(corpus->classes, b->label_values, sizeof(char *) * K);
		qsort(corpus->classes, K, sizeof(char *), corpus_cmp_cstring_ptr);
		class_of_value = MemoryContextAlloc(cxt, sizeof(int32) * K);
		for (int32 v = 0; v < K; v++)
			for (int32 k = 0; k < K; k++)
				if (corpus->classes[k] == b->label_values[v])
					class_of_value[v] = k;
	}
	corpus->n_classes = K;
	return class_of_value;
}

/*
 * The labelled documents in the corpus: ids and classes (unless publishing
 * writes their rows from the source: then how many of each class), their
 * V x K counts (by the renumbered word ids), and the classes of the checked
 * ones.
 */
static void
corpus_labeled(CorpusBuilder *b, const GnbJobParams *params, const int32 *class_of_value,
			   const int32 *new_id, GnbCorpus *corpus)
{
	MemoryContext cxt = b->cxt;
	int32		K = corpus->n_classes;

	corpus->n_labeled = b->n_labeled;
	corpus->labeled_in_source = b->unlabeled_ids_only;
	corpus->labeled_ids = NULL;
	corpus->labeled_class = NULL;
	corpus->labeled_doc_counts = MemoryContextAllocZero(cxt, sizeof(double) * K);
	/* the labelled documents' V x K counts: only when there are any */
	corpus->labeled_word_counts = NULL;
	corpus->word_counts = NULL;
	if (b->n_labeled > 0)
	{
		gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
							 (double) sizeof(double) * ((double) b->n_words * K + 1),
							 "the labelled documents' counts");
		corpus->labeled_word_counts = MemoryContextAllocExtended(cxt, sizeof(double) * ((Size) b->n_words * K + 1),
																 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	}
	if (corpus->labeled_in_source)
	{
		for (int32 v = 0; v < b->n_label_values; v++)
			corpus->labeled_doc_counts[class_of_value[v]] += (double) b->labeled_value_docs[v];
	}
	else
	{
		corpus->labeled_ids = b->labeled_ids;
		corpus->labeled_class = MemoryContextAlloc(cxt, sizeof(int32) * (b->n_labeled + 1));
		for (int32 i = 0; i < b->n_labeled; i++)
		{
			corpus->labeled_class[i] = class_of_value[b->labeled_value[i]];
			corpus->labeled_doc_counts[corpus->labeled_class[i]] += 1;
		}
	}
	for (int32 w = 0; w < b->n_count_words; w++)
		for (int32 v = 0; v < b->n_count_values; v++)
			corpus->labeled_word_counts[(int64) new_id[w] * K + class_of_value[v]] +=
				b->labeled_counts32 ? (double) b->labeled_counts32[(int64) w * b->n_count_values + v] :
				b->labeled_counts[(int64) w * b->n_count_values + v];
	corpus->n_tokens += b->labeled_tokens;
	corpus->n_checked = b->n_checked;
	corpus->checked_start = b->checked_start;
	corpus->checked_class = b->checked_value;
	for (int32 i = 0; i < b->n_checked; i++)
		corpus->checked_class[i] = class_of_value[b->checked_value[i]];
}

static int
cmp_uint64(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : x > y;
}

static bool
id_is_integer(Oid type)
{
	return type == INT8OID || type == INT4OID || type == INT2OID;
}

/* n documents' keys, increasing, are distinct: else the job stops (0A000). */
static void
check_distinct_keys(const uint64 *sorted, int64 n)
{
	for (int64 j = 1; j < n; j++)
		if (sorted[j] == sorted[j - 1])
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("two ids of the source have the same 64-bit hash"),
					 errdetail("Sampler \"blocked\" names each unlabelled document's draws by the "
							   "hash of its id."),
					 errhint("Use an integer id column, or another sampler.")));
}

/*
 * The blocked sampler's document keys (gnb_corpus.doc_key): what names a
 * document's draws, so that whoever holds the document (a sweep worker, a
 * Citus node reading its own shards) draws its label alike.  An int2, int4
 * or int8 id is its own key; another id its type's 64-bit hash (seed 0)
 * under the column's collation, which does not depend on settings as the
 * id's text form would.  The documents (all unlabelled) may not share a key
 * (they would share their draws): a hash's collision (chance about
 * D^2 / 2^65) stops the job rather than bias it.
 */
static uint64 *
corpus_doc_keys(const GnbJobParams *params, const GnbCorpus *corpus, MemoryContext cxt)
{
	const GnbSourceDesc *src = &params->source;
	int32		D = corpus->n_docs;
	uint64	   *key;
	uint64	   *sorted;
	MemoryContext row_cxt;
	MemoryContext old;

	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
						 2.0 * sizeof(uint64) * ((double) D + 1), "reading the source");
	key = MemoryContextAllocExtended(cxt, sizeof(uint64) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	/* what a hash function leaves (a detoasted id) goes with each row */
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb document keys",
									ALLOCSET_SMALL_SIZES);
	for (int32 j = 0; j < D; j++)
	{
		if ((j & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(row_cxt);
		key[j] = gnb_id_key(src, corpus->ids[j]);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
	}
	MemoryContextDelete(row_cxt);
	/* distinct integer ids have distinct keys */
	if (id_is_integer(src->id_type))
		return key;
	sorted = palloc_extended(sizeof(uint64) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	memcpy(sorted, key, sizeof(uint64) * D);
	qsort(sorted, D, sizeof(uint64), cmp_uint64);
	check_distinct_keys(sorted, D);
	pfree(sorted);
	return key;
}

/* The documents read, out of the builder into the corpus, of V words. */
static void
corpus_take_documents(const CorpusBuilder *b, int32 V, GnbCorpus *corpus)
{
	corpus->n_docs = b->n_docs;
	corpus->n_words = V;
	corpus->doc_start = b->doc_start;
	corpus->word = b->word;
	corpus->count = b->count;
	corpus->label = b->label;
	corpus->ids = b->ids;
	corpus->n_skipped = b->n_skipped;
}

/*
 * Read the source of a job; with on_nodes, of the unlabelled documents only
 * how many, their words' counts (GnbCorpus.unlabeled_word_count) and what
 * their ids say (held_document): the documents are left to the nodes that
 * will hold them.  Runs as the caller, with one
 * snapshot for all its queries, in a transaction that holds the source's lock (see
 * gnb_lock_source, which gives source_sql); SPI must not be connected.
 * Everything the corpus holds is allocated in cxt.
 */
void
gnb_read_corpus(const GnbJobParams *params, const char *source_sql, bool on_nodes,
				MemoryContext cxt, GnbCorpus *corpus)
{
	CorpusBuilder b;
	int32	   *class_of_value;
	int32	   *new_id;

	corpus_builder_init(&b, params, cxt);
	read_source(&b, params, source_sql, gnb_holdout_condition(params), on_nodes);
	/* (a version's n_documents is an int4) */
	if ((int64) b.n_docs + b.n_held + b.n_labeled + b.n_holdout > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many documents")));
	class_of_value = corpus_classes(&b, params, source_sql, corpus);
	new_id = corpus_renumber_words(&b, params, corpus);
	corpus_labeled(&b, params, class_of_value, new_id, corpus);

	corpus_take_documents(&b, b.n_words, corpus);
	corpus->unlabeled_word_count = NULL;
	corpus->n_held = 0;
	corpus->source_ids_sum = 0;
	corpus->held_id_dump_bytes = 0;
	corpus->n_warm = 0;
	corpus->warm_keys = NULL;
	corpus->warm_labels = NULL;
	if (on_nodes)
	{
		gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
							 sizeof(int64) * ((double) b.n_words + 1), "reading the source");
		corpus->unlabeled_word_count =
			MemoryContextAllocExtended(cxt, sizeof(int64) * ((Size) b.n_words + 1),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		for (int32 w = 0; w < b.n_unlabeled_count_words; w++)
			corpus->unlabeled_word_count[new_id[w]] = b.unlabeled_counts[w];
		corpus->n_tokens += b.unlabeled_tokens;
		end_held(&b, params, corpus);
	}
	corpus->n_holdout = b.n_holdout;
	corpus->n_holdout_skipped = b.n_holdout_skipped;
	/* (with nodes, read and scored when the job publishes: gnb_score_holdout_rows) */
	corpus->holdout_ids = on_nodes ? NULL : b.holdout_ids;
	corpus->holdout_tokens = on_nodes ? NULL : b.holdout_tokens;
	corpus->holdout_labels = on_nodes ? NULL : b.holdout_labels;
	/*
	 * the blocked sampler's keys (with nodes, each node makes and checks
	 * its documents': keys that collide are in one node, add_part_row, and
	 * on Citus in one shard, a type's 32-bit hash being the low half of its
	 * 64-bit one at seed 0)
	 */
	corpus->doc_key = params->sampler.sampler == GNB_SAMPLER_BLOCKED ?
		corpus_doc_keys(params, corpus, cxt) : NULL;
	/* the word table, the counts' value, the renumbering */
	MemoryContextDelete(b.scratch);
}

/*
 * A node's part of the source (worker/nodes.h): the unlabelled documents
 * whose key is `part` modulo `parts` (add_part_row; all of them with one
 * part), their words numbered by the job's vocabulary (V tokens in
 * byte order, which must hold every word they have), and their keys, not
 * their ids.  The documents in any order: the blocked sampler draws them by
 * their keys.
 * Runs as the caller; SPI must not be connected.  Everything the part holds
 * is allocated in cxt.
 */
void
gnb_read_part(const GnbJobParams *params, const char *source_sql, int32 part, int32 parts,
			  char **vocabulary, int32 V, MemoryContext cxt, GnbCorpus *corpus)
{
	const GnbSourceDesc *src = &params->source;
	const char *id = quote_identifier(src->id_column);
	const char *tokens = quote_identifier(src->tokens_column);
	Oid			document_types[2] = {src->id_type, src->tokens_type};
	StringInfoData sql;
	CorpusBuilder b;
	Datum	   *local;
	int			n_local;
	int32	   *to_job;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s, %s FROM %s WHERE %s IS NOT NULL", id, tokens, source_sql,
					 tokens);
	if (src->label_attnum != 0)
		appendStringInfo(&sql, " AND %s IS NULL", quote_identifier(src->label_column));
	corpus_builder_init(&b, params, cxt);
	b.part = part;
	b.parts = parts;
	/* (in blocks of at most 1 MB: a context's last block is not all used) */
	b.ids_cxt = AllocSetContextCreate(cxt, "gibbs_nb part ids", 0, 8 * 1024, 1024 * 1024);
	SPI_connect();
	for_each_row(&b, params, sql.data, 2, document_types, add_part_row);
	SPI_finish();
	b.doc_start[b.n_docs] = b.n_pairs;
	(void) corpus_renumber_words(&b, params, corpus);

	/*
	 * The part's words, now in its own byte order, to the job's: a merge of
	 * two lists in byte order
	 */
	deconstruct_array(corpus->tokens, TEXTOID, -1, false, TYPALIGN_INT, &local, NULL, &n_local);
	to_job = palloc(sizeof(int32) * ((Size) n_local + 1));
	for (int32 i = 0, w = 0; i < n_local; i++)
	{
		char	   *t = TextDatumGetCString(local[i]);

		while (w < V && strcmp(vocabulary[w], t) < 0)
			w++;
		if (w == V || strcmp(vocabulary[w], t) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed while it was read",
							params->job_id),
					 errdetail("A node's documents have a token the job's vocabulary has not.")));
		to_job[i] = w;
		pfree(t);
	}
	for (int64 p = 0; p < b.n_pairs; p++)
		b.word[p] = to_job[b.word[p]];
	pfree(to_job);
	pfree(local);

	corpus_take_documents(&b, V, corpus);
	corpus->doc_key = corpus_doc_keys(params, corpus, cxt);
	/* a node finds its documents by their keys: their ids go */
	MemoryContextDelete(b.ids_cxt);
	pfree(corpus->ids);
	corpus->ids = NULL;
	MemoryContextDelete(b.scratch);
}

/*
 * Once the sampler is done with the documents: each word's occurrences in
 * the training documents, labelled or not, as the int8[] the packed row
 * stores, made in the corpus's memory; then the documents' pairs and the
 * labelled counts, which nothing after sampling reads, are freed, so that
 * publishing does not hold them beside the arrays it builds.
 */
void
gnb_corpus_word_counts(GnbCorpus *corpus)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(corpus->doc_start));
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	int64		n_pairs = corpus->doc_start[corpus->n_docs];
	int64	   *counts;

	corpus->word_counts = gnb_fixed_array(INT8OID, sizeof(int64), V, (void **) &counts);
	MemoryContextSwitchTo(old);
	if (corpus->labeled_word_counts != NULL)
	{
		for (int32 w = 0; w < V; w++)
			for (int32 k = 0; k < K; k++)
				counts[w] += (int64) corpus->labeled_word_counts[(int64) w * K + k];
		pfree(corpus->labeled_word_counts);
		corpus->labeled_word_counts = NULL;
	}
	for (int64 p = 0; p < n_pairs; p++)
		counts[corpus->word[p]] += corpus->count[p];
	if (corpus->unlabeled_word_count != NULL)
		for (int32 w = 0; w < V; w++)
			counts[w] += corpus->unlabeled_word_count[w];
	pfree(corpus->word);
	pfree(corpus->count);
	corpus->word = NULL;
	corpus->count = NULL;
}
