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

#include "compat.h"

#include "gnb_sampler.h"
#include "storage/dsm.h"
#include "fmgr.h"
#include "storage/lockdefs.h"
#include "storage/spin.h"
#include "access/htup.h"
#include "access/tupdesc.h"
#include "nodes/pg_list.h"
#include "utils/timestamp.h"
#include "lib/stringinfo.h"

/* The schema that holds the extension's tables. */
#define GNB_SCHEMA "gibbs_nb"

/* Longest model name: it is part of the default labels table's name. */
#define GNB_MODEL_NAME_MAX (NAMEDATALEN - 1)
/* the longest tokenizer description gibbs_nb_train takes, in bytes */
#define GNB_TOKENIZER_MAX 1000
/*
 * ... and gibbs_nb_import: an exported model carries the tokenizer training
 * derived when none was stated (a generated column's expression), which may
 * be longer; bounded all the same, for a backup (dump_size.c).
 */
#define GNB_IMPORTED_TOKENIZER_MAX (1024 * 1024)

/* Largest number of classes a model may have. */
#define GNB_MAX_CLASSES 1000
/* labelled documents the label check scores at most (gnb_label_check.h) */
#define GNB_CHECKED_DOCS 2000
/*
 * Longest label (class name) in bytes: a model's rows hold its classes, some
 * of them K times, and each must fit in a backup (dump_size.c).
 */
#define GNB_LABEL_MAX 1024

static inline void
gnb_check_label_length(int len)
{
	if (len > GNB_LABEL_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a label of %d bytes is longer than the %d bytes a class name may be",
						len, GNB_LABEL_MAX)));
}
/*
 * Longest a row of the extension's tables may be as pg_dump writes it
 * (MaxAllocSize less the line's end): see dump_size.c.
 */
#define GNB_DUMP_ROW_MAX ((uint64) MaxAllocSize - 2)

/* GUCs (gibbs_nb.c, predict.c) */
extern int	gnb_progress_interval_ms;
extern int	gnb_model_cache_kb;
extern int	gnb_max_jobs;
extern int	gnb_max_jobs_per_role;
extern int	gnb_max_job_memory_kb;
extern int	gnb_job_retention_s;
extern int	gnb_class_counts_budget_kb;
extern int	gnb_max_chain_workers;

/*
 * A training source as checked: the relation and the columns used.  Types
 * are the columns' declared types (a domain stays a domain); tokens_base is
 * text[] or tsvector.  Label attnum 0 means no label column.
 */
typedef struct GnbSourceDesc
{
	Oid			relid;
	char		relkind;
	char		tokens_column[NAMEDATALEN];
	char		label_column[NAMEDATALEN];	/* "" for none */
	char		id_column[NAMEDATALEN];
	AttrNumber	tokens_attnum;
	AttrNumber	label_attnum;
	AttrNumber	id_attnum;
	Oid			tokens_type;
	Oid			tokens_base;
	Oid			label_type;
	Oid			id_type;
	int32		id_typmod;
} GnbSourceDesc;

/* source.c: the one definition of a valid source, for caller and worker */
extern void gnb_describe_source(Oid relid, const char *tokens_column,
								const char *label_column, const char *id_column,
								GnbSourceDesc *desc);
extern char *gnb_lock_source(const GnbSourceDesc *checked, int64 job_id);
extern void gnb_check_result_column(TupleDesc desc, int col, Oid type, const char *what);
extern void gnb_check_label_values(int n_values, int n_classes, const char *source);

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

	/* the model: (owner, name); the owner is a role name, see store.c */
	char		model_name[NAMEDATALEN];
	char		model_owner[NAMEDATALEN];
	Oid			model_owner_role;	/* the role it stands for, as the caller checked */

	/*
	 * The source as the caller checked it: a relation OID and its columns'
	 * numbers and types.  The worker locks the OID and checks these again
	 * (source.c) before it reads; no name is ever carried over.
	 */
	GnbSourceDesc source;
	int64		max_job_memory;	/* bytes: the caller's gibbs_nb.max_job_memory */
	int32		max_chain_workers;	/* the caller's gibbs_nb.max_chain_workers */
	int32		max_jobs;		/* ... gibbs_nb.max_jobs, for the chain slots */
	int32		max_jobs_per_role;	/* ... gibbs_nb.max_jobs_per_role, the same */
	int32		n_classes;		/* 0: from the labels */
	double		holdout;		/* share of the labelled rows held out, [0, 1) */
	int64		warm_version_id;	/* 0: a cold start; else the version whose
									 * labels start the chains (retrain, warm) */
	/* how the tokens were made, as the caller said (tokenizer => ...); "" unsaid */
	char		tokenizer[GNB_TOKENIZER_MAX + 1];
	gnb_params	sampler;		/* sweeps, burn_in, ..., the resolved seed */
	/*
	 * unlabeled_weight => NULL: sampler.unlabeled_weight is 1, and the
	 * version keeps the unlabelled documents only if the label check finds
	 * the model clearly better than the labels alone; else it is the
	 * labels-only model (unlabeled_weight 0)
	 */
	bool		unlabeled_weight_chosen;
	char		labels_schema[NAMEDATALEN];
	char		labels_table[NAMEDATALEN];
	/* the labels table the job's worker created for it (InvalidOid: none) */
	Oid			labels_reserved;
	/* for messages only, never for SQL: the source's name at call time */
	char		source_display[2 * (2 * NAMEDATALEN + 2) + 2];
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
	int64		sweeps_so_far;	/* over all chains: for the time estimate */
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

