/*
 * nodes.c
 *	  The job's worker training a blocked chain through nodes
 *	  (worker/nodes.h): the chain holds no document, only the counts, theta
 *	  and pi; every call it makes of its nodes is one query that calls
 *	  gibbs_nb.blocked_node once a node, each answer applied as it comes.
 *
 * Where the nodes are:
 * - a source that is a hash-distributed Citus table: a node on each server
 *   that owns shards with rows (gnb_citus_owned_shards), holding all of
 *   them, in the backend Citus runs the server's task in.  The query
 *   reaches each such server once, through one value of the distribution
 *   column from one of its shards (picked from the rows when the job
 *   starts), and names that shard by its tableoid there; with
 *   citus.max_adaptive_executor_pool_size = 1 the tasks of a server run in
 *   one backend, the same for every query of the job, so each node keeps
 *   its documents between the calls.  (A node a shard sent theta to each
 *   of 32 shards: 769 kB each, 130 ms a sweep on this machine's cluster;
 *   a node a server, 11 ms.)
 * - gibbs_nb.blocked_nodes = n (a developer's setting): a local source cut
 *   into n parts by each id's key, each a node in this very process,
 *   reached through SQL as a node on another server would be.
 * The model must be the one the local chain trains, bit for bit (blocked.sql,
 * t/008_citus.pl).  The worker has read no unlabelled document's tokens
 * (gnb_read_corpus with on_nodes) and holds none of them: it read their
 * ids (and checked them, and took a warm start's first labels by them),
 * counted them and their words, which with the labelled counts make the
 * vocabulary and the summary the nodes are told.  The chains are combined
 * where the documents are: after each chain the worker's combiner aligns
 * its classes (from theta, V x K) and the nodes fold its estimates into
 * their sums by that alignment, answering their part of chain_agreement;
 * after the last they make the sums means and answer their mass, which the
 * label check weighs by; both exact sums (gnb_exact_sum), the local
 * combiner's to the last bit.  A labels-only version's probabilities are
 * made and kept by the nodes too (gnb_nodes_labels_only).  The worker
 * keeps no labelled document's id either, only how many of each class:
 * publishing writes the labels table's rows of the labelled documents and
 * of the nodes' documents where they are (gnb_nodes_write_labels: an
 * INSERT ... SELECT over the source for each kind, the labelled rows' from
 * their labels, the others' from their nodes) when it can
 * (gnb_nodes_can_write_labels); else the same queries' rows come here a
 * batch at a time into the version's documents' labels
 * (gnb_nodes_store_labels), the labels table written from those.  The
 * held-out rows are read then too, and scored and written a batch at a time
 * (gnb_nodes_holdout_sql, gnb_score_holdout_rows).  No document's id or
 * estimates are ever all held here.  The nodes are released after
 * publishing.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/nodes.h"
#include "security/security.h"
#include "store/store.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "storage/lmgr.h"

/* What the chain's calls of its nodes share. */
typedef struct NodesRun
{
	const GnbJobParams *params;
	const gnb_hooks *inner;		/* the worker's own: memory, progress, interrupts */
	MemoryContext cxt;			/* the job's, for what the run allocates as it goes */
	/*
	 * the queries that reach every node ($1 the job; a call's $2 its setup,
	 * $3 itself), and how many nodes answer each (a node reached twice
	 * answers the repeat NULL)
	 */
	char	   *call_sql;
	char	   *fold_sql;		/* $2 the chain, $3 its alignment */
	char	   *combined_sql;	/* $2 the number of chains */
	char	   *scores_sql;		/* $2 the labels-only model */
	char	   *release_sql;
	/*
	 * the source: the names the queries reach it by, locked and checked
	 * again in each query's transaction (lock_source_name)
	 */
	Oid			source_relid;
	bool		on_citus;		/* the queries reach it through Citus */
	char	   *source_nspname;
	char	   *source_relname;
	int32		n_nodes;
	int32		K;
	int32		V;
	/*
	 * the classes (K), and how many labelled documents the job trained on:
	 * their rows are written from the source too (labeled_rows_from)
	 */
	char	  **classes;
	int32		n_labeled;
	uint64		source_ids_sum; /* the sum of those documents' ids and the others' */
	bytea	   *setup;			/* sent with the first call, then NULL */
	/* an answer decoded: max_entries entries (allocated with the first) */
	int64		max_entries;
	int64	   *entry;
	int64	   *delta;
	int64	   *docs;
	int64	   *tokens;
	/* what a start's answers say the nodes hold, and what they must */
	int64		held_docs;
	int64		held_tokens;
	int64		all_docs;
	int64		all_tokens;
	/* exact sums the nodes answer, merged (n_sums of them) */
	gnb_exact_sum *sums;
	int32		n_sums;
} NodesRun;

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
 * Run one of the nodes' queries as the caller, in a transaction of its own
 * (or, while the job publishes, in the publishing one), calling fn on each
 * node's answer (a row's single bytea; a repeat's NULL is skipped): every
 * node must answer once.  The sampler's memory is the
 * worker's, not the transaction's: the chain goes on between the queries,
 * and the worker's progress hook writes rows in transactions of its own.
 * The parameters are not folded into the plan (a call may be megabytes).
 */
