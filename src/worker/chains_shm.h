/*
 * chains_shm.h
 *	  The shared memory of a job's parallel chains, as the job's worker
 *	  (chains.c) and its chain workers (chain_worker.c) both see it: the
 *	  segment's table of contents, a slot per chain, and each chain's entries.
 */
#ifndef GNB_WORKER_CHAINS_SHM_H
#define GNB_WORKER_CHAINS_SHM_H

#include "gibbs_nb.h"

#include "storage/shm_toc.h"
#include "storage/spin.h"

/* The segment's table of contents: its magic number and keys. */
#define CHAINS_MAGIC			UINT64CONST(0x474E42434841494E)
#define CHAINS_KEY_SHARED		1	/* GnbChainsShared: parameters, a slot per chain */
/* 2 .. 9: the corpus (GNB_CORPUS_KEY_*, corpus_shm.c), a warm start's labels included */

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
	bool		has_doc_key;
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

/* chain_worker.c: what both sides do with a chain's entries */
extern void gnb_chain_arrays(shm_toc *toc, int32 c, GnbChainArrays *a);
extern void gnb_chain_to_slot(GnbChainsShared *sh, const GnbChainArrays *a, int32 c,
							  const gnb_chain *ch);

#endif							/* GNB_WORKER_CHAINS_SHM_H */
