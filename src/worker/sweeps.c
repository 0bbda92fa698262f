/*
 * sweeps.c
 *	  One chain of the blocked sampler on several cores: its sweeps shared
 *	  with sweep workers.
 *
 * With sampler => 'blocked' and sweep_workers => n the job's worker copies
 * the corpus into a dynamic shared memory segment, with the blocked
 * sampler's arrays (log theta, the counts, log pi, the labels drawn, their
 * probabilities, the blocks' sums: gnb_blocked_arrays), and starts up to
 * n - 1 sweep workers, within gibbs_nb.max_chain_workers and the job slots
 * (gnb_reserve_chain_slots), as chains.c does.  The chains run one after
 * another in the job's worker, the sampler's state in the segment; each
 * phase of each sweep (the labels, theta) is handed to the sweep workers:
 * the job's worker publishes the step, wakes them, draws its own share (the
 * first of n_parts ranges of the phase's chunks, and then what the others
 * left of theirs: gnb_sweeps_draw_chunks), and waits until each has drawn
 * its share.  Every draw is keyed by what it draws
 * (gnb_label_blocked.c), so the model is the same bit for bit for any number
 * of sweep workers, none included.
 *
 * The segment is laid out as chains.c lays out its own (shm_toc), and the
 * set-up runs as parallel.c's does: sweeps_begin (estimate, create, fill),
 * sweeps_launch (job slots, workers, wait until they are ready), the chains,
 * sweeps_end.  A sweep worker runs no SQL (it connects as the caller, as a
 * chain worker does, to be seen in pg_stat_activity).  Its
 * errors come through its error queue (shm_mq) and fail the job as they
 * are; one that exits without a word fails it with a message that says so.
 * When the job fails or is cancelled its worker terminates the sweep
 * workers (gnb_sweeps_stop); a sweep worker whose job's worker has gone
 * stops by itself within a second.
 */
#include "gibbs_nb.h"

#include <math.h>

#include "worker/worker.h"
#include "worker/sweeps_shm.h"
#include "store/store.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

/* How often the job's worker looks at its sweep workers while it waits. */
#define SWEEPS_POLL_MS 100

/* The job's worker's view of its sweep workers. */
typedef struct GnbSweepsRun
{
	dsm_segment *seg;
	GnbSweepsShared *sh;
	int32		n_workers;		/* asked for (slots 1 .. n_workers) */
	BackgroundWorkerHandle **handle;	/* by slot; NULL: none */
	shm_mq_handle **mqh;		/* by slot; NULL: none, or detached */
	char	  **worker_line;	/* by slot: the context line of its errors */
	gnb_blocked_arrays arrays;
	GnbSweepClaim *claims;		/* by part */
	GnbSweepChunks chunks;		/* its cut of the phases */
	gnb_blocked_helper *helper; /* the job's worker's own share */
	const gnb_hooks *hooks;		/* the job's worker's */
	ErrorContextCallback *error_context_stack;
	MemoryContext message_cxt;
} GnbSweepsRun;

/* The running sweeps: what gnb_sweeps_stop stops. */
static GnbSweepsRun *active_sweeps = NULL;
static bool stop_callback_registered = false;

/* Terminate the sweep workers; with wait, wait (boundedly) for them to exit. */
void
gnb_sweeps_stop(bool wait)
{
	GnbSweepsRun *run = active_sweeps;

	if (run == NULL)
		return;
	active_sweeps = NULL;
	gnb_terminate_workers(run->handle + 1, run->n_workers, true, wait, run->sh->params.job_id,
						  "sweep workers");
	dsm_detach(run->seg);
}

/* At the exit of the job's worker, however it exits: no orphaned workers. */
static void
stop_sweeps_at_exit(int code, Datum arg)
{
	GnbSweepsRun *run = active_sweeps;

	if (run == NULL)
		return;
	active_sweeps = NULL;
	gnb_terminate_workers(run->handle + 1, run->n_workers, true, false, run->sh->params.job_id,
						  "sweep workers");
}

/*
 * Begin: the segment's size from its entries, the memory check, the
 * segment made and filled with the corpus.  NULL, after a LOG line, when
 * the chains must run without sweep workers: the segment and the sweep
 * workers' own memory, on top of memory_committed, would exceed
 * gibbs_nb.max_job_memory, or no segment is free.
 */
