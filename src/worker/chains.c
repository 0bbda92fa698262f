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

PGDLLEXPORT void gibbs_nb_chain_worker_main(Datum main_arg);

/* How often the job's worker looks at its chain workers while it waits. */
#define CHAINS_POLL_MS 100
/* How long a failing job's worker waits for its chain workers to exit. */
#define CHAINS_STOP_WAIT_MS 10000
/* How often a chain worker updates pg_stat_activity. */
#define CHAIN_ACTIVITY_MS 1000

/* The segment's table of contents: its magic number and keys. */
#define CHAINS_MAGIC			UINT64CONST(0x474E42434841494E)
#define CHAINS_KEY_SHARED		1	/* GnbChainsShared: parameters, a slot per chain */
#define CHAINS_KEY_DOC_START	2	/* the corpus, as gnb_corpus has it */
#define CHAINS_KEY_WORD			3
#define CHAINS_KEY_COUNT		4
#define CHAINS_KEY_LABEL		5
#define CHAINS_KEY_EXTRA_WORDS	6	/* the clamped documents' counts, if any */
#define CHAINS_KEY_EXTRA_DOCS	7
#define CHAINS_KEY_INIT_LABEL	8	/* a warm start's labels, if any */

/* Chain c's own entries: CHAIN_KEY(c, CHAIN_THETA) and so on. */
typedef enum GnbChainEntry
{
	CHAIN_LABEL_PROB = 0,		/* n_docs x K */
	CHAIN_THETA,				/* V x K */
	CHAIN_PI,					/* K */
	CHAIN_KEPT,					/* the kept log joints, at most GNB_KEPT_SERIES_MAX */
	CHAIN_LAST_LABELS,			/* n_docs + 1 */
	CHAIN_TRACE,				/* max_trace trace points */
	CHAIN_ERROR_QUEUE,			/* the chain worker's messages (shm_mq) */
	CHAIN_N_ENTRIES
} GnbChainEntry;
#define CHAIN_KEY(c, entry)		(UINT64CONST(1000) + (uint64) (c) * CHAIN_N_ENTRIES + (entry))

/* A chain worker's error queue: parallel.c's size for a parallel worker's. */
#define CHAIN_ERROR_QUEUE_SIZE	16384

typedef enum GnbChainState
{
	CHAIN_PENDING = 0,			/* a worker was asked for; not yet running */
	CHAIN_RUNNING,
	CHAIN_DONE,					/* the result is in the chain's entries */
	CHAIN_FAILED,				/* its error went through its queue */
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

/* Where a chain is, and its result's figures once it is done. */
typedef struct GnbChainSlot
{
	slock_t		mutex;			/* protects all of it */
	GnbChainState state;
	int32		sweep;			/* last finished sweep */
	double		log_joint;
	int32		n_trace;		/* trace points written */
	int			sqlerrcode;		/* CHAIN_FAILED: the error's, had its message no way through */
	/* the result, once state is CHAIN_DONE */
	int64		changed_after_burn_in;
	int64		locked;
	int32		kept_points;	/* the thinned kept log joints in CHAIN_KEPT */
	int32		kept_stride;
	double		last_log_joint;
	double		gamma_theta;
	double		gamma_pi;
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
	bool		has_extra_counts;
	bool		has_init_label;
	GnbChainSlot slot[FLEXIBLE_ARRAY_MEMBER];
} GnbChainsShared;

/* A chain's entries, as one process has them mapped. */
typedef struct GnbChainArrays
{
	double	   *label_prob;
	double	   *theta;
	double	   *pi;
	double	   *kept;
	int32	   *last_labels;
	GnbTracePoint *trace;
} GnbChainArrays;

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
};

/* The job's worker's running chains: what gnb_chains_stop stops. */
static GnbChainsRun *active_run = NULL;
static bool stop_callback_registered = false;

/* Allocate and name an entry of the segment. */
static void *
toc_put(shm_toc *toc, uint64 key, Size bytes)
{
	void	   *p = shm_toc_allocate(toc, bytes);

	shm_toc_insert(toc, key, p);
	return p;
}