typedef void (*answer_fn) (NodesRun *run, const gnb_node_call *call, bytea *value);

/*
 * The source a query names, locked by OID with its schema's name
 * (gnb_lock_namespace_name) for the transaction, and still so named: the
 * name leads to it, not to a look-alike another role put there.
 */
static void
lock_source_name(const NodesRun *run)
{
	Oid			relid = run->source_relid;
	char	   *nspname;
	char	   *relname;

	LockRelationOid(relid, AccessShareLock);
	relname = get_rel_name(relid);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " was dropped while the job ran",
						run->params->job_id)));
	gnb_lock_namespace_name(get_rel_namespace(relid), true);
	nspname = get_namespace_name(get_rel_namespace(relid));
	if (strcmp(relname, run->source_relname) != 0 || strcmp(nspname, run->source_nspname) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " was renamed while the job ran",
						run->params->job_id)));
}

static void
query_nodes(NodesRun *run, const char *sql, int nargs, Oid *types, Datum *values,
			const char *nulls, const gnb_node_call *call, answer_fn fn)
{
	MemoryContext cxt = CurrentMemoryContext;
	int64		answers = 0;
	bool		own = !IsTransactionState();

	/* between the job's phases in one of its own; else (publishing) in the caller's */
	if (own)
	{
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
	if (run->on_citus)
		lock_source_name(run);
	SPI_connect();
	gnb_execute_unfolded(sql, nargs, types, values, nulls, GNB_AS_CALLER, SPI_OK_SELECT);
	gnb_check_result_column(SPI_tuptable->tupdesc, 1, BYTEAOID, "node answer");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull)
			continue;
		answers++;
		if (fn)
			fn(run, call, DatumGetByteaPP(d));
	}
	if (fn && answers != run->n_nodes)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb job " INT64_FORMAT " reached " INT64_FORMAT " of its %d nodes",
						run->params->job_id, answers, run->n_nodes),
				 errhint("The source changed while the job ran; train again.")));
	SPI_finish();
	if (own)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	MemoryContextSwitchTo(cxt);
}

static void
apply_answer(NodesRun *run, const gnb_node_call *call, bytea *value)
{
	gnb_count_changes changes;
	const char *err;

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
	run->held_docs += changes.held_docs;
	run->held_tokens += changes.held_tokens;
	call->apply(call->coordinator, &changes);
}

/* hooks->blocked_nodes: every node answers the call, through SQL */
static void
call_nodes(void *arg, const gnb_node_call *call)
{
	NodesRun   *run = arg;
	size_t		size = gnb_node_call_size(call, call->theta_length, run->K, run->V);
	bytea	   *value;
	Oid			types[3] = {INT8OID, BYTEAOID, BYTEAOID};
	Datum		values[3];
	char		nulls[3] = {' ', run->setup ? ' ' : 'n', ' '};

	if (size > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a call of gibbs_nb job " INT64_FORMAT "'s nodes would take %zu bytes",
						run->params->job_id, size)));
	value = palloc(VARHDRSZ + size);
	SET_VARSIZE(value, VARHDRSZ + size);
	gnb_node_call_encode(call, call->theta_length, run->K, run->V, (uint8 *) VARDATA(value));
	values[0] = Int64GetDatum(run->params->job_id);
	values[1] = PointerGetDatum(run->setup);
	values[2] = PointerGetDatum(value);
	run->held_docs = run->held_tokens = 0;
	query_nodes(run, run->call_sql, 3, types, values, nulls, call, apply_answer);
	pfree(value);
	/* the nodes hold the job's documents, no more and no fewer */
	if (call->what == GNB_NODE_START &&
		(run->held_docs != run->all_docs || run->held_tokens != run->all_tokens))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed while it was read",
						run->params->job_id),
				 errdetail("Its nodes hold " INT64_FORMAT " unlabelled documents of " INT64_FORMAT
						   " tokens, the job read " INT64_FORMAT " of " INT64_FORMAT ".",
						   run->held_docs, run->held_tokens, run->all_docs, run->all_tokens)));
	/* the nodes have read their parts: later calls carry no setup */
	if (run->setup)
		pfree(run->setup);
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

