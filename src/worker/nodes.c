/*
 * nodes.c
 *	  The job's worker training a blocked chain through nodes
 *	  (worker/nodes.h): the chain holds no document, only the counts, theta
 *	  and pi; every call it makes of its nodes is one query that calls
 *	  gibbs_nb.blocked_node once a node, each answer applied as it comes.
 *
 * gibbs_nb.blocked_nodes = n (a developer's setting) cuts a local source
 * into n parts by a hash of each id, each a node in this very process,
 * reached through SQL as a node on another server would be: the model must
 * be the one the local chain trains, bit for bit (blocked.sql).  The worker
 * has read the whole source (as it does without nodes): it takes from it
 * only what a coordinator would be told, the vocabulary, the clamped counts
 * and each word's unlabelled count, and after each chain it maps the nodes'
 * estimates back to its documents by their keys, for the combiner and
 * publishing.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/nodes.h"
#include "security/security.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/* What the chain's calls of its nodes share. */
typedef struct NodesRun
{
	const GnbJobParams *params;
	const gnb_hooks *inner;		/* the worker's own: memory, progress, interrupts */
	MemoryContext cxt;			/* the job's, for what the run allocates as it goes */
	int32		parts;
	int32		K;
	int32		V;
	bytea	   *setup;			/* sent with the first call, then NULL */
	/* an answer decoded: max_entries entries (allocated with the first) */
	int64		max_entries;
	int64	   *entry;
	int64	   *delta;
	int64	   *docs;
	int64	   *tokens;
	/* the nodes' estimates, mapped to the worker's documents by their keys */
	int32		n_docs;
	const uint64 *sorted_keys;	/* n_docs, increasing */
	const int32 *doc_of_key;	/* the document of each */
	double	   *label_prob;		/* n_docs x K */
	int32	   *last_labels;	/* n_docs */
	bool	   *estimated;		/* n_docs */
} NodesRun;

static const char *const call_sql =
"SELECT gibbs_nb.blocked_node($1, i, $2, $3, $4) "
"FROM pg_catalog.generate_series(0, $2 OPERATOR(pg_catalog.-) 1) AS i";

static void *
run_alloc(size_t size, void *arg)
{
	NodesRun   *run = arg;

	return run->inner->alloc(size, run->inner->arg);
}

static void
run_release(void *ptr, void *arg)
{
	NodesRun   *run = arg;

	run->inner->release(ptr, run->inner->arg);
}

static void
run_progress(void *arg, const gnb_sweep *sweep)
{
	NodesRun   *run = arg;

	if (run->inner->progress)
		run->inner->progress(run->inner->arg, sweep);
}

static void
run_interrupts(void *arg)
{
	CHECK_FOR_INTERRUPTS();
}

/*
 * Run one query in a transaction of its own, as the caller, calling fn on
 * each row's single bytea (NULL: none).  The sampler's memory is the
 * worker's, not the transaction's: the chain goes on between the queries,
 * and the worker's progress hook writes rows in transactions of its own.
 */
typedef void (*answer_fn) (NodesRun *run, const gnb_node_call *call, bytea *value);

static void
query_nodes(NodesRun *run, const char *sql, int nargs, Oid *types, Datum *values,
			const char *nulls, const gnb_node_call *call, answer_fn fn)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != (uint64) run->parts)
		elog(ERROR, "gibbs_nb: calling the nodes of job " INT64_FORMAT " failed (%s)",
			 run->params->job_id, SPI_result_code_string(rc));
	gnb_check_result_column(SPI_tuptable->tupdesc, 1, BYTEAOID, "node answer");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);

		fn(run, call, isnull ? NULL : DatumGetByteaPP(d));
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
}

