/*
 * evaluate.c
 *	  How well a model labels documents whose labels are known:
 *	  gibbs_nb_evaluate, and the metrics a job stores for its held-out share.
 *
 * Every document is scored with gnb_model_proba (predict.c), the arithmetic
 * of gibbs_nb_predict_proba; its predicted class is gibbs_nb_predict's.  The
 * metrics follow scikit-learn's definitions (sklearn.metrics, version 1.2):
 *
 *	- the classes reported are the model's classes, in the model's order,
 *	  then the labels of the documents that the model does not know
 *	  ("unknown" labels), in byte order.  A document with an unknown label is
 *	  always an error: it counts in that label's support, never as correct.
 *	- precision_k = TP_k / (documents predicted k), recall_k = TP_k / support_k,
 *	  F1_k = 2 P R / (P + R); a 0/0 is 0, as with zero_division = "warn".
 *	  A model class that no document has and none was predicted as has no
 *	  precision, recall or F1 (NULL): scikit-learn, without labels =, does
 *	  not list it.
 *	- macro-F1 is the mean F1 over the classes that occur in the labels or
 *	  in the predictions (scikit-learn's f1_score(average = 'macro')).
 *	- log loss is the mean of -log p(true label), p clipped to [eps, 1 - eps]
 *	  with eps = DBL_EPSILON = 2.220446049250313e-16 (scikit-learn's
 *	  eps = 'auto' for float64); an unknown label has p = 0, so it costs
 *	  -log(eps) = 36.04.  (scikit-learn renormalises the clipped row; that
 *	  changes the result by at most a few units in the 16th digit.)
 *	- the confusion matrix has a row per true class and a column per
 *	  predicted class, in the order above (unknown labels' columns are 0).
 */
#include "gibbs_nb.h"

#include "predict/predict.h"
#include "store/store.h"
#include "security/security.h"
#include "counts/tokens.h"

#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

/* Rows fetched per SPI round trip. */
#define FETCH_ROWS 1000

/* The clipping of log loss: scikit-learn's eps = 'auto' for float64. */
#define LOG_LOSS_EPS DBL_EPSILON

struct GnbMetrics
{
	MemoryContext cxt;
	int32		n_classes;		/* the model's, K */
	int32		n_labels;		/* K, then the unknown labels seen */
	int32		labels_cap;
	char	  **labels;			/* label id -> text */
	vocab_hash *index;			/* label text -> label id */
	int64	   *confusion;		/* labels_cap x K: [true label][predicted class] */
	int64		n;
	int64		n_skipped;
	int64		n_unknown;
	double		log_loss_sum;
};

/* The metrics, computed: R labels in the reported order. */
typedef struct MetricsResult
{
	int32		n_rows;			/* R */
	char	  **classes;		/* R */
	double	   *precision;		/* R, NaN for "none" */
	double	   *recall;
	double	   *f1;
	int64	   *support;
	int64	   *confusion;		/* R x R */
	double		accuracy;		/* NaN when no document was scored */
	double		macro_f1;
	double		log_loss;
} MetricsResult;

static int32
intern_label(GnbMetrics *mt, const char *str, int len)
{
	bool		found;
	VocabEntry *e = vocab_insert(mt->index, token_key(str, len), &found);

	if (!found)
	{
		char	   *copy = MemoryContextAlloc(mt->cxt, len + 1);

		memcpy(copy, str, len);
		copy[len] = '\0';
		e->key.str = copy;
		if (mt->n_labels >= GNB_MAX_CLASSES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the labels and the model's classes are more than %d distinct values",
							GNB_MAX_CLASSES)));
		if (mt->n_labels == mt->labels_cap)
		{
			int32		cap = mt->labels_cap * 2;

			mt->labels = repalloc(mt->labels, sizeof(char *) * cap);
			mt->confusion = repalloc(mt->confusion, sizeof(int64) * cap * mt->n_classes);
			memset(mt->confusion + (int64) mt->labels_cap * mt->n_classes, 0,
				   sizeof(int64) * (cap - mt->labels_cap) * mt->n_classes);
			mt->labels_cap = cap;
		}
		e->id = mt->n_labels;
		mt->labels[mt->n_labels++] = copy;
	}
	return e->id;
}

/*
 * A new accumulator for documents scored with model m, in a memory context
 * of its own under the current one.
 */