/* A node's exact sums (gnb_exact_sums_encode) into the run's. */
static void
take_sums(NodesRun *run, const gnb_node_call *call, bytea *value)
{
	if (!gnb_exact_sums_merge(value, run->sums, run->n_sums))
		bad_estimates(run, psprintf("They are not %d sums.", run->n_sums));
}

/*
 * Chain c folded into the nodes' sums, aligned by perm (gnb_combine_add's):
 * its documents' distance from the chains' before, summed over the nodes
 * into *distance.
 */
static void
fold_chain(NodesRun *run, int32 c, const int32 *perm, gnb_exact_sum *distance)
{
	Oid			types[3] = {INT8OID, INT4OID, INT4ARRAYOID};
	Datum		values[3];

	values[0] = Int64GetDatum(run->params->job_id);
	values[1] = Int32GetDatum(c);
	values[2] = PointerGetDatum(gnb_int4_array(perm, run->K));
	memset(distance, 0, sizeof(*distance));
	run->sums = distance;
	run->n_sums = 1;
	query_nodes(run, run->fold_sql, 3, types, values, NULL, NULL, take_sums);
	run->sums = NULL;
	pfree(DatumGetPointer(values[2]));
}

/*
 * The chains combined on the nodes: their sums made means, and the mass of
 * those (gnb_result.unlabeled_mass, 2K) summed over the nodes into mass.
 */
static void
combine_chains(NodesRun *run, int32 chains, double *mass)
{
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(run->params->job_id), Int32GetDatum(chains)};
	gnb_exact_sum *sums = palloc0(sizeof(gnb_exact_sum) * 2 * run->K);

	run->sums = sums;
	run->n_sums = 2 * run->K;
	query_nodes(run, run->combined_sql, 2, types, values, NULL, NULL, take_sums);
	run->sums = NULL;
	for (int32 k = 0; k < 2 * run->K; k++)
		mass[k] = gnb_exact_value(&sums[k]);
	pfree(sums);
}

/* the nodes' query without a call: their release */
static void
query_all_nodes(NodesRun *run, const char *sql, answer_fn fn)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run->params->job_id)};

	query_nodes(run, sql, 1, types, values, NULL, NULL, fn);
}

/*
 * The queries that reach the job's nodes (the file's comment): on a Citus
 * source, a row of a shard of each server that owns shards with rows, each
 * node named by that shard's tableoid; else parts nodes of the source
 * itself.  In a transaction.
 */