static GnbSweepsRun *
sweeps_begin(const GnbJobParams *p, const gnb_corpus *corpus, const gnb_hooks *hooks,
			 int32 n_workers, double memory_committed)
{
	int32		D = corpus->n_docs;
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	Size		shared_size = add_size(offsetof(GnbSweepsShared, slot),
									   mul_size(n_workers + 1, sizeof(GnbSweepSlot)));
	size_t		array_size[GNB_BLOCKED_N_ARRAYS];
	shm_toc_estimator e;
	Size		size;
	double		more;
	dsm_segment *seg;
	shm_toc    *toc;
	GnbSweepsShared *sh;
	GnbSweepsRun *run;

	gnb_blocked_sizes(D, V, K, &p->sampler, array_size);
	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, shared_size);
	shm_toc_estimate_chunk(&e, mul_size(n_workers + 1, sizeof(GnbSweepClaim)));
	shm_toc_estimate_keys(&e, 2);
	gnb_corpus_shm_estimate(&e, corpus, false);
	for (int i = 0; i < GNB_BLOCKED_N_ARRAYS; i++)
		shm_toc_estimate_chunk(&e, array_size[i]);
	shm_toc_estimate_keys(&e, GNB_BLOCKED_N_ARRAYS);
	for (int w = 1; w <= n_workers; w++)
		shm_toc_estimate_chunk(&e, SWEEPS_QUEUE_SIZE);
	shm_toc_estimate_keys(&e, n_workers);
	size = shm_toc_estimate(&e);

	/*
	 * the segment, and every process's share's own memory (the job's
	 * worker's too): its helper and its cut of the phases into chunks
	 */
	more = (double) size +
		(n_workers + 1) * ((double) gnb_blocked_helper_memory(D, V, K, corpus->doc_start[D]) +
						   2.0 * sizeof(int64) * ((n_workers + 1) * SWEEPS_CHUNKS_PER_PART + 1));
	if (memory_committed + more > (double) p->max_job_memory)
	{
		elog(LOG, "gibbs_nb job " INT64_FORMAT ": no sweep workers: they would need %.0f kB more than gibbs_nb.max_job_memory allows",
			 p->job_id, ceil((memory_committed + more - p->max_job_memory) / 1024.0));
		return NULL;
	}
	seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (seg == NULL)
	{
		elog(LOG, "gibbs_nb job " INT64_FORMAT ": no sweep workers: no dynamic shared memory segment is free",
			 p->job_id);
		return NULL;
	}
	toc = shm_toc_create(SWEEPS_MAGIC, dsm_segment_address(seg), size);

	sh = gnb_toc_put(toc, SWEEPS_KEY_SHARED, shared_size);
	memset(sh, 0, shared_size);
	SpinLockInit(&sh->mutex);
	pg_atomic_init_u64(&sh->generation, 0);
#ifdef USE_ASSERT_CHECKING
	pg_atomic_init_u32(&sh->chunks_drawn, 0);
