/*
 * holdout.c
 *	  The held-out documents of a job (gibbs_nb_train's holdout): which rows
 *	  they are (gnb_holdout_condition), and their scores under the version
 *	  the job is about to publish.
 *
 * The model is made from the job's estimates exactly as gibbs_nb.packed
 * stores them (log theta-hat word-major, log pi-hat; see store/versions.c's
 * write_packed) and scored by predict.c's gnb_model_proba, so each held-out
 * document gets the probabilities gibbs_nb_predict_proba will give it once
 * the version serves, and the metrics are gibbs_nb_evaluate's on those rows.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "predict/predict.h"
#include "store/store.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

/*
 * Probabilities of the held-out documents (n_holdout x K, row-major) under
 * the job's estimates; their metrics as JSON in *metrics_json.
 */
double *
gnb_score_holdout(const GnbJobParams *params, const GnbCorpus *corpus,
				  const gnb_result *result, char **metrics_json)
{
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	bool		is_tsvector = params->source.tokens_base == TSVECTOROID;
	double	   *log_theta;
	ArrayType  *log_theta_array;
	double	   *log_pi = palloc(sizeof(double) * K);
	double	   *probs = palloc_extended(sizeof(double) * ((Size) corpus->n_holdout * K + 1),
										MCXT_ALLOC_HUGE);
	GnbModel   *m;
	GnbMetrics *mt;

	if ((int64) V * K > MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%d words x %d classes are too many to score the held-out rows", V, K)));
	log_theta_array = gnb_fixed_array(FLOAT8OID, sizeof(float8), (int64) V * K, (void **) &log_theta);
	for (int32 w = 0; w < V; w++)
		for (int32 k = 0; k < K; k++)
			log_theta[(int64) w * K + k] = log(result->theta[(int64) k * V + w]);
	for (int32 k = 0; k < K; k++)
		log_pi[k] = log(result->pi[k]);
	m = gnb_model_from_arrays(gnb_text_array(corpus->classes, K), gnb_float8_array(log_pi, K),
							  corpus->tokens,
							  log_theta_array);
	mt = gnb_metrics_create(m);
	for (int32 i = 0; i < corpus->n_holdout_skipped; i++)
		gnb_metrics_skip(mt);
	for (int32 i = 0; i < corpus->n_holdout; i++)
	{
		double	   *p = probs + (int64) i * K;
		int32		predicted = gnb_model_proba(m, corpus->holdout_tokens[i], is_tsvector, p);

		gnb_metrics_add(mt, corpus->holdout_labels[i], strlen(corpus->holdout_labels[i]), p,
						predicted);
		if (i % 1000 == 999)
			CHECK_FOR_INTERRUPTS();
	}
	*metrics_json = gnb_metrics_json(mt);
	return probs;
}

/*
 * The condition that holds out a labelled row, as SQL over the source's
 * columns, or NULL without holdout: the row's id as text, hashed with the
 * seed (hashtextextended, collation "C": the bytes, whatever the id's
 * collation), has its low 53 bits below holdout x 2^53.  The
 * same rows for the same seed and data, whatever the scan order; a user can
 * select them with the same expression.
 */
char *
gnb_holdout_condition(const GnbJobParams *params)
{
	const GnbSourceDesc *src = &params->source;
	int64		threshold;

	if (params->holdout <= 0.0 || src->label_attnum == 0)
		return NULL;
	threshold = (int64) floor(params->holdout * 9007199254740992.0);
	return psprintf("(%s IS NOT NULL AND (pg_catalog.hashtextextended(%s::pg_catalog.text COLLATE pg_catalog.\"C\", "
					"(" INT64_FORMAT ")::pg_catalog.int8) OPERATOR(pg_catalog.&) "
					"9007199254740991::pg_catalog.int8) OPERATOR(pg_catalog.<) "
					"(" INT64_FORMAT ")::pg_catalog.int8)",
					quote_identifier(src->label_column), quote_identifier(src->id_column),
					(int64) params->sampler.seed, threshold);
}