static void
plan_nodes(NodesRun *run, const GnbJobParams *params, const char *column)
{
	const GnbSourceDesc *src = &params->source;
	char	   *args;
	char	   *from;

	run->source_relid = src->relid;
	run->source_relname = get_rel_name(src->relid);
	if (run->source_relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " was dropped while the job ran",
						params->job_id)));
	run->source_nspname = get_namespace_name(get_rel_namespace(src->relid));
	run->on_citus = column != NULL;
	lock_source_name(run);
	if (column == NULL)
	{
		run->n_nodes = params->blocked_nodes;
		args = psprintf("%u::pg_catalog.oid, i, %d", src->relid, params->blocked_nodes);
		from = psprintf("pg_catalog.generate_series(0, %d) AS i", params->blocked_nodes - 1);
	}
	else
	{
		char	  **anchors;
		int			n;
		StringInfoData list;
		char	   *type = format_type_be_qualified(get_atttype(src->relid,
															 get_attnum(src->relid, column)));
		const char *source;

		source = quote_qualified_identifier(run->source_nspname, run->source_relname);
		SPI_connect();
		anchors = gnb_citus_shard_anchors(src->relid, column, run->cxt, &n);
		SPI_finish();
		initStringInfo(&list);
		for (int i = 0; i < n; i++)
			appendStringInfo(&list, "%s%s::%s", i > 0 ? ", " : "", quote_literal_cstr(anchors[i]),
							 type);
		run->n_nodes = n;
		args = "s.tableoid, 0, 1";
		from = n == 0 ? psprintf("%s AS s WHERE false", source) :
			psprintf("%s AS s WHERE s.%s OPERATOR(pg_catalog.=) ANY (ARRAY[%s])", source,
					 quote_identifier(column), list.data);
		/*
		 * every task of a worker in one backend, which keeps its node, and
		 * that backend's connection kept however long the job runs (Citus
		 * closes a cached connection older than its lifetime, 10 minutes by
		 * default, when a transaction ends: a new backend would have no node)
		 */
		(void) set_config_option("citus.max_adaptive_executor_pool_size", "1", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
		(void) set_config_option("citus.max_cached_connection_lifetime", "-1", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	}
	run->call_sql = psprintf("SELECT gibbs_nb.blocked_node($1, %s, $2, $3) FROM %s", args, from);
	run->fold_sql = psprintf("SELECT gibbs_nb.blocked_node_fold($1, %s, $2, $3) FROM %s", args,
							 from);
	run->combined_sql = psprintf("SELECT gibbs_nb.blocked_node_combined($1, %s, $2) FROM %s",
								 args, from);
	run->scores_sql = psprintf("SELECT pg_catalog.int8send(gibbs_nb.blocked_node_scores($1, %s, $2)) "
							   "FROM %s", args, from);
	run->release_sql = psprintf("SELECT gibbs_nb.blocked_node($1, %s, NULL, NULL) FROM %s", args,
								from);
}

/*
 * Does the job train through nodes?  With gibbs_nb.blocked_nodes, or the
 * blocked sampler on a Citus source whose shards nodes can hold
 * (gnb_citus_nodes_column).  A warm start too: its first labels go to the
 * nodes with their setup.  In a transaction of its own.
 */
bool
gnb_nodes_wanted(const GnbJobParams *params)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		wanted;

	if (params->sampler.sampler != GNB_SAMPLER_BLOCKED)
		return false;
	if (params->blocked_nodes > 0)
		return true;
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	wanted = gnb_citus_nodes_column(params->source.relid) != NULL;
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return wanted;
}

/*
 * What the chain and its nodes are told of the corpus: the clamped counts
 * as its extra counts, each word's count in the unlabelled documents, and
 * the setup that carries them to the nodes with the vocabulary and the
 * source's name; in a warm start the first labels by key (GnbCorpus).
 */
static void
describe_corpus(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_corpus *core,
				gnb_corpus *chain_corpus, GnbNodeSetup *setup)
{
	const int32 V = core->n_words;
	const GnbSourceDesc *src = &params->source;
	int64	   *all_count = corpus->unlabeled_word_count;
	Datum	   *tokens;
	int			n_tokens;
	static const int64 no_pairs = 0;
	static const int32 nothing = -1;
	bool		warm = params->warm_version_id != 0;

	if (all_count == NULL || core->n_docs != 0)
		elog(ERROR, "gibbs_nb: job " INT64_FORMAT " read the documents its nodes hold",
			 params->job_id);
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
	chain_corpus->all_n_unlabeled = corpus->n_held;
	/* a warm start, said to a chain of no documents (gnb_sampler.h) */
	chain_corpus->init_label = warm ? &nothing : NULL;

	memset(setup, 0, sizeof(*setup));
	setup->job_id = params->job_id;
	setup->sampler = params->sampler;
	setup->sampler.gamma_grid = NULL;
	setup->n_classes = core->n_classes;
	setup->n_words = V;
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
	setup->all_n_unlabeled = corpus->n_held;
	/* a warm start's first labels, by key, for the nodes to look theirs up */
	setup->warm = warm;
	setup->n_warm = corpus->n_warm;
	setup->warm_keys = corpus->warm_keys;
	setup->warm_labels = corpus->warm_labels;
}

/*
 * Train with the chains' documents held by nodes (the file's comment): each
 * chain run by gnb_train_chain on a corpus of no documents, its nodes called
 * through SQL; each chain combined as gnb_train combines them, its
 * documents' estimates folded by the nodes, whose mass fills the result's
 * at the end (the estimates stay with them: gnb_nodes_write_labels,
 * gnb_nodes_store_labels; result->label_prob holds no document).  The
 * corpus was read with on_nodes (no document, the words' counts); a warm
 * start's first labels go to the nodes by key with the setup.  Returns the
 * run, whose nodes still hold the documents
 * (gnb_nodes_labels_only, gnb_nodes_write_labels, gnb_nodes_store_labels,
 * gnb_nodes_release).  In the worker's transaction-free state between its
 * phases; the sampler's memory through hooks, as gnb_train's.
 */
