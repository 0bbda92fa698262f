/*
 * sweep_worker.c
 *	  A sweep worker: its share of every phase of the blocked sampler's
 *	  sweeps of a training job (sweeps.c), over the corpus and arrays its job's
 *	  worker put in shared memory.  It runs no SQL: it draws numbers into
 *	  shared memory.  It connects as the caller all the same, as a chain
 *	  worker does, so that pg_stat_activity shows it, under the caller's
 *	  name, and pg_terminate_backend reaches it.  Its messages go, whole,
 *	  through its error queue.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/sweeps_shm.h"
#include "security/security.h"

#include "libpq/pqmq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shm_mq.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

PGDLLEXPORT void gibbs_nb_sweep_worker_main(Datum main_arg);

/* How long a sweep worker sleeps between looks at its job's worker. */
#define SWEEP_WORKER_IDLE_MS 1000

typedef struct SweepWorker
{
	GnbSweepsShared *sh;
	MemoryContext cxt;
} SweepWorker;

static void *
sweep_alloc(size_t size, void *arg)
{
	SweepWorker *sw = arg;

	return MemoryContextAllocExtended(sw->cxt, size, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static void
sweep_release(void *ptr, void *arg)
{
	pfree(ptr);
}

/* Stop if told to, or if the job's worker is gone. */
static void
sweep_check_interrupts(void *arg)
{
	SweepWorker *sw = arg;

	CHECK_FOR_INTERRUPTS();
	if (BackendPidGetProc(sw->sh->job_pid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("gibbs_nb job " INT64_FORMAT "'s worker has exited",
						sw->sh->params.job_id)));
}

/*
 * Draw this worker's share of every step handed out, until told to stop:
 * the step's number watched (gnb_sweeps_spin) and then slept on, the step
 * read under the segment's lock once its number changed, the share drawn
 * (its part's chunks, then what the others left: gnb_sweeps_draw_chunks),
 * the number written to the slot after a full barrier (which orders the
 * share's reads and writes before it), the job's worker woken.
 */
static void
serve_steps(GnbSweepsShared *sh, GnbSweepSlot *slot, GnbSweepClaim *claims,
			gnb_blocked_helper *helper, const gnb_blocked_arrays *arrays,
			const gnb_hooks *hooks)
{
	uint64		done = 0;
	GnbSweepChunks chunks = {0};

	for (;;)
	{
		gnb_blocked_step step;
		uint64		generation;
		int32		parts;
		bool		stop;

		if (!gnb_sweeps_spin(&sh->generation, done))
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 SWEEP_WORKER_IDLE_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			hooks->check_interrupts(hooks->arg);
			continue;
		}
		generation = pg_atomic_read_u64(&sh->generation);
		SpinLockAcquire(&sh->mutex);
		step = sh->step;
		parts = sh->n_parts;
		stop = sh->stop;
		SpinLockRelease(&sh->mutex);
		if (stop)
			return;
		gnb_sweeps_cut_chunks(&chunks, helper, parts, ((SweepWorker *) hooks->arg)->cxt);
		gnb_sweeps_draw_chunks(sh, claims, &chunks, slot->part, helper, arrays, &step);
		/* its reads and writes of the arrays before the number (loads too: a full barrier) */
		pg_memory_barrier();
		pg_atomic_write_u64(&slot->done, generation);
		done = generation;
		SetLatch(sh->job_latch);
	}
}

/*
 * gibbs_nb_sweep_worker_main: entry point of a sweep worker.  main_arg is
 * the handle of the job's sweeps segment, bgw_extra the worker's number
 * (1 .. n_workers).
 */
void
gibbs_nb_sweep_worker_main(Datum main_arg)
{
	dsm_segment *seg;
	shm_toc    *toc;
	GnbSweepsShared *sh;
	GnbSweepSlot *slot;
	shm_mq	   *mq;
	int32		w;
	SweepWorker sw;
	gnb_corpus	corpus;
	gnb_blocked_arrays arrays;
	gnb_hooks	hooks = {sweep_alloc, sweep_release, NULL, sweep_check_interrupts, &sw};

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "gibbs_nb sweep worker");
	toc = gnb_attach_job_segment(main_arg, SWEEPS_MAGIC, "gibbs_nb sweep worker", &seg);
	sh = shm_toc_lookup(toc, SWEEPS_KEY_SHARED, false);
	memcpy(&w, MyBgworkerEntry->bgw_extra, sizeof(int32));
	if (w < 1 || w > sh->n_workers)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("gibbs_nb sweep worker started as number %d of %d", w, sh->n_workers)));
	slot = &sh->slot[w];

	/*
	 * The caller's identity, as the job's worker has it.  Before the error
	 * queue: a worker refused at connection leaves its part to the others
	 * (sweeps_launch), its refusal in the log.
	 */
	gnb_become_caller(&sh->params, "gibbs_nb sweep worker");
	{
		char		activity[128];

		snprintf(activity, sizeof(activity), "gibbs_nb job " INT64_FORMAT ": sweep worker %d",
				 sh->params.job_id, w);
		pgstat_report_activity(STATE_RUNNING, activity);
	}

	/* from here on what it reports goes to the job's worker, whole */
	mq = shm_toc_lookup(toc, SWEEPS_KEY_QUEUE(w), false);
	shm_mq_set_sender(mq, MyProc);
	pq_redirect_to_shm_mq(seg, shm_mq_attach(mq, seg, NULL));

	memset(&sw, 0, sizeof(sw));
	sw.sh = sh;
	sw.cxt = AllocSetContextCreate(TopMemoryContext, "gibbs_nb sweep worker",
								   ALLOCSET_DEFAULT_SIZES);
	gnb_corpus_shm_get(toc, sh->n_docs, sh->n_words, sh->n_classes, sh->has_extra_counts, false,
					   sh->has_doc_key, &corpus);
	arrays.log_theta = shm_toc_lookup(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_LOG_THETA), false);
	arrays.N = shm_toc_lookup(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_N), false);
	arrays.log_pi = shm_toc_lookup(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_LOG_PI), false);
	arrays.next_label = shm_toc_lookup(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_NEXT_LABEL), false);
	arrays.pred = shm_toc_lookup(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_PRED), false);
	arrays.block_lse = shm_toc_lookup(toc, SWEEPS_KEY_ARRAY(GNB_BLOCKED_BLOCK_LSE), false);
	PG_TRY();
	{
		gnb_blocked_helper *helper = gnb_blocked_helper_begin(&corpus, &sh->params.sampler,
															  &hooks);

		SpinLockAcquire(&slot->mutex);
		slot->latch = MyLatch;
		slot->state = SWEEP_WORKER_READY;
		SpinLockRelease(&slot->mutex);
		SetLatch(sh->job_latch);
		serve_steps(sh, slot, shm_toc_lookup(toc, SWEEPS_KEY_CLAIMS, false), helper, &arrays,
					&hooks);
	}
	PG_CATCH();
	{
		int			sqlerrcode = gnb_report_worker_error();

		SpinLockAcquire(&slot->mutex);
		slot->sqlerrcode = sqlerrcode;
		slot->state = SWEEP_WORKER_FAILED;
		SpinLockRelease(&slot->mutex);
	}
	PG_END_TRY();

	SetLatch(sh->job_latch);
	pgstat_report_activity(STATE_IDLE, NULL);
	dsm_detach(seg);
}
