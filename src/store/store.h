/*
 * store/store.h
 *	  Every statement on the extension's tables: job locks and limits
 *	  (job_locks.c), job rows (jobs.c), writing a version (versions.c), what
 *	  prediction reads (packed.c), export, import and warm starts
 *	  (transfer.c), dropping and deploying (retention.c), statement
 *	  parameters (arrays.c), a row's size in a backup (dump_size.c), and
 *	  Citus placement (citus.c).  The schema is named GNB_SCHEMA in C and
 *	  "gibbs_nb" in the statements' text.
 */
#ifndef GNB_STORE_STORE_H
#define GNB_STORE_STORE_H

#include "gibbs_nb.h"

/* job_locks.c */
extern void gnb_guard_job_locks(void);
extern void gnb_hold_job_lock(int64 job_id, Oid role, Oid login);
extern void gnb_check_job_limits(int max_jobs, int max_jobs_per_role, int max_jobs_per_login,
								 Oid role, Oid login);
extern void gnb_lock_model_registration(const char *owner, const char *model_name);
extern void gnb_refuse_running_model(const char *model_name, int64 running);
extern void gnb_release_job_lock(int64 job_id);
extern int32 gnb_reserve_chain_slots(int32 wanted, int max_jobs, int max_jobs_per_role,
									 int max_jobs_per_login);
extern void gnb_release_chain_slots(void);
extern bool gnb_job_worker_alive(int64 job_id);
extern void gnb_reconcile_jobs(void);
extern void gnb_store_job_labels_reserved(int64 job_id, Oid relid);
extern int	gnb_store_lost_reservations(const char *owner, const char *model_name, int max,
										int64 **jobs, char ***owners, char ***models,
										Oid **relids);
extern void gnb_store_lost_reservation_settled(int64 job_id);
extern bool gnb_store_left_by_lost_job(const char *owner, const char *model_name, Oid relid);
extern int64 gnb_running_job(const char *owner, const char *model_name);
extern void gnb_launch_lock_acquire(void);
extern void gnb_launch_lock_release(void);
extern int	gnb_count_live_jobs(void);
extern int	gnb_count_role_jobs(Oid role);
extern int	gnb_count_login_jobs(Oid login);
extern int64 gnb_count_running_jobs_here(void);
extern void gnb_prune_jobs(void);

/* jobs.c */
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

/* arrays.c */
extern struct ArrayType *gnb_float8_array(const double *values, int n);
extern struct ArrayType *gnb_text_array(char **values, int n);
extern struct ArrayType *gnb_text_array_strided(const char *const *strs, size_t stride,
												  const int32 *lens, int n);
extern struct ArrayType *gnb_int4_array(const int32 *values, int n);
extern struct ArrayType *gnb_fixed_array(Oid elmtype, int elmlen, int64 n, void **data);
extern int32 gnb_labels_batch_size(const Datum *ids, int64 n, int32 n_classes, int16 typlen,
								   bool typbyval);

/*
 * Documents' labels are written a batch at a time: a batch's ids as an
 * array, and its probabilities as one row-major array, K a document; at
 * most GNB_LABELS_BATCH documents whose ids and probabilities take at most
 * GNB_LABELS_BATCH_BYTES (an array is at most 1 GB; ids may be long), or
 * one document alone.  GNB_BATCH_ROW_SQL(probs, o, k) is the SQL of the o-th
 * document's K of them (o from 1, a slice: its bounds renumbered from 1).
 * They are read GNB_LABELS_FETCH rows at a time.
 */
#define GNB_LABELS_BATCH 50000
#define GNB_LABELS_BATCH_BYTES (64 * 1024 * 1024)
#define GNB_LABELS_FETCH 10000
#define GNB_BATCH_ROW_SQL(probs, o, k) \
	probs "[((" o " OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) " k \
	" OPERATOR(pg_catalog.+) 1)::pg_catalog.int4 : (" o " OPERATOR(pg_catalog.*) " k \
	")::pg_catalog.int4]"

/* versions.c */
extern int	gnb_pin_id_text_format(void);
extern void gnb_store_lock_model(const char *owner, const char *model_name);
extern void gnb_store_trace_rows(const GnbJobParams *params, int n, const int32 *chain,
								 const int32 *sweep, const double *log_joint,
								 const double *changed, const double *gamma_theta,
								 const double *gamma_pi);
extern void gnb_store_number_version(const char *owner, const char *model_name, int32 *version,
									 int64 *version_id, int32 *keep_versions);
extern void gnb_store_version(const GnbJobParams *params, const GnbCorpus *corpus,
							  gnb_result *result, struct ArrayType *warnings,
							  const GnbDocLabels *labels, int32 version, int64 version_id,
							  Oid labels_relid, int32 keep_versions, double seconds);