GnbNodesRun *
gnb_train_nodes(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_corpus *core,
				const gnb_hooks *hooks, gnb_result *result)
{
	const int32 K = core->n_classes;
	const int32 D = corpus->n_held;
	NodesRun   *run = palloc0(sizeof(NodesRun));
	gnb_hooks	node_hooks = {run_alloc, run_release, run_progress, run_interrupts, run};
	gnb_corpus	chain_corpus;
	GnbNodeSetup setup;
	gnb_combiner *cb;
	const char *problem;
	char	   *column;

	/* a warm start's first labels go to the nodes, not into the chain */
	if (core->init_label)
		elog(ERROR, "gibbs_nb: a warm start's labels belong to the nodes");
	/*
	 * beyond what sampling was checked for: the unlabelled counts, an
	 * answer's entries, the setup (the vocabulary again, the counts, a warm
	 * start's first labels)
	 */
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(CurrentMemoryContext, true),
						 12.0 * corpus->n_warm +
						 (double) core->n_words * (40.0 + 24.0 * K) +
						 2.0 * VARSIZE_ANY(corpus->tokens) + 64.0 * 1024,
						 "the chain's calls of its nodes");
	run->params = params;
	run->inner = hooks;
	run->cxt = CurrentMemoryContext;
	run->K = K;
	run->V = core->n_words;
	run->classes = corpus->classes;
	run->n_labeled = corpus->n_labeled;
	run->source_ids_sum = corpus->source_ids_sum;
	run->docs = palloc(sizeof(int64) * K);
	run->tokens = palloc(sizeof(int64) * K);
	/* (the source's names and shards from the catalogs, in a transaction) */
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(run->cxt);
	describe_corpus(params, corpus, core, &chain_corpus, &setup);
	if (params->blocked_nodes > 0)
		column = NULL;
	else
	{
		SPI_connect();
		column = gnb_citus_nodes_column(params->source.relid);
		if (column == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed while it was read",
							params->job_id),
					 errdetail("It is no longer distributed as it was.")));
		column = MemoryContextStrdup(run->cxt, column);
		SPI_finish();
	}
	plan_nodes(run, params, column);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(run->cxt);
	if ((problem = gnb_check(&chain_corpus, &params->sampler)) != NULL)
		elog(ERROR, "gibbs_nb: the chain of job " INT64_FORMAT " cannot train: %s",
			 params->job_id, problem);
	run->setup = gnb_node_setup_encode(&setup);
	node_hooks.blocked_nodes = call_nodes;
	run->all_docs = D;
	for (int32 w = 0; w < core->n_words; w++)
		run->all_tokens += setup.all_unlabeled_count[w];

	cb = gnb_combine_begin(core, &params->sampler, hooks, result);
	for (int32 c = 0; c < params->sampler.chains; c++)
	{
		gnb_chain	chain;
		double	   *own_prob;
		int32	   *own_last;
		const int32 *perm;
		gnb_exact_sum distance;

		gnb_train_chain(&chain_corpus, &params->sampler, c, &node_hooks, &chain);
		/* the chain's documents' estimates are the nodes': they fold them */
		own_prob = chain.label_prob;
		own_last = chain.last_labels;
		chain.label_prob = NULL;
		chain.last_labels = NULL;
		perm = gnb_combine_add(cb, &chain);
		fold_chain(run, c, perm, &distance);
		gnb_combine_distance(cb, &distance);
		chain.label_prob = own_prob;
		chain.last_labels = own_last;
		gnb_chain_free(&chain, &node_hooks);
	}
	gnb_combine_end(cb);
	/* the chains combined where the documents are: their mass */
	combine_chains(run, params->sampler.chains, result->unlabeled_mass);
	return run;
}

/* A node's number of documents scored (gibbs_nb.blocked_node_scores, int8send). */
static void
take_scored(NodesRun *run, const gnb_node_call *call, bytea *value)
{
	StringInfoData msg;

	gnb_bytea_reader(&msg, value);
	if (msg.len != 8)
		bad_estimates(run, "A node's number of documents scored is not an int8.");
	run->held_docs += pq_getmsgint64(&msg);
}

/*
 * The labels-only model the job's label check fell back to (its theta-hat
 * and pi, gnb_labels_only_model) sent to every node, which scores its
 * documents with it and keeps the scores: the version's estimates from now
 * on (gnb_nodes_write_labels, gnb_nodes_store_labels).
 */