#endif
	sh->params = *p;
	sh->job_pid = MyProcPid;
	sh->job_latch = MyLatch;
	sh->n_docs = D;
	sh->n_words = V;
	sh->n_classes = K;
	sh->has_extra_counts = corpus->extra_word_counts != NULL;
	sh->has_doc_key = corpus->doc_key != NULL;
	sh->n_workers = n_workers;
	sh->n_parts = 1;
	gnb_corpus_shm_put(toc, corpus, false);

	run = palloc0(sizeof(GnbSweepsRun));
	run->seg = seg;
	run->sh = sh;
	run->n_workers = n_workers;
	run->handle = palloc0(sizeof(BackgroundWorkerHandle *) * (n_workers + 1));
	run->mqh = palloc0(sizeof(shm_mq_handle *) * (n_workers + 1));
	run->worker_line = palloc0(sizeof(char *) * (n_workers + 1));
	run->hooks = hooks;
	run->error_context_stack = error_context_stack;
	run->message_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb sweep messages",
											 ALLOCSET_SMALL_SIZES);
	run->claims = gnb_toc_put(toc, SWEEPS_KEY_CLAIMS, sizeof(GnbSweepClaim) * (n_workers + 1));
	for (int part = 0; part <= n_workers; part++)
		pg_atomic_init_u64(&run->claims[part].left, 0);
	run->arrays.log_theta = gnb_toc_put(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_LOG_THETA),
									array_size[GNB_BLOCKED_LOG_THETA]);
	run->arrays.N = gnb_toc_put(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_N), array_size[GNB_BLOCKED_N]);
	run->arrays.log_pi = gnb_toc_put(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_LOG_PI),
								 array_size[GNB_BLOCKED_LOG_PI]);
	run->arrays.next_label = gnb_toc_put(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_NEXT_LABEL),
									 array_size[GNB_BLOCKED_NEXT_LABEL]);
	run->arrays.pred = gnb_toc_put(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_PRED),
							   array_size[GNB_BLOCKED_PRED]);
	run->arrays.block_lse = gnb_toc_put(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_BLOCK_LSE),
									array_size[GNB_BLOCKED_BLOCK_LSE]);
	for (int w = 1; w <= n_workers; w++)
	{
		shm_mq	   *mq = shm_mq_create(gnb_toc_put(toc, SWEEPS_KEY_QUEUE(w), SWEEPS_QUEUE_SIZE),
									   SWEEPS_QUEUE_SIZE);

		SpinLockInit(&sh->slot[w].mutex);
		pg_atomic_init_u64(&sh->slot[w].done, 0);
		shm_mq_set_receiver(mq, MyProc);
		run->mqh[w] = shm_mq_attach(mq, seg, NULL);
		run->worker_line[w] = psprintf("sweep worker %d of gibbs_nb job " INT64_FORMAT,
									   w, p->job_id);
	}
	if (!stop_callback_registered)
	{
		before_shmem_exit(stop_sweeps_at_exit, (Datum) 0);
		stop_callback_registered = true;
	}
	active_sweeps = run;
	run->helper = gnb_blocked_helper_begin(corpus, &p->sampler, hooks);
	return run;
}

/* A sweep worker no longer there: its queue let go of. */
static void
no_worker(GnbSweepsRun *run, int w)
{
	run->handle[w] = NULL;
	if (run->mqh[w] != NULL)
	{
		shm_mq_detach(run->mqh[w]);
		run->mqh[w] = NULL;
	}
}

/*
 * Raise what sweep worker w said, and fail the job if it failed or exited
 * (stopped) without being asked to.
 */
static void
check_worker(GnbSweepsRun *run, int w, GnbSweepWorkerState state, bool stopped)
{
	gnb_read_worker_messages(&run->mqh[w], run->message_cxt, run->error_context_stack,
							 run->worker_line[w]);
	if (state == SWEEP_WORKER_FAILED)
		ereport(ERROR,
				(errcode(run->sh->slot[w].sqlerrcode),
				 errmsg("gibbs_nb sweep worker %d of job " INT64_FORMAT " failed",
						w, run->sh->params.job_id),
				 errhint("The server log has its error.")));
	if (stopped)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("gibbs_nb sweep worker %d of job " INT64_FORMAT " exited before its job ended",
						w, run->sh->params.job_id),
				 errhint("It crashed; the server log has its messages.")));
}

/*
 * Launch: sweep workers 1 .. n, as many as free job slots allow and
 * background worker slots take; then wait until each is ready (or never
 * started: the phases are split over the others), and number their parts.
 */