/* job_process.c: the job's memory budget */
extern void gnb_check_job_memory(const GnbJobParams *params, double in_use, double more,
								 const char *what);

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
	struct ArrayType *tokens;	/* text[]: word id + 1 -> token */
	char	  **classes;		/* class id -> class name, sorted */
	int32		n_labeled;		/* labelled documents */
	Datum	   *labeled_ids;
	int32	   *labeled_class;
	double	   *labeled_word_counts;	/* V x K word-major */
	double	   *labeled_doc_counts; /* K */
	/*
	 * When there are labelled and unlabelled documents: up to
	 * GNB_CHECKED_DOCS labelled ones (all, or the first by a seeded hash of
	 * their id) with their pairs, for
	 * the label check (gnb_label_check.h), the i-th's in word and count
	 * from checked_start[i] to checked_start[i + 1], after the unlabelled
	 * documents' (the sampler reads to doc_start[n_docs] only); their
	 * classes.
	 */
	int32		n_checked;
	int64	   *checked_start;
	int32	   *checked_class;
	/*
	 * After sampling (gnb_corpus_word_counts): each word's occurrences in
	 * the training documents, labelled or not, as the packed row's int8[];
	 * word, count and labeled_word_counts are then gone (NULL).
	 */
	struct ArrayType *word_counts;
	int32		n_skipped;		/* rows whose tokens are NULL */
	int64		n_tokens;
	/* labelled documents held out of training (holdout), with their tokens */
	int32		n_holdout;
	int32		n_holdout_skipped;	/* held out but without tokens (in n_skipped) */
	Datum	   *holdout_ids;
	Datum	   *holdout_tokens;
	char	  **holdout_labels;
} GnbCorpus;

extern char *gnb_holdout_condition(const GnbJobParams *params);
extern void gnb_read_corpus(const GnbJobParams *params, const char *source_sql,
							MemoryContext cxt, GnbCorpus *corpus);
extern void gnb_corpus_word_counts(GnbCorpus *corpus);

/* dump_size.c */
extern uint64 gnb_corpus_ids_dump_bytes(const GnbJobParams *params, const GnbCorpus *corpus);
extern void gnb_check_corpus_dumpable(const GnbJobParams *params, const GnbCorpus *corpus,
									  uint64 ids_bytes);

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
	bool		sorted;			/* the sorted format (2), not the plain one (1) */
	const char *words;			/* the first word */
	const char *cells;			/* plain: n_cells x (int32 class, int32 word, int64
								 * count); sorted: the first word's record */
	Size		size;			/* of the value's data, its header excluded */
} GnbParsedCounts;

/* A reader of a parsed value's cells, in order (gnb_counts_next). */
typedef struct GnbCountsIter
{
	const GnbParsedCounts *pc;
	int64		i;				/* cells read */
	const char *p;				/* sorted: the next cell or word record */
	int32		word;			/* sorted: the current word */
	uint64		left;			/* sorted: its cells not read yet */
} GnbCountsIter;

extern void gnb_counts_parse(bytea *value, GnbParsedCounts *pc, bool check_distinct);
extern void gnb_counts_iter_init(GnbCountsIter *it, const GnbParsedCounts *pc);
extern bool gnb_counts_next(GnbCountsIter *it, int32 *cls, int32 *word, int64 *count);

/*
 * The documents' labels of a version: n documents, their ids (in the
 * source's id type) and probabilities (n x n_classes, row-major).  The labels
 * table is written from it, and a version keeps it to be deployed again.
 */