void
gnb_nodes_labels_only(GnbNodesRun *run, gnb_result *result)
{
	const int32 K = run->K;
	const int32 V = run->V;
	double		size = 8.0 + 8.0 * K + 8.0 * K * V;
	StringInfoData buf;
	bytea	   *model;
	Oid			types[2] = {INT8OID, BYTEAOID};
	Datum		values[2];

	gnb_check_job_memory(run->params, (double) MemoryContextMemAllocated(run->cxt, true),
						 size + VARHDRSZ, "the labels-only model for the nodes");
	if (size > MaxAllocSize - VARHDRSZ - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the labels-only model of gibbs_nb job " INT64_FORMAT " is too large to send to its nodes",
						run->params->job_id)));
	gnb_sized_bytea_begin(&buf, (Size) size);
	pq_sendint32(&buf, K);
	pq_sendint32(&buf, V);
	for (int32 k = 0; k < K; k++)
		pq_sendfloat8(&buf, result->pi[k]);
	for (int64 i = 0; i < (int64) K * V; i++)
	{
		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		pq_sendfloat8(&buf, result->theta[i]);
	}
	Assert(buf.len == VARHDRSZ + (int) size);
	model = pq_endtypsend(&buf);
	values[0] = Int64GetDatum(run->params->job_id);
	values[1] = PointerGetDatum(model);
	run->held_docs = 0;
	query_nodes(run, run->scores_sql, 2, types, values, NULL, NULL, take_scored);
	if (run->held_docs != run->all_docs)
		bad_estimates(run, psprintf("The nodes scored " INT64_FORMAT " documents, not " INT64_FORMAT ".",
									run->held_docs, run->all_docs));
	pfree(model);
}

/*
 * May the nodes write the version's labels of their documents into the
 * labels table (labels_relid) where they are (gnb_nodes_write_labels)?
 * Only as the job's caller: a node lives in the caller's backend (on Citus,
 * the one its connections as that role reach), and the labels table is
 * written as the model's owner, so the caller must be the owner.  And on
 * Citus only into a labels table co-located with the source by its id
 * (each document's label on the server of the document); with nodes in
 * this process, only in a database without Citus.  The labels table's ids
 * must be of the source's type.  Else the labels come here
 * (gnb_nodes_store_labels).  SPI connected.
 */
