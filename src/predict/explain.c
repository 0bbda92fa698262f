/*
 * explain.c
 *	  Why a model labels a document as it does (gibbs_nb_explain), and which
 *	  words set a class apart (gibbs_nb_top_words).
 *
 * Both use the version prediction uses, found as prediction finds it
 * (gnb_serving_model in predict.c: the deployed version, else the latest, of
 * the model the name means for the calling role).  gibbs_nb_explain reads
 * the same cached log pi-hat and log theta-hat that gibbs_nb_predict adds
 * up, one token at a time, so that its terms add up to what
 * gibbs_nb_predict_proba computes.
 */
#include "gibbs_nb.h"

#include "predict/predict.h"
#include "store/store.h"
#include "predict/vocab_index.h"
#include "counts/tokens.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

/* One distinct known word of a document. */
typedef struct ExplainWord
{
	const char *str;
	int			len;
	int64		count;
	const double *log_theta;	/* K, the cache entry's record */
	double		margin;			/* count x (log theta_pred - log theta_runner_up) */
} ExplainWord;

typedef struct ExplainState
{
	const GnbVocabIndex *index;
	ExplainWord *words;
	int64		n;
	int64		cap;
	int64		known;			/* token occurrences the model knows */
	int64		unknown;		/* and those it does not */
} ExplainState;

/* A token of the document (a gnb_token_fn): known ones are kept. */
static void
collect_token(void *arg, const char *str, int len, int32 count)
{
	ExplainState *st = arg;
	const double *lt = gnb_vocab_index_lookup(st->index, str, len);

	if (lt == NULL)
	{
		st->unknown += count;
		return;
	}
	st->known += count;
	if (st->n == st->cap)
	{
		st->cap *= 2;
		st->words = repalloc_huge(st->words, sizeof(ExplainWord) * st->cap);
	}
	st->words[st->n].str = str;
	st->words[st->n].len = len;
	st->words[st->n].count = count;
	st->words[st->n].log_theta = lt;
	st->words[st->n].margin = 0.0;
	st->n++;
}

/* The same word has the same record: order by it to merge repeats. */
static int
cmp_record(const void *a, const void *b)
{
	const ExplainWord *x = a;
	const ExplainWord *y = b;

	return x->log_theta < y->log_theta ? -1 : x->log_theta > y->log_theta ? 1 : 0;
}

