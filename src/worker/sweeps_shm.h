/*
 * sweeps_shm.h
 *	  The shared memory of a job's sweep workers, as the job's worker
 *	  (sweeps.c) and its sweep workers (sweep_worker.c) both see it: the
 *	  segment's table of contents, the step under way, a slot per sweep
 *	  worker, the corpus and the blocked sampler's arrays.
 */
#ifndef GNB_WORKER_SWEEPS_SHM_H
#define GNB_WORKER_SWEEPS_SHM_H

#include "gibbs_nb.h"

#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/shm_toc.h"
#include "storage/spin.h"

/*
 * How long a process waiting for the next step (a sweep worker) or for the
 * others' shares (the job's worker) watches the step numbers before it
 * sleeps on its latch: a latch's wake-up took 0.5 to 1 ms here, as long as
 * a phase's share of the SpamAssassin corpus (see sweeps.c).
 */
#define SWEEPS_SPIN_US			2000

#define SWEEPS_MAGIC			UINT64CONST(0x474E425357454550)
#define SWEEPS_KEY_SHARED		1	/* GnbSweepsShared */
/* 2 .. 9: the corpus (GNB_CORPUS_KEY_*, corpus_shm.c), no warm start's labels (8) */
/* the blocked sampler's arrays, by GNB_BLOCKED_* */
#define SWEEPS_KEY_ARRAY(i)		(UINT64CONST(100) + (uint64) (i))
/* sweep worker w's error queue, w = 1 .. n_workers */
#define SWEEPS_KEY_QUEUE(w)		(UINT64CONST(1000) + (uint64) (w))

/* A sweep worker's error queue: parallel.c's size for a parallel worker's. */
#define SWEEPS_QUEUE_SIZE		16384

typedef enum GnbSweepWorkerState
{
	SWEEP_WORKER_PENDING = 0,	/* asked for; not yet ready */
	SWEEP_WORKER_READY,			/* takes part in the phases from `part` on */
	SWEEP_WORKER_FAILED			/* its error went through its queue */
} GnbSweepWorkerState;

typedef struct GnbSweepSlot
{
	slock_t		mutex;			/* protects all of it */
	GnbSweepWorkerState state;
	struct Latch *latch;		/* the sweep worker's, once ready */
	int32		part;			/* its share of every phase (1 .. n_parts - 1) */
	int			sqlerrcode;		/* FAILED: the error's */
	pg_atomic_uint64 done;		/* the last step it drew its share of (no lock) */
} GnbSweepSlot;

typedef struct GnbSweepsShared
{
	slock_t		mutex;			/* protects step, n_parts, stop */
	/* counts the steps handed out: written after the step, with a barrier */
	pg_atomic_uint64 generation;
	gnb_blocked_step step;		/* the one under way */
	int32		n_parts;		/* processes a phase is split over (ready workers + 1) */
	bool		stop;			/* the job's worker is done with them */
	GnbJobParams params;		/* the sampler's parameters, the job */
	int			job_pid;
	struct Latch *job_latch;
	int32		n_docs;
	int32		n_words;
	int32		n_classes;
	bool		has_extra_counts;
	bool		has_doc_key;
	int32		n_workers;
	GnbSweepSlot slot[FLEXIBLE_ARRAY_MEMBER];	/* 1 .. n_workers; slot[0] unused */
} GnbSweepsShared;

/*
 * Watch *value for up to SWEEPS_SPIN_US while it equals `unchanged`
 * (sweeps.c): true when it changed (a read barrier follows, so what was
 * written before it can be read), false when the time ran out.
 */
static inline bool
gnb_sweeps_spin(pg_atomic_uint64 *value, uint64 unchanged)
{
	instr_time	start,
				now;

	INSTR_TIME_SET_CURRENT(start);
	for (int i = 1;; i++)
	{
		if (pg_atomic_read_u64(value) != unchanged)
		{
			pg_read_barrier();
			return true;
		}
		pg_spin_delay();
		if (i % 256 == 0)
		{
			INSTR_TIME_SET_CURRENT(now);
			INSTR_TIME_SUBTRACT(now, start);
			if (INSTR_TIME_GET_MICROSEC(now) >= SWEEPS_SPIN_US)
				return false;
		}
	}
}

#endif							/* GNB_WORKER_SWEEPS_SHM_H */
