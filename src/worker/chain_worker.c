/*
 * chain_worker.c
 *	  A chain worker: one chain of a training job, in a background worker of
 *	  its own, over the corpus its job's worker put in shared memory
 *	  (chains.c).  Its result goes to its chain's entries, its messages,
 *	  whole, through its error queue.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/chains_shm.h"
#include "security/security.h"

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
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

PGDLLEXPORT void gibbs_nb_chain_worker_main(Datum main_arg);

/* How often a chain worker updates pg_stat_activity. */
#define CHAIN_ACTIVITY_MS 1000

/* Chain c's entries in this process. */
void
gnb_chain_arrays(shm_toc *toc, int32 c, GnbChainArrays *a)
{
	a->label_prob = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_LABEL_PROB), false);
	a->theta = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_THETA), false);
	a->pi = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_PI), false);
	a->kept = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_KEPT), false);
	a->last_labels = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_LAST_LABELS), false);
	a->trace = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_TRACE), false);
}

/* Copy a finished chain into its entries, and mark it done. */
void
gnb_chain_to_slot(GnbChainsShared *sh, const GnbChainArrays *a, int32 c, const gnb_chain *ch)
{
	GnbChainSlot *s = &sh->slot[c];
	Size		dk = (Size) sh->n_docs * sh->n_classes;
	Size		vk = (Size) sh->n_words * sh->n_classes;

	memcpy(a->label_prob, ch->label_prob, dk * sizeof(double));
	memcpy(a->theta, ch->theta, vk * sizeof(double));
	memcpy(a->pi, ch->pi, sh->n_classes * sizeof(double));
	memcpy(a->kept, ch->kept_log_joint, ch->kept_points * sizeof(double));
	memcpy(a->last_labels, ch->last_labels, (Size) Max(sh->n_docs, 1) * sizeof(int32));
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

typedef struct ChainWorker
{
	GnbChainsShared *sh;
	GnbChainArrays arrays;
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
		GnbTracePoint *tp = cw->arrays.trace + s->n_trace;

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
	shm_toc    *toc;
	GnbChainsShared *sh;
	GnbChainSlot *s;
	shm_mq	   *mq;
	int32		chain;
	ChainWorker cw;
	gnb_corpus	corpus;
	gnb_hooks	hooks = {chain_alloc, chain_release, chain_progress, chain_check_interrupts, &cw};

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "gibbs_nb chain worker");
	toc = gnb_attach_job_segment(main_arg, CHAINS_MAGIC, "gibbs_nb chain worker", &seg);
	sh = shm_toc_lookup(toc, CHAINS_KEY_SHARED, false);
	memcpy(&chain, MyBgworkerEntry->bgw_extra, sizeof(int32));
	if (chain < 1 || chain >= sh->params.sampler.chains)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("gibbs_nb chain worker started for chain %d of %d", chain,
						sh->params.sampler.chains)));
	s = &sh->slot[chain];

	/*
	 * The caller's identity, as the job's worker has it.  Before the error
	 * queue: a worker refused at connection leaves its chain to the job's
	 * worker (poll_chains), its refusal in the log.
	 */
	gnb_become_caller(&sh->params, "gibbs_nb chain worker");

	/* from here on what it reports goes to the job's worker, whole */
	mq = shm_toc_lookup(toc, CHAIN_KEY(chain, CHAIN_ERROR_QUEUE), false);
	shm_mq_set_sender(mq, MyProc);
	pq_redirect_to_shm_mq(seg, shm_mq_attach(mq, seg, NULL));

	memset(&cw, 0, sizeof(cw));
	cw.sh = sh;
	cw.chain = chain;
	cw.cxt = AllocSetContextCreate(TopMemoryContext, "gibbs_nb chain", ALLOCSET_DEFAULT_SIZES);
	gnb_chain_arrays(toc, chain, &cw.arrays);
	gnb_corpus_shm_get(toc, sh->n_docs, sh->n_words, sh->n_classes, sh->has_extra_counts,
					   sh->has_init_label, sh->has_doc_key, &corpus);

	SpinLockAcquire(&s->mutex);
	s->state = CHAIN_RUNNING;
	SpinLockRelease(&s->mutex);

	PG_TRY();
	{
		gnb_chain	ch;

		gnb_train_chain(&corpus, &sh->params.sampler, chain, &hooks, &ch);
		gnb_chain_to_slot(sh, &cw.arrays, chain, &ch);
	}
	PG_CATCH();
	{
		int			sqlerrcode = gnb_report_worker_error();

		SpinLockAcquire(&s->mutex);
		s->sqlerrcode = sqlerrcode;
		s->state = CHAIN_FAILED;
		SpinLockRelease(&s->mutex);
	}
	PG_END_TRY();

	SetLatch(sh->job_latch);
	pgstat_report_activity(STATE_IDLE, NULL);
	dsm_detach(seg);
}
