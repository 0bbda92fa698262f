/*
 * chains.c
 *	  A training job's chains in parallel background workers.
 *
 * With chains => n the job's worker reads the corpus once, copies it into a
 * dynamic shared memory segment (the compressed sparse rows, the clamped
 * counts, the warm start) and starts up to n - 1 chain workers, at most
 * gibbs_nb.max_chain_workers, each of which runs one chain over that corpus
 * read-only.  The job's worker runs chain 0 itself meanwhile, then every
 * chain no worker could be started for (no free slot, or beyond the limit).
 * Chain c's random stream is the seed's jumped c times wherever it runs, and
 * the chains are combined in chain order once all have ended, so the model
 * depends on the seed and the data alone, not on timing or on how many
 * workers there were: bit for bit the model of the chains run one after
 * another.
 *
 * A chain worker puts its chain's result (label probabilities, theta, pi,
 * the kept log joints, its last labels) and its trace points into its slot
 * of the segment; the job's worker writes the trace rows and the job's
 * progress for all chains.  The job's worker watches its chain workers while
 * it samples and waits on its latch with a timeout afterwards: a chain
 * worker that reported an error fails the job with that error, one that
 * exited without a result (terminated, crashed) fails it with a message
 * that says so.  When the job fails or is cancelled its worker terminates
 * the chain workers and waits (boundedly) for them to exit; a chain worker
 * whose job's worker has gone stops by itself at its next sweep.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "store/store.h"
#include "security/security.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

PGDLLEXPORT void gibbs_nb_chain_worker_main(Datum main_arg);

/* How often the job's worker looks at its chain workers while it waits. */
#define CHAINS_POLL_MS 100
/* How long a failing job's worker waits for its chain workers to exit. */
#define CHAINS_STOP_WAIT_MS 10000
/* How often a chain worker updates pg_stat_activity. */
#define CHAIN_ACTIVITY_MS 1000

typedef enum GnbChainState
{
	CHAIN_PENDING = 0,			/* a worker was asked for; not yet running */
	CHAIN_RUNNING,
	CHAIN_DONE,					/* the result is in the slot */
	CHAIN_FAILED,				/* the error is in the slot */
	CHAIN_LOCAL					/* the job's worker runs it */
} GnbChainState;

/* One kept trace point of a chain. */
typedef struct GnbTracePoint
{
	int32		sweep;
	double		log_joint;
	double		changed;
	double		gamma_theta;
	double		gamma_pi;
} GnbTracePoint;

typedef struct GnbChainSlot
{
	slock_t		mutex;			/* protects state .. message */
	GnbChainState state;
	int32		sweep;			/* last finished sweep */
	double		log_joint;
	int32		n_trace;		/* trace points written */
	int			sqlerrcode;
	char		message[512];
	/* the result, once state is CHAIN_DONE */
	int64		changed_after_burn_in;
	int64		locked;
	int32		kept_points;	/* the thinned kept log joints in the slot */
	int32		kept_stride;
	double		last_log_joint;
	double		gamma_theta;
	double		gamma_pi;
	/* offsets into the segment */
	Size		label_prob_off;	/* n_docs x K */
	Size		theta_off;		/* V x K */
	Size		pi_off;			/* K */
	Size		kept_off;		/* min(kept, GNB_KEPT_SERIES_MAX) */
	Size		last_labels_off;	/* max(n_docs, 1) */
	Size		trace_off;		/* max_trace */
} GnbChainSlot;

typedef struct GnbChainsShared
{
	GnbJobParams params;		/* the caller's identity, the sampler's parameters */
	int			job_pid;
	struct Latch *job_latch;	/* the job's worker's */
	int32		trace_stride;
	int32		max_trace;
	int32		n_docs;
	int32		n_words;
	int32		n_classes;
	Size		doc_start_off;
	Size		word_off;
	Size		count_off;
	Size		label_off;
	Size		extra_word_counts_off;	/* 0: none */
	Size		extra_doc_counts_off;
	Size		init_label_off; /* 0: none */
	GnbChainSlot slot[FLEXIBLE_ARRAY_MEMBER];
} GnbChainsShared;