/* Chain c's entries in this process. */
static void
chain_arrays(shm_toc *toc, int32 c, GnbChainArrays *a)
{
	a->label_prob = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_LABEL_PROB), false);
	a->theta = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_THETA), false);
	a->pi = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_PI), false);
	a->kept = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_KEPT), false);
	a->last_labels = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_LAST_LABELS), false);
	a->trace = shm_toc_lookup(toc, CHAIN_KEY(c, CHAIN_TRACE), false);
}

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
 * Read what chain c's worker said: an error is raised here as it was raised
 * there (its SQLSTATE, message, detail, hint and context, and a line naming
 * the chain), a notice or warning is emitted, as parallel.c does with a
 * parallel worker's ('E' and 'N' are the protocol's ErrorResponse and
 * NoticeResponse).  A queue its worker has left is let go of.
 */
static void
read_chain_messages(GnbChainsRun *run, int32 c)
{
	while (run->error_mqh[c] != NULL)
	{
		shm_mq_result res;
		Size		nbytes;
		void	   *data;
		StringInfoData msg;
		char		msgtype;

		res = shm_mq_receive(run->error_mqh[c], &nbytes, &data, true);
		if (res == SHM_MQ_WOULD_BLOCK)
			return;
		if (res != SHM_MQ_SUCCESS)
		{
			shm_mq_detach(run->error_mqh[c]);
			run->error_mqh[c] = NULL;
			return;
		}
		initStringInfo(&msg);
		appendBinaryStringInfo(&msg, data, nbytes);
		msgtype = pq_getmsgbyte(&msg);
		if (msgtype == 'E' || msgtype == 'N')
		{
			ErrorData	edata;
			const char *chain_line = psprintf("chain %d/%d of gibbs_nb job " INT64_FORMAT ", in its own worker",
											  c + 1, run->chains, run->sh->params.job_id);

			pq_parse_errornotice(&msg, &edata);
			/* a chain worker's FATAL ends the job, not its worker */
			edata.elevel = Min(edata.elevel, ERROR);
			edata.context = edata.context ? psprintf("%s\n%s", edata.context, chain_line)
				: pstrdup(chain_line);
			ThrowErrorData(&edata);
		}
		pfree(msg.data);
	}
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

/* Copy a finished chain into its entries, and mark it done. */
static void
chain_to_slot(GnbChainsShared *sh, const GnbChainArrays *a, int32 c, const gnb_chain *ch)
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
	shm_toc_estimate_chunk(&e, mul_size(D + 1, sizeof(int64)));
	shm_toc_estimate_chunk(&e, mul_size(Max(nnz, 1), sizeof(int32)));
	shm_toc_estimate_chunk(&e, mul_size(Max(nnz, 1), sizeof(int32)));
	shm_toc_estimate_chunk(&e, mul_size(D + 1, sizeof(int32)));
	shm_toc_estimate_keys(&e, 5);
	if (corpus->extra_word_counts)
	{
		shm_toc_estimate_chunk(&e, mul_size(mul_size(V, K), sizeof(double)));
		shm_toc_estimate_chunk(&e, mul_size(K, sizeof(double)));
		shm_toc_estimate_keys(&e, 2);
	}
	if (corpus->init_label)
	{
		shm_toc_estimate_chunk(&e, mul_size(D + 1, sizeof(int32)));
		shm_toc_estimate_keys(&e, 1);
	}
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

	sh = toc_put(toc, CHAINS_KEY_SHARED, shared_size);
	memset(sh, 0, shared_size);
	memcpy(sh, &head, offsetof(GnbChainsShared, slot));
	sh->params = *p;
	sh->job_pid = MyProcPid;
	sh->job_latch = MyLatch;
	sh->trace_stride = trace_stride;
	sh->has_extra_counts = corpus->extra_word_counts != NULL;
	sh->has_init_label = corpus->init_label != NULL;
	memcpy(toc_put(toc, CHAINS_KEY_DOC_START, sizeof(int64) * (D + 1)), corpus->doc_start,
		   sizeof(int64) * (D + 1));
	memcpy(toc_put(toc, CHAINS_KEY_WORD, sizeof(int32) * Max(nnz, 1)), corpus->word,
		   sizeof(int32) * nnz);
	memcpy(toc_put(toc, CHAINS_KEY_COUNT, sizeof(int32) * Max(nnz, 1)), corpus->count,
		   sizeof(int32) * nnz);
	memcpy(toc_put(toc, CHAINS_KEY_LABEL, sizeof(int32) * (D + 1)), corpus->label,
		   sizeof(int32) * D);
	if (sh->has_extra_counts)
	{
		memcpy(toc_put(toc, CHAINS_KEY_EXTRA_WORDS, sizeof(double) * V * K),
			   corpus->extra_word_counts, sizeof(double) * V * K);
		memcpy(toc_put(toc, CHAINS_KEY_EXTRA_DOCS, sizeof(double) * K),
			   corpus->extra_doc_counts, sizeof(double) * K);
	}
	if (sh->has_init_label)
		memcpy(toc_put(toc, CHAINS_KEY_INIT_LABEL, sizeof(int32) * (D + 1)),
			   corpus->init_label, sizeof(int32) * D);

	run = palloc0(sizeof(GnbChainsRun));
	run->seg = seg;
	run->toc = toc;
	run->sh = sh;
	run->chains = chains;
	run->arrays = palloc0(sizeof(GnbChainArrays) * chains);
	run->handle = palloc0(sizeof(BackgroundWorkerHandle *) * chains);
	run->error_mqh = palloc0(sizeof(shm_mq_handle *) * chains);
	run->trace_read = palloc0(sizeof(int32) * chains);
	run->hooks = hooks;
	for (int c = 0; c < chains; c++)
	{
		for (int i = 0; i < CHAIN_ERROR_QUEUE; i++)
			toc_put(toc, CHAIN_KEY(c, i), entry[i]);
		chain_arrays(toc, c, &run->arrays[c]);
		SpinLockInit(&sh->slot[c].mutex);
		/* chain 0 is the job's worker's own: its queue stays unused */
		{
			shm_mq	   *mq = shm_mq_create(toc_put(toc, CHAIN_KEY(c, CHAIN_ERROR_QUEUE),
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
			shm_mq_detach(run->error_mqh[c]);
			run->error_mqh[c] = NULL;
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
		worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(run->seg));
		memcpy(worker.bgw_extra, &c, sizeof(int32));
		worker.bgw_notify_pid = MyProcPid;
		sh->slot[c].state = CHAIN_PENDING;
		if (RegisterDynamicBackgroundWorker(&worker, &run->handle[c]))
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
			chain_to_slot(sh, &run->arrays[local], local, &ch);
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

/* ---- the chain worker ---- */

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

/* The corpus as the chain worker reads it: the segment's entries. */
static void
chain_corpus(shm_toc *toc, const GnbChainsShared *sh, gnb_corpus *corpus)
{
	memset(corpus, 0, sizeof(*corpus));
	corpus->n_docs = sh->n_docs;
	corpus->n_words = sh->n_words;
	corpus->n_classes = sh->n_classes;
	corpus->doc_start = shm_toc_lookup(toc, CHAINS_KEY_DOC_START, false);
	corpus->word = shm_toc_lookup(toc, CHAINS_KEY_WORD, false);
	corpus->count = shm_toc_lookup(toc, CHAINS_KEY_COUNT, false);
	corpus->label = shm_toc_lookup(toc, CHAINS_KEY_LABEL, false);
	if (sh->has_extra_counts)
	{
		corpus->extra_word_counts = shm_toc_lookup(toc, CHAINS_KEY_EXTRA_WORDS, false);
		corpus->extra_doc_counts = shm_toc_lookup(toc, CHAINS_KEY_EXTRA_DOCS, false);
	}
	if (sh->has_init_label)
		corpus->init_label = shm_toc_lookup(toc, CHAINS_KEY_INIT_LABEL, false);
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
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb chain worker could not map its job's shared memory")));
	toc = shm_toc_attach(CHAINS_MAGIC, dsm_segment_address(seg));
	if (toc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gibbs_nb chain worker found no chains in its job's shared memory")));
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
	chain_arrays(toc, chain, &cw.arrays);
	chain_corpus(toc, sh, &corpus);

	SpinLockAcquire(&s->mutex);
	s->state = CHAIN_RUNNING;
	SpinLockRelease(&s->mutex);

	PG_TRY();
	{
		gnb_chain	ch;

		gnb_train_chain(&corpus, &sh->params.sampler, chain, &hooks, &ch);
		chain_to_slot(sh, &cw.arrays, chain, &ch);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		/* to the log and, whole, through the queue: before FAILED is seen */
		EmitErrorReport();
		FlushErrorState();
		SpinLockAcquire(&s->mutex);
		s->sqlerrcode = edata->sqlerrcode;
		s->state = CHAIN_FAILED;
		SpinLockRelease(&s->mutex);
	}
	PG_END_TRY();

	SetLatch(sh->job_latch);
	pgstat_report_activity(STATE_IDLE, NULL);
	dsm_detach(seg);
}
