/*
 * test_scores.c
 *	  The collapsed sampler's conditional scores, computed as the sampler
 *	  computes them (gnb_collapsed_full_scores: the K = 2 vector path, or the
 *	  general one), against the formula of docs/model.md evaluated directly:
 *
 *	    s_k = log(C_k^-j + g_pi)
 *	        + sum_w [lgamma(N_kw^-j + W_jw + g) - lgamma(N_kw^-j + g)]
 *	        - [lgamma(N_k^-j + R_j + V g) - lgamma(N_k^-j + V g)]
 *
 *	  with each lgamma difference, a log rising factorial, summed as
 *	  sum_{i < c} log(x + i) in long double (exact to long double rounding for
 *	  any x, where a difference of two lgamma values loses digits when x is
 *	  large).
 *
 *	  The sampler's internals are reached through src/core/gnb_internal.h.
 *	  Ends with the line "N passed, N failed".
 */
#define _DEFAULT_SOURCE
#include "gnb_internal.h"

#include <float.h>
#include <stdio.h>

#include "check.h"

/*
 * Tolerance: the sampler's error comes from the rounding of each factor of
 * the rising factorials (a few ulps relative, so a few ulps of 1 absolute per
 * token), of the exponent times log 2, and of the lgamma values it still
 * uses (a few ulps of their magnitude each).  So the bound is
 * GNB_TOL_ULPS * DBL_EPSILON times the tokens plus the summed magnitudes of
 * all the lgamma values of the formula (which bound the exponents too).
 */
#define GNB_TOL_ULPS 64.0

#define T_MAX_DOCS 16
#define T_MAX_WORDS 800
#define T_MAX_PAIRS 4096

typedef struct test_corpus
{
	int64_t		doc_start[T_MAX_DOCS + 1];
	int32_t		word[T_MAX_PAIRS];
	int32_t		count[T_MAX_PAIRS];
	int32_t		label[T_MAX_DOCS];
	int32_t		z[T_MAX_DOCS];
	double		extra_word[T_MAX_WORDS * 3];
	double		extra_doc[3];
	gnb_corpus	c;
} test_corpus;

/* A count: mostly 1 to 4, some 5 to 40, a few past 256 (the lgamma tail). */
static int32_t
draw_count(gnb_rng *rng)
{
	double		u = gnb_rng_uniform(rng);

	if (u < 0.6)
		return 1;
	if (u < 0.75)
		return 2 + (int32_t) (gnb_rng_uniform(rng) * 3);
	if (u < 0.95)
		return 5 + (int32_t) (gnb_rng_uniform(rng) * 36);
	if (u < 0.98)
		return 41 + (int32_t) (gnb_rng_uniform(rng) * 200);
	return 257 + (int32_t) (gnb_rng_uniform(rng) * 400);
}

/*
 * K = 2 (or 3), D documents, V words: document 0 has 600 distinct words (more
 * than a block of the K = 2 path), the others up to 40; every other document
 * clamped; extra counts (each about `extra`, 0 for none) make N large.
 */
static void
make_corpus(test_corpus *t, uint64_t seed, int32_t K, int32_t D, int32_t V, double extra,
			int fractional)
{
	gnb_rng		rng;
	int64_t		pos = 0;
	char		used[T_MAX_WORDS];

	memset(t, 0, sizeof(*t));
	gnb_rng_seed(&rng, seed);
	for (int32_t j = 0; j < D; j++)
	{
		int32_t		len = j == 0 ? 600 : (int32_t) (gnb_rng_uniform(&rng) * 41);

		memset(used, 0, sizeof(used));
		t->doc_start[j] = pos;
		for (int32_t i = 0; i < len; i++)
		{
			int32_t		w = (int32_t) (gnb_rng_uniform(&rng) * V);

			if (used[w])
				continue;
			used[w] = 1;
			t->word[pos] = w;
			t->count[pos] = draw_count(&rng);
			pos++;
		}
		t->label[j] = j % 2 ? (int32_t) (gnb_rng_uniform(&rng) * K) : -1;
		t->z[j] = t->label[j] >= 0 ? t->label[j] : (int32_t) (gnb_rng_uniform(&rng) * K);
	}
	t->doc_start[D] = pos;
	t->c = (gnb_corpus) {D, V, K, t->doc_start, t->word, t->count, t->label, NULL, NULL};
	if (extra > 0.0)
	{
		for (int32_t i = 0; i < V * K; i++)
		{
			double		n = floor(extra * gnb_rng_uniform(&rng));

			t->extra_word[i] = fractional ? n + gnb_rng_uniform(&rng) : n;
		}
		for (int32_t k = 0; k < K; k++)
			t->extra_doc[k] = 3.0 + k;
		t->c.extra_word_counts = t->extra_word;
		t->c.extra_doc_counts = t->extra_doc;
	}
}

