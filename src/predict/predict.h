/*
 * predict/predict.h
 *	  Serving: a model version as prediction uses it (predict.c, with the
 *	  per-backend cache and the vocabulary index), explanations
 *	  (explain.c), metrics (evaluate.c), the theta view (theta_view.c).
 */
#ifndef GNB_PREDICT_PREDICT_H
#define GNB_PREDICT_PREDICT_H

#include "gibbs_nb.h"

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

#endif							/* GNB_PREDICT_PREDICT_H */
