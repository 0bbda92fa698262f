/*
 * worker.c
 *	  The background worker that runs one training job.
 *
 * A job's life, each step its own short transaction, none held open while
 * sampling:
 *	 1. register: insert the job row, status 'running';
 *	 2. read the source once, as the caller, into memory;
 *	 3. sample (no transaction; progress to shared memory every sweep and to
 *		the job row about once a second);
 *	 4. publish the new version and mark the job succeeded, in one transaction.
 * An error anywhere is caught, the transaction aborted, and the job marked
 * failed (or cancelled) with its message and SQLSTATE in a fresh transaction,
 * as TimescaleDB's job runner does.
 *
 * The worker connects as the caller's authenticated user and takes on the
 * caller's session user, role and security context, as PostgreSQL's parallel
 * workers do: it reads exactly what the caller could read.  search_path is
 * pinned to pg_catalog, pg_temp; every name it uses is qualified.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/nodes.h"
#include "store/store.h"
#include "security/security.h"
#include "gnb_label_check.h"

#include <signal.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "mb/pg_wchar.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

PGDLLEXPORT void gibbs_nb_worker_main(Datum main_arg);

/* How often the job row and pg_stat_activity get the worker's progress. */
#define PROGRESS_ROW_MS 1000

static volatile sig_atomic_t got_sigterm = false;

/*
 * SIGTERM (gibbs_nb_cancel, pg_terminate_backend, server shutdown): turn it
 * into a query cancel, so that CHECK_FOR_INTERRUPTS raises an ERROR the job
 * runner can catch and record, instead of the FATAL exit of bgworker_die.
 */
static void
handle_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	got_sigterm = true;
	if (!proc_exit_inprogress)
	{
		InterruptPending = true;
		QueryCancelPending = true;
	}
	SetLatch(MyLatch);
	errno = save_errno;
}

/* Trace rows buffered before they are written: a fixed amount of memory. */
#define TRACE_BATCH 4096

/*
 * At most this many trace rows per chain: a longer run keeps every k-th
 * sweep (and the last), so that a long job's trace fits neither memory nor
 * the disk by the chains x sweeps.
 */
#define TRACE_POINTS_PER_CHAIN 10000

typedef struct WorkerState
{
	GnbJobShared *job;
	GnbChainsRun *run;			/* chains in parallel: where they are */
	MemoryContext job_cxt;
	MemoryContext sample_cxt;
	TimestampTz started;
	TimestampTz last_row_update;
	/* the trace: every trace_stride-th sweep, buffered */
	int32		trace_stride;
	int			trace_n;
	int32		trace_chain[TRACE_BATCH];
	int32		trace_sweep[TRACE_BATCH];
	double		trace_lj[TRACE_BATCH];
	double		trace_changed[TRACE_BATCH];
	double		trace_gamma_theta[TRACE_BATCH];
	double		trace_gamma_pi[TRACE_BATCH];
} WorkerState;

/* The running job's state, for record_failure: it writes what was sampled. */
static WorkerState *active_worker = NULL;

/* Write the buffered trace rows, in a transaction of their own. */
static void
flush_trace(WorkerState *ws)
{
	MemoryContext old = MemoryContextSwitchTo(ws->sample_cxt);

	gnb_store_trace_rows(&ws->job->params, ws->trace_n, ws->trace_chain, ws->trace_sweep,
						 ws->trace_lj, ws->trace_changed, ws->trace_gamma_theta,
						 ws->trace_gamma_pi);
	MemoryContextSwitchTo(old);
	ws->trace_n = 0;
}

static void
set_phase(GnbJobShared *job, GnbJobPhase phase)
{
	SpinLockAcquire(&job->mutex);
	job->phase = phase;
	SpinLockRelease(&job->mutex);
	SetLatch(job->caller_latch);
}

static double
seconds_since(TimestampTz start)
{
	long		secs;
	int			usecs;

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	return secs + usecs / 1e6;
}

/*
 * The job's row, written once no other job of the model runs: under the
 * model's registration lock (taken before the snapshot, so that a job
 * registered just before is seen), committed before the lock goes.
 */
