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
 * The segment is laid out as PostgreSQL's parallel contexts lay out theirs:
 * named entries of a table of contents (shm_toc), the corpus's arrays, one
 * slot per chain, and each chain's result arrays and error queue.  The job's
 * worker runs the set-up as parallel.c does: chains_begin (estimate, create,
 * fill), chains_launch (worker slots, workers), chains_participate (run its
 * own chains, watch the others) and chains_end (combine, detach).
 *
 * A chain worker puts its chain's result (label probabilities, theta, pi,
 * the kept log joints, its last labels) and its trace points into its
 * entries; the job's worker writes the trace rows and the job's progress for
 * all chains.  A chain worker's messages go to the job's worker through its
 * error queue (shm_mq, as a parallel worker's do): an error arrives whole
 * (SQLSTATE, message, detail, hint, context) and fails the job as it is, with
 * a line of context that names the chain.  One that exited without a result
 * and without a word (crashed) fails it with a message that says so.  When
 * the job fails or is cancelled its worker terminates the chain workers and
 * waits (boundedly) for them to exit; a chain worker whose job's worker has
 * gone stops by itself at its next sweep.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/chains_shm.h"
#include "store/store.h"
#include "security/security.h"

#include "access/xact.h"
#include "libpq/pqformat.h"
#include "libpq/pqmq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

/* How often the job's worker looks at its chain workers while it waits. */
#define CHAINS_POLL_MS 100

/* The job's worker's view of its chains. */
struct GnbChainsRun
{
	dsm_segment *seg;
	shm_toc    *toc;
	GnbChainsShared *sh;
	int32		chains;
	GnbChainArrays *arrays;		/* chains entries */
	BackgroundWorkerHandle **handle;	/* chains entries; NULL: none */
	shm_mq_handle **error_mqh;	/* chains entries; NULL: none, or detached */
	int32	   *trace_read;		/* trace points already passed on */
	const gnb_hooks *hooks;		/* the job's worker's */
	/* where a chain worker's error is raised from: chains_begin's caller's */
	ErrorContextCallback *error_context_stack;
	MemoryContext message_cxt;	/* what reading one message takes, reset after it */
	char	  **worker_line;	/* chains entries: the context line of its worker's errors */
};

/* The job's worker's running chains: what gnb_chains_stop stops. */
static GnbChainsRun *active_run = NULL;
static bool stop_callback_registered = false;

/* The sizes of chain c's entries, by GnbChainEntry. */
static void
chain_entry_sizes(const GnbChainsShared *sh, const gnb_params *sp, Size *sizes)
{
	int32		kept = (sp->sweeps - sp->burn_in) / sp->lag;

	sizes[CHAIN_LABEL_PROB] = mul_size(mul_size(sh->n_docs, sh->n_classes), sizeof(double));
	sizes[CHAIN_THETA] = mul_size(mul_size(sh->n_words, sh->n_classes), sizeof(double));
	sizes[CHAIN_PI] = mul_size(sh->n_classes, sizeof(double));
	sizes[CHAIN_KEPT] = mul_size(Max(Min(kept, GNB_KEPT_SERIES_MAX), 1), sizeof(double));
	sizes[CHAIN_LAST_LABELS] = mul_size(add_size(sh->n_docs, 1), sizeof(int32));
	sizes[CHAIN_TRACE] = mul_size(sh->max_trace, sizeof(GnbTracePoint));
	sizes[CHAIN_ERROR_QUEUE] = CHAIN_ERROR_QUEUE_SIZE;
}

/* Terminate the chain workers; with wait, wait (boundedly) for them to exit. */
void
gnb_chains_stop(bool wait)
{
	GnbChainsRun *run = active_run;

	if (run == NULL)
		return;
	active_run = NULL;
	gnb_terminate_workers(run->handle, run->chains, true, wait, run->sh->params.job_id,
						  "chain workers");
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
	gnb_terminate_workers(run->handle, run->chains, true, false, run->sh->params.job_id,
						  "chain workers");
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

/* Read what chain c's worker said (gnb_read_worker_messages). */
static void
read_chain_messages(GnbChainsRun *run, int32 c)
{
	if (run->error_mqh[c] != NULL)
		gnb_read_worker_messages(&run->error_mqh[c], run->message_cxt, run->error_context_stack,
								 run->worker_line[c]);
}

/*
 * Pass the chain workers' new trace points to the job's progress hook, raise
 * what they said, and fail the job if a chain failed or its worker is gone
 * without a result.
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
			GnbTracePoint *tp = run->arrays[c].trace + run->trace_read[c];
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

		/* after the state: a worker queues its error before it says FAILED */
		read_chain_messages(run, c);

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
					 errmsg("gibbs_nb chain worker of chain %d/%d of job " INT64_FORMAT " failed",
							c + 1, run->chains, sh->params.job_id),
					 errhint("The server log has its error.")));
		if (st != CHAIN_DONE && stopped)
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("gibbs_nb chain worker of chain %d/%d of job " INT64_FORMAT " exited before its chain ended",
							c + 1, run->chains, sh->params.job_id),
					 errhint("It crashed; the server log has its messages.")));
	}
}

