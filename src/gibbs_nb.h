/*
 * gibbs_nb.h
 *	  The types and limits every group of gibbs_nb's server code shares: the
 *	  job's parameters and shared memory, the corpus a job reads, a version's
 *	  labels, the export image, and the settings.  What each group offers the
 *	  others is in its own header (train/train.h, worker/worker.h,
 *	  models/models.h, predict/predict.h, store/store.h, security/security.h,
 *	  counts/counts.h, core/gnb_sampler.h); calls go down that list only.
 *	  The statistics live in src/core (pure C, no server headers).
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
 * be longer; bounded all the same, for a backup (store/dump_size.c).
 */
#define GNB_IMPORTED_TOKENIZER_MAX (1024 * 1024)

/* Largest number of classes a model may have. */
#define GNB_MAX_CLASSES 1000
/* labelled documents the label check scores at most (gnb_label_check.h) */
#define GNB_CHECKED_DOCS 2000
/*
 * Longest label (class name) in bytes: a model's rows hold its classes, some
 * of them K times, and each must fit in a backup (store/dump_size.c).
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
 * (MaxAllocSize less the line's end): see store/dump_size.c.
 */
#define GNB_DUMP_ROW_MAX ((uint64) MaxAllocSize - 2)

/* settings (gibbs_nb.c, predict/predict.c) */
extern int	gnb_progress_interval_ms;
extern int	gnb_model_cache_kb;
extern int	gnb_max_jobs;
extern int	gnb_max_jobs_per_role;
extern int	gnb_max_jobs_per_login;
extern int	gnb_lock_timeout_ms;
extern int	gnb_max_job_memory_kb;
extern int	gnb_job_retention_s;
extern int	gnb_class_counts_budget_kb;
extern int	gnb_max_chain_workers;
extern int	gnb_sweep_workers;
extern int	gnb_blocked_nodes;


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
	Oid			id_collation;	/* the id column's */
} GnbSourceDesc;

/*
 * What a training job needs to run: fixed-size so that it travels to the
 * worker in a dynamic shared memory segment.  Names are unquoted
 * identifiers; the worker quotes them.
 */
typedef struct GnbJobParams
{
	int64		job_id;
	Oid			database_id;
	/* the caller's identity, restored by the worker (see security/identity.c) */
	Oid			authenticated_user_id;
	Oid			session_user_id;
	bool		session_user_is_superuser;
	Oid			outer_user_id;
	bool		outer_user_is_superuser;
	Oid			current_user_id;
	int			sec_context;

	/* the model: (owner, name); the owner is a role name, see security/owners.c */
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
	int32		sweep_workers;	/* blocked: processes one chain's sweeps share (1: none) */
	int32		blocked_nodes;	/* blocked: nodes through SQL (worker/nodes.h; 0: none) */
	int32		max_jobs;		/* ... gibbs_nb.max_jobs, for the chain slots */
	int32		max_jobs_per_role;	/* ... gibbs_nb.max_jobs_per_role, the same */
	int32		max_jobs_per_login;	/* ... gibbs_nb.max_jobs_per_login, the same */
	int32		lock_timeout_ms;	/* the caller's bound on lock waits (gnb_lock_wait_bound_ms) */
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
	GNB_PHASE_STARTING = 0,		/* worker launched, its locks not yet taken */
	GNB_PHASE_ADMITTED,			/* its job locks taken: the job limits count it */
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
	char		context[2048];	/* where it arose: a chain worker's lines too */
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

/*
 * A job's documents, read once (worker/corpus.c).  The documents are the unlabelled rows, as compressed sparse rows (label
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
	Datum	   *ids;			/* the source's ids, in its own type (a node's part: NULL) */
	uint64	   *doc_key;		/* sampler blocked: gnb_corpus.doc_key; else NULL */
	struct ArrayType *tokens;	/* text[]: word id + 1 -> token */
	char	  **classes;		/* class id -> class name, sorted */
	int32		n_labeled;		/* labelled documents */
	/*
	 * their ids and classes; when nodes hold the unlabelled documents, NULL
	 * (labeled_in_source): their rows are written from the source when the
	 * version is published (gnb_nodes_write_labels, gnb_nodes_store_labels),
	 * and the held-out rows are read, scored and written then too
	 * (gnb_score_holdout_rows; holdout_ids, tokens and labels NULL)
	 */
	bool		labeled_in_source;
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
	/*
	 * The unlabelled documents held by nodes (worker/nodes.h), not read here
	 * (n_docs is then 0): how many, each word's count in them (V; NULL when
	 * the documents were read), the sum of their ids and of the labelled
	 * and held-out ones' (labeled_in_source; gnb_id_sum_term), the longest
	 * of those ids as dump text (gnb_id_dump_bytes), and a warm start's
	 * first labels of those the previous version had, by key (n_warm, keys
	 * increasing): nothing held a document.
	 */
	int32		n_held;
	int64	   *unlabeled_word_count;
	uint64		source_ids_sum;
	uint64		held_id_dump_bytes;
	int64		n_warm;
	uint64	   *warm_keys;
	int32	   *warm_labels;
	/*
	 * labelled documents held out of training (holdout), with their tokens
	 * (with labeled_in_source, how many only: ids, tokens, labels NULL)
	 */
	int32		n_holdout;
	int32		n_holdout_skipped;	/* held out but without tokens (in n_skipped) */
	Datum	   *holdout_ids;
	Datum	   *holdout_tokens;
	char	  **holdout_labels;
} GnbCorpus;

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

/*
 * A model version as export writes it and import reads it (models/model_format.c,
 * store/transfer.c).
 */
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
	char	   *init;			/* how unlabelled labels started: labels, random */
	bool		unlabeled_weight_chosen;	/* unlabeled_weight => NULL */
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

#endif							/* GIBBS_NB_H */