GnbMetrics *
gnb_metrics_create(const GnbModel *m)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb metrics",
											  ALLOCSET_DEFAULT_SIZES);
	GnbMetrics *mt = MemoryContextAllocZero(cxt, sizeof(GnbMetrics));
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int32		K = gnb_model_n_classes(m);

	mt->cxt = cxt;
	mt->n_classes = K;
	mt->labels_cap = K + 16;
	mt->labels = palloc(sizeof(char *) * mt->labels_cap);
	mt->confusion = palloc0(sizeof(int64) * mt->labels_cap * K);
	mt->index = vocab_create(cxt, 64, NULL);
	for (int32 k = 0; k < K; k++)
	{
		char	   *name = gnb_model_class(m, k);

		if (intern_label(mt, name, strlen(name)) != k)
			elog(ERROR, "model has class \"%s\" twice", name);
	}
	MemoryContextSwitchTo(old);
	return mt;
}

/*
 * One document: its true label (len bytes, not NUL-terminated), the model's
 * probabilities (K) and predicted class.
 */
void
gnb_metrics_add(GnbMetrics *mt, const char *label, int label_len, const double *probs,
				int32 predicted)
{
	MemoryContext old = MemoryContextSwitchTo(mt->cxt);
	int32		truth = intern_label(mt, label, label_len);
	double		p = truth < mt->n_classes ? probs[truth] : 0.0;

	MemoryContextSwitchTo(old);
	mt->confusion[(int64) truth * mt->n_classes + predicted]++;
	mt->n++;
	if (truth >= mt->n_classes)
		mt->n_unknown++;
	p = Min(Max(p, LOG_LOSS_EPS), 1.0 - LOG_LOSS_EPS);
	mt->log_loss_sum -= log(p);
}

/* A document that was not scored (no label, or no tokens). */
void
gnb_metrics_skip(GnbMetrics *mt)
{
	mt->n_skipped++;
}

/* Unknown labels in byte order; sort_labels is the label texts. */
static char **sort_labels;

static int
cmp_label_id(const void *a, const void *b)
{
	return strcmp(sort_labels[*(const int32 *) a], sort_labels[*(const int32 *) b]);
}

static double
ratio(int64 num, int64 den)
{
	return den == 0 ? 0.0 : (double) num / (double) den;
}

static void
metrics_compute(GnbMetrics *mt, MetricsResult *r)
{
	int32		K = mt->n_classes;
	int32		R = mt->n_labels;
	int32	   *order = palloc(sizeof(int32) * R);	/* reported row -> label id */
	int64	   *predicted = palloc0(sizeof(int64) * K);
	int64		correct = 0;
	int32		n_present = 0;
	double		f1_sum = 0.0;

	for (int32 i = 0; i < R; i++)
		order[i] = i;
	sort_labels = mt->labels;
	qsort(order + K, R - K, sizeof(int32), cmp_label_id);

	r->n_rows = R;
	r->classes = palloc(sizeof(char *) * R);
	r->precision = palloc(sizeof(double) * R);
	r->recall = palloc(sizeof(double) * R);
	r->f1 = palloc(sizeof(double) * R);
	r->support = palloc0(sizeof(int64) * R);
	r->confusion = palloc0(sizeof(int64) * R * R);
	for (int32 i = 0; i < R; i++)
		for (int32 k = 0; k < K; k++)
		{
			int64		c = mt->confusion[(int64) order[i] * K + k];

			/* columns: the predicted class k is reported at row k */
			r->confusion[(int64) i * R + k] = c;
			r->support[i] += c;
			predicted[k] += c;
		}
	for (int32 i = 0; i < R; i++)
	{
		int64		tp = i < K ? r->confusion[(int64) i * R + i] : 0;
		int64		npred = i < K ? predicted[i] : 0;

		r->classes[i] = mt->labels[order[i]];
		correct += tp;
		if (r->support[i] == 0 && npred == 0)
		{
			r->precision[i] = r->recall[i] = r->f1[i] = NAN;
			continue;
		}
		r->precision[i] = ratio(tp, npred);
		r->recall[i] = ratio(tp, r->support[i]);
		r->f1[i] = r->precision[i] + r->recall[i] == 0.0 ? 0.0 :
			2.0 * r->precision[i] * r->recall[i] / (r->precision[i] + r->recall[i]);
		f1_sum += r->f1[i];
		n_present++;
	}
	if (mt->n == 0)
		r->accuracy = r->macro_f1 = r->log_loss = NAN;
	else
	{
		r->accuracy = (double) correct / (double) mt->n;
		r->macro_f1 = f1_sum / n_present;
		r->log_loss = mt->log_loss_sum / (double) mt->n;
	}
}