bool
gnb_nodes_can_write_labels(GnbNodesRun *run, Oid labels_relid)
{
	const GnbJobParams *params = run->params;
	Oid			types[3] = {REGCLASSOID, REGCLASSOID, TEXTOID};
	Datum		values[3];
	bool		isnull;
	bool		colocated;
	Oid			id_type;
	int32		id_typmod;
	Oid			id_collation;

	if (GetUserId() != gnb_owner_role(params->model_owner))
		return false;
	/*
	 * the labels table's ids are the source's, typmod too (a version's
	 * labels are read back from them, their ids summed as the read's:
	 * gnb_nodes_check_ids; numeric(10,2) would round them)
	 */
	get_atttypetypmodcoll(labels_relid, get_attnum(labels_relid, "id"), &id_type, &id_typmod,
						  &id_collation);
	if (id_type != params->source.id_type || id_typmod != params->source.id_typmod)
		return false;
	/*
	 * nodes in this process (gibbs_nb.blocked_nodes): only where nothing
	 * goes through Citus, whose tasks would run in other backends
	 */
	if (!run->on_citus)
		return !OidIsValid(get_extension_oid("citus", true));
	values[0] = ObjectIdGetDatum(labels_relid);
	values[1] = ObjectIdGetDatum(params->source.relid);
	values[2] = CStringGetTextDatum(params->source.id_column);
	gnb_execute("SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 "
				"FROM pg_catalog.pg_dist_partition l, pg_catalog.pg_dist_partition s "
				"WHERE l.logicalrelid OPERATOR(pg_catalog.=) $1 "
				"AND s.logicalrelid OPERATOR(pg_catalog.=) $2 "
				"AND l.partmethod OPERATOR(pg_catalog.=) 'h' AND s.partmethod OPERATOR(pg_catalog.=) 'h' "
				"AND l.colocationid OPERATOR(pg_catalog.=) s.colocationid "
				"AND pg_catalog.column_to_column_name(l.logicalrelid, l.partkey) OPERATOR(pg_catalog.=) 'id' "
				"AND pg_catalog.column_to_column_name(s.logicalrelid, s.partkey) OPERATOR(pg_catalog.=) $3",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	colocated = DatumGetBool(gnb_result_value(1, &isnull));
	return !isnull && colocated;
}

/*
 * The query's FROM over the source that gives each document the nodes hold
 * its row l, the version's label (gibbs_nb.blocked_node_label, $n the job;
 * rows no node holds, labelled or added since the job read, give none; a
 * document asked for twice is an error), under the source's lock.
 */
static char *
labels_from_nodes(NodesRun *run, int n)
{
	const char *id = quote_identifier(run->params->source.id_column);
	const char *source;

	lock_source_name(run);
	source = quote_qualified_identifier(run->source_nspname, run->source_relname);
	/*
	 * a local source (a view perhaps) read once, whatever the plan: a
	 * document asked for again is an error (on Citus a plain table, whose
	 * query must stay one Citus pushes down)
	 */
	if (!run->on_citus)
		source = psprintf("(SELECT * FROM %s OFFSET 0)", source);
	return psprintf("FROM %s AS s, LATERAL gibbs_nb.blocked_node_label($%d, s.%s) AS l", source, n,
					id);
}

/*
 * The query's select list, after the id, and FROM over the source that give
 * each labelled document the job trained on (its label one of the job's
 * classes, $n, text[]; its tokens not NULL; not held out) its row: its
 * class's name and 1 (for the labels table, with_class), probabilities all
 * 0 but its class's 1, then more.  Expressions of the row alone (no
 * subquery, no volatile function), so that Citus pushes the whole of it down
 * to each shard.  Under the source's lock.
 */
static char *
labeled_rows_from(NodesRun *run, int n, bool with_class, const char *more)
{
	const GnbSourceDesc *src = &run->params->source;
	const char *held_out = gnb_holdout_condition(run->params);
	const char *label = quote_identifier(src->label_column);
	char	   *position;

	lock_source_name(run);
	/* 1-based, NULL for a label that is no class */
	position = psprintf("pg_catalog.array_position($%d, s.%s::pg_catalog.text COLLATE pg_catalog.\"C\")",
					 n, label);
	return psprintf("%s%s%s"
					"pg_catalog.array_fill(0::pg_catalog.float8, ARRAY[%s OPERATOR(pg_catalog.-) 1]) "
					"OPERATOR(pg_catalog.||) 1::pg_catalog.float8 OPERATOR(pg_catalog.||) "
					"pg_catalog.array_fill(0::pg_catalog.float8, ARRAY[%d OPERATOR(pg_catalog.-) %s])%s "
					"FROM %s AS s WHERE s.%s IS NOT NULL AND s.%s IS NOT NULL AND NOT (%s) "
					"AND %s IS NOT NULL",
					with_class ? psprintf("$%d[", n) : "", with_class ? position : "",
					with_class ? "], 1::pg_catalog.float8, " : "",
					position, run->K, position, more,
					quote_qualified_identifier(run->source_nspname, run->source_relname),
					label, quote_identifier(src->tokens_column), held_out ? held_out : "false",
					position);
}

/*
 * The query of the held-out rows of the job (gnb_score_holdout_rows): their
 * id, tokens and label as text, by id where the id type has an order (the
 * order the local read takes them in, so that their metrics' sums are
 * added alike).  Under the source's lock.
 */
char *
gnb_nodes_holdout_sql(GnbNodesRun *run)
{
	const GnbSourceDesc *src = &run->params->source;
	const char *tokens = quote_identifier(src->tokens_column);

	lock_source_name(run);
	return psprintf("SELECT s.%s, s.%s, s.%s::pg_catalog.text FROM %s AS s "
					"WHERE %s AND s.%s IS NOT NULL%s",
					quote_identifier(src->id_column), tokens, quote_identifier(src->label_column),
					quote_qualified_identifier(run->source_nspname, run->source_relname),
					gnb_holdout_condition(run->params), tokens, gnb_id_order_by(src));
}

/*
 * Every document the job read must have got its label (given of expected,
 * what they are): else the source changed since.
 */
void
gnb_nodes_check_labels_given(const GnbNodesRun *run, uint64 given, int64 expected,
							 const char *what)
{
	if (given != (uint64) expected)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed while the job ran",
						run->params->job_id),
				 errdetail("The labels of " UINT64_FORMAT " of its " INT64_FORMAT " %s documents were written.",
						   given, expected, what),
				 errhint("Train again.")));
}

/*
 * The rows written of the labelled documents and of the documents the nodes
 * hold must be those of the documents the job read: their ids' sum
 * (gnb_id_sum_term), of the rows written, must be the one the job read
 * (GnbCorpus.source_ids_sum): else a row was deleted and another added
 * since, or a label moved from a document to another (one of them would
 * get no row, the other two).
 */