/* A chain as the combiner takes it, from its entries. */
static void
chain_from_slot(GnbChainsShared *sh, const GnbChainArrays *a, int32 c, gnb_chain *ch)
{
	GnbChainSlot *s = &sh->slot[c];
	const gnb_params *sp = &sh->params.sampler;

	memset(ch, 0, sizeof(*ch));
	ch->chain = c;
	ch->kept = (sp->sweeps - sp->burn_in) / sp->lag;
	ch->sweeps = sp->sweeps;
	ch->label_prob = a->label_prob;
	ch->theta = a->theta;
	ch->pi = a->pi;
	ch->kept_log_joint = a->kept;
	ch->last_labels = a->last_labels;
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
 * Begin: the segment's size from its entries (shm_toc's estimator), the
 * memory check, the segment made and filled with the corpus, one slot and
 * the result entries and error queue of every chain.  NULL, after a LOG
 * line, when the chains must run one after another instead: the parallel
 * run's memory (the segment and every chain worker's own, on top of
 * memory_committed) would exceed gibbs_nb.max_job_memory, or no segment is
 * free.
 */
static GnbChainsRun *
chains_begin(const GnbJobParams *p, const gnb_corpus *corpus, const gnb_hooks *hooks,
			 int32 trace_stride, double memory_committed)
{
	const gnb_params *sp = &p->sampler;
	int32		chains = sp->chains;
	int32		D = corpus->n_docs;
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	int64		nnz = corpus->doc_start[D];
	GnbChainsShared head;
	Size		shared_size = add_size(offsetof(GnbChainsShared, slot),
									   mul_size(chains, sizeof(GnbChainSlot)));
	Size		entry[CHAIN_N_ENTRIES];
	shm_toc_estimator e;
	Size		size;
	gnb_params	one = *sp;
	double		chain_memory;
	dsm_segment *seg;
	shm_toc    *toc;
	GnbChainsShared *sh;
	GnbChainsRun *run;

	memset(&head, 0, sizeof(head));
	head.n_docs = D;
	head.n_words = V;
	head.n_classes = K;
	head.max_trace = sp->sweeps / trace_stride + 2;
	chain_entry_sizes(&head, sp, entry);

	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, shared_size);
	shm_toc_estimate_keys(&e, 1);
	gnb_corpus_shm_estimate(&e, corpus, true);
	for (int c = 0; c < chains; c++)
		for (int i = 0; i < CHAIN_N_ENTRIES; i++)
			shm_toc_estimate_chunk(&e, entry[i]);
	shm_toc_estimate_keys(&e, chains * CHAIN_N_ENTRIES);
	size = shm_toc_estimate(&e);

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
		return NULL;
	}
	seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (seg == NULL)
	{
		elog(LOG, "gibbs_nb job " INT64_FORMAT ": chains run one after another: no dynamic shared memory segment is free",
			 p->job_id);
		return NULL;
	}
	toc = shm_toc_create(CHAINS_MAGIC, dsm_segment_address(seg), size);

	sh = gnb_toc_put(toc, CHAINS_KEY_SHARED, shared_size);
	memset(sh, 0, shared_size);
	memcpy(sh, &head, offsetof(GnbChainsShared, slot));
	sh->params = *p;
	sh->job_pid = MyProcPid;
	sh->job_latch = MyLatch;
	sh->trace_stride = trace_stride;
	sh->has_extra_counts = corpus->extra_word_counts != NULL;
	sh->has_init_label = corpus->init_label != NULL;
	sh->has_doc_key = corpus->doc_key != NULL;
	gnb_corpus_shm_put(toc, corpus, true);

	run = palloc0(sizeof(GnbChainsRun));
	run->seg = seg;
	run->toc = toc;
	run->sh = sh;
	run->chains = chains;
	run->arrays = palloc0(sizeof(GnbChainArrays) * chains);
	run->handle = palloc0(sizeof(BackgroundWorkerHandle *) * chains);
	run->error_mqh = palloc0(sizeof(shm_mq_handle *) * chains);
	run->worker_line = palloc0(sizeof(char *) * chains);
	for (int c = 0; c < chains; c++)
		run->worker_line[c] = psprintf("chain %d/%d of gibbs_nb job " INT64_FORMAT ", in its own worker",
									   c + 1, chains, p->job_id);
	run->trace_read = palloc0(sizeof(int32) * chains);
	run->hooks = hooks;
	run->error_context_stack = error_context_stack;
	run->message_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb chain messages",
											 ALLOCSET_SMALL_SIZES);
	for (int c = 0; c < chains; c++)
	{
		for (int i = 0; i < CHAIN_ERROR_QUEUE; i++)
			gnb_toc_put(toc, CHAIN_KEY(c, i), entry[i]);
		gnb_chain_arrays(toc, c, &run->arrays[c]);
		SpinLockInit(&sh->slot[c].mutex);
		/* chain 0 is the job's worker's own: its queue stays unused */
		{
			shm_mq	   *mq = shm_mq_create(gnb_toc_put(toc, CHAIN_KEY(c, CHAIN_ERROR_QUEUE),
												   CHAIN_ERROR_QUEUE_SIZE),
										   CHAIN_ERROR_QUEUE_SIZE);

			shm_mq_set_receiver(mq, MyProc);
			if (c > 0)
				run->error_mqh[c] = shm_mq_attach(mq, seg, NULL);
		}
	}
	if (!stop_callback_registered)
	{
		before_shmem_exit(stop_chains_at_exit, (Datum) 0);
		stop_callback_registered = true;
	}
	active_run = run;
	return run;
}