/* log x (x + 1) ... (x + c - 1) in long double, term by term */
static long double
log_rising_ref(long double x, int64_t c)
{
	long double s = 0.0L;

	for (int64_t i = 0; i < c; i++)
		s += logl(x + i);
	return s;
}

/*
 * Compare gnb_collapsed_full_scores with the formula for every unlabelled
 * document of t, under gamma_theta g and unlabeled_weight lambda (the
 * full-weight scores: what a kept sweep's predictive uses when lambda < 1).
 * Returns the largest error as a share of its tolerance.
 */
static double
compare_scores(const char *name, test_corpus *t, double g, double lambda)
{
	const gnb_corpus *c = &t->c;
	const int32_t K = c->n_classes;
	const int32_t V = c->n_words;
	gnb_params	p = {0};
	run_shared	sh;
	chain_state st;
	double		worst = 0.0;
	int			bad = 0;

	p.sampler = GNB_SAMPLER_COLLAPSED;
	p.sweeps = 2;
	p.burn_in = 1;
	p.lag = 1;
	p.chains = 1;
	p.gamma_pi = 0.7;
	p.gamma_theta = g;
	p.unlabeled_weight = lambda;
	gnb_setup_shared(&sh, c, &p, &gnb_default_hooks, 1);
	memset(&st, 0, sizeof(st));
	st.sh = &sh;
	st.lambda = lambda;
	st.g_theta = g;
	st.g_pi = p.gamma_pi;
	st.z = t->z;
	st.C = calloc(K, sizeof(double));
	st.N = calloc((size_t) V * K + 1, sizeof(double));
	st.Nk = calloc(K, sizeof(double));
	st.log_prior = calloc(K, sizeof(double));
	st.log_prior_own = calloc(K, sizeof(double));
	st.log_pred = calloc(K, sizeof(double));
	st.log_pred_own = calloc(K, sizeof(double));
	st.products = calloc(K, sizeof(log_product));
	for (int32_t j = 0; j < c->n_docs; j++)
		add_doc_counts(&sh, st.N, st.Nk, st.C, j, t->z[j], doc_weight(&sh, j));
	if (c->extra_word_counts)
	{
		for (int32_t i = 0; i < V * K; i++)
		{
			st.N[i] += c->extra_word_counts[i];
			st.Nk[i % K] += c->extra_word_counts[i];
		}
		for (int32_t k = 0; k < K; k++)
			st.C[k] += c->extra_doc_counts[k];
	}
	for (int32_t k = 0; k < K; k++)
		refresh_prior(&st, k);

	for (int32_t i = 0; i < sh.n_unlabeled; i++)
	{
		int32_t		j = sh.unlabeled[i];
		int32_t		a = t->z[j];
		double		s[3];

		gnb_collapsed_full_scores(&st, j, a, s);
		for (int32_t k = 0; k < K; k++)
		{
			long double own = k == a ? lambda : 0.0L;
			long double nk = (long double) (st.Nk[k] - (double) own * sh.doc_length[j]) +
				(long double) V * g;
			long double ref = logl((long double) st.C[k] - own + st.g_pi);
			double		scale = sh.doc_length[j] + fabs(log(st.C[k] - (double) own + st.g_pi));
			double		tol,
						err;

			for (int64_t q = c->doc_start[j]; q < c->doc_start[j + 1]; q++)
			{
				/*
				 * N_kw^-j as the sampler holds it: its double count less the
				 * document's share, in double (with lambda < 1 that share is
				 * rounded; the formula is evaluated exactly from there)
				 */
				double		n_minus = st.N[(int64_t) c->word[q] * K + k] - (double) own * c->count[q];
				long double x = (long double) n_minus + g;

				ref += log_rising_ref(x, c->count[q]);
				scale += fabs(lgamma((double) x + c->count[q])) + fabs(lgamma((double) x));
			}
			ref -= log_rising_ref(nk, (int64_t) sh.doc_length[j]);
			scale += fabs(lgamma((double) nk + sh.doc_length[j])) + fabs(lgamma((double) nk));
			tol = GNB_TOL_ULPS * DBL_EPSILON * scale;
			err = fabs(s[k] - (double) ref);
			if (!(err <= tol))
			{
				if (bad++ < 3)
					printf("  %s: document %d class %d: %.17g, formula %.17Lg (tolerance %.3g)\n",
						   name, j, k, s[k], ref, tol);
			}
			if (err / tol > worst)
				worst = err / tol;
		}
	}
	CHECK(bad == 0, "%s: %d scores off the formula", name, bad);

	gnb_release_shared(&sh);
	free(st.C);
	free(st.N);
	free(st.Nk);
	free(st.log_prior);
	free(st.log_prior_own);
	free(st.log_pred);
	free(st.log_pred_own);
	free(st.products);
	return worst;
}