/* Largest |margin| first; ties in byte order of the token. */
static int
cmp_margin(const void *a, const void *b)
{
	const ExplainWord *x = a;
	const ExplainWord *y = b;
	double		ax = fabs(x->margin);
	double		ay = fabs(y->margin);
	int			c;

	if (ax != ay)
		return ax > ay ? -1 : 1;
	c = memcmp(x->str, y->str, Min(x->len, y->len));
	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

/* One row of gibbs_nb_explain's result. */
static void
explain_row(Tuplestorestate *ts, TupleDesc desc, const char *kind, const char *str, int len,
			bool has_count, int64 count, const double *vs, int32 K, int32 runner,
			double total, Datum predicted, Datum runner_up)
{
	Datum		values[8];
	bool		nulls[8] = {false};
	Datum	   *vs_datums = palloc(sizeof(Datum) * K);

	values[0] = CStringGetTextDatum(kind);
	if (str != NULL)
		values[1] = PointerGetDatum(cstring_to_text_with_len(str, len));
	else
		nulls[1] = true;
	values[2] = Int64GetDatum(count);
	nulls[2] = !has_count;
	values[3] = Float8GetDatum(vs[runner]);
	/* the share of the margin over the runner-up; none when there is none */
	values[4] = Float8GetDatum(vs[runner] / total);
	nulls[4] = !(total > 0.0);
	for (int32 k = 0; k < K; k++)
		vs_datums[k] = Float8GetDatum(vs[k]);
	values[5] = PointerGetDatum(construct_array(vs_datums, K, FLOAT8OID, sizeof(float8),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[6] = predicted;
	values[7] = runner_up;
	tuplestore_putvalues(ts, desc, values, nulls);
}

static Datum
explain(FunctionCallInfo fcinfo, bool is_tsvector)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GnbServingModel m;
	ExplainState st;
	int32		top;
	int32		K;
	double	   *scores;
	double	   *vs;
	double	   *rest;
	int32		pred = 0;
	int32		runner;
	int64		shown;
	int64		rest_count = 0;
	double		total;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL",
						PG_ARGISNULL(0) ? "model_name" : PG_ARGISNULL(1) ? "tokens" : "top")));
	top = PG_GETARG_INT32(2);
	if (top < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top must be 0 or more")));

	InitMaterializedSRF(fcinfo, 0);
	gnb_serving_model_view(fcinfo, PG_GETARG_TEXT_PP(0), &m);
	K = m.n_classes;

	st.index = m.index;
	st.n = 0;
	st.cap = 64;
	st.words = palloc(sizeof(ExplainWord) * st.cap);
	st.known = st.unknown = 0;
	gnb_each_token(PG_GETARG_DATUM(1), is_tsvector, collect_token, &st);

	/* repeats of a word (a text[] may hold them) are one word */
	if (st.n > 1)
	{
		int64		out = 0;

		qsort(st.words, st.n, sizeof(ExplainWord), cmp_record);
		for (int64 i = 1; i < st.n; i++)
		{
			if (st.words[i].log_theta == st.words[out].log_theta)
				st.words[out].count += st.words[i].count;
			else
				st.words[++out] = st.words[i];
		}
		st.n = out + 1;
	}

	/* the scores gibbs_nb_predict computes: log pi-hat_k + sum_w W_w log theta-hat_kw */
	scores = palloc(sizeof(double) * K);
	for (int32 k = 0; k < K; k++)
		scores[k] = m.log_pi[k];
	for (int64 i = 0; i < st.n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		for (int32 k = 0; k < K; k++)
			scores[k] += (double) st.words[i].count * st.words[i].log_theta[k];
	}
	for (int32 k = 1; k < K; k++)
		if (scores[k] > scores[pred])
			pred = k;
	runner = pred == 0 ? 1 : 0;
	for (int32 k = 0; k < K; k++)
		if (k != pred && scores[k] > scores[runner])
			runner = k;
	total = scores[pred] - scores[runner];

	for (int64 i = 0; i < st.n; i++)
		st.words[i].margin = (double) st.words[i].count *
			(st.words[i].log_theta[pred] - st.words[i].log_theta[runner]);
	qsort(st.words, st.n, sizeof(ExplainWord), cmp_margin);

	vs = palloc(sizeof(double) * K);
	rest = palloc0(sizeof(double) * K);

	/* the prior's term */
	for (int32 k = 0; k < K; k++)
		vs[k] = m.log_pi[pred] - m.log_pi[k];
	explain_row(rsinfo->setResult, rsinfo->setDesc, "prior", NULL, 0, false, 0, vs, K, runner,
				total, m.class_texts[pred], m.class_texts[runner]);

	/* the words that move the label most, then the rest of the known ones */
	shown = Min((int64) top, st.n);
	for (int64 i = 0; i < st.n; i++)
	{
		const ExplainWord *w = &st.words[i];

		CHECK_FOR_INTERRUPTS();
		for (int32 k = 0; k < K; k++)
			vs[k] = (double) w->count * (w->log_theta[pred] - w->log_theta[k]);
		if (i < shown)
			explain_row(rsinfo->setResult, rsinfo->setDesc, "word", w->str, w->len, true,
						w->count, vs, K, runner, total, m.class_texts[pred],
						m.class_texts[runner]);
		else
		{
			for (int32 k = 0; k < K; k++)
				rest[k] += vs[k];
			rest_count += w->count;
		}
	}
	if (st.n > shown)
		explain_row(rsinfo->setResult, rsinfo->setDesc, "other known words", NULL, 0, true,
					rest_count, rest, K, runner, total, m.class_texts[pred],
					m.class_texts[runner]);

	/* what the model does not know counts for nothing, but is shown */
	for (int32 k = 0; k < K; k++)
		vs[k] = 0.0;
	explain_row(rsinfo->setResult, rsinfo->setDesc, "unknown words", NULL, 0, true, st.unknown,
				vs, K, runner, total, m.class_texts[pred], m.class_texts[runner]);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(gibbs_nb_explain_text_array);
PG_FUNCTION_INFO_V1(gibbs_nb_explain_tsvector);
PG_FUNCTION_INFO_V1(gibbs_nb_top_words);

/*
 * gibbs_nb_explain(model_name text, tokens text[], top int DEFAULT 10)
 *   RETURNS TABLE (kind text, token text, count bigint, log_odds float8,
 *                  share float8, log_odds_vs float8[], predicted text,
 *                  runner_up text)
 *
 * The terms of the document's score: the prior's, the `top` known words that
 * move the label most, the rest of the known words together, and the count
 * of the words the model does not know.  log_odds is a term's share of
 * log P(predicted | W) - log P(runner_up | W); log_odds_vs the same against
 * every class (in gibbs_nb_classes order).  The rows add up to what
 * gibbs_nb_predict_proba gives.
 */
Datum
gibbs_nb_explain_text_array(PG_FUNCTION_ARGS)
{
	return explain(fcinfo, false);
}

/* gibbs_nb_explain(model_name text, tokens tsvector, top int DEFAULT 10) */
Datum
gibbs_nb_explain_tsvector(PG_FUNCTION_ARGS)
{
	return explain(fcinfo, true);
}

/* One candidate of gibbs_nb_top_words. */
typedef struct TopWord
{
	int32		word;
	double		ratio;
} TopWord;

static int
cmp_ratio(const void *a, const void *b)
{
	const TopWord *x = a;
	const TopWord *y = b;

	if (x->ratio != y->ratio)
		return x->ratio > y->ratio ? -1 : 1;
	return x->word < y->word ? -1 : x->word > y->word ? 1 : 0;
}

/*
 * gibbs_nb_top_words(model_name text, class text, n int DEFAULT 20,
 *                    min_count bigint DEFAULT 5)
 *   RETURNS TABLE (rank int, token text, log_ratio float8, theta float8,
 *                  count bigint)
 *
 * The words that most set `class` apart in the serving version: by the log
 * ratio of theta-hat for the class to theta-hat of the other classes
 * together (weighted by pi-hat: P(w | not class)), among the words seen at
 * least min_count times in training.
 */
Datum
gibbs_nb_top_words(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GnbServingModel m;
	GnbPackedModel p;
	char	   *cls;
	int32		n;
	int64		min_count;
	int32		c = -1;
	TopWord    *cand;
	int64		n_cand = 0;
	double		other_pi = 0.0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL",
						PG_ARGISNULL(0) ? "model_name" : PG_ARGISNULL(1) ? "class" :
						PG_ARGISNULL(2) ? "n" : "min_count")));
	cls = text_to_cstring(PG_GETARG_TEXT_PP(1));
	n = PG_GETARG_INT32(2);
	min_count = PG_GETARG_INT64(3);
	if (n < 0 || min_count < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be 0 or more", n < 0 ? "n" : "min_count")));

	InitMaterializedSRF(fcinfo, 0);
	gnb_serving_model_view(fcinfo, PG_GETARG_TEXT_PP(0), &m);
	SPI_connect();
	gnb_store_packed_model(m.version_id, &p);

	for (int32 k = 0; k < p.n_classes; k++)
		if (strcmp(TextDatumGetCString(p.classes[k]), cls) == 0)
			c = k;
	if (c < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model \"%s\" has no class \"%s\"", m.name, cls),
				 errhint("Its classes are gibbs_nb_classes('%s').", m.name)));
	for (int32 k = 0; k < p.n_classes; k++)
		if (k != c)
			other_pi += exp(p.log_pi[k]);

	cand = palloc_extended(sizeof(TopWord) * ((Size) p.n_words + 1), MCXT_ALLOC_HUGE);
	for (int32 w = 0; w < p.n_words; w++)
	{
		const double *lt = p.log_theta + (int64) w * p.n_classes;
		double		other = 0.0;

		CHECK_FOR_INTERRUPTS();
		if (p.word_counts != NULL && p.word_counts[w] < min_count)
			continue;
		for (int32 k = 0; k < p.n_classes; k++)
			if (k != c)
				other += exp(p.log_pi[k] + lt[k]);
		cand[n_cand].word = w;
		cand[n_cand].ratio = lt[c] - log(other / other_pi);
		n_cand++;
	}
	qsort(cand, n_cand, sizeof(TopWord), cmp_ratio);

	for (int64 i = 0; i < Min((int64) n, n_cand); i++)
	{
		int32		w = cand[i].word;
		Datum		values[5];
		bool		nulls[5] = {false};

		values[0] = Int32GetDatum((int32) i + 1);
		values[1] = p.tokens[w];
		values[2] = Float8GetDatum(cand[i].ratio);
		values[3] = Float8GetDatum(exp(p.log_theta[(int64) w * p.n_classes + c]));
		values[4] = Int64GetDatum(p.word_counts ? p.word_counts[w] : 0);
		nulls[4] = p.word_counts == NULL;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