static void
register_job(GnbJobShared *job)
{
	const GnbJobParams *p = &job->params;
	int64		running;

	StartTransactionCommand();
	gnb_lock_model_registration(p->model_owner, p->model_name);
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	running = gnb_running_job(p->model_owner, p->model_name);
	SPI_finish();
	if (running != 0)
		gnb_refuse_running_model(p->model_name, running);
	gnb_store_job_started(p, MyProcPid);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * Register the model owner's name (gnb_register_owner), in a transaction of
 * its own, once the job is running.  The insert may wait for another
 * transaction inserting the same name (the owner's import, left open); only
 * this job waits for it, at most gibbs_nb.lock_timeout.
 */
static void
register_owner(GnbJobShared *job)
{
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	gnb_register_owner(job->params.model_owner, job->params.model_owner_role);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Sampler progress: shared memory every sweep, the job row once a second. */
static void
progress_hook(void *arg, const gnb_sweep *sw)
{
	WorkerState *ws = arg;
	GnbJobShared *job = ws->job;
	TimestampTz now;
	int			chain = sw->chain;
	int			sweep = sw->sweep;
	double		log_joint = sw->log_joint;
	int64		so_far = (int64) chain * job->params.sampler.sweeps + sweep;

	/* the job's position: with chains in parallel, the least advanced chain */
	if (ws->run != NULL)
		gnb_chains_position(ws->run, &chain, &sweep, &log_joint, &so_far);
	SpinLockAcquire(&job->mutex);
	job->chain = chain;
	job->sweep = sweep;
	job->log_joint = log_joint;
	job->sweeps_so_far = so_far;
	SpinLockRelease(&job->mutex);
	CHECK_FOR_INTERRUPTS();

	if (sw->sweep % ws->trace_stride == 0 || sw->sweep == job->params.sampler.sweeps)
	{
		ws->trace_chain[ws->trace_n] = sw->chain + 1;
		ws->trace_sweep[ws->trace_n] = sw->sweep;
		ws->trace_lj[ws->trace_n] = sw->log_joint;
		ws->trace_changed[ws->trace_n] = sw->changed;
		ws->trace_gamma_theta[ws->trace_n] = sw->gamma_theta;
		ws->trace_gamma_pi[ws->trace_n] = sw->gamma_pi;
		if (++ws->trace_n == TRACE_BATCH)
			flush_trace(ws);
	}

	now = GetCurrentTimestamp();
	if (TimestampDifferenceExceeds(ws->last_row_update, now, PROGRESS_ROW_MS))
	{
		char		activity[128];

		gnb_store_job_progress(job->params.job_id, chain, sweep, log_joint);
		flush_trace(ws);
		snprintf(activity, sizeof(activity), "gibbs_nb job " INT64_FORMAT ": chain %d/%d, sweep %d/%d",
				 job->params.job_id, chain + 1, job->params.sampler.chains, sweep,
				 job->params.sampler.sweeps);
		pgstat_report_activity(STATE_RUNNING, activity);
		ws->last_row_update = now;
	}
}

static void
check_interrupts_hook(void *arg)
{
	CHECK_FOR_INTERRUPTS();
}

static void *
alloc_hook(size_t size, void *arg)
{
	WorkerState *ws = arg;

	/* a backstop: gnb_memory_needed was checked before sampling began */
	gnb_check_job_memory(&ws->job->params,
						 (double) MemoryContextMemAllocated(ws->job_cxt, true), (double) size,
						 "the sampler");

	return MemoryContextAllocExtended(ws->sample_cxt, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static void
release_hook(void *ptr, void *arg)
{
	pfree(ptr);
}

/*
 * The trained model against its labels alone (gnb_label_check.h): the
 * labelled documents read with their tokens (GnbCorpus.checked_start), each
 * scored left out.  Its figures and warning go into result, for the version.
 * Nothing to check without both labelled and unlabelled documents.
 */
static void
check_labels(GnbJobParams *p, const GnbCorpus *corpus, const gnb_corpus *core,
			 const gnb_hooks *hooks, GnbNodesRun *nodes, gnb_result *result)
{
	gnb_corpus	checked;
	gnb_label_check check;
	int64	   *start;

	if (corpus->n_checked == 0)
		return;
	/* offsets from the first checked pair, as a corpus of their own */
	start = palloc(sizeof(int64) * (corpus->n_checked + 1));
	for (int32 i = 0; i <= corpus->n_checked; i++)
		start[i] = corpus->checked_start[i] - corpus->checked_start[0];
	memset(&checked, 0, sizeof(checked));
	checked.n_docs = corpus->n_checked;
	checked.n_words = corpus->n_words;
	checked.n_classes = corpus->n_classes;
	checked.doc_start = start;
	checked.word = corpus->word + corpus->checked_start[0];
	checked.count = corpus->count + corpus->checked_start[0];
	checked.label = corpus->checked_class;
	gnb_check_labels(core, &p->sampler, result, &checked, hooks, &check);
	pfree(start);

	/*
	 * unlabeled_weight chosen: the unlabelled documents stay only if they
	 * made the model clearly better than its labels alone; else the version
	 * is the labels-only model, which is then what it records
	 */
	if (p->unlabeled_weight_chosen && !gnb_check_labels_better(&check))
	{
		gnb_labels_only_model(core, &p->sampler, result, hooks);
		/* documents the nodes hold: they score them */
		if (nodes)
			gnb_nodes_labels_only(nodes, result);
		p->sampler.unlabeled_weight = 0.0;
	}
}

/*
 * The job's reading: the source locked and read as the caller, in one
 * transaction with one snapshot, and a warm start's labels (init_label,
 * allocated here; NULL for a cold start).  Returns its seconds.
 */
static double
read_job_corpus(GnbJobParams *p, bool on_nodes, MemoryContext job_cxt, GnbCorpus *corpus,
				int32 **init_label, uint64 *longest_id_dump_bytes)
{
	char		activity[128];
	TimestampTz phase_start;
	char	   *source_sql;
	int64		warm_docs = 0;

	snprintf(activity, sizeof(activity), "gibbs_nb job " INT64_FORMAT ": reading", p->job_id);
	pgstat_report_activity(STATE_RUNNING, activity);
	phase_start = GetCurrentTimestamp();
	StartTransactionCommand();
	/* the lock first, then the snapshot: the read sees the source as locked */
	source_sql = gnb_lock_source(&p->source, p->job_id);
	PushActiveSnapshot(GetTransactionSnapshot());
	gnb_watch_source_memory(p);
	PG_TRY();
	{
		gnb_read_corpus(p, source_sql, on_nodes, job_cxt, corpus);
	}
	PG_CATCH();
	{
		gnb_unwatch_source_memory();
		/* the watch's cancel, if it was one, as the 53200 it stands for */
		gnb_source_memory_check(p, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	gnb_unwatch_source_memory();
	/* a source that caught the watch's cancel and went on does not train */
	gnb_source_memory_check(p, false);
	/* the longest id's text, for the check that a backup can hold the version */
	*longest_id_dump_bytes = gnb_corpus_longest_id_dump_bytes(p, corpus);
	/* and that the labels table can hold every id */
	gnb_check_ids_fit_labels_table(p, corpus);
	/*
	 * a warm start: the documents still there start where they were (with
	 * nodes, their first labels by key were taken as their ids were read)
	 */
	if (p->warm_version_id != 0 && on_nodes)
		elog(DEBUG1, "gibbs_nb job " INT64_FORMAT ": " INT64_FORMAT " of %d unlabelled documents start warm",
			 p->job_id, corpus->n_warm, corpus->n_held);
	else if (p->warm_version_id != 0)
	{
		*init_label = MemoryContextAllocExtended(job_cxt, sizeof(int32) * ((Size) corpus->n_docs + 1),
												MCXT_ALLOC_HUGE);
		SPI_connect();
		/* the version's labels, all of them, beside the corpus */
		gnb_check_warm_start_memory(p, job_cxt);
		warm_docs = gnb_store_warm_start(p->warm_version_id, corpus, p->source.id_type,
										 *init_label);
		SPI_finish();
		elog(DEBUG1, "gibbs_nb job " INT64_FORMAT ": " INT64_FORMAT " of %d unlabelled documents start warm",
			 p->job_id, warm_docs, corpus->n_docs);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(job_cxt);
	elog(DEBUG1, "gibbs_nb job " INT64_FORMAT ": the corpus read holds %zu bytes (%d unlabelled documents here, %d held by nodes, %d labelled)",
		 p->job_id, MemoryContextMemAllocated(job_cxt, true), corpus->n_docs, corpus->n_held,
		 corpus->n_labeled);

	/*
	 * Reading's transient memory (its word table, the rows, the counting
	 * query's aggregate states and plans) is back with malloc, which glibc
	 * keeps in the process's heap unless asked: give it back to the system,
	 * so that the worker's resident memory while it samples (and publishes)
	 * is the corpus, not the corpus plus what it took to read it.
	 */
#ifdef __GLIBC__
	(void) malloc_trim(0);
#endif
	return seconds_since(phase_start);
}

/* The corpus as the sampler core takes it: its arrays, lent where they can be. */
static void
core_corpus(const GnbCorpus *corpus, int32 *init_label, gnb_corpus *core)
{
	memset(core, 0, sizeof(*core));
	core->n_docs = corpus->n_docs;
	core->n_words = corpus->n_words;
	core->n_classes = corpus->n_classes;
	core->doc_start = corpus->doc_start;
	core->word = corpus->word;
	core->count = corpus->count;
	core->label = corpus->label;
	/* lent: the paper sampler packs its pairs there rather than in a copy */
	core->lent_word = corpus->word;
	core->init_label = init_label;
	core->doc_key = corpus->doc_key;
	/*
	 * documents held by nodes: none here, the whole's summary (the nodes
	 * start them, gnb_train_nodes)
	 */
	if (corpus->unlabeled_word_count)
	{
		core->all_unlabeled_count = corpus->unlabeled_word_count;
		core->all_n_unlabeled = corpus->n_held;
	}
	if (corpus->n_labeled > 0)
	{
		core->extra_word_counts = corpus->labeled_word_counts;
		/* lent: a chain counts in them rather than in a copy */
		core->lent_extra_word_counts = corpus->labeled_word_counts;
		core->extra_doc_counts = corpus->labeled_doc_counts;
	}
}

/*
 * What sampling and publishing will take, on top of the corpus, in bytes:
 * checked before any of it is allocated.
 */
static double
job_memory_committed(const GnbJobParams *p, const GnbCorpus *corpus, MemoryContext job_cxt)
{
	double		committed;

	/*
	 * Publishing holds the vocabulary
	 * and log theta-hat as arrays (about three copies of V x K doubles and
	 * two of the tokens).
	 */
	committed = (double) MemoryContextMemAllocated(job_cxt, true) +
		(double) gnb_memory_needed(corpus->n_docs, corpus->n_words, corpus->n_classes,
								   corpus->doc_start[corpus->n_docs], &p->sampler) +
		3.0 * sizeof(double) * corpus->n_words * corpus->n_classes +
		64.0 * corpus->n_words +
		(double) gnb_check_labels_memory(corpus->n_words, corpus->n_classes);
	/*
	 * Scoring the held-out rows builds a model of the version beside it (log
	 * theta-hat and its array copy, the vocabulary index) and their
	 * probabilities, before publishing (with nodes, a batch's at a time:
	 * below).
	 */
	if (p->holdout > 0.0)
		committed += 3.0 * sizeof(double) * corpus->n_words * corpus->n_classes +
			64.0 * corpus->n_words +
			(corpus->labeled_in_source ? 0.0 :
			 2.0 * sizeof(double) * corpus->n_holdout * corpus->n_classes);
	/*
	 * The labels of the documents nodes hold, and then of the labelled and
	 * held-out ones, pass through a batch at a time
	 * (gnb_store_document_labels_from, gnb_nodes_store_labels, the labels
	 * table's copy): a fetch's rows, the batch made of them and the arrays
	 * it is written by, each GNB_LABELS_FETCH documents' K probabilities
	 * and an id's few words.
	 */
	if (corpus->labeled_in_source)
		committed += 3.0 * GNB_LABELS_FETCH * (sizeof(double) * corpus->n_classes + 64.0);
	return committed;
}

/*
 * The nodes let go of the job's documents, once its version is published
 * (they wrote their labels, or gave them).  The version stands whatever
 * happens here: a failure (a lost connection, the source renamed, a cancel)
 * is a warning, and the nodes go anyway when this worker's connections do.
 */
static void
release_nodes(GnbNodesRun *nodes, int64 job_id, MemoryContext job_cxt)
{
	PG_TRY();
	{
		gnb_nodes_release(nodes);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(job_cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		MemoryContextSwitchTo(job_cxt);
		/*
		 * a cancel now comes too late: the job is done (a warning checks
		 * for interrupts as it ends)
		 */
		HOLD_INTERRUPTS();
		QueryCancelPending = false;
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("gibbs_nb job " INT64_FORMAT " could not release its nodes: %s",
						job_id, edata->message)));
		RESUME_INTERRUPTS();
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * A job, start to end, in its worker: registered, its labels table's name
 * reserved, the source read, the chains sampled (in chain workers where
 * there are several), the label check, the version published, the outcome
 * told.  An error goes to record_failure.
 */
static void
run_job(GnbJobShared *job, MemoryContext job_cxt)
{
	GnbJobParams *p = &job->params;
	WorkerState *ws = MemoryContextAllocZero(job_cxt, sizeof(WorkerState));
	GnbCorpus	corpus;
	gnb_corpus	core;
	gnb_result	result;
	gnb_hooks	hooks = {alloc_hook, release_hook, progress_hook, check_interrupts_hook, ws};
	const char *problem;
	int32		version;
	char		activity[128];
	TimestampTz phase_start;
	double		read_seconds;
	double		sample_seconds;
	int32	   *init_label = NULL;
	double		committed;
	uint64		longest_id_dump_bytes;
	bool		on_nodes;
	GnbNodesRun *nodes = NULL;

	active_worker = ws;
	ws->job = job;
	ws->started = GetCurrentTimestamp();
	ws->job_cxt = job_cxt;
	ws->trace_stride = (p->sampler.sweeps + TRACE_POINTS_PER_CHAIN - 1) / TRACE_POINTS_PER_CHAIN;
	ws->sample_cxt = AllocSetContextCreate(job_cxt, "gibbs_nb sampler", ALLOCSET_DEFAULT_SIZES);

	register_job(job);
	MemoryContextSwitchTo(job_cxt);
	set_phase(job, GNB_PHASE_RUNNING);
	register_owner(job);
	/*
	 * what lost jobs left, then the labels table's name, taken now, not
	 * after the sweeps (publish.c)
	 */
	gnb_release_lost_labels_tables(p);
	gnb_reserve_labels_table(p);
	MemoryContextSwitchTo(job_cxt);

	/* a chain whose documents nodes hold: the worker reads their ids and words' counts only */
	on_nodes = gnb_nodes_wanted(p);
	read_seconds = read_job_corpus(p, on_nodes, job_cxt, &corpus, &init_label,
								   &longest_id_dump_bytes);

	if ((int64) corpus.n_docs + corpus.n_held + corpus.n_labeled == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot train on %s: it has no documents", p->source_display),
				 errdetail("%d rows have NULL tokens.", corpus.n_skipped)));

	core_corpus(&corpus, init_label, &core);
	problem = gnb_check(&core, &p->sampler);
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot train on %s: %s", p->source_display, problem)));

	committed = job_memory_committed(p, &corpus, job_cxt);
	gnb_check_job_memory(p, 0.0, committed, "sampling and publishing");
	/* a version no backup could hold is refused before it samples */
	gnb_check_corpus_dumpable(p, &corpus, longest_id_dump_bytes);

	SpinLockAcquire(&job->mutex);
	job->sampling_started = GetCurrentTimestamp();
	SpinLockRelease(&job->mutex);
	ws->last_row_update = phase_start = GetCurrentTimestamp();
	if (on_nodes)
		nodes = gnb_train_nodes(p, &corpus, &core, &hooks, &result);
	else if (p->sampler.sampler == GNB_SAMPLER_BLOCKED && p->sweep_workers > 1 &&
			 p->max_chain_workers > 0)
		gnb_train_sweeps(job, &core, &hooks, committed, &result);
	else if (p->sampler.chains > 1 && p->max_chain_workers > 0)
		gnb_train_parallel(job, &core, &hooks, ws->trace_stride, committed, &ws->run, &result);
	else
		gnb_train(&core, &p->sampler, &hooks, &result);
	flush_trace(ws);
	sample_seconds = seconds_since(phase_start);
	check_labels(p, &corpus, &core, &hooks, nodes, &result);
	/* the documents' pairs go before publishing builds its arrays */
	gnb_corpus_word_counts(&corpus);

	snprintf(activity, sizeof(activity), "gibbs_nb job " INT64_FORMAT ": publishing", p->job_id);
	pgstat_report_activity(STATE_RUNNING, activity);
	phase_start = GetCurrentTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	version = gnb_publish(p, &corpus, nodes, &result, seconds_since(ws->started));
	gnb_store_job_succeeded(p, version, result.final_log_joint, read_seconds, sample_seconds,
							seconds_since(phase_start));
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(job_cxt);
	if (nodes)
		release_nodes(nodes, p->job_id, job_cxt);

	/* the outcome is in the job's row: the job is over for everyone else */
	gnb_release_job_lock(p->job_id);

	SpinLockAcquire(&job->mutex);
	job->version = version;
	job->sweeps_done = p->sampler.sweeps;
	job->seconds = seconds_since(ws->started);
	job->log_likelihood = result.final_log_joint;
	job->phase = GNB_PHASE_SUCCEEDED;
	SpinLockRelease(&job->mutex);
	SetLatch(job->caller_latch);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Longest error message kept in a job's row, in bytes. */
#define JOB_MESSAGE_MAX 1000

/*
 * A message cut to at most max bytes, on a character boundary: a failing
 * job's message may be as long as the data that caused it, and a row of
 * gibbs_nb.jobs must not be.
 */
static const char *
capped(const char *message, int max)
{
	int			len = strlen(message);

	if (len <= max)
		return message;
	return psprintf("%s...", pnstrdup(message, pg_mbcliplen(message, len, max - 3)));
}

/*
 * Record a failed or cancelled job: in shared memory for a waiting caller,
 * in the job row for everyone else.  Called with the error state set.
 */
static void
record_failure(GnbJobShared *job, MemoryContext job_cxt)
{
	ErrorData  *edata;
	bool		cancelled;
	const char *status;
	uint32		holdoff;

	MemoryContextSwitchTo(job_cxt);
	edata = CopyErrorData();
	cancelled = edata->sqlerrcode == ERRCODE_QUERY_CANCELED || got_sigterm;
	if (got_sigterm)
	{
		edata->sqlerrcode = ERRCODE_QUERY_CANCELED;
		edata->message = pstrdup("gibbs_nb job cancelled: its worker was told to terminate");
	}
	else if (cancelled)
		edata->message = pstrdup("gibbs_nb job cancelled");
	/* a cancel's message is its own: where the worker was is not its context */
	if (cancelled)
		edata->context = NULL;
	EmitErrorReport();
	FlushErrorState();
	AbortOutOfAnyTransaction();
	QueryCancelPending = false;
	/* no chain or sweep worker outlives its job: stop them before the outcome is told */
	if (active_worker != NULL)
		active_worker->run = NULL;
	gnb_chains_stop(true);
	gnb_sweeps_stop(true);

	/*
	 * A labels table it created and nothing holds goes (publish.c), before
	 * the outcome is told: whoever sees the job ended finds it gone.  It
	 * waits at most a second for any lock, and any error in it is a WARNING.
	 */
	gnb_release_labels_table(&job->params);
	QueryCancelPending = false;

	status = cancelled ? "cancelled" : "failed";

	/*
	 * The outcome first: it is what must not be lost.  With interrupts held:
	 * a second SIGTERM meanwhile (a second cancel, a shutdown) cancelled the
	 * statement that wrote it, and the job, its row still 'running' once its
	 * lock was gone, was shown as lost in a crash.  The count is put back as
	 * it was, not decremented: an error resets it to 0 (errfinish).
	 */
	holdoff = InterruptHoldoffCount;
	HOLD_INTERRUPTS();
	PG_TRY();
	{
		gnb_store_job_ended(&job->params, status,
							capped(edata->message ? edata->message : "unknown error",
								   JOB_MESSAGE_MAX),
							unpack_sql_state(edata->sqlerrcode), MyProcPid);
	}
	PG_CATCH();
	{
		/* nothing more we can do than say so in the log */
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();
	InterruptHoldoffCount = holdoff;
	/* a cancel that came meanwhile is the one being recorded */
	QueryCancelPending = false;

	/* then the trace up to the failure: it shows where the job was */
	PG_TRY();
	{
		if (active_worker != NULL)
			flush_trace(active_worker);
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();

	/*
	 * The outcome is in the job's row (or could not be written; then the row
	 * shows the job failed once the lock is gone): the job is over for
	 * everyone else, before its caller hears of it.
	 */
	gnb_release_job_lock(job->params.job_id);

	/* last, so that a caller who sees this finds the job row written */
	SpinLockAcquire(&job->mutex);
	job->sqlerrcode = edata->sqlerrcode;
	strlcpy(job->message, capped(edata->message ? edata->message : "unknown error",
								 sizeof(job->message) - 1), sizeof(job->message));
	strlcpy(job->detail, capped(edata->detail ? edata->detail : "", sizeof(job->detail) - 1),
			sizeof(job->detail));
	strlcpy(job->hint, capped(edata->hint ? edata->hint : "", sizeof(job->hint) - 1),
			sizeof(job->hint));
	strlcpy(job->context, capped(edata->context ? edata->context : "",
								 sizeof(job->context) - 1), sizeof(job->context));
	job->phase = GNB_PHASE_FAILED;
	SpinLockRelease(&job->mutex);
	SetLatch(job->caller_latch);
}

/*
 * gibbs_nb_worker_main: entry point of a job's background worker.
 * main_arg is the handle of the job's shared memory segment.
 */
void
gibbs_nb_worker_main(Datum main_arg)
{
	dsm_segment *seg;
	GnbJobShared *job;
	GnbJobParams *p;
	MemoryContext job_cxt;

	pqsignal(SIGTERM, handle_sigterm);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "gibbs_nb worker");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb worker could not map its job's shared memory")));
	/*
	 * A caller that loaded another build of the library (one installed
	 * since) made a segment of another layout: refuse it rather than write
	 * past its end.  The caller then finds its worker gone.
	 */
	if (dsm_segment_map_length(seg) < sizeof(GnbJobShared))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb worker: its job's shared memory is of another build of gibbs_nb"),
				 errhint("Reconnect, so that the session loads the installed library, and train again.")));
	job = dsm_segment_address(seg);
	p = &job->params;

	gnb_become_caller(p, "gibbs_nb worker");
	/* held until this process exits: what says the job's worker is alive */
	gnb_guard_job_locks();
	gnb_hold_job_lock(p->job_id, p->current_user_id, p->session_user_id);
	/* counted by the job limits now: the caller lets go of the launch lock */
	set_phase(job, GNB_PHASE_ADMITTED);

#ifdef __GLIBC__

	/*
	 * Every block of 128 kB or more its own mapping, given back to the system
	 * when freed: the job frees large arrays phase by phase (reading's, the
	 * sampler's, the documents' before publishing), and glibc would otherwise
	 * raise this threshold to the largest block freed so far and serve the
	 * next large arrays from its heap, which it keeps.  Setting it turns that
	 * adjustment off.
	 */
	(void) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
	job_cxt = AllocSetContextCreate(TopMemoryContext, "gibbs_nb job", ALLOCSET_DEFAULT_SIZES);
	PG_TRY();
	{
		MemoryContextSwitchTo(job_cxt);
		run_job(job, job_cxt);
	}
	PG_CATCH();
	{
		record_failure(job, job_cxt);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(TopMemoryContext);
	MemoryContextDelete(job_cxt);
	dsm_detach(seg);
}