/* a fetch of a cursor's rows (gnb_store_each_fetch) */
struct SPITupleTable;
typedef void (*GnbRowsFn) (void *arg, struct SPITupleTable *rows, uint64 n);
extern int64 gnb_store_each_fetch(const char *sql, int nargs, Oid *types, Datum *values,
								  Oid reader, const char *what, int32 fetch, GnbRowsFn fn,
								  void *arg);
/* called with each id of the rows a query of documents' labels gives, or NULL */
typedef void (*GnbEachIdFn) (void *arg, Datum id);
extern void gnb_store_document_labels_from(const GnbJobParams *params, Oid relid,
										   const char *qualified, int32 version,
										   int64 version_id, int32 n_classes, int64 expected,
										   GnbEachIdFn each_id, void *each_arg);
extern void gnb_store_document_labels_batch(const GnbJobParams *params,
											const GnbDocLabels *labels, int64 version_id);
extern int64 gnb_store_document_labels_of(const GnbJobParams *params, const char *sql, int nargs,
										  Oid *types, Datum *values, const char *what,
										  int64 version_id, int32 n_classes,
										  GnbEachIdFn each_id, void *each_arg);
/* a document's id (as text) and its probabilities, in its version's class order */
typedef void (*GnbDocumentLabelFn) (void *arg, const struct varlena *id, const double *probs,
									int n_probs);
extern int64 gnb_store_each_document_label(int64 version_id, bool internal,
										   GnbDocumentLabelFn fn, void *arg);
extern void gnb_store_holdout(const char *owner, const char *model_name, int32 version,
							  double holdout, const char *metrics_json);

/* packed.c */
extern Oid	gnb_citus_local_placement(Oid relid);
extern int64 gnb_store_current_version_id(const char *name, TransactionId *row_xmin,
										  const char **owner_out);
extern HeapTuple gnb_store_packed_row(int64 version_id, TupleDesc *desc);

/*
 * A version's gibbs_nb.packed row, checked and unpacked (packed.c,
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

/* transfer.c */
extern void gnb_store_export_params(int64 version_id, GnbModelImage *img);
extern int32 gnb_store_import(const char *model_name, GnbModelImage *img);
extern double gnb_store_warm_start_memory(int64 version_id);
/* a previous version's documents' ids' text and classes, for a warm start */
typedef struct GnbWarmList GnbWarmList;
extern GnbWarmList *gnb_store_warm_list(int64 version_id);
extern int32 *gnb_warm_class_map(const GnbWarmList *w, char **classes, int32 K);
extern int32 gnb_warm_list_class(const GnbWarmList *w, const char *text);
extern int64 gnb_store_warm_start(int64 version_id, const GnbCorpus *corpus, Oid id_type,
								  int32 *init_label);

/* retention.c */
extern int	gnb_delete_versions(const char *owner, const char *model_name, const char *filter,
								int32 arg, List **labels_tables);
extern int	gnb_apply_retention(const char *owner, const char *model_name, int32 newest,
								int32 keep);
extern int32 gnb_store_newest_version(const char *owner, const char *model_name);
extern void gnb_store_set_keep_versions(const char *owner, const char *model_name, int32 keep);
extern HeapTuple gnb_store_latest_version(const char *owner, const char *model_name,
										  TupleDesc *desc);
extern struct ArrayType *gnb_store_version_warnings(const char *owner, const char *model_name,
													int32 version);
extern bool gnb_store_pinned(const char *owner, const char *model_name);
extern int32 gnb_store_serving_version(const char *owner, const char *model_name);
extern int32 gnb_store_pin(const char *owner, const char *model_name, int32 version);
extern bool gnb_store_version_labels(const char *owner, const char *model_name, int32 version,
									 GnbDocLabels *labels, char ***classes, Oid *labels_relid,
									 Oid *id_type);

/* dump_size.c */
extern Datum gnb_published_id(const GnbCorpus *corpus, int64 i);
extern uint64 gnb_id_dump_bytes(const char *text);
extern int64 gnb_published_labels(const GnbJobParams *params, const GnbCorpus *corpus);
extern uint64 gnb_corpus_longest_id_dump_bytes(const GnbJobParams *params,
											   const GnbCorpus *corpus);
extern void gnb_check_corpus_dumpable(const GnbJobParams *params, const GnbCorpus *corpus,
									  uint64 longest_id_bytes);
extern void gnb_check_image_dumpable(const GnbModelImage *img);

/* citus.c */
extern bool gnb_citus_is_distributed(Oid relid);
extern void gnb_citus_distribute_labels(Oid labels_relid, Oid source_relid, const char *id_column);
extern char *gnb_citus_hash_column(Oid relid);
extern char *gnb_citus_nodes_column(Oid relid);
extern char **gnb_citus_shard_anchors(Oid relid, const char *column, MemoryContext cxt, int *n);
extern List *gnb_citus_owned_shards(Oid relid);

#endif							/* GNB_STORE_STORE_H */