/* The job's worker's view of its chains. */
struct GnbChainsRun
{
	dsm_segment *seg;
	GnbChainsShared *sh;
	int32		chains;
	BackgroundWorkerHandle **handle;	/* chains entries; NULL: none */
	int32	   *trace_read;		/* trace points already passed on */
	const gnb_hooks *hooks;		/* the job's worker's */
};

/* The job's worker's running chains: what gnb_chains_stop stops. */
static GnbChainsRun *active_run = NULL;
static bool stop_callback_registered = false;

#define AT(sh, off, type) ((type) ((char *) (sh) + (off)))

/* Lay out a piece of `bytes` at *size, aligned; returns its offset. */
static Size
place(Size *size, double bytes)
{
	Size		off = MAXALIGN(*size);

	*size = off + MAXALIGN((Size) bytes);
	return off;
}

/* Terminate the chain workers; with wait, wait (boundedly) for them to exit. */
void
gnb_chains_stop(bool wait)
{
	GnbChainsRun *run = active_run;
	TimestampTz start = GetCurrentTimestamp();

	if (run == NULL)
		return;
	active_run = NULL;
	for (int c = 0; c < run->chains; c++)
		if (run->handle[c] != NULL)
			TerminateBackgroundWorker(run->handle[c]);
	while (wait)
	{
		bool		all_gone = true;

		for (int c = 0; c < run->chains; c++)
		{
			pid_t		pid;

			if (run->handle[c] != NULL &&
				GetBackgroundWorkerPid(run->handle[c], &pid) != BGWH_STOPPED)
				all_gone = false;
		}
		if (all_gone)
			break;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), CHAINS_STOP_WAIT_MS))
		{
			elog(WARNING, "gibbs_nb job " INT64_FORMAT ": chain workers still running %d s after they were told to stop",
				 run->sh->params.job_id, CHAINS_STOP_WAIT_MS / 1000);
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	dsm_detach(run->seg);
}

/* At the exit of the job's worker, however it exits: no orphaned chains. */
static void
stop_chains_at_exit(int code, Datum arg)
{
	GnbChainsRun *run = active_run;

	if (run == NULL)
		return;
	active_run = NULL;
	for (int c = 0; c < run->chains; c++)
		if (run->handle[c] != NULL)
			TerminateBackgroundWorker(run->handle[c]);
}

/*
 * Where the job is: the least advanced chain that has not ended (the last
 * chain if all have), and the sweeps done over all chains.
 */
void
gnb_chains_position(GnbChainsRun *run, int32 *chain, int32 *sweep, double *log_joint,
					int64 *sweeps_done)
{
	int32		best = -1;
	int32		best_sweep = 0;
	double		best_lj = 0;
	int64		done = 0;

	for (int c = 0; c < run->chains; c++)
	{
		GnbChainSlot *s = &run->sh->slot[c];
		int32		sw;
		double		lj;
		GnbChainState st;

		SpinLockAcquire(&s->mutex);
		sw = s->sweep;
		lj = s->log_joint;
		st = s->state;
		SpinLockRelease(&s->mutex);
		done += sw;
		if (st != CHAIN_DONE && (best < 0 || sw < best_sweep))
		{
			best = c;
			best_sweep = sw;
			best_lj = lj;
		}
		else if (best < 0 && c == run->chains - 1)
		{
			best = c;
			best_sweep = sw;
			best_lj = lj;
		}
	}
	*chain = best;
	*sweep = best_sweep;
	*log_joint = best_lj;
	*sweeps_done = done;
}

/*
 * Pass the chain workers' new trace points to the job's progress hook, and
 * fail the job if a chain failed or its worker is gone without a result.
 */