static void
test_collapsed_scores(void)
{
	/*
	 * gamma_theta from below the K = 2 path's range (2^-60: then the general
	 * path) to far above GNB_GAMMA_MAX; N from the corpus alone to about
	 * 10^15 per entry (extra counts), integer and not.
	 */
	static const double gammas[] = {1e-300, 1e-20, 0x1p-60, 1e-12, 1e-3, 0.05, 1.0, 7.5, 1e3, 1e6, 1e12};
	static const double extras[] = {0.0, 50.0, 1e6, 1e15};
	double		worst = 0.0;
	int			cases = 0;

	for (int32_t K = 2; K <= 3; K++)
		for (size_t gi = 0; gi < sizeof(gammas) / sizeof(gammas[0]); gi++)
			for (size_t ei = 0; ei < sizeof(extras) / sizeof(extras[0]); ei++)
				for (int lw = 0; lw < 2; lw++)
				{
					/*
					 * lambda < 1 only for gamma_theta >= GNB_GAMMA_MIN: the
					 * counts are sums of lambda W_jw, and taking a document's
					 * share out of them leaves a rounding residue of about
					 * 1e-16 N, which a tinier gamma_theta does not dominate
					 * (x = N^-j + g is then not determined by the state)
					 */
					if (lw && gammas[gi] < GNB_GAMMA_MIN)
						continue;

					test_corpus *t = malloc(sizeof(test_corpus));
					char		name[160];
					double		lambda = lw ? 0.35 : 1.0;
					double		w;

					make_corpus(t, 1000 + 37 * gi + 5 * ei + lw + 100 * K, K, 12, 700,
								extras[ei], ei == 2);
					snprintf(name, sizeof(name), "K=%d gamma_theta=%g extra=%g lambda=%g",
							 K, gammas[gi], extras[ei], lambda);
					w = compare_scores(name, t, gammas[gi], lambda);
					if (w > worst)
						worst = w;
					cases++;
					free(t);
				}
	printf("collapsed scores against the formula: %d cases, largest error %.3g of its tolerance "
		   "(%g ulps of the summed lgamma magnitudes)\n", cases, worst, GNB_TOL_ULPS);
}

/*
 * lgamma_diff against the sum of logs in long double, for x from below
 * GNB_STIRLING_MIN (lgamma) to 1e18 and c from 0 to 10^5, integer and not
 * (the tempered scores pass lambda c).  Tolerance: GNB_TOL_ULPS ulps of 1 +
 * c |log(x + c)|, plus |lgamma(x)| + |lgamma(x + c)| below GNB_STIRLING_MIN
 * (what a difference of lgamma values loses).
 */
static void
test_lgamma_diff(void)
{
	static const double xs[] = {0.3, 1.0, 5.5, 31.999, 32.0, 33.7, 100.0, 1234.5, 1e5 + 0.25,
	3e6, 1e9, 123456789012.5, 1e15, 1e18};
	static const double cs[] = {0.0, 0.35, 1.0, 2.0, 3.0, 7.0, 8.5, 33.0, 257.0, 1000.0, 4321.0, 1e5};
	int			bad = 0;
	double		worst = 0.0;

	for (size_t xi = 0; xi < sizeof(xs) / sizeof(xs[0]); xi++)
		for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ci++)
		{
			double		x = xs[xi],
						c = cs[ci];
			long double ref = 0.0L;
			double		got = lgamma_diff(x, c);
			double		tol,
						err;

			/*
			 * A non-integer c's fractional part is referred to lgammal, whose
			 * difference loses 1e-19 |lgammal(x)|: only up to x = 1e4 is that
			 * well below the tolerance (the same code serves both kinds of c)
			 */
			if (c != floor(c) && x > 1e4)
				continue;
			if (c == floor(c))
				for (int64_t i = 0; i < (int64_t) c; i++)
					ref += logl((long double) x + i);
			else
			{
				/* non-integer c: the integer part term by term, the rest by lgammal at x + floor(c) */
				long double xf = (long double) x + floor(c);

				for (int64_t i = 0; i < (int64_t) floor(c); i++)
					ref += logl((long double) x + i);
				ref += lgammal(xf + (c - floor(c))) - lgammal(xf);
			}
			tol = GNB_TOL_ULPS * DBL_EPSILON * (1.0 + c * fabs(log(x + c)) +
												(x < GNB_STIRLING_MIN ? fabs(lgamma(x)) + fabs(lgamma(x + c)) : 0.0));
			err = fabs(got - (double) ref);
			if (!(err <= tol) && bad++ < 5)
				printf("  lgamma_diff(%.17g, %g) = %.17g, reference %.17Lg (tolerance %.3g)\n",
					   x, c, got, ref, tol);
			if (err / tol > worst)
				worst = err / tol;
		}
	CHECK(bad == 0, "lgamma_diff: %d values off", bad);
	printf("lgamma_diff against the sum of logs: largest error %.3g of its tolerance\n", worst);
}

int
main(void)
{
	test_lgamma_diff();
	test_collapsed_scores();
	return check_report();
}