static void
apply_answer(NodesRun *run, const gnb_node_call *call, bytea *value)
{
	gnb_count_changes changes;
	const char *err;

	if (value == NULL)
		elog(ERROR, "a node of gibbs_nb job " INT64_FORMAT " gave no answer", run->params->job_id);
	if (run->entry == NULL || run->max_entries != call->max_entries)
	{
		run->max_entries = call->max_entries;
		if (run->entry != NULL)
		{
			pfree(run->entry);
			pfree(run->delta);
		}
		run->entry = MemoryContextAllocExtended(run->cxt,
												sizeof(int64) * ((Size) run->max_entries + 1),
												MCXT_ALLOC_HUGE);
		run->delta = MemoryContextAllocExtended(run->cxt,
												sizeof(int64) * ((Size) run->max_entries + 1),
												MCXT_ALLOC_HUGE);
	}
	err = gnb_count_changes_decode((const uint8 *) VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value),
								   run->K, run->max_entries, run->entry, run->delta, run->docs,
								   run->tokens, &changes);
	if (err != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid answer of a node of gibbs_nb job " INT64_FORMAT ": %s",
						run->params->job_id, err)));
	call->apply(call->coordinator, &changes);
}

/* hooks->blocked_nodes: every node answers the call, through SQL */
static void
call_nodes(void *arg, const gnb_node_call *call)
{
	NodesRun   *run = arg;
	size_t		size = gnb_node_call_size(call, call->theta_length, run->K, run->V);
	bytea	   *value;
	Oid			types[4] = {INT8OID, INT4OID, BYTEAOID, BYTEAOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', run->setup ? ' ' : 'n', ' '};

	if (size > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a call of gibbs_nb job " INT64_FORMAT "'s nodes would take %zu bytes",
						run->params->job_id, size)));
	value = palloc(VARHDRSZ + size);
	SET_VARSIZE(value, VARHDRSZ + size);
	gnb_node_call_encode(call, call->theta_length, run->K, run->V, (uint8 *) VARDATA(value));
	values[0] = Int64GetDatum(run->params->job_id);
	values[1] = Int32GetDatum(run->parts);
	values[2] = PointerGetDatum(run->setup);
	values[3] = PointerGetDatum(value);
	query_nodes(run, call_sql, 4, types, values, nulls, call, apply_answer);
	pfree(value);
	/* the nodes have read their parts: later calls carry no setup */
	run->setup = NULL;
}

static void
bad_estimates(const NodesRun *run, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid estimates of a node of gibbs_nb job " INT64_FORMAT,
					run->params->job_id),
			 errdetail("%s", detail)));
}

/* A node's estimates (gibbs_nb.blocked_node_estimates) into the documents'. */
static void
take_estimates(NodesRun *run, const gnb_node_call *call, bytea *value)
{
	StringInfoData msg;
	const int32 K = run->K;
	int32		n;

	if (value == NULL)
		bad_estimates(run, "A node gave none.");
	msg.data = VARDATA_ANY(value);
	msg.len = VARSIZE_ANY_EXHDR(value);
	msg.maxlen = msg.len;
	msg.cursor = 0;
	if (msg.len < 8 || pq_getmsgint(&msg, 4) != K)
		bad_estimates(run, "They are of another number of classes.");
	n = pq_getmsgint(&msg, 4);
	if (n < 0 || (double) (msg.len - msg.cursor) != (double) n * (12 + 8.0 * K))
		bad_estimates(run, "Their length is not that of their documents.");
	for (int32 d = 0; d < n; d++)
	{
		uint64		key = (uint64) pq_getmsgint64(&msg);
		int32		lo = 0,
					hi = run->n_docs;
		int32		j;

		while (lo < hi)
		{
			int32		mid = lo + (hi - lo) / 2;

			if (run->sorted_keys[mid] < key)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == run->n_docs || run->sorted_keys[lo] != key)
			bad_estimates(run, "A node holds a document the job did not read.");
		j = run->doc_of_key[lo];
		if (run->estimated[j])
			bad_estimates(run, "Two nodes hold one document.");
		run->estimated[j] = true;
		run->last_labels[j] = pq_getmsgint(&msg, 4);
		if (run->last_labels[j] < 0 || run->last_labels[j] >= K)
			bad_estimates(run, "A label is out of range.");
		for (int32 k = 0; k < K; k++)
			run->label_prob[(int64) j * K + k] = pq_getmsgfloat8(&msg);
	}
}

static void
ignore_answer(NodesRun *run, const gnb_node_call *call, bytea *value)
{
}

