/*
 * gibbs_nb.h
 *	  Declarations shared by the PostgreSQL glue of gibbs_nb.
 *
 * The statistics live in src/core (pure C); everything here is the thin layer
 * that reads documents, runs jobs in background workers and writes results.
 */
#ifndef GIBBS_NB_H
#define GIBBS_NB_H

#include "postgres.h"

#include "gnb_sampler.h"
#include "storage/dsm.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

/* The schema that holds the extension's tables. */
#define GNB_SCHEMA "gibbs_nb"

/* Longest model name: it is part of the default labels table's name. */
#define GNB_MODEL_NAME_MAX (NAMEDATALEN - 1)

/* Largest number of classes a model may have. */
#define GNB_MAX_CLASSES 1000

/* GUCs (gibbs_nb.c, predict.c) */
extern int	gnb_progress_interval_ms;
extern int	gnb_model_cache_kb;
extern int	gnb_max_jobs;

/*
 * What a training job needs to run: fixed-size so that it travels to the
 * worker in a dynamic shared memory segment.  Names are unquoted
 * identifiers; the worker quotes them.
 */
typedef struct GnbJobParams
{
	int64		job_id;
	Oid			database_id;
	/* the caller's identity, restored by the worker (see worker.c) */
	Oid			authenticated_user_id;
	Oid			session_user_id;
	bool		session_user_is_superuser;
	Oid			outer_user_id;
	bool		outer_user_is_superuser;
	Oid			current_user_id;
	int			sec_context;

	char		model_name[NAMEDATALEN];
	Oid			source_relid;
	char		source_name[2 * NAMEDATALEN + 8];	/* qualified, quoted */
	char		tokens_column[NAMEDATALEN];
	char		label_column[NAMEDATALEN];	/* "" for none */
	char		id_column[NAMEDATALEN];
	bool		tokens_are_tsvector;
	Oid			id_type;
	int32		id_typmod;
	int32		n_classes;		/* 0: from the labels */
	gnb_params	sampler;		/* sweeps, burn_in, ..., the resolved seed */
	char		labels_schema[NAMEDATALEN];
	char		labels_table[NAMEDATALEN];
} GnbJobParams;

/* Where a job is; the worker moves it forward, the caller reads it. */
typedef enum GnbJobPhase
{
	GNB_PHASE_STARTING = 0,		/* worker launched, job row not yet written */
	GNB_PHASE_RUNNING,			/* job row committed: visible to others */
	GNB_PHASE_SUCCEEDED,
	GNB_PHASE_FAILED
} GnbJobPhase;

/* The job's shared memory: parameters in, progress and outcome out. */
typedef struct GnbJobShared
{
	GnbJobParams params;
	struct Latch *caller_latch; /* set by the worker when the phase changes */

	slock_t		mutex;			/* protects everything below */
	GnbJobPhase phase;
	int32		chain;			/* 0-based chain in progress */
	int32		sweep;			/* last finished sweep of that chain */
	double		log_joint;
	TimestampTz sampling_started;
	/* outcome */
	int32		version;
	int32		sweeps_done;
	double		seconds;
	double		log_likelihood;
	int			sqlerrcode;
	char		message[1024];
	char		detail[1024];
	char		hint[512];
} GnbJobShared;

/* What a finished job reports back to gibbs_nb_train's caller. */
typedef struct GnbJobOutcome
{
	GnbJobPhase phase;
	int32		version;
	int32		sweeps_done;
	double		seconds;
	double		log_likelihood;
} GnbJobOutcome;

/* job.c: launch a worker for a job and follow it */
extern void gnb_run_job(GnbJobParams *params, bool wait, GnbJobOutcome *outcome);

/* corpus.c: documents of the source, read once, as compressed sparse rows */
/*
 * The documents are the unlabelled rows, as compressed sparse rows (label
 * -1).  Labelled rows enter the samplers only through their counts, read
 * with gibbs_nb_class_counts (in parallel where the plan allows), so they are
 * kept as ids and classes only.  Word ids are in byte order of the tokens:
 * the model does not depend on the order rows were read in.
 */
typedef struct GnbCorpus
{
	int32		n_docs;			/* unlabelled documents */
	int32		n_words;
	int32		n_classes;
	int64	   *doc_start;
	int32	   *word;
	int32	   *count;
	int32	   *label;			/* all -1 */
	Datum	   *ids;			/* the source's ids, in its own type */
	char	  **tokens;			/* word id -> token */
	char	  **classes;		/* class id -> class name, sorted */
	int32		n_labeled;		/* labelled documents */
	Datum	   *labeled_ids;
	int32	   *labeled_class;
	double	   *labeled_word_counts;	/* V x K word-major */
	double	   *labeled_doc_counts; /* K */
	int32		n_skipped;		/* rows whose tokens are NULL */
	int64		n_tokens;
} GnbCorpus;

extern void gnb_read_corpus(const GnbJobParams *params, MemoryContext cxt,
							GnbCorpus *corpus);

/* class_counts.c: a gibbs_nb_class_counts value, parsed and validated */
typedef struct GnbParsedCounts
{
	int32		n_classes;
	int32		n_words;
	int64		n_cells;
	const char **class_str;
	int32	   *class_len;
	const char **word_str;
	int32	   *word_len;
	const char *cells;			/* n_cells x (int32 class, int32 word, int64 count) */
} GnbParsedCounts;

extern void gnb_counts_parse(bytea *value, GnbParsedCounts *pc, bool check_distinct);
extern void gnb_counts_cell(const GnbParsedCounts *pc, int64 i, int32 *cls, int32 *word,
							int64 *count);

/* publish.c: one transaction writes a finished job's model version */
extern int32 gnb_publish(const GnbJobParams *params, const GnbCorpus *corpus,
						 const gnb_result *result, double seconds_so_far);

/* model.c: the extension's tables, and who may touch which model */
typedef struct GnbPrivilegeState
{
	Oid			save_user;
	int			save_sec_context;
	int			save_nestlevel;
} GnbPrivilegeState;

extern Oid	gnb_internal_owner(void);
extern void gnb_become_internal(GnbPrivilegeState *state);
extern void gnb_restore_user(GnbPrivilegeState *state);
extern Oid	gnb_model_owner(const char *model_name);
extern void gnb_check_model_access(const char *model_name, Oid role, bool missing_ok);
extern Oid	gnb_registered_labels_table(const char *model_name, Oid relid);
extern void gnb_reconcile_jobs(void);
extern int64 gnb_running_job(const char *model_name, int64 *n_running);

#endif							/* GIBBS_NB_H */
