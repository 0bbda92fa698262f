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

/*
 * The chunks of a phase, for each process that shares it: each process
 * draws its own range of them from its start, then takes what is left of
 * the others' from their ends (gnb_sweeps_draw_chunks).  At 64 a chunk of
 * the SpamAssassin corpus's theta phase is about 15 us of work for one of
 * two processes, and the one that finishes first waits about half that.
 */
#define SWEEPS_CHUNKS_PER_PART	64

#define SWEEPS_MAGIC			UINT64CONST(0x474E425357454550)
#define SWEEPS_KEY_SHARED		1	/* GnbSweepsShared */
#define SWEEPS_KEY_CLAIMS		10	/* GnbSweepClaim, by part */
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
	int32		part;			/* its chunks of every phase, drawn first (1 .. n_parts - 1) */
	int			sqlerrcode;		/* FAILED: the error's */
	pg_atomic_uint64 done;		/* the last step it drew its share of (no lock) */
} GnbSweepSlot;

/*
 * What is left of a part's chunks of the step under way: the next chunk
 * from its start in the low 32 bits, the end in the high ones; the part's
 * own process takes from the start (an atomic add), others from the end (a
 * compare and exchange), so every chunk is drawn once.  A cache line each:
 * a process takes its own chunks without touching another's line.
 */
typedef union GnbSweepClaim
{
	pg_atomic_uint64 left;
	char		pad[PG_CACHE_LINE_SIZE];
} GnbSweepClaim;

typedef struct GnbSweepsShared
{
	slock_t		mutex;			/* protects step, n_parts, stop */
	/* counts the steps handed out: written after the step, with a barrier */
	pg_atomic_uint64 generation;
	gnb_blocked_step step;		/* the one under way */
	int32		n_parts;		/* processes a phase is split over (ready workers + 1) */
	bool		stop;			/* the job's worker is done with them */
#ifdef USE_ASSERT_CHECKING
	pg_atomic_uint32 chunks_drawn;	/* of the step under way, by every process */
#endif
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

/*
 * A process's cut of each phase into chunks (the first unit of each, and
 * the phase's units last), for `parts` processes: a search of the work
 * before each unit made once, not at every chunk of every step.
 */
typedef struct GnbSweepChunks
{
	int32		parts;			/* 0: not cut yet */
	int64	   *first[2];		/* labels, theta: parts x SWEEPS_CHUNKS_PER_PART + 1 */
} GnbSweepChunks;

/* sweeps.c: the cut, and a process's draws of the step under way (their comments) */
extern void gnb_sweeps_cut_chunks(GnbSweepChunks *chunks, gnb_blocked_helper *helper,
								  int32 parts, MemoryContext cxt);
extern void gnb_sweeps_draw_chunks(GnbSweepsShared *sh, GnbSweepClaim *claims,
								   const GnbSweepChunks *chunks, int32 part,
								   gnb_blocked_helper *helper, const gnb_blocked_arrays *arrays,
								   const gnb_blocked_step *step);

#endif							/* GNB_WORKER_SWEEPS_SHM_H */