typedef struct GnbDocLabels
{
	int64		n;
	int32		n_classes;
	Datum	   *ids;
	double	   *probs;
} GnbDocLabels;

/* publish.c: one transaction writes a finished job's model version */
extern void gnb_write_label_rows(Oid relid, const char *qualified, const char *model_owner,
								 const char *model_name, Oid id_type, char **classes,
								 const GnbDocLabels *labels, int32 version);
extern char *gnb_lock_labels_table(Oid relid, LOCKMODE mode);
extern void gnb_reserve_labels_table(GnbJobParams *params);
extern void gnb_release_labels_table(const GnbJobParams *params);
extern int32 gnb_publish(const GnbJobParams *params, const GnbCorpus *corpus,
						 gnb_result *result, double seconds_so_far);

/* store.c: the extension's tables, model names, job liveness */
typedef struct GnbPrivilegeState
{
	Oid			save_user;
	int			save_sec_context;
	int			save_nestlevel;
} GnbPrivilegeState;

typedef enum GnbRunAs
{
	GNB_AS_CALLER,				/* the current user, row security applies */
	GNB_AS_INTERNAL				/* the extension's owner */
} GnbRunAs;

extern Oid	gnb_internal_owner(void);
extern void gnb_become_internal(GnbPrivilegeState *state);
extern void gnb_become_role(Oid role, GnbPrivilegeState *state);
extern Oid	gnb_labels_table_owner(Oid relid, const char *model_owner, const char *model_name,
								   int elevel);
extern void gnb_restore_user(GnbPrivilegeState *state);
extern void gnb_pin_search_path(GnbPrivilegeState *state);
extern void gnb_execute(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, GnbRunAs as, int expected, long limit);
extern Datum gnb_result_value(int col, bool *isnull);
extern void gnb_lock_namespace_name(Oid nspid, bool nowait);
extern char *gnb_current_role_name(void);
extern const char *gnb_cluster_identity(void);
extern Oid	gnb_owner_role(const char *owner);
extern Oid	gnb_owner_role_required(const char *owner);
extern Oid	gnb_check_owner(const char *owner);
extern void gnb_register_owner(const char *owner, Oid role);
extern const char *gnb_choose_owner(const char *model_name, char **owners, int n);
extern const char *gnb_resolve_model_owner(const char *model_name, bool missing_ok);
extern char *gnb_catalog_identity(void);
extern int	gnb_pin_id_text_format(void);
extern bool gnb_labels_table_registered(const char *owner, const char *model_name, Oid relid);
extern void gnb_guard_job_locks(void);
extern void gnb_hold_job_lock(int64 job_id, Oid role);
extern void gnb_release_job_lock(int64 job_id);
extern int32 gnb_reserve_chain_slots(int32 wanted, int max_jobs, int max_jobs_per_role);
extern void gnb_release_chain_slots(void);
extern bool gnb_job_worker_alive(int64 job_id);
extern void gnb_reconcile_jobs(void);
extern void gnb_store_lock_model(const char *owner, const char *model_name);
extern int64 gnb_running_job(const char *owner, const char *model_name);
extern void gnb_launch_lock_acquire(void);
extern void gnb_launch_lock_release(void);
extern int	gnb_count_live_jobs(void);
extern int	gnb_count_role_jobs(Oid role);
extern int64 gnb_count_running_jobs_here(void);
extern void gnb_store_job_started(const GnbJobParams *p, int pid);
extern void gnb_store_job_progress(int64 job_id, int32 chain, int32 sweep, double log_joint);
extern void gnb_store_job_succeeded(const GnbJobParams *p, int32 version, double log_likelihood,
									double read_seconds, double sample_seconds,
									double publish_seconds);
extern void gnb_store_job_ended(const GnbJobParams *p, const char *status, const char *message,
								const char *sqlstate, int pid);
extern bool gnb_store_job_lookup(int64 job_id, bool *running, int *pid);
extern bool gnb_store_delete_job(int64 job_id);
extern int64 gnb_store_next_job_id(void);
extern void gnb_store_trace_rows(const GnbJobParams *params, int n, const int32 *chain,
								 const int32 *sweep, const double *log_joint,
								 const double *changed, const double *gamma_theta,
								 const double *gamma_pi);
extern struct ArrayType *gnb_store_version_warnings(const char *owner, const char *model_name,
													int32 version);

/* diagnostics.c: the warnings of a training */
extern struct ArrayType *gnb_warnings_array(const gnb_result *result, char **classes);
extern void gnb_notice_warnings(const char *owner, const char *model_name, int32 version);
extern void gnb_store_number_version(const char *owner, const char *model_name, int32 *version,
									 int64 *version_id, int32 *keep_versions);