/* the nodes' queries without a call: their estimates, or their release */
static void
query_all_nodes(NodesRun *run, const char *sql, answer_fn fn)
{
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(run->params->job_id), Int32GetDatum(run->parts)};

	query_nodes(run, sql, 2, types, values, NULL, NULL, fn);
}

typedef struct KeyDoc
{
	uint64		key;
	int32		doc;
} KeyDoc;

static int
cmp_key_doc(const void *a, const void *b)
{
	uint64		x = ((const KeyDoc *) a)->key;
	uint64		y = ((const KeyDoc *) b)->key;

	return x < y ? -1 : x > y;
}

/*
 * What the chain and its nodes are told of the corpus: the clamped counts
 * as its extra counts, each word's count in the unlabelled documents, and
 * the setup that carries them to the nodes with the vocabulary and the
 * source's name.
 */
static void
describe_corpus(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_corpus *core,
				gnb_corpus *chain_corpus, GnbNodeSetup *setup)
{
	const int32 V = core->n_words;
	const GnbSourceDesc *src = &params->source;
	int64	   *all_count = palloc_extended(sizeof(int64) * ((Size) V + 1),
											 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	Datum	   *tokens;
	int			n_tokens;
	static const int64 no_pairs = 0;
	static const int32 nothing = -1;

	for (int64 p = 0; p < core->doc_start[core->n_docs]; p++)
		all_count[core->word[p]] += core->count[p];
	memset(chain_corpus, 0, sizeof(*chain_corpus));
	chain_corpus->n_words = V;
	chain_corpus->n_classes = core->n_classes;
	chain_corpus->doc_start = &no_pairs;
	chain_corpus->word = &nothing;
	chain_corpus->count = &nothing;
	chain_corpus->label = &nothing;
	chain_corpus->extra_word_counts = core->extra_word_counts;
	chain_corpus->extra_doc_counts = core->extra_doc_counts;
	chain_corpus->all_unlabeled_count = all_count;
	chain_corpus->all_n_unlabeled = core->n_docs;

	memset(setup, 0, sizeof(*setup));
	setup->job_id = params->job_id;
	setup->sampler = params->sampler;
	setup->sampler.gamma_grid = NULL;
	setup->n_classes = core->n_classes;
	setup->n_words = V;
	strlcpy(setup->schema, get_namespace_name(get_rel_namespace(src->relid)), NAMEDATALEN);
	strlcpy(setup->relation, get_rel_name(src->relid), NAMEDATALEN);
	strlcpy(setup->id_column, src->id_column, NAMEDATALEN);
	strlcpy(setup->tokens_column, src->tokens_column, NAMEDATALEN);
	strlcpy(setup->label_column, src->label_column, NAMEDATALEN);
	setup->max_job_memory = params->max_job_memory;
	deconstruct_array(corpus->tokens, TEXTOID, -1, false, TYPALIGN_INT, &tokens, NULL, &n_tokens);
	if (n_tokens != V)
		elog(ERROR, "gibbs_nb: the vocabulary has %d tokens, not %d", n_tokens, V);
	setup->tokens = palloc_extended(sizeof(char *) * ((Size) V + 1), MCXT_ALLOC_HUGE);
	for (int32 w = 0; w < V; w++)
		setup->tokens[w] = TextDatumGetCString(tokens[w]);
	setup->extra_word_counts = (double *) core->extra_word_counts;
	setup->extra_doc_counts = (double *) core->extra_doc_counts;
	setup->all_unlabeled_count = all_count;
	setup->all_n_unlabeled = core->n_docs;
}

/*
 * Train with the chains' documents held by gibbs_nb.blocked_nodes nodes
 * (the file's comment): each chain run by gnb_train_chain on a corpus of no
 * documents, its nodes called through SQL; each chain's estimates taken
 * from the nodes and combined as gnb_train combines them.  In the worker's
 * transaction-free state between its phases; the sampler's memory through
 * hooks, as gnb_train's.
 */
void
gnb_train_nodes(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_corpus *core,
				const gnb_hooks *hooks, gnb_result *result)
{
	const int32 K = core->n_classes;
	const int32 D = core->n_docs;
	NodesRun	run;
	gnb_hooks	node_hooks = {run_alloc, run_release, run_progress, run_interrupts, &run};
	gnb_corpus	chain_corpus;
	GnbNodeSetup setup;
	gnb_combiner *cb;
	KeyDoc	   *keys;
	uint64	   *sorted_keys;
	int32	   *doc_of_key;
	const char *problem;

	if (core->init_label)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a warm start does not train through nodes")));
	memset(&run, 0, sizeof(run));
	run.params = params;
	run.inner = hooks;
	run.cxt = CurrentMemoryContext;
	run.parts = params->blocked_nodes;
	run.K = K;
	run.V = core->n_words;
	run.docs = palloc(sizeof(int64) * K);
	run.tokens = palloc(sizeof(int64) * K);
	/* (the source's names from the catalogs, in a transaction) */
	StartTransactionCommand();
	MemoryContextSwitchTo(run.cxt);
	describe_corpus(params, corpus, core, &chain_corpus, &setup);
	CommitTransactionCommand();
	MemoryContextSwitchTo(run.cxt);
	if ((problem = gnb_check(&chain_corpus, &params->sampler)) != NULL)
		elog(ERROR, "gibbs_nb: the chain of job " INT64_FORMAT " cannot train: %s",
			 params->job_id, problem);
	run.setup = gnb_node_setup_encode(&setup);
	node_hooks.blocked_nodes = call_nodes;

	/* the documents by key, for the nodes' estimates */
	keys = palloc_extended(sizeof(KeyDoc) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	for (int32 j = 0; j < D; j++)
	{
		keys[j].key = core->doc_key[j];
		keys[j].doc = j;
	}
	qsort(keys, D, sizeof(KeyDoc), cmp_key_doc);
	sorted_keys = palloc_extended(sizeof(uint64) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	doc_of_key = palloc_extended(sizeof(int32) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	for (int32 i = 0; i < D; i++)
	{
		sorted_keys[i] = keys[i].key;
		doc_of_key[i] = keys[i].doc;
	}
	pfree(keys);
	run.n_docs = D;
	run.sorted_keys = sorted_keys;
	run.doc_of_key = doc_of_key;
	run.label_prob = palloc_extended(sizeof(double) * ((Size) D * K + 1), MCXT_ALLOC_HUGE);
	run.last_labels = palloc_extended(sizeof(int32) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	run.estimated = palloc_extended(sizeof(bool) * ((Size) D + 1), MCXT_ALLOC_HUGE);

	cb = gnb_combine_begin(core, &params->sampler, hooks, result);
	for (int32 c = 0; c < params->sampler.chains; c++)
	{
		gnb_chain	chain;
		double	   *own_prob;
		int32	   *own_last;

		gnb_train_chain(&chain_corpus, &params->sampler, c, &node_hooks, &chain);
		memset(run.estimated, 0, sizeof(bool) * D);
		memset(run.label_prob, 0, sizeof(double) * ((Size) D * K));
		query_all_nodes(&run, "SELECT gibbs_nb.blocked_node_estimates($1, i, $2) "
						"FROM pg_catalog.generate_series(0, $2 OPERATOR(pg_catalog.-) 1) AS i",
						take_estimates);
		for (int32 j = 0; j < D; j++)
			if (!run.estimated[j])
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("no node of gibbs_nb job " INT64_FORMAT " holds one of its documents",
								params->job_id)));
		/* the chain as gnb_train_chain on the whole corpus would give it */
		own_prob = chain.label_prob;
		own_last = chain.last_labels;
		chain.label_prob = run.label_prob;
		chain.last_labels = run.last_labels;
		gnb_combine_add(cb, &chain);
		chain.label_prob = own_prob;
		chain.last_labels = own_last;
		gnb_chain_free(&chain, &node_hooks);
	}
	query_all_nodes(&run, "SELECT gibbs_nb.blocked_node($1, i, $2, NULL, NULL) "
					"FROM pg_catalog.generate_series(0, $2 OPERATOR(pg_catalog.-) 1) AS i",
					ignore_answer);
	gnb_combine_end(cb);
}