static void
poll_chains(GnbChainsRun *run)
{
	GnbChainsShared *sh = run->sh;

	for (int c = 0; c < run->chains; c++)
	{
		GnbChainSlot *s = &sh->slot[c];
		GnbChainState st;
		int32		n_trace;
		bool		stopped = false;
		pid_t		pid;

		if (run->handle[c] == NULL)
			continue;
		/* liveness first, then the state: a worker that ended leaves DONE */
		stopped = GetBackgroundWorkerPid(run->handle[c], &pid) == BGWH_STOPPED;
		SpinLockAcquire(&s->mutex);
		st = s->state;
		n_trace = s->n_trace;
		SpinLockRelease(&s->mutex);

		while (run->trace_read[c] < n_trace)
		{
			GnbTracePoint *tp = AT(sh, s->trace_off, GnbTracePoint *) + run->trace_read[c];
			gnb_sweep	sw;

			sw.chain = c;
			sw.sweep = tp->sweep;
			sw.log_joint = tp->log_joint;
			sw.changed = tp->changed;
			sw.gamma_theta = tp->gamma_theta;
			sw.gamma_pi = tp->gamma_pi;
			run->trace_read[c]++;
			run->hooks->progress(run->hooks->arg, &sw);
		}

		/*
		 * A worker that exited before it took its chain (it could not
		 * connect: the role's connection limit, say) leaves the chain to
		 * the job's worker: the model is the same.
		 */
		if (st == CHAIN_PENDING && stopped)
		{
			SpinLockAcquire(&s->mutex);
			st = s->state;
			if (st == CHAIN_PENDING)
				s->state = st = CHAIN_LOCAL;
			SpinLockRelease(&s->mutex);
			if (st == CHAIN_LOCAL)
			{
				run->handle[c] = NULL;
				ereport(LOG,
						(errmsg("gibbs_nb job " INT64_FORMAT ": the chain worker of chain %d/%d exited before it started; the chain runs in the job's worker",
								sh->params.job_id, c + 1, run->chains),
						 errhint("The server log has its messages.")));
				continue;
			}
		}
		if (st == CHAIN_FAILED)
			ereport(ERROR,
					(errcode(s->sqlerrcode),
					 errmsg_internal("%s", s->message),
					 errcontext("chain %d/%d of gibbs_nb job " INT64_FORMAT ", in its own worker",
								c + 1, run->chains, sh->params.job_id)));
		if (st != CHAIN_DONE && stopped)
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("gibbs_nb chain worker of chain %d/%d of job " INT64_FORMAT " exited before its chain ended",
							c + 1, run->chains, sh->params.job_id),
					 errhint("It was terminated or crashed; the server log has its messages.")));
	}
}

/* Copy a finished chain into its slot, and mark it done. */
static void
chain_to_slot(GnbChainsShared *sh, int32 c, const gnb_chain *ch)
{
	GnbChainSlot *s = &sh->slot[c];
	Size		dk = (Size) sh->n_docs * sh->n_classes;
	Size		vk = (Size) sh->n_words * sh->n_classes;

	memcpy(AT(sh, s->label_prob_off, double *), ch->label_prob, dk * sizeof(double));
	memcpy(AT(sh, s->theta_off, double *), ch->theta, vk * sizeof(double));
	memcpy(AT(sh, s->pi_off, double *), ch->pi, sh->n_classes * sizeof(double));
	memcpy(AT(sh, s->kept_off, double *), ch->kept_log_joint, ch->kept_points * sizeof(double));
	memcpy(AT(sh, s->last_labels_off, int32 *), ch->last_labels,
		   (Size) Max(sh->n_docs, 1) * sizeof(int32));
	SpinLockAcquire(&s->mutex);
	s->changed_after_burn_in = ch->changed_after_burn_in;
	s->locked = ch->locked;
	s->kept_points = ch->kept_points;
	s->kept_stride = ch->kept_stride;
	s->last_log_joint = ch->last_log_joint;
	s->gamma_theta = ch->gamma_theta;
	s->gamma_pi = ch->gamma_pi;
	s->sweep = sh->params.sampler.sweeps;
	s->state = CHAIN_DONE;
	SpinLockRelease(&s->mutex);
}