extern void gnb_store_version(const GnbJobParams *params, const GnbCorpus *corpus,
							  gnb_result *result, struct ArrayType *warnings,
							  const GnbDocLabels *labels, int32 version, int64 version_id,
							  Oid labels_relid, int32 keep_versions, double seconds);
extern bool gnb_store_pinned(const char *owner, const char *model_name);
extern int32 gnb_store_pin(const char *owner, const char *model_name, int32 version);
extern bool gnb_store_version_labels(const char *owner, const char *model_name, int32 version,
									 GnbDocLabels *labels, char ***classes, Oid *labels_relid,
									 Oid *id_type);
extern struct ArrayType *gnb_float8_array(const double *values, int n);
extern struct ArrayType *gnb_text_array(char **values, int n);
extern struct ArrayType *gnb_text_array_strided(const char *const *strs, size_t stride,
												  const int32 *lens, int n);
extern struct ArrayType *gnb_int4_array(const int32 *values, int n);
extern struct ArrayType *gnb_fixed_array(Oid elmtype, int elmlen, int64 n, void **data);
/* store.c: this node's placement of a Citus reference table */
extern Oid	gnb_citus_local_placement(Oid relid);
/* citus.c */
extern bool gnb_citus_is_distributed(Oid relid);
extern void gnb_citus_distribute_labels(Oid labels_relid, Oid source_relid, const char *id_column);

extern int64 gnb_store_current_version_id(const char *name, TransactionId *row_xmin,
										  const char **owner_out);
extern HeapTuple gnb_store_packed_row(int64 version_id, TupleDesc *desc);

/*
 * A version's gibbs_nb.packed row, checked and unpacked (store.c,
 * gnb_store_packed_model): in the current memory context, read as the caller.
 */
typedef struct GnbPackedModel
{
	char	   *owner;
	char	   *name;
	int32		version;
	int32		n_classes;
	int32		n_words;
	Datum	   *classes;		/* K text Datums */
	const double *log_pi;		/* K */
	Datum	   *tokens;			/* V text Datums, in byte order */
	const double *log_theta;	/* V x K, word-major */
	const int64 *word_counts;	/* V: occurrences in training; NULL if not kept */
} GnbPackedModel;

extern void gnb_store_packed_model(int64 version_id, GnbPackedModel *p);
extern int32 gnb_store_newest_version(const char *owner, const char *model_name);
extern void gnb_store_holdout(const char *owner, const char *model_name, int32 version,
							  double holdout, const char *metrics_json);
extern void gnb_store_set_keep_versions(const char *owner, const char *model_name, int32 keep);
extern HeapTuple gnb_store_latest_version(const char *owner, const char *model_name,
										  TupleDesc *desc);

/* store.c: dropping versions (gibbs_nb_drop, retention) */
extern int	gnb_delete_versions(const char *owner, const char *model_name, const char *filter,
								int32 arg, List **labels_tables);
extern int	gnb_apply_retention(const char *owner, const char *model_name, int32 newest,
								int32 keep);
extern void gnb_prune_jobs(void);

/*
 * predict.c: a model version as prediction uses it.  The serving version
 * comes from the per-backend cache; a job's held-out documents are scored
 * with a model made from its arrays.  gnb_model_proba fills probs[K] as
 * gibbs_nb_predict_proba does and returns gibbs_nb_predict's class.
 */
typedef struct GnbModel GnbModel;
struct ArrayType;
extern GnbModel *gnb_serving_model(FunctionCallInfo fcinfo, struct varlena *name);
extern GnbModel *gnb_model_from_arrays(struct ArrayType *classes, struct ArrayType *log_pi,
									   struct ArrayType *tokens, struct ArrayType *log_theta);
extern int32 gnb_model_proba(const GnbModel *m, Datum tokens, bool is_tsvector, double *probs);
extern int32 gnb_model_version(const GnbModel *m);
extern int64 gnb_model_version_id(const GnbModel *m);
extern int32 gnb_model_n_classes(const GnbModel *m);
extern char *gnb_model_class(const GnbModel *m, int32 k);

/*
 * evaluate.c: classification metrics of labelled documents against a
 * model's predictions (gibbs_nb_evaluate, and a job's held-out share).
 */
typedef struct GnbMetrics GnbMetrics;
extern GnbMetrics *gnb_metrics_create(const GnbModel *m);
extern void gnb_metrics_add(GnbMetrics *mt, const char *label, int label_len,
							const double *probs, int32 predicted);