/*
 * Launch: chain workers for chains 1 .. n, as many as free job slots allow
 * (gnb_reserve_chain_slots) and background worker slots take; the other
 * chains are the job's worker's own (CHAIN_LOCAL).
 */
static void
chains_launch(GnbChainsRun *run)
{
	GnbChainsShared *sh = run->sh;
	const GnbJobParams *p = &sh->params;
	int32		chains = run->chains;
	int32		wanted = Min(chains - 1, p->max_chain_workers);
	int32		workers;
	int32		started = 0;

	workers = gnb_reserve_worker_slots(p, wanted);
	if (workers < wanted)
		ereport(LOG,
				(errmsg("gibbs_nb job " INT64_FORMAT ": %d of %d chain workers granted; %d chains run in the job's worker",
						p->job_id, workers, wanted, chains - workers),
				 errdetail("The workers of gibbs_nb jobs and chains stay within gibbs_nb.max_jobs (%d) in the cluster, gibbs_nb.max_jobs_per_role (%d) for a role and gibbs_nb.max_jobs_per_login (%d) for a login.",
						   p->max_jobs, p->max_jobs_per_role, p->max_jobs_per_login)));
	sh->slot[0].state = CHAIN_LOCAL;
	for (int c = 1; c < chains; c++)
	{
		if (c > workers || started < c - 1)
		{
			/* beyond the limit, or a slot was refused before: run it here */
			sh->slot[c].state = CHAIN_LOCAL;
			shm_mq_detach(run->error_mqh[c]);
			run->error_mqh[c] = NULL;
			continue;
		}
		sh->slot[c].state = CHAIN_PENDING;
		if (gnb_start_worker(p, "gibbs_nb_chain_worker_main", "gibbs_nb chain worker",
							 psprintf("chain %d", c + 1), c, run->seg, &run->handle[c]))
		{
			/* a worker that dies before it attaches detaches its queue */
			shm_mq_set_handle(run->error_mqh[c], run->handle[c]);
			started++;
		}
		else
		{
			run->handle[c] = NULL;
			sh->slot[c].state = CHAIN_LOCAL;
			shm_mq_detach(run->error_mqh[c]);
			run->error_mqh[c] = NULL;
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
}

/*
 * Participate: chain 0, then every chain that has no worker, here; then wait
 * for the others with a timeout, watching them.  A chain whose worker could
 * not start becomes one of ours meanwhile.
 */
static void
chains_participate(GnbChainsRun *run, const gnb_corpus *corpus)
{
	GnbChainsShared *sh = run->sh;
	const gnb_params *sp = &sh->params.sampler;

	for (;;)
	{
		bool		all_done = true;
		int32		local = -1;

		poll_chains(run);
		for (int c = 0; c < run->chains; c++)
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
			return;
		if (local >= 0)
		{
			LocalChain lc = {run, local};
			gnb_hooks	own = {local_alloc, local_release, local_progress,
			local_check_interrupts, &lc};
			gnb_chain	ch;

			gnb_train_chain(corpus, sp, local, &own, &ch);
			gnb_chain_to_slot(sh, &run->arrays[local], local, &ch);
			gnb_chain_free(&ch, run->hooks);
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 CHAINS_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * End: the last trace points, the chain workers' job slots given back, the
 * chains combined in chain order (the same model whatever the timing), the
 * segment let go of.
 */
static void
chains_end(GnbChainsRun *run, const gnb_corpus *corpus, gnb_result *result)
{
	gnb_combiner *cb;

	poll_chains(run);
	gnb_release_chain_slots();
	cb = gnb_combine_begin(corpus, &run->sh->params.sampler, run->hooks, result);
	for (int c = 0; c < run->chains; c++)
	{
		gnb_chain	ch;

		chain_from_slot(run->sh, &run->arrays[c], c, &ch);
		gnb_combine_add(cb, &ch);
	}
	gnb_combine_end(cb);
	active_run = NULL;
	dsm_detach(run->seg);
}

/*
 * Run the job's chains in parallel (see the file's comment) and combine them
 * into *result, or one after another, with the same result, when
 * chains_begin says they cannot run in parallel.
 */
void
gnb_train_parallel(GnbJobShared *job, const gnb_corpus *corpus, const gnb_hooks *hooks,
				   int32 trace_stride, double memory_committed, GnbChainsRun **run_out,
				   gnb_result *result)
{
	GnbChainsRun *run = chains_begin(&job->params, corpus, hooks, trace_stride,
									 memory_committed);

	if (run == NULL)
	{
		gnb_train(corpus, &job->params.sampler, hooks, result);
		return;
	}
	*run_out = run;
	chains_launch(run);
	chains_participate(run, corpus);
	*run_out = NULL;
	chains_end(run, corpus, result);
}
