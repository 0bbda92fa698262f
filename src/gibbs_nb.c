/*
 * gibbs_nb.c
 *	  Module entry point and GUCs of gibbs_nb.
 */
#include "gibbs_nb.h"

#include "security/security.h"

#include "fmgr.h"
#include "utils/guc.h"

#include <limits.h>

#ifndef GNB_VERSION
#error "GNB_VERSION (the control file's default_version) must be defined: build with the Makefile"
#endif

/* with its name and version where the server takes them (compat.h) */
GNB_MODULE_MAGIC;

/* gibbs_nb.progress_interval: ms between progress NOTICEs of a waiting call */
int			gnb_progress_interval_ms = 5000;

/* gibbs_nb.max_jobs: training jobs that may run at once, 0 for no bound */
int			gnb_max_jobs = 4;

/* gibbs_nb.max_job_memory: what one job may allocate, in kB */
int			gnb_max_job_memory_kb = 1024 * 1024;

/*
 * gibbs_nb.class_counts_budget: what one process's gibbs_nb_class_counts
 * state may take, in kB, 0 for no bound.  Set by the training worker for
 * the query that counts a job's labelled documents (corpus.c).
 */
int			gnb_class_counts_budget_kb = 0;

/* gibbs_nb.job_retention: seconds finished jobs' rows are kept, 0 for ever */
int			gnb_job_retention_s = 7 * 24 * 3600;

/* gibbs_nb.max_jobs_per_role: jobs one role may run at once, 0 for no bound */
int			gnb_max_jobs_per_role = 2;

/* gibbs_nb.max_jobs_per_login: jobs one login (session user) may run at once */
int			gnb_max_jobs_per_login = 2;

/* gibbs_nb.lock_timeout: the longest gibbs_nb waits for another session's lock */
int			gnb_lock_timeout_ms = 10000;

/* gibbs_nb.max_chain_workers: extra workers one job may run its chains in */
int			gnb_max_chain_workers = 4;

/* gibbs_nb.sweep_workers: sweep_workers when gibbs_nb_train is not given it */
int			gnb_sweep_workers = 1;
/* gibbs_nb.blocked_nodes: a developer's setting, see worker/nodes.c */
int			gnb_blocked_nodes = 0;

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomIntVariable("gibbs_nb.progress_interval",
							"Time between progress messages of a waiting gibbs_nb_train call.",
							"0 turns the messages off.",
							&gnb_progress_interval_ms,
							5000, 0, 3600 * 1000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.model_cache_size",
							"Memory each backend may use to cache models for prediction.",
							"Least recently used models are evicted beyond it; the model in "
							"use is always kept.",
							&gnb_model_cache_kb,
							256 * 1024, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.max_jobs",
							"Training jobs that may run at the same time.",
							"Counted over the whole cluster.  A training started beyond it fails "
							"at once; 0 means no bound (max_worker_processes still applies).",
							&gnb_max_jobs,
							4, 0, 1024,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.max_jobs_per_role",
							"Training jobs one role may run at the same time.",
							"So that one role cannot take every job slot; 0 means no bound "
							"(gibbs_nb.max_jobs still applies).  Settable per role by a superuser.",
							&gnb_max_jobs_per_role,
							2, 0, 1024,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.max_jobs_per_login",
							"Training jobs one login may run at the same time, whatever roles it sets.",
							"Counted by session user, so that a member of several roles cannot "
							"take a slot of each with SET ROLE; 0 means no bound.  Chain workers "
							"count as gibbs_nb.max_jobs_per_role counts them.  Settable per role "
							"by a superuser.",
							&gnb_max_jobs_per_login,
							2, 0, 1024,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.lock_timeout",
							"The longest gibbs_nb waits for a lock another session holds or is queued for.",
							"Bounds every lock wait of gibbs_nb's own statements, of prediction's "
							"reads and of a job's worker (the session's lock_timeout, where shorter, "
							"bounds them instead); a wait that reaches it fails with 55P03.  Another "
							"role can hold a table's lock, or queue for one that later readers wait "
							"behind, for as long as it keeps a transaction open.  0 leaves the waits "
							"to lock_timeout alone.  Settable per role by a superuser.",
							&gnb_lock_timeout_ms,
							10000, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.max_job_memory",
							"Memory one training job may use.",
							"The worker estimates what a job needs from the corpus it read and "
							"the parameters, and fails at once when it is more.  Settable per "
							"role by a superuser.",
							&gnb_max_job_memory_kb,
							1024 * 1024, 1024, INT_MAX,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.class_counts_budget",
							"Memory the state of gibbs_nb_class_counts may take in one process.",
							"Set by the training worker, to what is left of the job's "
							"gibbs_nb.max_job_memory, for the query that counts the labelled "
							"documents; parallel workers inherit it.  0, the default, bounds "
							"nothing.  Superuser only, so that no role can raise it for a job.",
							&gnb_class_counts_budget_kb,
							0, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_KB | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE |
							GUC_NO_RESET_ALL,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.job_retention",
							"How long the rows of finished training jobs are kept.",
							"Older ones are deleted when a job starts; 0 keeps them for ever.",
							&gnb_job_retention_s,
							7 * 24 * 3600, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.max_chain_workers",
							"Background workers, besides its own, one training job may run chains in.",
							"A job with chains => n runs chain 1 in its own worker and up to n - 1 "
							"others at the same time in workers of their own; chains beyond this "
							"(or beyond free worker slots) run in the job's worker after its own.  "
							"0 runs all chains one after another.  The model is the same either way.",
							&gnb_max_chain_workers,
							4, 0, 63,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.sweep_workers",
							"Processes that share each chain's sweeps of the blocked sampler, when gibbs_nb_train is not told.",
							"With sampler => 'blocked', a job's worker and up to n - 1 sweep workers "
							"(within gibbs_nb.max_chain_workers and the job slots) draw each sweep "
							"together; the chains then run one after another.  The model is the "
							"same for every n.  Other samplers ignore it.",
							&gnb_sweep_workers,
							1, 1, 64,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gibbs_nb.blocked_nodes",
							"Developers only: train the blocked sampler's chains through this many nodes.",
							"With sampler => 'blocked', a job cuts its unlabelled documents into n "
							"parts by their ids' keys, each held by a node that the job's worker "
							"calls through SQL, as it would call nodes on other servers.  The model "
							"is the one trained without nodes.  0: none.",
							&gnb_blocked_nodes,
							0, 0, 64,
							PGC_SUSET, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("gibbs_nb");
	/* labels tables are written by name only where the name leads to them */
	gnb_install_statement_target_check();
}