/* A chain as the combiner takes it, from its slot. */
static void
chain_from_slot(GnbChainsShared *sh, int32 c, gnb_chain *ch)
{
	GnbChainSlot *s = &sh->slot[c];
	const gnb_params *sp = &sh->params.sampler;

	memset(ch, 0, sizeof(*ch));
	ch->chain = c;
	ch->kept = (sp->sweeps - sp->burn_in) / sp->lag;
	ch->sweeps = sp->sweeps;
	ch->label_prob = AT(sh, s->label_prob_off, double *);
	ch->theta = AT(sh, s->theta_off, double *);
	ch->pi = AT(sh, s->pi_off, double *);
	ch->kept_log_joint = AT(sh, s->kept_off, double *);
	ch->last_labels = AT(sh, s->last_labels_off, int32 *);
	ch->last_log_joint = s->last_log_joint;
	ch->changed_after_burn_in = s->changed_after_burn_in;
	ch->locked = s->locked;
	ch->kept_points = s->kept_points;
	ch->kept_stride = s->kept_stride;
	ch->gamma_theta = s->gamma_theta;
	ch->gamma_pi = s->gamma_pi;
}

/* The job's worker's own chains: its progress hook, and the others' too. */
typedef struct LocalChain
{
	GnbChainsRun *run;
	int32		chain;
} LocalChain;

static void *
local_alloc(size_t size, void *arg)
{
	LocalChain *lc = arg;

	return lc->run->hooks->alloc(size, lc->run->hooks->arg);
}

static void
local_release(void *ptr, void *arg)
{
	LocalChain *lc = arg;

	lc->run->hooks->release(ptr, lc->run->hooks->arg);
}

static void
local_progress(void *arg, const gnb_sweep *sw)
{
	LocalChain *lc = arg;
	GnbChainSlot *s = &lc->run->sh->slot[lc->chain];

	SpinLockAcquire(&s->mutex);
	s->sweep = sw->sweep;
	s->log_joint = sw->log_joint;
	SpinLockRelease(&s->mutex);
	poll_chains(lc->run);
	lc->run->hooks->progress(lc->run->hooks->arg, sw);
}

static void
local_check_interrupts(void *arg)
{
	LocalChain *lc = arg;

	lc->run->hooks->check_interrupts(lc->run->hooks->arg);
}

/*
 * Run the job's chains in parallel (see the file's comment) and combine them
 * into *result.  Falls back to the chains one after another, with the same
 * result, when the parallel run's memory (the segment and every chain
 * worker's own, on top of memory_committed) would exceed
 * gibbs_nb.max_job_memory or no segment can be made.
 */