static void
sweeps_launch(GnbSweepsRun *run)
{
	GnbSweepsShared *sh = run->sh;
	const GnbJobParams *p = &sh->params;
	int32		granted;
	int32		started = 0;
	int32		parts = 1;

	granted = gnb_reserve_worker_slots(p, run->n_workers);
	for (int w = 1; w <= run->n_workers; w++)
	{
		if (w > granted)
		{
			no_worker(run, w);
			continue;
		}
		if (gnb_start_worker(p, "gibbs_nb_sweep_worker_main", "gibbs_nb sweep worker",
							 psprintf("sweep worker %d", w), w, run->seg, &run->handle[w]))
		{
			/* a worker that dies before it attaches detaches its queue */
			shm_mq_set_handle(run->mqh[w], run->handle[w]);
			started++;
		}
		else
			no_worker(run, w);
	}
	if (started < run->n_workers)
		ereport(LOG,
				(errmsg("gibbs_nb job " INT64_FORMAT ": %d of %d sweep workers started",
						p->job_id, started, run->n_workers),
				 errdetail("The workers of gibbs_nb jobs stay within gibbs_nb.max_jobs (%d) in the cluster, gibbs_nb.max_jobs_per_role (%d) for a role and gibbs_nb.max_jobs_per_login (%d) for a login, and max_worker_processes (%d).",
						   p->max_jobs, p->max_jobs_per_role, p->max_jobs_per_login,
						   max_worker_processes)));

	/* ready, or gone before it was: bounded by each worker's start */
	for (;;)
	{
		bool		waiting = false;

		for (int w = 1; w <= run->n_workers; w++)
		{
			GnbSweepWorkerState state;
			pid_t		pid;
			bool		stopped;

			if (run->handle[w] == NULL)
				continue;
			stopped = GetBackgroundWorkerPid(run->handle[w], &pid) == BGWH_STOPPED;
			SpinLockAcquire(&sh->slot[w].mutex);
			state = sh->slot[w].state;
			SpinLockRelease(&sh->slot[w].mutex);
			if (state == SWEEP_WORKER_FAILED)
				check_worker(run, w, state, false);
			if (state == SWEEP_WORKER_PENDING && stopped)
			{
				ereport(LOG,
						(errmsg("gibbs_nb job " INT64_FORMAT ": sweep worker %d exited before it was ready; the others share its part",
								p->job_id, w),
						 errhint("The server log has its messages.")));
				no_worker(run, w);
			}
			else if (state == SWEEP_WORKER_PENDING)
				waiting = true;
		}
		if (!waiting)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SWEEPS_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	for (int w = 1; w <= run->n_workers; w++)
		if (run->handle[w] != NULL)
			sh->slot[w].part = parts++;
	SpinLockAcquire(&sh->mutex);
	sh->n_parts = parts;
	SpinLockRelease(&sh->mutex);
	gnb_sweeps_cut_chunks(&run->chunks, run->helper, parts, CurrentMemoryContext);
	ereport(LOG,
			(errmsg("gibbs_nb job " INT64_FORMAT ": its sweeps are shared by %d processes",
					p->job_id, parts)));
}

/*
 * Wait until every sweep worker has drawn its share of step `generation`:
 * each one's step number watched (gnb_sweeps_spin), then slept on with the
 * workers' liveness checked.
 */
static void
wait_for_step(GnbSweepsRun *run, uint64 generation)
{
	GnbSweepsShared *sh = run->sh;

	for (;;)
	{
		bool		all_done = true;

		for (int w = 1; w <= run->n_workers; w++)
		{
			GnbSweepSlot *s = &sh->slot[w];
			GnbSweepWorkerState state;
			pid_t		pid;
			bool		stopped;

			if (run->handle[w] == NULL)
				continue;
			if (gnb_sweeps_spin(&s->done, generation - 1))
				continue;
			/* liveness first, then the state: a worker that drew its share says so */
			stopped = GetBackgroundWorkerPid(run->handle[w], &pid) == BGWH_STOPPED;
			SpinLockAcquire(&s->mutex);
			state = s->state;
			SpinLockRelease(&s->mutex);
			if (pg_atomic_read_u64(&s->done) == generation)
			{
				pg_read_barrier();
				continue;
			}
			all_done = false;
			if (state == SWEEP_WORKER_FAILED || stopped)
				check_worker(run, w, state, stopped);
		}
		if (all_done)
			return;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SWEEPS_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		run->hooks->check_interrupts(run->hooks->arg);
	}
}

/*
 * Cut both phases into parts x SWEEPS_CHUNKS_PER_PART chunks of about equal
 * estimated work (chunk c is gnb_blocked_part's part c), once for a number
 * of parts, in cxt.
 */
void
gnb_sweeps_cut_chunks(GnbSweepChunks *chunks, gnb_blocked_helper *helper, int32 parts,
					  MemoryContext cxt)
{
	const int32 n = parts * SWEEPS_CHUNKS_PER_PART;

	if (chunks->parts == parts)
		return;
	for (int i = 0; i < 2; i++)
	{
		int32		phase = i == 0 ? GNB_PHASE_LABELS : GNB_PHASE_THETA;
		int64		to;

		if (chunks->first[i] != NULL)
			pfree(chunks->first[i]);
		chunks->first[i] = MemoryContextAlloc(cxt, sizeof(int64) * (n + 1));
		/* chunk c ends where c + 1 begins: the same search of the same work */
		for (int32 c = 0; c < n; c++)
			gnb_blocked_part(helper, phase, c, n, &chunks->first[i][c], &to);
		chunks->first[i][n] = gnb_blocked_units(helper, phase);
	}
	chunks->parts = parts;
}

/*
 * Draw chunks of the step under way until none is left: the chunks of
 * `part`'s own range one at a time from its start, then, while another
 * part's range has some left, its last (chunks: gnb_sweeps_cut_chunks).
 * The estimate of work is the corpus's; what a chunk costs is also the
 * process's (its caches, its core, what else ran there, how soon it woke):
 * the static split left one of two processes waiting for the other 4% of a
 * sweep, and a process woken late left its whole share to wait for.  Each chunk is claimed once (GnbSweepClaim), by
 * whichever process, and the draws do not depend on who draws them.  For
 * the job's worker (part 0) and its sweep workers alike.
 */
void
gnb_sweeps_draw_chunks(GnbSweepsShared *sh, GnbSweepClaim *claims, const GnbSweepChunks *chunks,
					   int32 part, gnb_blocked_helper *helper, const gnb_blocked_arrays *arrays,
					   const gnb_blocked_step *step)
{
#ifdef USE_ASSERT_CHECKING
	pg_atomic_uint32 *chunks_drawn = &sh->chunks_drawn;
#endif
	const int32 parts = chunks->parts;
	const int64 *first = chunks->first[step->phase == GNB_PHASE_LABELS ? 0 : 1];

	for (int32 i = 0; i < parts; i++)
	{
		GnbSweepClaim *claim = &claims[(part + i) % parts];
		uint64		left = pg_atomic_read_u64(&claim->left);

		for (;;)
		{
			uint32		next = (uint32) left;
			uint32		end = (uint32) (left >> 32);
			uint32		chunk;

			if (next >= end)
				break;
			if (i == 0)
			{
				/* its own, from the start: a step past the end says none is left */
				left = pg_atomic_fetch_add_u64(&claim->left, 1);
				if ((uint32) left >= (uint32) (left >> 32))
					break;
				chunk = (uint32) left;
			}
			else if (pg_atomic_compare_exchange_u64(&claim->left, &left,
													((uint64) (end - 1) << 32) | next))
				chunk = end - 1;
			else
				continue;		/* left has what the claim holds now */
			if (first[chunk] < first[chunk + 1])
				gnb_blocked_helper_run(helper, arrays, step, first[chunk], first[chunk + 1]);
#ifdef USE_ASSERT_CHECKING
			pg_atomic_fetch_add_u32(chunks_drawn, 1);
#endif
			if (i != 0)
				left = pg_atomic_read_u64(&claim->left);
		}
	}
}

/*
 * The core's blocked_phase hook: every part's chunks set, the step
 * published and the sweep workers woken, the job's worker's chunks drawn
 * (gnb_sweeps_draw_chunks), the others' waited for.  Alone (no sweep worker
 * started), the job's worker draws the phase at once.
 */
static void
sweeps_phase(void *arg, const gnb_blocked_step *step)
{
	GnbSweepsRun *run = arg;
	GnbSweepsShared *sh = run->sh;
	uint64		generation;
	int32		parts;

	SpinLockAcquire(&sh->mutex);
	sh->step = *step;
	parts = sh->n_parts;
	SpinLockRelease(&sh->mutex);
	if (parts == 1)
	{
		gnb_blocked_helper_run(run->helper, &run->arrays, step, 0,
							   gnb_blocked_units(run->helper, step->phase));
		return;
	}
	/* no process draws until the number changes: the last step's are all done */
#ifdef USE_ASSERT_CHECKING
	pg_atomic_write_u32(&sh->chunks_drawn, 0);
#endif
	for (int32 part = 0; part < parts; part++)
		pg_atomic_write_u64(&run->claims[part].left,
							((uint64) ((part + 1) * SWEEPS_CHUNKS_PER_PART) << 32) |
							(uint64) (part * SWEEPS_CHUNKS_PER_PART));
	/* the step, the chunks and the arrays the chain wrote, before its number */
	generation = pg_atomic_read_u64(&sh->generation) + 1;
	pg_write_barrier();
	pg_atomic_write_u64(&sh->generation, generation);
	for (int w = 1; w <= run->n_workers; w++)
		if (run->handle[w] != NULL)
			SetLatch(sh->slot[w].latch);
	gnb_sweeps_draw_chunks(sh, run->claims, &run->chunks, 0, run->helper, &run->arrays, step);
	wait_for_step(run, generation);
	/* every chunk drawn, and once */
	Assert(pg_atomic_read_u32(&sh->chunks_drawn) == (uint32) (parts * SWEEPS_CHUNKS_PER_PART));
}

static int
sweeps_arrays(void *arg, gnb_blocked_arrays *arrays)
{
	GnbSweepsRun *run = arg;

	*arrays = run->arrays;
	return 1;
}

/* The job's worker's own hooks, passed through. */
static void *
sweeps_alloc(size_t size, void *arg)
{
	GnbSweepsRun *run = arg;

	return run->hooks->alloc(size, run->hooks->arg);
}

static void
sweeps_release(void *ptr, void *arg)
{
	GnbSweepsRun *run = arg;

	run->hooks->release(ptr, run->hooks->arg);
}

static void
sweeps_progress(void *arg, const gnb_sweep *sweep)
{
	GnbSweepsRun *run = arg;

	run->hooks->progress(run->hooks->arg, sweep);
}

static void
sweeps_check_interrupts(void *arg)
{
	GnbSweepsRun *run = arg;

	run->hooks->check_interrupts(run->hooks->arg);
}

/* End: the sweep workers told to stop, their job slots given back, the segment let go of. */
static void
sweeps_end(GnbSweepsRun *run)
{
	GnbSweepsShared *sh = run->sh;

	SpinLockAcquire(&sh->mutex);
	sh->stop = true;
	SpinLockRelease(&sh->mutex);
	/* a new number, so that a watching worker reads stop */
	pg_write_barrier();
	pg_atomic_add_fetch_u64(&sh->generation, 1);
	for (int w = 1; w <= run->n_workers; w++)
		if (run->handle[w] != NULL)
			SetLatch(sh->slot[w].latch);
	/* gone before their slots are given back: they see stop at once */
	gnb_terminate_workers(run->handle + 1, run->n_workers, false, true, sh->params.job_id,
						  "sweep workers");
	gnb_release_chain_slots();
	gnb_blocked_helper_end(run->helper);
	active_sweeps = NULL;
	dsm_detach(run->seg);
}

/*
 * Train the job's chains, one after another, each sweep's phases shared
 * with the sweep workers (see the file's comment); without them, the same
 * model, when sweeps_begin says they cannot run.
 */
void
gnb_train_sweeps(GnbJobShared *job, const gnb_corpus *corpus, const gnb_hooks *hooks,
				 double memory_committed, gnb_result *result)
{
	const GnbJobParams *p = &job->params;
	int32		n_workers = Min(p->sweep_workers - 1, p->max_chain_workers);
	GnbSweepsRun *run = n_workers > 0 ?
		sweeps_begin(p, corpus, hooks, n_workers, memory_committed) : NULL;
	gnb_hooks	shared;

	if (run == NULL)
	{
		gnb_train(corpus, &p->sampler, hooks, result);
		return;
	}
	sweeps_launch(run);
	memset(&shared, 0, sizeof(shared));
	shared.alloc = sweeps_alloc;
	shared.release = sweeps_release;
	shared.progress = hooks->progress ? sweeps_progress : NULL;
	shared.check_interrupts = sweeps_check_interrupts;
	shared.arg = run;
	shared.blocked_arrays = sweeps_arrays;
	shared.blocked_phase = sweeps_phase;
	gnb_train(corpus, &p->sampler, &shared, result);
	sweeps_end(run);
}
