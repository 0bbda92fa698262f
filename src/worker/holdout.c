/*
 * holdout.c
 *	  The held-out documents of a job (gibbs_nb_train's holdout): which rows
 *	  they are (gnb_holdout_condition), and their scores under the version
 *	  the job is about to publish.
 *
 * A job whose nodes hold its documents reads its held-out rows only when
 * it publishes, GNB_HOLDOUT_FETCH at a time, each fetch scored and written
 * (gnb_score_holdout_rows): the job's worker holds no more of them at once.
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
#include "security/security.h"
#include "store/store.h"

#include <math.h>

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

/* The model of the job's estimates, as the version will be (the file's comment). */
static GnbModel *
holdout_model(const GnbCorpus *corpus, const gnb_result *result)
{
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	double	   *log_theta;
	ArrayType  *log_theta_array;
	double	   *log_pi = palloc(sizeof(double) * K);

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
	return gnb_model_from_arrays(gnb_text_array(corpus->classes, K), gnb_float8_array(log_pi, K),
								 corpus->tokens, log_theta_array);
}

/*
 * Probabilities of the held-out documents (n_holdout x K, row-major) under
 * the job's estimates; their metrics as JSON in *metrics_json.
 */
double *
gnb_score_holdout(const GnbJobParams *params, const GnbCorpus *corpus,
				  const gnb_result *result, char **metrics_json)
{
	int32		K = corpus->n_classes;
	bool		is_tsvector = params->source.tokens_base == TSVECTOROID;
	double	   *probs = palloc_extended(sizeof(double) * ((Size) corpus->n_holdout * K + 1),
										MCXT_ALLOC_HUGE);
	GnbModel   *m = holdout_model(corpus, result);
	GnbMetrics *mt;

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
 * Held-out rows a fetch (gnb_score_holdout_rows): each holds a whole
 * document, as the read's rows do, so that few are held at once; each
 * checked against the job's memory.
 */
#define GNB_HOLDOUT_FETCH 100

/* What score_holdout_fetch needs (gnb_score_holdout_rows). */
typedef struct HoldoutFetch
{
	const GnbJobParams *params;
	MemoryContext cxt;			/* the model, its metrics, the batch */
	GnbModel   *model;
	GnbMetrics *metrics;
	GnbLabelsBatchFn write;
	void	   *arg;
	GnbIdSum   *ids;
	GnbDocLabels batch;
	MemoryContext row_cxt;
} HoldoutFetch;

/* A GnbRowsFn: a fetch of held-out rows (id, tokens, label) scored and written. */
static void
score_holdout_fetch(void *arg, SPITupleTable *rows, uint64 got)
{
	HoldoutFetch *f = arg;
	const GnbJobParams *params = f->params;
	int32		K = f->batch.n_classes;
	bool		is_tsvector = params->source.tokens_base == TSVECTOROID;
	double		fetched = 0.0;

	gnb_check_result_column(rows->tupdesc, 1, params->source.id_type, "held-out rows' id");
	gnb_check_result_column(rows->tupdesc, 2, params->source.tokens_type, "held-out rows' tokens");
	gnb_check_result_column(rows->tupdesc, 3, TEXTOID, "held-out rows' label");
	f->batch.n = (int64) got;
	for (uint64 i = 0; i < got; i++)
	{
		bool		nulls[3];
		Datum		tokens;
		Datum		label;
		double	   *p = f->batch.probs + i * K;
		MemoryContext old;
		text	   *t;
		int32		predicted;

		f->batch.ids[i] = SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &nulls[0]);
		tokens = SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &nulls[1]);
		label = SPI_getbinval(rows->vals[i], rows->tupdesc, 3, &nulls[2]);
		if (nulls[0] || nulls[1] || nulls[2])
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a held-out row of gibbs_nb job " INT64_FORMAT " has no id, tokens or label",
							params->job_id)));
		/* the fetch's rows so far, within the job's budget, as the read's are */
		fetched += (double) toast_raw_datum_size(tokens) + (double) toast_raw_datum_size(label);
		gnb_check_job_memory(params, (double) MemoryContextMemAllocated(f->cxt, true), fetched,
							 "the held-out rows, read to be scored");
		gnb_check_label_length((int) (toast_raw_datum_size(label) - VARHDRSZ));
		/* (detoasted in row_cxt, gone after the row) */
		old = MemoryContextSwitchTo(f->row_cxt);
		predicted = gnb_model_proba(f->model, PointerGetDatum(PG_DETOAST_DATUM(tokens)),
									is_tsvector, p);
		t = DatumGetTextPP(label);
		gnb_metrics_add(f->metrics, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), p, predicted);
		if (f->ids)
			gnb_id_sum_add(f->ids, f->batch.ids[i]);
		MemoryContextSwitchTo(old);
		MemoryContextReset(f->row_cxt);
		if (i % 1000 == 999)
			CHECK_FOR_INTERRUPTS();
	}
	f->write(f->arg, &f->batch);
}

/*
 * The held-out rows of a job whose nodes hold its documents: not read with
 * the corpus (GnbCorpus.labeled_in_source), but when it publishes, as the
 * current user (sql gives their id, tokens, and label as text), a fetch at
 * a time (gnb_store_each_fetch), each scored as gnb_score_holdout scores it
 * and each fetch's passed to write; their ids added to ids (unless NULL),
 * their metrics as JSON in *metrics_json.  Returns how many.  SPI connected.
 */
int64
gnb_score_holdout_rows(const GnbJobParams *params, const GnbCorpus *corpus,
					   const gnb_result *result, const char *sql, GnbLabelsBatchFn write,
					   void *arg, GnbIdSum *ids, char **metrics_json)
{
	HoldoutFetch f;
	int64		n;
	MemoryContext old;

	f.params = params;
	f.cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb held-out rows",
								  ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(f.cxt);
	f.model = holdout_model(corpus, result);
	f.metrics = gnb_metrics_create(f.model);
	f.write = write;
	f.arg = arg;
	f.ids = ids;
	f.batch.n_classes = corpus->n_classes;
	f.batch.ids = palloc(sizeof(Datum) * GNB_HOLDOUT_FETCH);
	f.batch.probs = palloc(sizeof(double) * GNB_HOLDOUT_FETCH * corpus->n_classes);
	MemoryContextSwitchTo(old);
	f.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb held-out row",
									  ALLOCSET_DEFAULT_SIZES);
	for (int32 i = 0; i < corpus->n_holdout_skipped; i++)
		gnb_metrics_skip(f.metrics);
	n = gnb_store_each_fetch(sql, 0, NULL, NULL, InvalidOid, "the held-out rows",
							 GNB_HOLDOUT_FETCH, score_holdout_fetch, &f);
	MemoryContextDelete(f.row_cxt);
	*metrics_json = gnb_metrics_json(f.metrics);
	MemoryContextDelete(f.cxt);
	return n;
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