void
gnb_train_parallel(GnbJobShared *job, const gnb_corpus *corpus, const gnb_hooks *hooks,
				   int32 trace_stride, double memory_committed, GnbChainsRun **run_out,
				   gnb_result *result)
{
	const GnbJobParams *p = &job->params;
	const gnb_params *sp = &p->sampler;
	int32		chains = sp->chains;
	int32		D = corpus->n_docs;
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	int64		nnz = corpus->doc_start[D];
	int32		kept = (sp->sweeps - sp->burn_in) / sp->lag;
	int32		max_trace = sp->sweeps / trace_stride + 2;
	gnb_params	one = *sp;
	double		chain_memory;
	Size		size;
	Size		doc_start_off, word_off, count_off, label_off;
	Size		ewc_off = 0, edc_off = 0, init_off = 0;
	Size	   *slot_off;
	dsm_segment *seg;
	GnbChainsShared *sh;
	GnbChainsRun *run;
	int32		workers;
	int32		wanted;
	int32		started = 0;
	gnb_combiner *cb;

	/* the layout: the corpus, then each chain's slot arrays */
	size = offsetof(GnbChainsShared, slot) + chains * sizeof(GnbChainSlot);
	doc_start_off = place(&size, (double) sizeof(int64) * (D + 1));
	word_off = place(&size, (double) sizeof(int32) * Max(nnz, 1));
	count_off = place(&size, (double) sizeof(int32) * Max(nnz, 1));
	label_off = place(&size, (double) sizeof(int32) * (D + 1));
	if (corpus->extra_word_counts)
	{
		ewc_off = place(&size, (double) sizeof(double) * V * K);
		edc_off = place(&size, (double) sizeof(double) * K);
	}
	if (corpus->init_label)
		init_off = place(&size, (double) sizeof(int32) * (D + 1));
	slot_off = palloc(sizeof(Size) * 6 * chains);
	for (int c = 0; c < chains; c++)
	{
		slot_off[6 * c + 0] = place(&size, (double) sizeof(double) * D * K);
		slot_off[6 * c + 1] = place(&size, (double) sizeof(double) * V * K);
		slot_off[6 * c + 2] = place(&size, (double) sizeof(double) * K);
		/* the kept log joints, thinned by the core to at most GNB_KEPT_SERIES_MAX */
		slot_off[6 * c + 3] = place(&size, (double) sizeof(double) * Min(kept, GNB_KEPT_SERIES_MAX));
		slot_off[6 * c + 4] = place(&size, (double) sizeof(int32) * (D + 1));
		slot_off[6 * c + 5] = place(&size, (double) sizeof(GnbTracePoint) * max_trace);
	}

	/*
	 * What the parallel run needs beyond the sequential one: the segment and
	 * each chain worker's own sampler memory.  (The sizes are bounded: the
	 * corpus is in memory already, and V x K was checked with it.)
	 */
	one.chains = 1;
	chain_memory = (double) size + (chains - 1) * (double) gnb_memory_needed(D, V, K, nnz, &one);
	if (memory_committed + chain_memory > (double) p->max_job_memory)
	{
		elog(LOG, "gibbs_nb job " INT64_FORMAT ": chains run one after another: in parallel they would need %.0f MB more than gibbs_nb.max_job_memory allows",
			 p->job_id, (memory_committed + chain_memory - p->max_job_memory) / (1024.0 * 1024.0));
		gnb_train(corpus, sp, hooks, result);
		return;
	}
	seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (seg == NULL)
	{
		elog(LOG, "gibbs_nb job " INT64_FORMAT ": chains run one after another: no dynamic shared memory segment is free",
			 p->job_id);
		gnb_train(corpus, sp, hooks, result);
		return;
	}
	sh = dsm_segment_address(seg);
	memset(sh, 0, offsetof(GnbChainsShared, slot) + chains * sizeof(GnbChainSlot));
	sh->params = *p;
	sh->job_pid = MyProcPid;
	sh->job_latch = MyLatch;
	sh->trace_stride = trace_stride;
	sh->max_trace = max_trace;
	sh->n_docs = D;
	sh->n_words = V;
	sh->n_classes = K;
	sh->doc_start_off = doc_start_off;
	sh->word_off = word_off;
	sh->count_off = count_off;
	sh->label_off = label_off;
	sh->extra_word_counts_off = ewc_off;
	sh->extra_doc_counts_off = edc_off;
	sh->init_label_off = init_off;
	memcpy(AT(sh, doc_start_off, int64 *), corpus->doc_start, sizeof(int64) * (D + 1));
	memcpy(AT(sh, word_off, int32 *), corpus->word, sizeof(int32) * nnz);
	memcpy(AT(sh, count_off, int32 *), corpus->count, sizeof(int32) * nnz);
	memcpy(AT(sh, label_off, int32 *), corpus->label, sizeof(int32) * D);
	if (corpus->extra_word_counts)
	{
		memcpy(AT(sh, ewc_off, double *), corpus->extra_word_counts,
			   sizeof(double) * V * K);
		memcpy(AT(sh, edc_off, double *), corpus->extra_doc_counts, sizeof(double) * K);
	}
	if (corpus->init_label)
		memcpy(AT(sh, init_off, int32 *), corpus->init_label, sizeof(int32) * D);
	for (int c = 0; c < chains; c++)
	{
		GnbChainSlot *s = &sh->slot[c];

		SpinLockInit(&s->mutex);
		s->label_prob_off = slot_off[6 * c + 0];
		s->theta_off = slot_off[6 * c + 1];
		s->pi_off = slot_off[6 * c + 2];
		s->kept_off = slot_off[6 * c + 3];
		s->last_labels_off = slot_off[6 * c + 4];
		s->trace_off = slot_off[6 * c + 5];
	}

	run = palloc0(sizeof(GnbChainsRun));
	run->seg = seg;
	run->sh = sh;
	run->chains = chains;
	run->handle = palloc0(sizeof(BackgroundWorkerHandle *) * chains);
	run->trace_read = palloc0(sizeof(int32) * chains);
	run->hooks = hooks;
	if (!stop_callback_registered)
	{
		before_shmem_exit(stop_chains_at_exit, (Datum) 0);
		stop_callback_registered = true;
	}
	active_run = run;
	*run_out = run;

	/*
	 * The chain workers: chains 1 .. workers, as many as free job slots
	 * allow (gnb_reserve_chain_slots); the rest run here
	 */
	wanted = Min(chains - 1, p->max_chain_workers);
	{
		/*
		 * In a transaction of its own: an error while it waits for the
		 * launch lock (a cancel) is then cleaned up by the abort, wait
		 * queue and all.  The slots are session locks: they outlive it.
		 */
		MemoryContext cxt = CurrentMemoryContext;
		bool		own_xact = !IsTransactionState();

		if (own_xact)
			StartTransactionCommand();
		workers = gnb_reserve_chain_slots(wanted, p->max_jobs, p->max_jobs_per_role);
		if (own_xact)
			CommitTransactionCommand();
		MemoryContextSwitchTo(cxt);
	}
	if (workers < wanted)
		ereport(LOG,
				(errmsg("gibbs_nb job " INT64_FORMAT ": %d of %d chain workers granted; %d chains run in the job's worker",
						p->job_id, workers, wanted, chains - workers),
				 errdetail("The workers of gibbs_nb jobs and chains stay within gibbs_nb.max_jobs (%d) in the cluster and gibbs_nb.max_jobs_per_role (%d) for a role.",
						   p->max_jobs, p->max_jobs_per_role)));
	sh->slot[0].state = CHAIN_LOCAL;
	for (int c = 1; c < chains; c++)
	{
		BackgroundWorker worker;

		if (c > workers || started < c - 1)
		{
			/* beyond the limit, or a slot was refused before: run it here */
			sh->slot[c].state = CHAIN_LOCAL;
			continue;
		}
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = BGW_NEVER_RESTART;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "gibbs_nb");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "gibbs_nb_chain_worker_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "gibbs_nb job " INT64_FORMAT " chain %d",
				 p->job_id, c + 1);
		snprintf(worker.bgw_type, BGW_MAXLEN, "gibbs_nb chain worker");
		worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
		memcpy(worker.bgw_extra, &c, sizeof(int32));
		worker.bgw_notify_pid = MyProcPid;
		sh->slot[c].state = CHAIN_PENDING;
		if (RegisterDynamicBackgroundWorker(&worker, &run->handle[c]))
			started++;
		else
		{
			run->handle[c] = NULL;
			sh->slot[c].state = CHAIN_LOCAL;
		}
	}
	if (started < workers)
		ereport(LOG,
				(errmsg("gibbs_nb job " INT64_FORMAT ": %d of %d chain workers started; %d chains run in the job's worker",
						p->job_id, started, workers, chains - started),
				 errdetail("No background worker slot was free (max_worker_processes is %d).",
						   max_worker_processes)));
	else
		elog(DEBUG1, "gibbs_nb job " INT64_FORMAT ": %d of %d chains in workers of their own",
			 p->job_id, started, chains);

	/*
	 * Chain 0, then every chain that has no worker, here; then wait for the
	 * others with a timeout, watching them.  A chain whose worker could not
	 * start becomes one of ours meanwhile.
	 */
	for (;;)
	{
		bool		all_done = true;
		int32		local = -1;

		poll_chains(run);
		for (int c = 0; c < chains; c++)
		{
			GnbChainState st;

			SpinLockAcquire(&sh->slot[c].mutex);
			st = sh->slot[c].state;
			SpinLockRelease(&sh->slot[c].mutex);
			if (st != CHAIN_DONE)
				all_done = false;
			if (st == CHAIN_LOCAL && local < 0)
				local = c;
		}
		if (all_done)
			break;
		if (local >= 0)
		{
			LocalChain lc = {run, local};
			gnb_hooks	own = {local_alloc, local_release, local_progress,
			local_check_interrupts, &lc};
			gnb_chain	ch;

			gnb_train_chain(corpus, sp, local, &own, &ch);
			chain_to_slot(sh, local, &ch);
			gnb_chain_free(&ch, hooks);
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 CHAINS_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	/* the last trace points; the chain workers' slots are free again */
	poll_chains(run);
	gnb_release_chain_slots();

	/* combined in chain order: the same model whatever the timing */
	cb = gnb_combine_begin(corpus, sp, hooks, result);
	for (int c = 0; c < chains; c++)
	{
		gnb_chain	ch;

		chain_from_slot(sh, c, &ch);
		gnb_combine_add(cb, &ch);
	}
	gnb_combine_end(cb);

	*run_out = NULL;
	active_run = NULL;
	dsm_detach(seg);
}

/* ---- the chain worker ---- */

typedef struct ChainWorker
{
	GnbChainsShared *sh;
	int32		chain;
	MemoryContext cxt;
	TimestampTz last_activity;
} ChainWorker;

static void *
chain_alloc(size_t size, void *arg)
{
	ChainWorker *cw = arg;

	/* a backstop: the job's worker checked every chain's need beforehand */
	gnb_check_job_memory(&cw->sh->params, (double) MemoryContextMemAllocated(cw->cxt, true),
						 (double) size, "a chain worker's sampler");
	return MemoryContextAllocExtended(cw->cxt, size, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static void
chain_release(void *ptr, void *arg)
{
	pfree(ptr);
}

/* Stop if told to, or if the job's worker is gone. */
static void
chain_check_interrupts(void *arg)
{
	ChainWorker *cw = arg;

	CHECK_FOR_INTERRUPTS();
	if (!PostmasterIsAlive())
		proc_exit(1);
	if (BackendPidGetProc(cw->sh->job_pid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("gibbs_nb job " INT64_FORMAT "'s worker has exited",
						cw->sh->params.job_id)));
}

static void
chain_progress(void *arg, const gnb_sweep *sw)
{
	ChainWorker *cw = arg;
	GnbChainsShared *sh = cw->sh;
	GnbChainSlot *s = &sh->slot[cw->chain];
	bool		point = sw->sweep % sh->trace_stride == 0 || sw->sweep == sh->params.sampler.sweeps;
	TimestampTz now;

	if (point)
	{
		GnbTracePoint *tp = AT(sh, s->trace_off, GnbTracePoint *) + s->n_trace;

		Assert(s->n_trace < sh->max_trace);
		tp->sweep = sw->sweep;
		tp->log_joint = sw->log_joint;
		tp->changed = sw->changed;
		tp->gamma_theta = sw->gamma_theta;
		tp->gamma_pi = sw->gamma_pi;
	}
	/* the spinlock orders the point's writes before the count's */
	SpinLockAcquire(&s->mutex);
	s->sweep = sw->sweep;
	s->log_joint = sw->log_joint;
	if (point)
		s->n_trace++;
	SpinLockRelease(&s->mutex);
	if (point)
		SetLatch(sh->job_latch);

	now = GetCurrentTimestamp();
	if (TimestampDifferenceExceeds(cw->last_activity, now, CHAIN_ACTIVITY_MS))
	{
		char		activity[128];

		snprintf(activity, sizeof(activity), "gibbs_nb job " INT64_FORMAT ": chain %d/%d, sweep %d/%d",
				 sh->params.job_id, cw->chain + 1, sh->params.sampler.chains, sw->sweep,
				 sh->params.sampler.sweeps);
		pgstat_report_activity(STATE_RUNNING, activity);
		cw->last_activity = now;
	}
	chain_check_interrupts(arg);
}

/*
 * gibbs_nb_chain_worker_main: entry point of a chain worker.  main_arg is
 * the handle of the job's chains segment, bgw_extra the chain's index.
 */
void
gibbs_nb_chain_worker_main(Datum main_arg)
{
	dsm_segment *seg;
	GnbChainsShared *sh;
	GnbChainSlot *s;
	int32		chain;
	ChainWorker cw;
	gnb_corpus	corpus;
	gnb_hooks	hooks = {chain_alloc, chain_release, chain_progress, chain_check_interrupts, &cw};

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "gibbs_nb chain worker");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb chain worker could not map its job's shared memory")));
	sh = dsm_segment_address(seg);
	memcpy(&chain, MyBgworkerEntry->bgw_extra, sizeof(int32));
	if (chain < 1 || chain >= sh->params.sampler.chains)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("gibbs_nb chain worker started for chain %d of %d", chain,
						sh->params.sampler.chains)));
	s = &sh->slot[chain];

	/* the caller's identity, as the job's worker has it */
	gnb_become_caller(&sh->params, "gibbs_nb chain worker");

	memset(&cw, 0, sizeof(cw));
	cw.sh = sh;
	cw.chain = chain;
	cw.cxt = AllocSetContextCreate(TopMemoryContext, "gibbs_nb chain", ALLOCSET_DEFAULT_SIZES);

	memset(&corpus, 0, sizeof(corpus));
	corpus.n_docs = sh->n_docs;
	corpus.n_words = sh->n_words;
	corpus.n_classes = sh->n_classes;
	corpus.doc_start = AT(sh, sh->doc_start_off, const int64 *);
	corpus.word = AT(sh, sh->word_off, const int32 *);
	corpus.count = AT(sh, sh->count_off, const int32 *);
	corpus.label = AT(sh, sh->label_off, const int32 *);
	if (sh->extra_word_counts_off != 0)
	{
		corpus.extra_word_counts = AT(sh, sh->extra_word_counts_off, const double *);
		corpus.extra_doc_counts = AT(sh, sh->extra_doc_counts_off, const double *);
	}
	if (sh->init_label_off != 0)
		corpus.init_label = AT(sh, sh->init_label_off, const int32 *);

	SpinLockAcquire(&s->mutex);
	s->state = CHAIN_RUNNING;
	SpinLockRelease(&s->mutex);

	PG_TRY();
	{
		gnb_chain	ch;

		gnb_train_chain(&corpus, &sh->params.sampler, chain, &hooks, &ch);
		chain_to_slot(sh, chain, &ch);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		SpinLockAcquire(&s->mutex);
		s->sqlerrcode = edata->sqlerrcode;
		strlcpy(s->message, edata->message ? edata->message : "unknown error",
				sizeof(s->message));
		s->state = CHAIN_FAILED;
		SpinLockRelease(&s->mutex);
	}
	PG_END_TRY();
	SetLatch(sh->job_latch);
	pgstat_report_activity(STATE_IDLE, NULL);
	dsm_detach(seg);
}
