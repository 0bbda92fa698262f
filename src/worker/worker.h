/*
 * worker/worker.h
 *	  What runs in a training job's background workers: the job's worker
 *	  (worker.c: where the worker starts, read, sample, publish), its memory
 *	  budget (job_memory.c), the corpus read (corpus.c), chains in parallel
 *	  (chains.c), publishing a version and its labels table (publish.c), the
 *	  held-out documents (holdout.c) and a training's warnings
 *	  (warnings.c).
 */
#ifndef GNB_WORKER_WORKER_H
#define GNB_WORKER_WORKER_H

#include "gibbs_nb.h"

#include "storage/shm_toc.h"

/* job_memory.c: the job's memory budget */
extern void gnb_check_job_memory(const GnbJobParams *params, double in_use, double more,
								 const char *what);
extern void gnb_check_job_memory_hint(const GnbJobParams *params, double in_use, double more,
									  const char *what, const char *hint);
extern void gnb_watch_source_memory(const GnbJobParams *params);
extern void gnb_unwatch_source_memory(void);
extern void gnb_source_memory_check(const GnbJobParams *params, bool in_error);

/* corpus.c: documents of the source, read once, as compressed sparse rows */
extern void gnb_read_corpus(const GnbJobParams *params, const char *source_sql,
							bool on_nodes, MemoryContext cxt, GnbCorpus *corpus);
extern void gnb_corpus_word_counts(GnbCorpus *corpus);
extern void gnb_check_warm_start_memory(const GnbJobParams *params, MemoryContext cxt);
extern void gnb_read_part(const GnbJobParams *params, const char *source_sql, int32 part,
						  int32 parts, char **vocabulary, int32 V, MemoryContext cxt,
						  GnbCorpus *corpus);

/* document_keys.c: a document's key, sums of documents' ids */
extern uint64 gnb_id_key(const GnbSourceDesc *src, Datum id);
/* a sum of documents' ids (gnb_id_sum_add, a GnbEachIdFn) */
typedef struct GnbIdSum
{
	const GnbSourceDesc *source;
	uint64		sum;
} GnbIdSum;
extern uint64 gnb_id_sum_term(const GnbSourceDesc *src, Datum id);
extern uint64 gnb_key_sum_term(uint64 key);
extern void gnb_id_sum_add(void *arg, Datum id);
extern const char *gnb_id_order_by(const GnbSourceDesc *src);

/* publish.c: one transaction writes a finished job's model version */
/* a job whose documents nodes hold (worker/nodes.h) */
struct NodesRun;
extern void gnb_write_label_rows(Oid relid, const char *qualified, const char *model_owner,
								 const char *model_name, Oid id_type, char **classes,
								 const GnbDocLabels *labels, struct NodesRun *nodes,
								 int64 n_copied, int32 version, int64 version_id);
extern char *gnb_lock_labels_table(Oid relid, LOCKMODE mode);
extern void gnb_reserve_labels_table(GnbJobParams *params);
extern void gnb_check_ids_fit_labels_table(const GnbJobParams *params, const GnbCorpus *corpus);
typedef struct GnbIdFit GnbIdFit;
extern GnbIdFit *gnb_id_fit_begin(const GnbJobParams *params);
extern void gnb_id_fits_labels_table(const GnbIdFit *fit, Datum id);
extern void gnb_release_labels_table(const GnbJobParams *params);
extern void gnb_release_lost_labels_tables(const GnbJobParams *params);
extern int32 gnb_publish(const GnbJobParams *params, const GnbCorpus *corpus,
						 struct NodesRun *nodes, gnb_result *result, double seconds_so_far);

/* warnings.c: the warnings of a training */
extern struct ArrayType *gnb_warnings_array(const gnb_result *result, char **classes);
extern void gnb_notice_warnings(const char *owner, const char *model_name, int32 version);

/*
 * holdout.c: a job's held-out documents scored with the version it
 * publishes: their probabilities (n_holdout x K) and metrics (as JSON).
 */
extern char *gnb_holdout_condition(const GnbJobParams *params);
/* a batch of documents' labels, written somewhere (gnb_score_holdout_rows) */
typedef void (*GnbLabelsBatchFn) (void *arg, const GnbDocLabels *batch);
extern int64 gnb_score_holdout_rows(const GnbJobParams *params, const GnbCorpus *corpus,
									const gnb_result *result, const char *sql,
									GnbLabelsBatchFn write, void *arg, GnbIdSum *ids,
									char **metrics_json);
extern double *gnb_score_holdout(const GnbJobParams *params, const GnbCorpus *corpus,
								 const gnb_result *result, char **metrics_json);

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

/*
 * worker_queue.c: what a job's worker does with the workers it starts:
 * raise what one said through its error queue, terminate them.
 */
struct BackgroundWorkerHandle;
struct shm_mq_handle;
extern void gnb_read_worker_messages(struct shm_mq_handle **mqh, MemoryContext message_cxt,
									 ErrorContextCallback *context_stack,
									 const char *worker_line);
extern void gnb_terminate_workers(struct BackgroundWorkerHandle **handle, int n, bool terminate,
								  bool wait, int64 job_id, const char *what);
extern int32 gnb_reserve_worker_slots(const GnbJobParams *p, int32 wanted);
extern int	gnb_report_worker_error(void);
extern shm_toc *gnb_attach_job_segment(Datum main_arg, uint64 magic, const char *type,
									   struct dsm_segment **seg);
struct dsm_segment;
extern bool gnb_start_worker(const GnbJobParams *p, const char *function, const char *type,
							 const char *name, int32 number, struct dsm_segment *seg,
							 struct BackgroundWorkerHandle **handle);

/*
 * corpus_shm.c: a job's corpus in a segment its workers map, under these
 * keys of the segment's shm_toc (key 1 is the segment's own shared struct).
 */
#define GNB_CORPUS_KEY_DOC_START	2
#define GNB_CORPUS_KEY_WORD			3
#define GNB_CORPUS_KEY_COUNT		4
#define GNB_CORPUS_KEY_LABEL		5
#define GNB_CORPUS_KEY_EXTRA_WORDS	6	/* the clamped documents' counts, if any */
#define GNB_CORPUS_KEY_EXTRA_DOCS	7
#define GNB_CORPUS_KEY_INIT_LABEL	8	/* a warm start's labels, if put in */
#define GNB_CORPUS_KEY_DOC_KEY		9	/* the documents' keys, if any */
extern void *gnb_toc_put(shm_toc *toc, uint64 key, Size bytes);
extern void gnb_corpus_shm_estimate(shm_toc_estimator *e, const gnb_corpus *corpus,
									bool with_init);
extern void gnb_corpus_shm_put(shm_toc *toc, const gnb_corpus *corpus, bool with_init);
extern void gnb_corpus_shm_get(shm_toc *toc, int32 n_docs, int32 n_words, int32 n_classes,
							   bool has_extra, bool has_init, bool has_key, gnb_corpus *corpus);

/*
 * sweeps.c: one chain's sweeps of the blocked sampler shared with sweep
 * workers (gibbs_nb_train's sweep_workers), the chains one after another;
 * gnb_sweeps_stop terminates the sweep workers.
 */
extern void gnb_train_sweeps(GnbJobShared *job, const gnb_corpus *corpus, const gnb_hooks *hooks,
							 double memory_committed, gnb_result *result);
extern void gnb_sweeps_stop(bool wait);

#endif							/* GNB_WORKER_WORKER_H */