void
gnb_nodes_check_ids(const GnbNodesRun *run, uint64 sum)
{
	if (sum != run->source_ids_sum)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed while the job ran",
						run->params->job_id),
				 errdetail("The documents whose labels were written are not those the job read."),
				 errhint("Train again.")));
}

/*
 * The version's labels of the labelled documents and of the documents the
 * nodes hold written into the labels table (relid, named `qualified` under
 * its lock) where they are: an INSERT ... SELECT over the source for each,
 * a labelled row's from its label (labeled_rows_from: on Citus pushed down
 * to each shard), another's from the node that holds it (labels_from_nodes:
 * on Citus the function is volatile, so Citus repartitions the query's
 * results, each shard's where it was made).  Every document the job read
 * must get its row (gnb_nodes_check_labels_given).  As the current user,
 * the labels table's owner (gnb_write_label_rows).  SPI connected.
 */
void
gnb_nodes_write_labels(GnbNodesRun *run, Oid relid, const char *qualified, char **classes,
					   int32 version)
{
	Oid			types[3] = {TEXTARRAYOID, INT4OID, INT8OID};
	Datum		values[3];
	const char *id = quote_identifier(run->params->source.id_column);
	const char *insert = psprintf("INSERT INTO %s (id, label, probability, probabilities, version) ",
								  qualified);

	values[0] = PointerGetDatum(gnb_text_array(classes, run->K));
	values[1] = Int32GetDatum(version);
	values[2] = Int64GetDatum(run->params->job_id);
	if (run->n_labeled > 0)
	{
		gnb_execute_on_relation(relid,
								psprintf("%s SELECT s.%s, %s", insert, id,
										 labeled_rows_from(run, 1, true, ", $2")),
								2, types, values, SPI_OK_INSERT);
		gnb_nodes_check_labels_given(run, SPI_processed, run->n_labeled, "labelled");
	}
	gnb_execute_on_relation(relid,
							psprintf("%s SELECT s.%s, $1[l.class_number], l.probability, l.probabilities, $2 %s",
									 insert, id, labels_from_nodes(run, 3)),
							3, types, values, SPI_OK_INSERT);
	gnb_nodes_check_labels_given(run, SPI_processed, run->all_docs, "unlabelled");
}

/*
 * The version's labels of the labelled documents and of the documents the
 * nodes hold, when they cannot write them where they are
 * (gnb_nodes_can_write_labels): read by the job's caller from the source
 * (labeled_rows_from) and from the nodes, which answer the caller
 * (labels_from_nodes), a batch at a time, into the version's documents'
 * labels (gibbs_nb.document_labels of version_id), never all held here.
 * Every document the job read must get its label
 * (gnb_nodes_check_labels_given); their ids are added to ids, which the
 * caller checks once the held-out rows' are added too (gnb_nodes_check_ids).
 * Returns how many.  In the publishing transaction,
 * before anything is written as another role: on Citus the caller may not
 * read the source's placements once another role wrote co-located ones in
 * it.  SPI connected.
 */
int64
gnb_nodes_store_labels(GnbNodesRun *run, int64 version_id, GnbIdSum *ids)
{
	const char *id = quote_identifier(run->params->source.id_column);
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run->params->job_id)};
	Oid			class_types[1] = {TEXTARRAYOID};
	Datum		classes[1] = {PointerGetDatum(gnb_text_array(run->classes, run->K))};
	int64		n_labeled = 0;
	int64		n;

	if (run->n_labeled > 0)
	{
		n_labeled = gnb_store_document_labels_of(run->params,
										 psprintf("SELECT s.%s, %s", id,
												  labeled_rows_from(run, 1, false, "")),
										 1, class_types, classes,
										 psprintf("the labelled documents of gibbs_nb job " INT64_FORMAT,
												  run->params->job_id),
										 version_id, run->K, gnb_id_sum_add, ids);
		gnb_nodes_check_labels_given(run, (uint64) n_labeled, run->n_labeled, "labelled");
	}
	n = gnb_store_document_labels_of(run->params,
									 psprintf("SELECT s.%s, l.probabilities %s", id,
											  labels_from_nodes(run, 1)),
									 1, types, values,
									 psprintf("the labels of gibbs_nb job " INT64_FORMAT "'s nodes",
											  run->params->job_id),
									 version_id, run->K, gnb_id_sum_add, ids);
	gnb_nodes_check_labels_given(run, (uint64) n, run->all_docs, "unlabelled");
	return n_labeled + n;
}

/* The nodes let go of the job's documents. */
void
gnb_nodes_release(GnbNodesRun *run)
{
	query_all_nodes(run, run->release_sql, NULL);
}