/* A number as float8out writes it (shortest exact), or null. */
static void
append_number(StringInfo buf, double v)
{
	char		digits[DOUBLE_SHORTEST_DECIMAL_LEN];

	if (isnan(v))
		appendStringInfoString(buf, "null");
	else
	{
		(void) double_to_shortest_decimal_buf(v, digits);
		appendStringInfoString(buf, digits);
	}
}

static void
append_numbers(StringInfo buf, const char *key, const double *v, int32 n)
{
	appendStringInfo(buf, ", \"%s\": [", key);
	for (int32 i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(buf, ", ");
		append_number(buf, v[i]);
	}
	appendStringInfoChar(buf, ']');
}

/*
 * The metrics as a JSON object whose keys are gibbs_nb_evaluate's columns
 * (model_name and version aside); the confusion matrix as an array of rows.
 */
char *
gnb_metrics_json(GnbMetrics *mt)
{
	MetricsResult r;
	StringInfoData buf;
	int32		R;

	metrics_compute(mt, &r);
	R = r.n_rows;
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"n_documents\": " INT64_FORMAT ", \"n_skipped\": " INT64_FORMAT
					 ", \"n_unknown\": " INT64_FORMAT ", \"accuracy\": ",
					 mt->n, mt->n_skipped, mt->n_unknown);
	append_number(&buf, r.accuracy);
	appendStringInfoString(&buf, ", \"macro_f1\": ");
	append_number(&buf, r.macro_f1);
	appendStringInfoString(&buf, ", \"log_loss\": ");
	append_number(&buf, r.log_loss);
	appendStringInfoString(&buf, ", \"classes\": [");
	for (int32 i = 0; i < R; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, r.classes[i]);
	}
	appendStringInfoChar(&buf, ']');
	append_numbers(&buf, "precision", r.precision, R);
	append_numbers(&buf, "recall", r.recall, R);
	append_numbers(&buf, "f1", r.f1, R);
	appendStringInfoString(&buf, ", \"support\": [");
	for (int32 i = 0; i < R; i++)
		appendStringInfo(&buf, "%s" INT64_FORMAT, i > 0 ? ", " : "", r.support[i]);
	appendStringInfoString(&buf, "], \"confusion\": [");
	for (int32 i = 0; i < R; i++)
	{
		appendStringInfoString(&buf, i > 0 ? ", [" : "[");
		for (int32 j = 0; j < R; j++)
			appendStringInfo(&buf, "%s" INT64_FORMAT, j > 0 ? ", " : "",
							 r.confusion[(int64) i * R + j]);
		appendStringInfoChar(&buf, ']');
	}
	appendStringInfoString(&buf, "]}");
	return buf.data;
}