extern void gnb_metrics_skip(GnbMetrics *mt);
extern char *gnb_metrics_json(GnbMetrics *mt);

/*
 * holdout.c: a job's held-out documents scored with the version it
 * publishes: their probabilities (n_holdout x K) and metrics (as JSON).
 */
extern double *gnb_score_holdout(const GnbJobParams *params, const GnbCorpus *corpus,
								 const gnb_result *result, char **metrics_json);

/*
 * predict.c: the model version a name means for the calling role, as the
 * prediction cache holds it, its fields laid open (gnb_serving_model_view).
 * The pointers are the cache entry's: valid until the next call that may
 * load or evict a model.
 */
struct GnbVocabIndex;
typedef struct GnbServingModel
{
	const char *owner;
	const char *name;
	int32		version;
	int64		version_id;
	int32		n_classes;
	const Datum *class_texts;	/* K text Datums, in gibbs_nb_classes order */
	const double *log_pi;		/* K */
	const struct GnbVocabIndex *index;	/* token -> K log theta-hat */
} GnbServingModel;

extern void gnb_serving_model_view(FunctionCallInfo fcinfo, text *name, GnbServingModel *out);

/*
 * model_format.c: the exported model (gibbs_nb_export, gibbs_nb_import), a
 * versioned, self-describing bytea; see model_format.c and docs/reference.md.
 */
#define GNB_MODEL_FORMAT 1
#define GNB_MODEL_HAS_COUNTS 0x1

typedef struct GnbModelImage
{
	/* the parameters and figures of the version (gibbs_nb.models) */
	char	   *sampler;
	int32		sweeps;
	int32		burn_in;
	int32		lag;
	int32		chains;
	double		gamma_pi;
	double		gamma_theta;
	double		unlabeled_weight;
	int64		seed;
	int32		n_documents;
	int32		n_labeled;
	int32		n_skipped;
	int64		n_tokens;
	double		log_likelihood;
	double		r_hat;			/* NaN: none */
	int32		n_classes_arg;	/* the n_classes argument, 0: none */
	char	   *model_name;		/* as exported: informative */
	int32		version;
	char	   *source;
	char	   *tokens_column;
	char	   *label_column;	/* "" none */
	char	   *id_column;
	char	   *tokenizer;		/* "" unknown */
	/* the model */
	int32		n_classes;
	int32		n_words;
	const char **class_str;		/* not NUL-terminated: with class_len */
	int32	   *class_len;
	double	   *log_pi;
	const char **word_str;
	int32	   *word_len;
	double	   *log_theta;		/* V x K, word-major */
	int64	   *word_counts;	/* V, or NULL */
} GnbModelImage;

extern void gnb_model_image_parse(const char *data, Size size, GnbModelImage *img);
extern void gnb_model_image_write(const GnbModelImage *img, StringInfo s);
extern void gnb_check_image_dumpable(const GnbModelImage *img);

/* store.c: what export reads and import writes */
extern void gnb_store_export_params(int64 version_id, GnbModelImage *img);
extern int32 gnb_store_import(const char *model_name, GnbModelImage *img);
extern int64 gnb_store_warm_start(int64 version_id, const GnbCorpus *corpus, Oid id_type,
								  int32 *init_label);

/*
 * chains.c: the chains of a job in parallel, each in a background worker of
 * its own (the job's worker runs chain 0 and any chain no worker could be
 * started for), over the corpus shared read-only in dynamic shared memory,
 * combined in chain order.  gnb_chains_position says where the least
 * advanced chain is; gnb_chains_stop terminates the chain workers (the job
 * failed or its worker exits).
 */
typedef struct GnbChainsRun GnbChainsRun;
extern void gnb_train_parallel(GnbJobShared *job, const gnb_corpus *corpus,
							   const gnb_hooks *hooks, int32 trace_stride,
							   double memory_committed, GnbChainsRun **run,
							   gnb_result *result);
extern void gnb_chains_position(GnbChainsRun *run, int32 *chain, int32 *sweep,
								double *log_joint, int64 *sweeps_done);
extern void gnb_chains_stop(bool wait);

/* job_process.c: a job's worker or chain worker becomes the caller */
extern void gnb_become_caller(const GnbJobParams *p, const char *application_name);

/* train.c: the training path shared by gibbs_nb_train and gibbs_nb_retrain */
extern void gnb_train_call(FunctionCallInfo fcinfo, const char *model_owner,
						   int64 warm_version_id);

#endif							/* GIBBS_NB_H */