static Datum
float8_array_or_nulls(const double *v, int32 n)
{
	Datum	   *d = palloc(sizeof(Datum) * n);
	bool	   *nulls = palloc(sizeof(bool) * n);
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int32 i = 0; i < n; i++)
	{
		nulls[i] = isnan(v[i]);
		d[i] = Float8GetDatum(nulls[i] ? 0.0 : v[i]);
	}
	return PointerGetDatum(construct_md_array(d, nulls, 1, dims, lbs, FLOAT8OID, sizeof(float8),
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

static Datum
int8_array(const int64 *v, int ndims, int n_rows, int n_cols)
{
	int64		n = (int64) n_rows * n_cols;
	Datum	   *d = palloc(sizeof(Datum) * (n + 1));
	int			dims[2] = {n_rows, n_cols};
	int			lbs[2] = {1, 1};

	for (int64 i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_md_array(d, NULL, ndims, dims, lbs, INT8OID, sizeof(int64),
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

PG_FUNCTION_INFO_V1(gibbs_nb_evaluate);

/*
 * gibbs_nb_evaluate(model_name text, source regclass, tokens_column text,
 *					 label_column text)
 *		returns record (model_name, version, n_documents, n_skipped,
 *		n_unknown, accuracy, macro_f1, log_loss, classes, precision, recall,
 *		f1, support, confusion)
 *
 * Scores every row of source whose label and tokens are not NULL with the
 * serving version of the model (as gibbs_nb_predict_proba would) and
 * compares the predicted class with the label (compared as text).  The
 * source is read as the caller, by OID, under a lock, with the columns'
 * types checked as gibbs_nb_train checks them.  One row; see the header
 * comment for the definitions.
 */
Datum
gibbs_nb_evaluate(PG_FUNCTION_ARGS)
{
	static const char *const arg_names[] = {"model_name", "source", "tokens_column",
	"label_column"};
	text	   *name;
	Oid			relid;
	GnbSourceDesc src;
	GnbModel   *m;
	GnbMetrics *mt;
	MetricsResult r;
	TupleDesc	result_desc;
	char	   *source_sql;
	const char *tokens_type;
	GnbPrivilegeState priv;
	Portal		portal;
	MemoryContext batch_cxt;
	Datum		values[14];
	bool		nulls[14];
	int32		K;
	int32		version;
	int64		version_id;
	double	   *probs;

	for (int arg = 0; arg < 4; arg++)
		if (PG_ARGISNULL(arg))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be NULL", arg_names[arg])));
	if (get_call_result_type(fcinfo, NULL, &result_desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "gibbs_nb_evaluate must return a row");
	name = PG_GETARG_TEXT_PP(0);
	relid = PG_GETARG_OID(1);

	m = gnb_serving_model(fcinfo, name);
	mt = gnb_metrics_create(m);
	K = gnb_model_n_classes(m);
	version = gnb_model_version(m);
	version_id = gnb_model_version_id(m);
	probs = palloc(sizeof(double) * K);

	/*
	 * The source by OID, locked while it is described and read; its name is
	 * made from the catalogs under the lock, for the one query below.
	 */
	LockRelationOid(relid, AccessShareLock);
	gnb_describe_source(relid, text_to_cstring(PG_GETARG_TEXT_PP(2)),
						text_to_cstring(PG_GETARG_TEXT_PP(3)), NULL, &src);
	source_sql = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											get_rel_name(relid));
	tokens_type = src.tokens_base == TSVECTOROID ? "pg_catalog.tsvector" : "pg_catalog.text[]";

	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb evaluate batch",
									  ALLOCSET_DEFAULT_SIZES);
	SPI_connect();
	gnb_pin_search_path(&priv);
	/* an unlabelled row's tokens are not read */
	portal = SPI_cursor_open_with_args(NULL,
									   psprintf("SELECT CASE WHEN %s IS NULL THEN NULL::%s ELSE %s::%s END, "
												"%s::pg_catalog.text FROM %s",
												quote_identifier(src.label_column), tokens_type,
												quote_identifier(src.tokens_column), tokens_type,
												quote_identifier(src.label_column), source_sql),
									   0, NULL, NULL, NULL, true, CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		MemoryContext old;

		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		gnb_check_result_column(SPI_tuptable->tupdesc, 1, src.tokens_base, "tokens");
		gnb_check_result_column(SPI_tuptable->tupdesc, 2, TEXTOID, "label");
		/*
		 * The query may have run SQL that evicted the model: ask again.  Its
		 * SQL may also have published, dropped or (SET ROLE) hidden the
		 * version being scored: every row must be scored by the same one.
		 */
		m = gnb_serving_model(fcinfo, name);
		if (gnb_model_version_id(m) != version_id)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("model \"%s\" changed while it was evaluated", text_to_cstring(name)),
					 errdetail("Reading the source ran SQL after which the name means another version.")));
		old = MemoryContextSwitchTo(batch_cxt);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[i];
			bool		tokens_null,
						label_null;
			Datum		tokens = SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &tokens_null);
			Datum		label = SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &label_null);
			text	   *t;
			int32		predicted;

			if (tokens_null || label_null)
			{
				gnb_metrics_skip(mt);
				continue;
			}
			predicted = gnb_model_proba(m, tokens, src.tokens_base == TSVECTOROID, probs);
			t = DatumGetTextPP(label);
			gnb_metrics_add(mt, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), probs, predicted);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_cxt);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	gnb_restore_user(&priv);
	SPI_finish();
	MemoryContextDelete(batch_cxt);

	metrics_compute(mt, &r);
	memset(nulls, false, sizeof(nulls));
	values[0] = PointerGetDatum(name);
	values[1] = Int32GetDatum(version);
	values[2] = Int64GetDatum(mt->n);
	values[3] = Int64GetDatum(mt->n_skipped);
	values[4] = Int64GetDatum(mt->n_unknown);
	values[5] = Float8GetDatum(r.accuracy);
	values[6] = Float8GetDatum(r.macro_f1);
	values[7] = Float8GetDatum(r.log_loss);
	nulls[5] = nulls[6] = nulls[7] = mt->n == 0;
	values[8] = PointerGetDatum(gnb_text_array(r.classes, r.n_rows));
	values[9] = float8_array_or_nulls(r.precision, r.n_rows);
	values[10] = float8_array_or_nulls(r.recall, r.n_rows);
	values[11] = float8_array_or_nulls(r.f1, r.n_rows);
	values[12] = int8_array(r.support, 1, r.n_rows, 1);
	values[13] = int8_array(r.confusion, 2, r.n_rows, r.n_rows);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(result_desc),
													  values, nulls)));
}
