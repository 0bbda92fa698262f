/*
 * test_core.c
 *	  Unit tests of the sampler core (src/core), no PostgreSQL needed.
 *
 * Statistical checks compare with exact answers; every tolerance is a
 * multiple of a Monte-Carlo standard error measured in the same run (from
 * independent replicates), never a number copied from an earlier run.  All
 * seeds are fixed, so a run is repeatable.
 *
 * Ends with the line "N passed, N failed".
 */
#define _DEFAULT_SOURCE
#include "gnb_rng.h"
#include "gnb_sampler.h"
#include "gnb_nodes.h"
#include "gnb_label_check.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* How many standard errors an estimate may be from the exact value. */
#define Z_TOLERANCE 5.0
/* check_against_exact: a marginal below RARE: its error floor from draws RARE_RUN sweeps apart */
#define RARE 0.01
#define RARE_RUN 20.0

/* ---------- special functions for the exact answers ---------- */

static double
digamma(double x)
{
	double		r = 0.0;

	while (x < 6.0)
	{
		r -= 1.0 / x;
		x += 1.0;
	}
	return r + log(x) - 1.0 / (2 * x) - 1.0 / (12 * x * x) + 1.0 / (120 * pow(x, 4)) -
		1.0 / (252 * pow(x, 6));
}

static double
trigamma(double x)
{
	double		r = 0.0;

	while (x < 6.0)
	{
		r += 1.0 / (x * x);
		x += 1.0;
	}
	return r + 1.0 / x + 1.0 / (2 * x * x) + 1.0 / (6 * pow(x, 3)) - 1.0 / (30 * pow(x, 5)) +
		1.0 / (42 * pow(x, 7)) - 1.0 / (30 * pow(x, 9));
}

/* CDF of Gamma(shape, 1) for the shapes the KS tests use. */
static double
gamma_cdf(double shape, double x)
{
	if (x <= 0)
		return 0.0;
	if (shape == 0.5)
		return erf(sqrt(x));
	if (shape == 1.5)
		return erf(sqrt(x)) - 2.0 * sqrt(x / M_PI) * exp(-x);
	if (shape == 2.5)
		return erf(sqrt(x)) - 2.0 * sqrt(x / M_PI) * exp(-x) * (1.0 + 2.0 * x / 3.0);
	/* integer shape: Erlang */
	{
		double		term = 1.0,
					sum = 1.0;

		for (int i = 1; i < (int) shape; i++)
		{
			term *= x / i;
			sum += term;
		}
		return 1.0 - exp(-x) * sum;
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* sqrt(n) * KS statistic of a sample against a CDF. */
static double
ks_scaled(double *xs, int n, double (*cdf) (double, double), double shape)
{
	double		d = 0.0;

	qsort(xs, n, sizeof(double), cmp_double);
	for (int i = 0; i < n; i++)
	{
		double		f = cdf(shape, xs[i]);
		double		lo = f - (double) i / n,
					hi = (double) (i + 1) / n - f;

		if (lo > d)
			d = lo;
		if (hi > d)
			d = hi;
	}
	return d * sqrt(n);
}

static double
normal_cdf(double unused, double x)
{
	(void) unused;
	return 0.5 * erfc(-x / sqrt(2.0));
}

/* ---------- RNG and distributions ---------- */

static void
test_rng_streams(void)
{
	gnb_rng		a,
				b,
				c;
	int			same = 1;
	int			differ = 0;

	gnb_rng_seed(&a, 42);
	gnb_rng_seed(&b, 42);
	gnb_rng_seed(&c, 43);
	for (int i = 0; i < 1000; i++)
	{
		uint64_t	x = gnb_rng_next(&a),
					y = gnb_rng_next(&b),
					z = gnb_rng_next(&c);

		same &= (x == y);
		differ += (x != z);
	}
	CHECK(same, "same seed must give the same stream");
	CHECK(differ == 1000, "seeds 42 and 43 gave %d equal draws of 1000", 1000 - differ);

	gnb_rng_seed(&a, 42);
	gnb_rng_seed(&b, 42);
	gnb_rng_jump(&b);
	differ = 0;
	for (int i = 0; i < 1000; i++)
		differ += (gnb_rng_next(&a) != gnb_rng_next(&b));
	CHECK(differ == 1000, "a jumped stream must differ from the original");

	/* xoshiro256++ reference: state {1,2,3,4} gives 41943041 first. */
	a.s[0] = 1;
	a.s[1] = 2;
	a.s[2] = 3;
	a.s[3] = 4;
	CHECK(gnb_rng_next(&a) == UINT64_C(41943041), "xoshiro256++ reference value");
}

/*
 * Philox4x32-10 against its authors' known answers (Random123's
 * kat_vectors), and the keyed draws built on it: a function of their key
 * alone, different for every part of it, uniform.
 */
static void
test_keyed_rng(void)
{
	static const uint32_t kat[3][10] = {
		{0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
		{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
		0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
		{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
		0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
	};
	enum
	{
	n = 200000};
	double		sum = 0.0,
				sum2 = 0.0;
	int			distinct = 1;
	gnb_rng		a,
				b;

	for (int i = 0; i < 3; i++)
	{
		uint32_t	out[4];

		gnb_philox(kat[i] + 4, kat[i], out);
		CHECK(memcmp(out, kat[i] + 6, sizeof(out)) == 0, "Philox4x32-10 known answer %d", i);
	}
	/* the same name, the same draw, whenever it is made */
	CHECK(gnb_keyed_uniform(7, 1, 2, GNB_DRAW_LABEL, 3) ==
		  gnb_keyed_uniform(7, 1, 2, GNB_DRAW_LABEL, 3), "a keyed draw is a function of its key");
	{
		double		base = gnb_keyed_uniform(7, 1, 2, GNB_DRAW_LABEL, 3);

		distinct &= base != gnb_keyed_uniform(8, 1, 2, GNB_DRAW_LABEL, 3);
		distinct &= base != gnb_keyed_uniform(7 + (UINT64_C(1) << 32), 1, 2, GNB_DRAW_LABEL, 3);
		distinct &= base != gnb_keyed_uniform(7, 2, 2, GNB_DRAW_LABEL, 3);
		distinct &= base != gnb_keyed_uniform(7, 1, 3, GNB_DRAW_LABEL, 3);
		distinct &= base != gnb_keyed_uniform(7, 1, 2, GNB_DRAW_START, 3);
		distinct &= base != gnb_keyed_uniform(7, 1, 2, GNB_DRAW_LABEL, 4);
		distinct &= base != gnb_keyed_uniform(7, 1, 2, GNB_DRAW_LABEL, 3 + (UINT64_C(1) << 32));
	}
	CHECK(distinct, "every part of a key changes the draw");
	gnb_rng_keyed(&a, 7, 0, 5, GNB_DRAW_THETA | 1 << 4, 9);
	gnb_rng_keyed(&b, 7, 0, 5, GNB_DRAW_THETA | 1 << 4, 9);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0, "a keyed generator is a function of its key");
	gnb_rng_keyed(&b, 7, 0, 5, GNB_DRAW_THETA | 2 << 4, 9);
	CHECK(memcmp(&a, &b, sizeof(a)) != 0, "another class, another keyed generator");
	/* draws over consecutive items: mean and variance of a uniform */
	for (uint32_t i = 0; i < n; i++)
	{
		double		u = gnb_keyed_uniform(11, 0, 1, GNB_DRAW_LABEL, i);

		sum += u;
		sum2 += u * u;
	}
	sum /= n;
	sum2 = sum2 / n - sum * sum;
	CHECK(fabs(sum - 0.5) < Z_TOLERANCE * sqrt(1.0 / 12 / n), "keyed uniform mean %g", sum);
	CHECK(fabs(sum2 - 1.0 / 12) < Z_TOLERANCE * sqrt(1.0 / 180 / n), "keyed uniform variance %g", sum2);
}

static void
test_uniform_and_normal(void)
{
	enum
	{
	n = 200000};
	gnb_rng		rng;
	double	   *xs = malloc(n * sizeof(double));
	double		mean = 0.0,
				min = 1.0,
				max = 0.0;

	gnb_rng_seed(&rng, 7);
	for (int i = 0; i < n; i++)
	{
		double		u = gnb_rng_uniform(&rng);

		mean += u / n;
		if (u < min)
			min = u;
		if (u > max)
			max = u;
	}
	CHECK(fabs(mean - 0.5) < Z_TOLERANCE * sqrt(1.0 / 12 / n), "uniform mean %g", mean);
	CHECK(min >= 0.0 && max < 1.0, "uniform range [%g, %g]", min, max);
	for (int i = 0; i < n; i++)
		xs[i] = gnb_rng_normal(&rng);
	/* sqrt(n) D above 2.3 has probability below 1e-4 under the null */
	CHECK(ks_scaled(xs, n, normal_cdf, 0) < 2.3, "normal KS");
	free(xs);
}

static void
test_gamma_distribution(void)
{
	enum
	{
	n = 200000};
	static const double ks_shapes[] = {0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 9.0};
	static const double moment_shapes[] = {0.001, 0.01, 0.1, 0.3, 0.7, 1.0, 4.0, 8.0, 8.5, 50.0, 5000.0};
	double	   *xs = malloc(n * sizeof(double));
	gnb_rng		rng;

	gnb_rng_seed(&rng, 11);
	for (size_t s = 0; s < sizeof(ks_shapes) / sizeof(ks_shapes[0]); s++)
	{
		double		a = ks_shapes[s];

		for (int i = 0; i < n; i++)
			xs[i] = exp(gnb_rng_log_gamma(&rng, a));
		CHECK(ks_scaled(xs, n, gamma_cdf, a) < 2.3, "Gamma(%g) KS", a);
	}
	for (size_t s = 0; s < sizeof(moment_shapes) / sizeof(moment_shapes[0]); s++)
	{
		double		a = moment_shapes[s];
		double		mean_log = 0.0;
		int			finite = 1;

		for (int i = 0; i < n; i++)
		{
			double		l = gnb_rng_log_gamma(&rng, a);

			finite &= isfinite(l);
			mean_log += l / n;
		}
		CHECK(finite, "log Gamma(%g) draws must all be finite", a);
		/* E log G = digamma(a), Var log G = trigamma(a) */
		CHECK(fabs(mean_log - digamma(a)) < Z_TOLERANCE * sqrt(trigamma(a) / n),
			  "E log Gamma(%g): %g vs %g", a, mean_log, digamma(a));
		if (a >= 1.0)
		{
			double		mean = 0.0,
						var = 0.0;

			for (int i = 0; i < n; i++)
				xs[i] = gnb_rng_gamma(&rng, a);
			for (int i = 0; i < n; i++)
				mean += xs[i] / n;
			for (int i = 0; i < n; i++)
				var += (xs[i] - mean) * (xs[i] - mean) / (n - 1);
			CHECK(fabs(mean - a) < Z_TOLERANCE * sqrt(a / n), "Gamma(%g) mean %g", a, mean);
			/* Var of the sample variance: (mu4 - sigma^4) / n, mu4 = 3a(a + 2) */
			CHECK(fabs(var - a) < Z_TOLERANCE * sqrt((3 * a * (a + 2) - a * a) / n),
				  "Gamma(%g) variance %g", a, var);
		}
	}
	free(xs);
}

/*
 * gnb_rng_gamma as the theta step calls it, inline: integer shapes up to
 * GNB_SUM_EXP_MAX are sums of exponentials, the next integer and the
 * non-integers Marsaglia and Tsang's.  For each shape, alone and in a mix
 * that changes shape from draw to draw (as the theta step's words do): KS
 * against the exact CDF, the mean and the variance.  (Checked: a sum that
 * takes one exponential too few or too many fails every one of these for
 * the shapes it touches.)
 */
static void
test_gamma_small_integers(void)
{
	enum
	{
	n = 200000};
	static const double shapes[] = {1.0, 2.0, 3.0, 4.0, 5.0, 1.5, 2.5};
	const int	n_shapes = (int) (sizeof(shapes) / sizeof(shapes[0]));
	double	   *xs = malloc(n * sizeof(double));
	double	   *mix = malloc((size_t) n * n_shapes * sizeof(double));
	gnb_rng		rng;

	gnb_rng_seed(&rng, 31);
	/* the mix: shape s at draws s, s + n_shapes, ... */
	for (int i = 0; i < n * n_shapes; i++)
		mix[i] = gnb_rng_gamma(&rng, shapes[i % n_shapes]);
	for (int pass = 0; pass < 2; pass++)
		for (int s = 0; s < n_shapes; s++)
		{
			double		a = shapes[s];
			double		mean = 0.0,
						var = 0.0;

			for (int i = 0; i < n; i++)
				xs[i] = pass == 0 ? gnb_rng_gamma(&rng, a) : mix[(int64_t) i * n_shapes + s];
			for (int i = 0; i < n; i++)
				mean += xs[i] / n;
			for (int i = 0; i < n; i++)
				var += (xs[i] - mean) * (xs[i] - mean) / (n - 1);
			CHECK(fabs(mean - a) < Z_TOLERANCE * sqrt(a / n), "Gamma(%g)%s mean %g", a,
				  pass ? " in a mix" : "", mean);
			CHECK(fabs(var - a) < Z_TOLERANCE * sqrt((3 * a * (a + 2) - a * a) / n),
				  "Gamma(%g)%s variance %g", a, pass ? " in a mix" : "", var);
			CHECK(ks_scaled(xs, n, gamma_cdf, a) < 2.3, "Gamma(%g)%s KS", a,
				  pass ? " in a mix" : "");
		}
	free(xs);
	free(mix);
}

/*
 * The theta step's Gamma methods (theta_step2, K = 2):
 * gnb_rng_gamma_pair_exp draws two integer shapes as m0 + m1 exponentials
 * split by masks, and gnb_rng_gamma_mt is Marsaglia and Tsang's method,
 * which the theta step also uses for the small integer shapes of frequent
 * words.  For every split (m0, m1)
 * with m0 + m1 <= 6, drawn in a mix that changes split from pair to pair
 * as the theta step's words do: KS of each draw against its Erlang CDF,
 * the mean and variance, and the correlation of y0 and y1 (independent:
 * within Z_TOLERANCE / sqrt(n) of 0).  For shapes 1 to 5 and 1000 the MT
 * draws pass KS, mean and variance.  (Checked: a mask that gives y0 one
 * exponential too few, r < m0 - 1, or one too many, r <= m0, fails 60 of
 * the 105 pair checks (the splits with exponentials between the first and
 * the last); c for shape m + 1 in place of m fails the KS, mean and
 * variance of shapes 1 to 5.)
 */
static void
test_gamma_pair_and_mt(void)
{
	enum
	{
	n = 100000};
	int			splits[16][2];
	int			n_splits = 0;
	double	   *y0 = malloc((size_t) n * 16 * sizeof(double));
	double	   *y1 = malloc((size_t) n * 16 * sizeof(double));
	double	   *xs = malloc(n * sizeof(double));
	static const int mt_shapes[] = {1, 2, 3, 4, 5, 1000};
	gnb_rng		rng;

	for (int m = 2; m <= 6; m++)
		for (int m0 = 1; m0 < m && n_splits < 16; m0++)
		{
			splits[n_splits][0] = m0;
			splits[n_splits][1] = m - m0;
			n_splits++;
		}
	gnb_rng_seed(&rng, 47);
	for (int64_t i = 0; i < (int64_t) n * n_splits; i++)
	{
		int			s = (int) (i % n_splits);

		gnb_rng_gamma_pair_exp(&rng, splits[s][0], splits[s][1], &y0[i], &y1[i]);
	}
	for (int s = 0; s < n_splits; s++)
	{
		double		mean[2] = {0.0, 0.0},
					var[2] = {0.0, 0.0},
					cov = 0.0;

		for (int side = 0; side < 2; side++)
		{
			double		a = splits[s][side];
			const double *y = side == 0 ? y0 : y1;

			for (int i = 0; i < n; i++)
				xs[i] = y[(int64_t) i * n_splits + s];
			for (int i = 0; i < n; i++)
				mean[side] += xs[i] / n;
			for (int i = 0; i < n; i++)
				var[side] += (xs[i] - mean[side]) * (xs[i] - mean[side]) / (n - 1);
			CHECK(fabs(mean[side] - a) < Z_TOLERANCE * sqrt(a / n),
				  "pair (%d, %d) y%d mean %g", splits[s][0], splits[s][1], side, mean[side]);
			CHECK(fabs(var[side] - a) < Z_TOLERANCE * sqrt((3 * a * (a + 2) - a * a) / n),
				  "pair (%d, %d) y%d variance %g", splits[s][0], splits[s][1], side, var[side]);
			CHECK(ks_scaled(xs, n, gamma_cdf, a) < 2.3, "pair (%d, %d) y%d KS",
				  splits[s][0], splits[s][1], side);
		}
		for (int i = 0; i < n; i++)
		{
			int64_t		idx = (int64_t) i * n_splits + s;

			cov += (y0[idx] - mean[0]) * (y1[idx] - mean[1]) / (n - 1);
		}
		CHECK(fabs(cov / sqrt(var[0] * var[1])) < Z_TOLERANCE / sqrt(n),
			  "pair (%d, %d) correlation %g", splits[s][0], splits[s][1],
			  cov / sqrt(var[0] * var[1]));
	}

	for (size_t s = 0; s < sizeof(mt_shapes) / sizeof(mt_shapes[0]); s++)
	{
		double		a = mt_shapes[s];
		double		mean = 0.0,
					var = 0.0;

		for (int i = 0; i < n; i++)
			xs[i] = gnb_rng_gamma_mt(&rng, a);
		for (int i = 0; i < n; i++)
			mean += xs[i] / n;
		for (int i = 0; i < n; i++)
			var += (xs[i] - mean) * (xs[i] - mean) / (n - 1);
		CHECK(fabs(mean - a) < Z_TOLERANCE * sqrt(a / n), "MT Gamma(%g) mean %g", a, mean);
		CHECK(fabs(var - a) < Z_TOLERANCE * sqrt((3 * a * (a + 2) - a * a) / n),
			  "MT Gamma(%g) variance %g", a, var);
		if (a <= 9)
			CHECK(ks_scaled(xs, n, gamma_cdf, a) < 2.3, "MT Gamma(%g) KS", a);
	}
	free(y0);
	free(y1);
	free(xs);
}

/*
 * Whether long double arithmetic is wider than double here: not under
 * valgrind, which computes x87 long doubles in double precision.
 */
static int
long_double_is_wide(void)
{
	volatile long double one = 1.0L;
	volatile long double tiny = 0x1p-60L;

	return one + tiny != one;
}

/* The distance from a to the exact b, in units in the last place of b. */
static double
ulps(double a, long double b)
{
	double		bd = (double) b;
	double		ulp = nextafter(fabs(bd), INFINITY) - fabs(bd);

	return (double) (fabsl((long double) a - b) / ulp);
}

/*
 * gnb_log_normal against log: on 2 million positive normal numbers spread
 * over every binade and 2 million in [0.5, 2) (where the reduction's
 * boundary at sqrt(2) and log's zero at 1 lie), the powers of two, their
 * neighbours, 1 and its neighbours, DBL_MIN and DBL_MAX, the error against
 * logl is under 1 ulp (fdlibm's bound) and results are finite.
 * gnb_log_array gives the same bits as gnb_log_normal for each element when
 * all are normal, and exactly log's results (by libm) when one is 0, -0, a
 * subnormal, an infinity, a NaN or negative; so does gnb_log_array_to,
 * out of place (on an odd number of elements too).  (Checked: Lg1 off by 1e-13
 * gives 9.8 ulp, Lg7 off by 1e-4 6.6 ulp, and fail; without the fallback to
 * libm every special value fails.)
 */
static void
test_fast_log(void)
{
	enum
	{
	n = 2000000};
	double	   *xs = malloc(n * sizeof(double));
	double	   *ys = malloc(n * sizeof(double));
	double	   *zs = malloc(n * sizeof(double));
	double		max_ulp = 0.0;
	int			finite = 1,
				same = 1,
				same_to = 1;
	uint64_t	state = 12345;
	static const double special[] = {0.0, -0.0, 4.9e-324, 2.2e-308, INFINITY, -INFINITY,
	NAN, -1.0};

	for (int pass = 0; pass < 2; pass++)
	{
		for (int i = 0; i < n; i++)
		{
			uint64_t	bits;

			state = state * 6364136223846793005ULL + 1442695040888963407ULL;
			if (pass == 0)
				/* every binade: exponent field 1 .. 2046 */
				bits = (state >> 12) | ((uint64_t) (1 + (state >> 20) % 2046) << 52);
			else
				/* [0.5, 2) */
				bits = (UINT64_C(0x3fe0000000000000) | (state >> 12)) +
					((state >> 63) ? UINT64_C(0x0010000000000000) : 0);
			memcpy(&xs[i], &bits, sizeof(bits));
		}
		if (pass == 1)
		{
			/* the powers of two and their neighbours, 1's neighbours */
			for (int e = -1022; e <= 1023; e++)
			{
				double		p2 = ldexp(1.0, e);

				xs[3 * (e + 1022)] = p2;
				xs[3 * (e + 1022) + 1] = nextafter(p2, 0.0) >= DBL_MIN ? nextafter(p2, 0.0) : p2;
				xs[3 * (e + 1022) + 2] = nextafter(p2, INFINITY);
			}
			xs[n - 1] = DBL_MAX;
			xs[n - 2] = DBL_MIN;
			xs[n - 3] = nextafter(1.0, 0.0);
			xs[n - 4] = nextafter(1.0, 2.0);
			xs[n - 5] = 1.0;
			xs[n - 6] = sqrt(0.5);
			xs[n - 7] = sqrt(2.0);
		}
		memcpy(ys, xs, n * sizeof(double));
		gnb_log_array(ys, n);
		/* n - 1 elements to gnb_log_array_to: its odd tail too */
		gnb_log_array_to(xs, zs, n - pass);
		for (int i = 0; i < n; i++)
		{
			double		l = gnb_log_normal(xs[i]);
			double		u = xs[i] == 1.0 ? fabs(l) : ulps(l, logl((long double) xs[i]));

			finite &= isfinite(l);
			same &= memcmp(&l, &ys[i], sizeof(l)) == 0;
			if (i < n - pass)
				same_to &= memcmp(&l, &zs[i], sizeof(l)) == 0;
			if (u > max_ulp)
				max_ulp = u;
		}
	}
	/*
	 * The reference is logl: under valgrind, which computes x87 long
	 * doubles in double precision, it is itself rounded to a double, off by
	 * up to half an ulp more.
	 */
	CHECK(max_ulp < (long_double_is_wide() ? 1.0 : 1.5), "fast log: max error %.3f ulp%s",
		  max_ulp, long_double_is_wide() ? "" : " (against logl rounded to double precision)");
	CHECK(finite, "fast log: finite on positive normal numbers");
	CHECK(same, "gnb_log_array gives gnb_log_normal's bits");
	CHECK(same_to, "gnb_log_array_to gives gnb_log_normal's bits");
	printf("  fast log: max error %.3f ulp over %d numbers\n", max_ulp, 2 * n);
	/* one special value among normal ones: every element as libm's log */
	for (size_t s = 0; s < sizeof(special) / sizeof(special[0]); s++)
	{
		double		v[5] = {3.0, 0.25, special[s], 7.5, 1e300};
		double		w[5],
					w_to[5];
		int			ok = 1,
					ok_to = 1;

		memcpy(w, v, sizeof(v));
		gnb_log_array(w, 5);
		gnb_log_array_to(v, w_to, 5);
		for (int i = 0; i < 5; i++)
		{
			double		l = log(v[i]);

			ok &= (isnan(l) && isnan(w[i])) || memcmp(&l, &w[i], sizeof(l)) == 0;
			ok_to &= (isnan(l) && isnan(w_to[i])) || memcmp(&l, &w_to[i], sizeof(l)) == 0;
		}
		CHECK(ok, "gnb_log_array with %g gives log's results", special[s]);
		CHECK(ok_to, "gnb_log_array_to with %g gives log's results", special[s]);
	}
	free(xs);
	free(ys);
	free(zs);
}

/*
 * Exp(1) by the ziggurat: KS over a million draws (every layer is hit about
 * 4,000 times), and the tail beyond r, drawn by its own path: P(X > r) =
 * exp(-r), and beyond r + 2 a share exp(-2) of it.
 */
static void
test_exponential(void)
{
	enum
	{
	n = 1000000};
	const double r = 7.69711747013104972;
	double	   *xs = malloc(n * sizeof(double));
	double		p = exp(-r);
	int			tail = 0,
				far = 0;
	gnb_rng		rng;

	gnb_rng_seed(&rng, 23);
	for (int i = 0; i < n; i++)
	{
		xs[i] = gnb_rng_exponential(&rng);
		tail += xs[i] > r;
		far += xs[i] > r + 2.0;
	}
	CHECK(ks_scaled(xs, n, gamma_cdf, 1.0) < 2.3, "Exp(1) KS");
	CHECK(fabs(tail - n * p) < Z_TOLERANCE * sqrt(n * p), "Exp(1) tail beyond r: %d vs %.1f",
		  tail, n * p);
	CHECK(fabs(far - tail * exp(-2.0)) < Z_TOLERANCE * sqrt(tail * exp(-2.0)) + 1,
		  "Exp(1) tail beyond r + 2: %d of %d", far, tail);
	free(xs);
}

/*
 * Normal by the ziggurat: KS over a million draws (every layer is hit about
 * 4,000 times), the mean, variance and fourth moment, both signs equally,
 * and the tail beyond r, drawn by its own path: P(|X| > r) = erfc(r / sqrt 2),
 * and beyond r + 1 a share P(|X| > r + 1) / P(|X| > r) of it.
 */
static void
test_normal_ziggurat(void)
{
	enum
	{
	n = 1000000};
	const double r = 3.65415288536100877;
	double	   *xs = malloc(n * sizeof(double));
	double		p = erfc(r / sqrt(2.0));
	double		q = erfc((r + 1.0) / sqrt(2.0)) / p;
	double		m1 = 0.0,
				m2 = 0.0,
				m4 = 0.0;
	int			tail = 0,
				far = 0,
				neg = 0;
	gnb_rng		rng;

	gnb_rng_seed(&rng, 29);
	for (int i = 0; i < n; i++)
	{
		double		x = gnb_rng_normal(&rng);

		xs[i] = x;
		m1 += x / n;
		m2 += x * x / n;
		m4 += x * x * x * x / n;
		tail += fabs(x) > r;
		far += fabs(x) > r + 1.0;
		neg += x < 0.0;
	}
	CHECK(ks_scaled(xs, n, normal_cdf, 0) < 2.3, "ziggurat normal KS");
	CHECK(fabs(m1) < Z_TOLERANCE * sqrt(1.0 / n), "normal mean %g", m1);
	/* Var(X^2) = 2, Var(X^4) = 105 - 9 = 96 */
	CHECK(fabs(m2 - 1.0) < Z_TOLERANCE * sqrt(2.0 / n), "normal second moment %g", m2);
	CHECK(fabs(m4 - 3.0) < Z_TOLERANCE * sqrt(96.0 / n), "normal fourth moment %g", m4);
	CHECK(fabs(neg - 0.5 * n) < Z_TOLERANCE * sqrt(0.25 * n), "normal signs: %d negative", neg);
	CHECK(fabs(tail - n * p) < Z_TOLERANCE * sqrt(n * p), "normal tail beyond r: %d vs %.1f",
		  tail, n * p);
	CHECK(fabs(far - tail * q) < Z_TOLERANCE * sqrt(tail * q * (1 - q)) + 1,
		  "normal tail beyond r + 1: %d of %d (share %g)", far, tail, q);
	free(xs);
}

static void
test_categorical(void)
{
	enum
	{
	n = 300000};
	static const double p[] = {0.1, 0.6, 0.05, 0.25};
	double		scores[4],
				scratch[4];
	int			hits[4] = {0, 0, 0, 0};
	gnb_rng		rng;

	/* shifted by a huge constant: the draw must work in log space */
	for (int k = 0; k < 4; k++)
		scores[k] = log(p[k]) - 1000.0;
	gnb_rng_seed(&rng, 5);
	for (int i = 0; i < n; i++)
		hits[gnb_rng_categorical_log(&rng, scores, 4, scratch)]++;
	for (int k = 0; k < 4; k++)
	{
		double		f = (double) hits[k] / n;

		CHECK(fabs(f - p[k]) < Z_TOLERANCE * sqrt(p[k] * (1 - p[k]) / n),
			  "categorical class %d: %g vs %g", k, f, p[k]);
	}
}

/* ---------- tiny corpora and exact enumeration ---------- */

typedef struct tiny_corpus
{
	gnb_corpus	c;
	int64_t		doc_start[32];
	int32_t		word[256];
	int32_t		count[256];
	int32_t		label[32];
} tiny_corpus;

/*
 * A random tiny corpus: docs documents, the first n_labelled of them clamped
 * to classes 0, 1, ..., and every document 1..4 distinct words with counts
 * 1..3.  If big_count, one word of document 0 occurs 11 times (the lgamma
 * path of the samplers).
 */
static void
make_tiny(tiny_corpus *t, uint64_t seed, int docs, int V, int K, int n_labelled,
		  int big_count)
{
	gnb_rng		rng;
	int64_t		pos = 0;

	gnb_rng_seed(&rng, seed);
	memset(t, 0, sizeof(*t));
	t->c.n_docs = docs;
	t->c.n_words = V;
	t->c.n_classes = K;
	for (int j = 0; j < docs; j++)
	{
		int			nw = 1 + (int) (gnb_rng_next(&rng) % 4);
		int			used[16] = {0};

		t->doc_start[j] = pos;
		for (int i = 0; i < nw; i++)
		{
			int			w = (int) (gnb_rng_next(&rng) % V);

			if (used[w])
				continue;
			used[w] = 1;
			t->word[pos] = w;
			t->count[pos] = 1 + (int) (gnb_rng_next(&rng) % 3);
			pos++;
		}
		t->label[j] = j < n_labelled ? j % K : -1;
	}
	if (big_count)
		t->count[0] = 11;
	t->doc_start[docs] = pos;
	t->c.doc_start = t->doc_start;
	t->c.word = t->word;
	t->c.count = t->count;
	t->c.label = t->label;
}

typedef struct exact_answer
{
	double		marginal[32 * 4];	/* P(L_j = k | W) */
	double		mean_log_joint; /* E[log P(L, W)] under the posterior */
} exact_answer;

/* Enumerate all labellings of the unlabelled documents. */
static void
enumerate_exact(const gnb_corpus *c, const gnb_params *params, exact_answer *out)
{
	int			K = c->n_classes;
	int			free_docs[32];
	int			U = 0;
	long		total = 1;
	int32_t		labels[32];
	double	   *lj;
	double		max = -INFINITY,
				z = 0.0;

	for (int j = 0; j < c->n_docs; j++)
		if (c->label[j] < 0)
			free_docs[U++] = j;
	for (int i = 0; i < U; i++)
		total *= K;
	lj = malloc(total * sizeof(double));
	for (long code = 0; code < total; code++)
	{
		long		x = code;

		for (int j = 0; j < c->n_docs; j++)
			labels[j] = c->label[j];
		for (int i = 0; i < U; i++)
		{
			labels[free_docs[i]] = (int32_t) (x % K);
			x /= K;
		}
		lj[code] = gnb_log_joint(c, params, labels);
		if (lj[code] > max)
			max = lj[code];
	}
	memset(out, 0, sizeof(*out));
	for (long code = 0; code < total; code++)
		z += exp(lj[code] - max);
	for (long code = 0; code < total; code++)
	{
		double		p = exp(lj[code] - max) / z;
		long		x = code;

		out->mean_log_joint += p * lj[code];
		for (int j = 0; j < c->n_docs; j++)
			if (c->label[j] >= 0)
				out->marginal[j * K + c->label[j]] += p;
		for (int i = 0; i < U; i++)
		{
			out->marginal[free_docs[i] * K + (int) (x % K)] += p;
			x /= K;
		}
	}
	free(lj);
}

/*
 * Run `reps` independent replicates (seeds 1..reps) and compare the mean of
 * their estimates with the exact answer, within Z_TOLERANCE standard errors
 * of that mean.  Unlabelled marginals are checked only if some document is
 * clamped: without clamps they are 1/K by symmetry whatever the sampler
 * does, while the expected log joint is a real check in both cases.
 */
static void
check_against_exact(const char *name, const gnb_corpus *c, gnb_params params, int reps)
{
	enum
	{
	MAXR = 40};
	int			K = c->n_classes;
	int			D = c->n_docs;
	int			has_labels = 0;
	exact_answer exact;
	static double est[MAXR][32 * 4];
	double		lj_est[MAXR];
	int			checked = 0,
				bad = 0;
	double		worst_z = 0.0;

	enumerate_exact(c, &params, &exact);
	for (int j = 0; j < D; j++)
		has_labels |= (c->label[j] >= 0);
	for (int r = 0; r < reps; r++)
	{
		gnb_result res;
		int			kept = 0;

		params.seed = (uint64_t) r + 1;
		gnb_train(c, &params, NULL, &res);
		memcpy(est[r], res.label_prob, (size_t) D * K * sizeof(double));
		lj_est[r] = 0.0;
		for (int t = params.burn_in + 1; t <= params.sweeps; t++)
			if ((t - params.burn_in) % params.lag == 0)
			{
				for (int ch = 0; ch < params.chains; ch++)
					lj_est[r] += res.log_joint[ch * params.sweeps + t - 1];
				kept += params.chains;
			}
		lj_est[r] /= kept;
		gnb_result_free(&res, NULL);
	}
	for (int i = 0; i < D * K + 1; i++)
	{
		double		mean = 0.0,
					var = 0.0,
					se,
					truth,
					zscore;

		if (i < D * K && (!has_labels || c->label[i / K] >= 0))
			continue;
		for (int r = 0; r < reps; r++)
			mean += (i < D * K ? est[r][i] : lj_est[r]) / reps;
		for (int r = 0; r < reps; r++)
		{
			double		d = (i < D * K ? est[r][i] : lj_est[r]) - mean;

			var += d * d / (reps - 1);
		}
		truth = i < D * K ? exact.marginal[i] : exact.mean_log_joint;
		/*
		 * Autocorrelation only adds to the error of a mean over kept sweeps,
		 * so the error of reps * kept independent draws is a floor: it keeps
		 * a rare event that no replicate saw from having zero error.  A
		 * marginal below RARE (or above 1 - RARE) comes in a few runs of
		 * sweeps (a document that enters an unlikely class stays a while),
		 * so the spread of 30 replicates' means understates its error: its
		 * floor counts RARE_RUN sweeps as one draw.  (Seen with the paper
		 * sampler at seeds 202..231 and the blocked one at 1..30: marginals
		 * of 0.0006 and 0.9985 estimated at 0.0003 and 0.9996, "z" above 5.)
		 */
		se = sqrt(var / reps);
		if (i < D * K)
		{
			double		run = fmin(truth, 1 - truth) < RARE ? RARE_RUN : 1.0;

			se = fmax(se, sqrt(truth * (1 - truth) * run /
							   ((double) reps * params.chains *
								((params.sweeps - params.burn_in) / params.lag))));
		}
		zscore = fabs(mean - truth) / (se > 0 ? se : 1e-300);
		checked++;
		if (zscore > worst_z)
			worst_z = zscore;
		if (zscore > Z_TOLERANCE)
		{
			bad++;
			printf("  %s: %s %d: estimate %.5f +- %.5f, exact %.5f\n", name,
				   i < D * K ? "marginal" : "E[log joint]", i, mean, se, truth);
		}
	}
	CHECK(bad == 0, "%s: %d of %d estimates off the exact answer", name, bad, checked);
	printf("  %-44s %3d estimates, worst |z| = %.2f\n", name, checked, worst_z);
}

/* The samplers by number, for the tests that run each: 0 paper, 1 collapsed, 2 blocked. */
static gnb_sampler_kind
sampler_of(int s)
{
	return s == 0 ? GNB_SAMPLER_PAPER : s == 1 ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_BLOCKED;
}

static const char *
sampler_name(int s)
{
	return s == 0 ? "paper" : s == 1 ? "collapsed" : "blocked";
}

static void
test_exactness(void)
{
	struct
	{
		const char *name;
		uint64_t	seed;
		int			docs,
					V,
					K,
					labelled,
					big;
		double		gpi,
					gth;
	}			cases[] = {
		{"K=2 unsupervised g=1", 101, 10, 4, 2, 0, 0, 1.0, 1.0},
		{"K=2 3 clamped g<1", 102, 12, 5, 2, 3, 0, 0.5, 0.3},
		{"K=2 4 clamped g>1 count 11", 103, 11, 6, 2, 4, 1, 1.0, 3.0},
		{"K=3 2 clamped g>1", 104, 10, 6, 3, 2, 0, 2.0, 1.5},
		{"K=3 unsupervised g<1", 105, 8, 4, 3, 0, 0, 0.7, 0.1},
		{"K=3 3 clamped g<1 count 11", 106, 11, 5, 3, 3, 1, 0.4, 0.05},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int s = 0; s < 3; s++)
		{
			tiny_corpus t;
			gnb_params	p = {0};
			char		name[128];

			make_tiny(&t, cases[i].seed, cases[i].docs, cases[i].V, cases[i].K,
					  cases[i].labelled, cases[i].big);
			p.sampler = sampler_of(s);
			p.sweeps = 6000;
			p.burn_in = 200;
			p.lag = 1;
			p.chains = 1;
			p.gamma_pi = cases[i].gpi;
			p.gamma_theta = cases[i].gth;
			p.unlabeled_weight = 1.0;
			snprintf(name, sizeof(name), "%s %s", sampler_name(s), cases[i].name);
			CHECK(gnb_check(&t.c, &p) == NULL, "%s: corpus rejected", name);
			check_against_exact(name, &t.c, p, 30);
		}

	/* two chains and a lag: the estimates still average to the truth */
	{
		tiny_corpus t;
		gnb_params	p = {GNB_SAMPLER_COLLAPSED, 3000, 300, 3, 2, 1.0, 0.5, 1.0, 0};

		make_tiny(&t, 104, 10, 6, 3, 2, 0);
		check_against_exact("collapsed K=3 2 chains lag 3", &t.c, p, 30);
		p.sampler = GNB_SAMPLER_PAPER;
		check_against_exact("paper K=3 2 chains lag 3", &t.c, p, 30);
		p.sampler = GNB_SAMPLER_BLOCKED;
		check_against_exact("blocked K=3 2 chains lag 3", &t.c, p, 30);
	}
}

/*
 * With unlabeled_weight = 0 the unlabelled documents leave the counts alone,
 * so each one's label is independent of the others.  For the collapsed
 * sampler P(L_j = k) is the Dirichlet-multinomial predictive from the clamped
 * documents: the log joint of the clamped documents plus j labelled k.  For
 * the paper sampler theta ~ Dir(clamped counts + g) and P(L_j = k) is
 * E_theta[softmax_k(log(C_k + g_pi) + sum_w W_jw log theta_kw)], which has no
 * closed form: the reference is a Monte-Carlo integral over independent theta
 * draws, and its own standard error is part of the tolerance.
 */
static void
test_zero_unlabeled_weight(void)
{
	enum
	{
	K = 2, D = 12, V = 5, first_free = 6, reps = 20, ref_draws = 200000};
	tiny_corpus t;
	double		exact[3][D * K],
				exact_se[3][D * K];
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 4000, 100, 1, 1, 1.0, 0.5, 0.0, 0};
	double		N[K][V],
				C[K];
	gnb_rng		rng;

	make_tiny(&t, 107, D, V, K, first_free, 0);
	memset(exact_se, 0, sizeof(exact_se));
	memset(N, 0, sizeof(N));
	memset(C, 0, sizeof(C));
	for (int j = 0; j < first_free; j++)
	{
		C[t.label[j]] += 1;
		for (int64_t q = t.doc_start[j]; q < t.doc_start[j + 1]; q++)
			N[t.label[j]][t.word[q]] += t.count[q];
	}
	/* collapsed: exact predictive */
	for (int j = first_free; j < D; j++)
	{
		tiny_corpus one = t;
		double		lj[K],
					max;

		one.c.label = one.label;
		for (int jj = first_free; jj < D; jj++)
			one.label[jj] = -1;
		for (int k = 0; k < K; k++)
		{
			int32_t		labels[D];

			one.label[j] = k;
			for (int jj = 0; jj < D; jj++)
				labels[jj] = one.label[jj] >= 0 ? one.label[jj] : 0;
			/* the other unlabelled documents weigh 0: they add nothing */
			lj[k] = gnb_log_joint(&one.c, &p, labels);
		}
		max = fmax(lj[0], lj[1]);
		for (int k = 0; k < K; k++)
			exact[1][j * K + k] = exp(lj[k] - max) / (exp(lj[0] - max) + exp(lj[1] - max));
	}
	/*
	 * paper: Monte-Carlo over theta, with its standard error; blocked the
	 * same over theta and pi, with log pi_k for the prior term
	 */
	gnb_rng_seed(&rng, 108);
	for (int blocked = 0; blocked < 2; blocked++)
	{
		double		sum[D * K],
					sum2[D * K];
		const int	s_ref = blocked ? 2 : 0;

		memset(sum, 0, sizeof(sum));
		memset(sum2, 0, sizeof(sum2));
		for (int m = 0; m < ref_draws; m++)
		{
			double		lt[K][V];
			double		lpi[K];

			if (blocked)
			{
				double		tot = 0;

				for (int k = 0; k < K; k++)
					tot += (lpi[k] = exp(gnb_rng_log_gamma(&rng, C[k] + p.gamma_pi)));
				for (int k = 0; k < K; k++)
					lpi[k] = log(lpi[k] / tot);
			}

			for (int k = 0; k < K; k++)
			{
				double		tot = 0;

				for (int w = 0; w < V; w++)
					tot += (lt[k][w] = exp(gnb_rng_log_gamma(&rng, N[k][w] + p.gamma_theta)));
				for (int w = 0; w < V; w++)
					lt[k][w] = log(lt[k][w] / tot);
			}
			for (int j = first_free; j < D; j++)
			{
				double		s[K],
							z;

				for (int k = 0; k < K; k++)
				{
					s[k] = blocked ? lpi[k] : log(C[k] + p.gamma_pi);
					for (int64_t q = t.doc_start[j]; q < t.doc_start[j + 1]; q++)
						s[k] += t.count[q] * lt[k][t.word[q]];
				}
				z = fmax(s[0], s[1]);
				z = z + log(exp(s[0] - z) + exp(s[1] - z));
				for (int k = 0; k < K; k++)
				{
					double		pk = exp(s[k] - z);

					sum[j * K + k] += pk;
					sum2[j * K + k] += pk * pk;
				}
			}
		}
		for (int i = first_free * K; i < D * K; i++)
		{
			double		mean = sum[i] / ref_draws;

			exact[s_ref][i] = mean;
			exact_se[s_ref][i] = sqrt(fmax(sum2[i] / ref_draws - mean * mean, 0) / ref_draws);
		}
	}
	for (int s = 0; s < 3; s++)
	{
		double		est[reps][D * K];
		int			bad = 0;

		p.sampler = sampler_of(s);
		for (int r = 0; r < reps; r++)
		{
			gnb_result	res;

			p.seed = 500 + r;
			gnb_train(&t.c, &p, NULL, &res);
			memcpy(est[r], res.label_prob, sizeof(double) * D * K);
			gnb_result_free(&res, NULL);
		}
		for (int i = first_free * K; i < D * K; i++)
		{
			double		mean = 0,
						var = 0,
						se;

			for (int r = 0; r < reps; r++)
				mean += est[r][i] / reps;
			for (int r = 0; r < reps; r++)
				var += (est[r][i] - mean) * (est[r][i] - mean) / (reps - 1);
			se = sqrt(var / reps + exact_se[s][i] * exact_se[s][i]);
			/*
			 * The collapsed estimate is the predictive itself (the labels
			 * of weight 0 do not move the counts): exact but for rounding.
			 */
			if (fabs(mean - exact[s][i]) > Z_TOLERANCE * se + 1e-12)
			{
				bad++;
				printf("  lambda=0 %s: %d: %.4f vs exact %.4f\n", sampler_name(s),
					   i, mean, exact[s][i]);
			}
		}
		CHECK(bad == 0, "unlabeled_weight = 0 (%s): %d marginals off", sampler_name(s), bad);
	}
}

/* ---------- determinism, checks, supervised closed form ---------- */

static void
test_determinism(void)
{
	tiny_corpus t;
	gnb_params	p = {GNB_SAMPLER_PAPER, 500, 100, 1, 3, 1.0, 0.5, 0.7, 99};
	gnb_result	a,
				b,
				c;

	make_tiny(&t, 201, 12, 6, 3, 3, 1);
	gnb_train(&t.c, &p, NULL, &a);
	gnb_train(&t.c, &p, NULL, &b);
	p.seed = 100;
	gnb_train(&t.c, &p, NULL, &c);
	CHECK(memcmp(a.label_prob, b.label_prob, sizeof(double) * 12 * 3) == 0 &&
		  memcmp(a.theta, b.theta, sizeof(double) * 6 * 3) == 0 &&
		  memcmp(a.log_joint, b.log_joint, sizeof(double) * 3 * 500) == 0,
		  "same seed, same data: same model");
	CHECK(memcmp(a.log_joint, c.log_joint, sizeof(double) * 3 * 500) != 0,
		  "another seed: another chain");
	gnb_result_free(&a, NULL);
	gnb_result_free(&b, NULL);
	gnb_result_free(&c, NULL);
}

static void
test_check(void)
{
	tiny_corpus t;
	gnb_params	good = {GNB_SAMPLER_PAPER, 10, 5, 1, 1, 1.0, 1.0, 1.0, 1};
	gnb_params	p;

	make_tiny(&t, 301, 6, 4, 2, 2, 0);
	CHECK(gnb_check(&t.c, &good) == NULL, "good parameters accepted");
#define REJECT(field, value) \
	do { p = good; p.field = value; \
		 CHECK(gnb_check(&t.c, &p) != NULL, "%s = %s must be rejected", #field, #value); } while (0)
	REJECT(sweeps, 0);
	REJECT(burn_in, 10);
	REJECT(burn_in, -1);
	REJECT(lag, 0);
	REJECT(chains, 0);
	REJECT(gamma_pi, 0.0);
	REJECT(gamma_pi, INFINITY);
	REJECT(gamma_theta, -1.0);
	REJECT(gamma_theta, NAN);
	REJECT(unlabeled_weight, 1.5);
	REJECT(unlabeled_weight, NAN);
	REJECT(sampler, (gnb_sampler_kind) 7);
	/* the blocked sampler's keyed counter holds a chain in 16 bits */
	p = good;
	p.sampler = GNB_SAMPLER_BLOCKED;
	p.chains = 65536;
	CHECK(gnb_check(&t.c, &p) == NULL, "blocked, 65536 chains accepted");
	p.chains = 65537;
	CHECK(gnb_check(&t.c, &p) != NULL, "blocked, 65537 chains must be rejected");
	t.c.n_classes = 1;
	CHECK(gnb_check(&t.c, &good) != NULL, "one class must be rejected");
	t.c.n_classes = 2;
	t.label[0] = 2;
	CHECK(gnb_check(&t.c, &good) != NULL, "label out of range must be rejected");
	t.label[0] = 0;
	t.count[0] = 0;
	CHECK(gnb_check(&t.c, &good) != NULL, "zero count must be rejected");
}

static void
test_supervised_closed_form(void)
{
	tiny_corpus t;
	gnb_params	p = {GNB_SAMPLER_PAPER, 20, 10, 1, 2, 0.5, 0.25, 1.0, 3};
	int			V = 6,
				K = 3,
				D = 12;
	double		N[3][6] = {{0}},
				Nk[3] = {0},
				C[3] = {0};
	double		err = 0.0;

	make_tiny(&t, 401, D, V, K, D, 1);
	for (int j = 0; j < D; j++)
	{
		C[t.label[j]] += 1;
		for (int64_t q = t.doc_start[j]; q < t.doc_start[j + 1]; q++)
		{
			N[t.label[j]][t.word[q]] += t.count[q];
			Nk[t.label[j]] += t.count[q];
		}
	}
	for (int s = 0; s < 2; s++)
	{
		gnb_result	r;

		p.sampler = s ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_PAPER;
		gnb_train(&t.c, &p, NULL, &r);
		err = 0.0;
		for (int k = 0; k < K; k++)
		{
			for (int w = 0; w < V; w++)
				err = fmax(err, fabs(r.theta[k * V + w] -
									 (N[k][w] + 0.25) / (Nk[k] + V * 0.25)));
			err = fmax(err, fabs(r.pi[k] - (C[k] + 0.5) / (D + K * 0.5)));
		}
		for (int j = 0; j < D; j++)
			err = fmax(err, fabs(r.label_prob[j * K + t.label[j]] - 1.0));
		CHECK(err < 1e-12, "supervised %s: closed form off by %g", s ? "collapsed" : "paper", err);
		CHECK(fabs(r.log_joint[p.sweeps - 1] - gnb_log_joint(&t.c, &p, t.label)) < 1e-9,
			  "supervised log joint");
		CHECK(isnan(r.r_hat) == 0 && fabs(r.r_hat - 1.0) < 1e-12,
			  "constant traces in 2 chains: r_hat 1, got %g", r.r_hat);
		gnb_result_free(&r, NULL);
	}
}

/* ---------- synthetic data from the generative model ---------- */

/* the Dirichlet shape of the true theta's */
static double synthetic_gamma_theta = 1.0;

typedef struct synthetic
{
	gnb_corpus	c;
	int64_t    *doc_start;
	int32_t    *word;
	int32_t    *count;
	int32_t    *label;
	int32_t    *truth;
	double	   *theta;			/* K x V */
	double		class_tokens[8];
} synthetic;

static void
make_synthetic(synthetic *s, int D, int V, int K, int length, double labelled_share,
			   uint64_t seed)
{
	static const double pi[] = {0.5, 0.3, 0.2, 0, 0, 0, 0, 0};
	gnb_rng		rng;
	int32_t    *counts = calloc(V, sizeof(int32_t));
	int64_t		pos = 0;

	gnb_rng_seed(&rng, seed);
	memset(s, 0, sizeof(*s));
	s->theta = calloc((size_t) K * V, sizeof(double));
	for (int k = 0; k < K; k++)
	{
		double		sum = 0;

		for (int w = 0; w < V; w++)
			sum += (s->theta[k * V + w] = exp(gnb_rng_log_gamma(&rng, synthetic_gamma_theta)));
		for (int w = 0; w < V; w++)
			s->theta[k * V + w] /= sum;
	}
	s->doc_start = calloc(D + 1, sizeof(int64_t));
	s->word = calloc((size_t) D * V, sizeof(int32_t));
	s->count = calloc((size_t) D * V, sizeof(int32_t));
	s->label = calloc(D, sizeof(int32_t));
	s->truth = calloc(D, sizeof(int32_t));
	for (int j = 0; j < D; j++)
	{
		double		u = gnb_rng_uniform(&rng);
		int			k = 0;

		while (k < K - 1 && u >= pi[k])
			u -= pi[k++];
		s->truth[j] = k;
		s->label[j] = gnb_rng_uniform(&rng) < labelled_share ? k : -1;
		memset(counts, 0, V * sizeof(int32_t));
		for (int i = 0; i < length; i++)
		{
			double		x = gnb_rng_uniform(&rng);
			int			w = 0;

			while (w < V - 1 && x >= s->theta[k * V + w])
				x -= s->theta[k * V + w++];
			counts[w]++;
		}
		s->class_tokens[k] += length;
		s->doc_start[j] = pos;
		for (int w = 0; w < V; w++)
			if (counts[w])
			{
				s->word[pos] = w;
				s->count[pos++] = counts[w];
			}
	}
	s->doc_start[D] = pos;
	s->c.n_docs = D;
	s->c.n_words = V;
	s->c.n_classes = K;
	s->c.doc_start = s->doc_start;
	s->c.word = s->word;
	s->c.count = s->count;
	s->c.label = s->label;
	free(counts);
}

static void
free_synthetic(synthetic *s)
{
	free(s->doc_start);
	free(s->word);
	free(s->count);
	free(s->label);
	free(s->truth);
	free(s->theta);
}

/*
 * A synthetic corpus in the form the worker gives the core: its unlabelled
 * documents alone, the labelled ones as their counts by word and class
 * (words, V x K) and by class (docs); map[i] is document i's index in the
 * synthetic corpus.
 */
typedef struct server_corpus
{
	gnb_corpus	c;
	int64_t    *doc_start;
	int32_t    *word;
	int32_t    *count;
	int32_t    *label;
	int32_t    *map;
	double	   *words;
	double	   *docs;
} server_corpus;

static void
make_server_corpus(server_corpus *sc, const synthetic *s, int V, int K)
{
	int			D = s->c.n_docs;
	int			n = 0;
	int64_t		pos = 0;

	sc->words = calloc((size_t) V * K, sizeof(double));
	sc->docs = calloc(K, sizeof(double));
	sc->doc_start = calloc(D + 1, sizeof(int64_t));
	sc->word = calloc((size_t) D * V + 1, sizeof(int32_t));
	sc->count = calloc((size_t) D * V + 1, sizeof(int32_t));
	sc->label = calloc(D, sizeof(int32_t));
	sc->map = calloc(D, sizeof(int32_t));
	for (int j = 0; j < D; j++)
	{
		if (s->label[j] >= 0)
		{
			sc->docs[s->label[j]] += 1;
			for (int64_t q = s->doc_start[j]; q < s->doc_start[j + 1]; q++)
				sc->words[(int64_t) s->word[q] * K + s->label[j]] += s->count[q];
			continue;
		}
		sc->doc_start[n] = pos;
		for (int64_t q = s->doc_start[j]; q < s->doc_start[j + 1]; q++)
		{
			sc->word[pos] = s->word[q];
			sc->count[pos++] = s->count[q];
		}
		sc->label[n] = -1;
		sc->map[n++] = j;
	}
	sc->doc_start[n] = pos;
	sc->c = s->c;
	sc->c.n_docs = n;
	sc->c.doc_start = sc->doc_start;
	sc->c.word = sc->word;
	sc->c.count = sc->count;
	sc->c.label = sc->label;
	sc->c.extra_word_counts = sc->words;
	sc->c.extra_doc_counts = sc->docs;
}

static void
free_server_corpus(server_corpus *sc)
{
	free(sc->doc_start);
	free(sc->word);
	free(sc->count);
	free(sc->label);
	free(sc->map);
	free(sc->words);
	free(sc->docs);
}

/*
 * Largest |theta-hat - theta| in units of its posterior standard deviation,
 * sqrt(theta (1 - theta) / N_k) with N_k the tokens of class k, over the
 * class matching perm (perm[k] = estimated class of true class k).
 */
static double
theta_z(const synthetic *s, const double *theta_hat, const int *perm)
{
	int			K = s->c.n_classes,
				V = s->c.n_words;
	double		worst = 0;

	for (int k = 0; k < K; k++)
		for (int w = 0; w < V; w++)
		{
			double		t = s->theta[k * V + w];
			double		sd = sqrt(t * (1 - t) / s->class_tokens[k]) + 1.0 / s->class_tokens[k];

			worst = fmax(worst, fabs(theta_hat[perm[k] * V + w] - t) / sd);
		}
	return worst;
}

static void
test_synthetic_recovery(void)
{
	synthetic	s;
	int			K = 3,
				V = 40,
				D = 3000;
	int			identity[3] = {0, 1, 2};

	make_synthetic(&s, D, V, K, 60, 0.1, 77);
	for (int sm = 0; sm < 2; sm++)
	{
		gnb_params	p = {sm ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_PAPER, 300, 100, 1, 1,
		1.0, 1.0, 1.0, 8};
		gnb_result	r;
		int			right = 0,
					hidden = 0;
		double		z;

		gnb_train(&s.c, &p, NULL, &r);
		for (int j = 0; j < D; j++)
			if (s.label[j] < 0)
			{
				int			best = 0;

				for (int k = 1; k < K; k++)
					if (r.label_prob[j * K + k] > r.label_prob[j * K + best])
						best = k;
				hidden++;
				right += (best == s.truth[j]);
			}
		z = theta_z(&s, r.theta, identity);
		CHECK(z < Z_TOLERANCE, "%s: theta-hat %.2f posterior sd from the truth",
			  sm ? "collapsed" : "paper", z);
		CHECK(right > 0.97 * hidden, "%s: %d of %d hidden labels right",
			  sm ? "collapsed" : "paper", right, hidden);
		printf("  synthetic %-9s: worst theta z = %.2f, %d/%d hidden labels right\n",
			   sm ? "collapsed" : "paper", z, right, hidden);
		CHECK(fabs(r.log_joint[p.sweeps - 1] - gnb_log_joint(&s.c, &p, r.last_labels)) <
			  1e-6 * fabs(r.log_joint[p.sweeps - 1]),
			  "%s: incremental log joint %.6f vs recomputed %.6f", sm ? "collapsed" : "paper",
			  r.log_joint[p.sweeps - 1], gnb_log_joint(&s.c, &p, r.last_labels));
		gnb_result_free(&r, NULL);
	}
	free_synthetic(&s);

	/*
	 * Unsupervised, 3 chains: class identities are arbitrary per chain, so
	 * the chains must be aligned before averaging or theta-hat is a blend.
	 */
	make_synthetic(&s, D, V, K, 60, 0.0, 78);
	{
		gnb_params	p = {GNB_SAMPLER_COLLAPSED, 200, 100, 1, 3, 1.0, 1.0, 1.0, 21};
		gnb_result	r;
		int			perm[3];
		double		best = INFINITY;
		static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

		gnb_train(&s.c, &p, NULL, &r);
		for (int i = 0; i < 6; i++)
		{
			double		z = theta_z(&s, r.theta, perms[i]);

			if (z < best)
			{
				best = z;
				memcpy(perm, perms[i], sizeof(perm));
			}
		}
		CHECK(best < Z_TOLERANCE, "unsupervised 3 chains: theta-hat %.2f sd from the truth", best);
		CHECK(isfinite(r.r_hat) && r.r_hat < 1.1, "unsupervised 3 chains: r_hat %g", r.r_hat);
		printf("  synthetic unsupervised, 3 chains aligned: worst theta z = %.2f, r_hat %.3f\n",
			   best, r.r_hat);
		gnb_result_free(&r, NULL);
	}
	free_synthetic(&s);
}

/*
 * Clamped documents given by their counts alone (extra_word_counts) give
 * the very same model as the documents themselves: both samplers use them
 * only through their counts, and the random stream does not depend on them.
 * Lending the counts (lent_extra_word_counts, counted in place) gives the
 * same model to the bit, and the counts back as they were.
 */
static void
extra_counts(int K)
{
	synthetic	s;
	int			V = 40,
				D = 600;

	make_synthetic(&s, D, V, K, 30, 0.4, 91);
	for (int sm = 0; sm < 2; sm++)
	{
		gnb_params	p = {sm ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_PAPER, 60, 20, 1, 2,
		0.8, 0.6, 1.0, 5};
		server_corpus sc;
		gnb_corpus	only_free;
		double	   *words;
		int32_t    *map;
		int			n;
		gnb_result	a,
					b;
		double		diff = 0.0;

		/* the unlabelled documents as a corpus; the labelled as counts */
		make_server_corpus(&sc, &s, V, K);
		only_free = sc.c;
		words = sc.words;
		map = sc.map;
		n = sc.c.n_docs;
		CHECK(gnb_check(&only_free, &p) == NULL, "corpus with extra counts accepted");

		gnb_train(&s.c, &p, NULL, &a);
		gnb_train(&only_free, &p, NULL, &b);
		for (int i = 0; i < V * K; i++)
			diff = fmax(diff, fabs(a.theta[i] - b.theta[i]));
		for (int k = 0; k < K; k++)
			diff = fmax(diff, fabs(a.pi[k] - b.pi[k]));
		for (int i = 0; i < n; i++)
			for (int k = 0; k < K; k++)
				diff = fmax(diff, fabs(a.label_prob[(int64_t) map[i] * K + k] -
									   b.label_prob[(int64_t) i * K + k]));
		for (int t = 0; t < p.sweeps * p.chains; t++)
			diff = fmax(diff, fabs(a.log_joint[t] - b.log_joint[t]) / fabs(a.log_joint[t]));
		CHECK(diff < 1e-9, "%s: clamped documents as counts change the model by %g",
			  sm ? "collapsed" : "paper", diff);
		{
			double	   *words_before = malloc(sizeof(double) * V * K);
			gnb_corpus	lent = only_free;
			gnb_result	c;
			int			same = 1;

			memcpy(words_before, words, sizeof(double) * V * K);
			lent.lent_extra_word_counts = words;
			gnb_train(&lent, &p, NULL, &c);
			same = memcmp(b.theta, c.theta, sizeof(double) * V * K) == 0 &&
				memcmp(b.pi, c.pi, sizeof(double) * K) == 0 &&
				memcmp(b.label_prob, c.label_prob, sizeof(double) * n * K) == 0 &&
				memcmp(b.log_joint, c.log_joint, sizeof(double) * p.sweeps * p.chains) == 0;
			CHECK(same, "%s, K = %d: lent counts change the model", sm ? "collapsed" : "paper", K);
			CHECK(memcmp(words_before, words, sizeof(double) * V * K) == 0,
				  "%s, K = %d: lent counts come back as they were", sm ? "collapsed" : "paper", K);
			gnb_result_free(&c, NULL);
			free(words_before);
		}
		gnb_result_free(&a, NULL);
		gnb_result_free(&b, NULL);
		free_server_corpus(&sc);
	}
	free_synthetic(&s);
}

static void
test_extra_counts(void)
{
	extra_counts(2);
	extra_counts(3);
}

/* ---------- issue 11: tempered posterior, sampled gammas, diagnostics ---------- */

/*
 * The exact law of (L, gamma_theta, gamma_pi) on a tiny corpus: every
 * labelling of the unlabelled documents, times every grid point of each
 * sampled gamma (uniform prior on the grid), weighted by exp(log joint).
 * Gives the marginals of the labels, the probability that two documents
 * share a class (invariant to relabelling: the unsupervised check), the
 * means of the gammas and of the log joint, and the expected full-weight
 * predictive of each unlabelled document (what the collapsed sampler
 * reports as label probabilities when lambda < 1).
 */
typedef struct exact_law
{
	double		marginal[32 * 4];
	double		together[32 * 32];
	double		predictive[32 * 4];
	double		mean_g_theta;
	double		mean_g_pi;
	double		mean_log_joint;
} exact_law;

static void
enumerate_law(const gnb_corpus *c, const gnb_params *params, exact_law *out)
{
	int			K = c->n_classes;
	int			D = c->n_docs;
	int			free_docs[32];
	int			U = 0;
	long		total = 1;
	int			nt = params->sample_gamma_theta ? params->n_gamma_grid : 1;
	int			np = params->sample_gamma_pi ? params->n_gamma_grid : 1;
	double		max = -INFINITY,
				z = 0.0;
	double	   *lj;

	for (int j = 0; j < D; j++)
		if (c->label[j] < 0)
			free_docs[U++] = j;
	for (int i = 0; i < U; i++)
		total *= K;
	lj = malloc((size_t) total * nt * np * sizeof(double));
	memset(out, 0, sizeof(*out));
	for (int pass = 0; pass < 2; pass++)
		for (long code = 0; code < total; code++)
			for (int a = 0; a < nt; a++)
				for (int b = 0; b < np; b++)
				{
					gnb_params	q = *params;
					int32_t		labels[32];
					long		x = code;
					long		idx = (code * nt + a) * np + b;
					double		p;

					if (params->sample_gamma_theta)
						q.gamma_theta = params->gamma_grid[a];
					if (params->sample_gamma_pi)
						q.gamma_pi = params->gamma_grid[b];
					for (int j = 0; j < D; j++)
						labels[j] = c->label[j];
					for (int i = 0; i < U; i++)
					{
						labels[free_docs[i]] = (int32_t) (x % K);
						x /= K;
					}
					if (pass == 0)
					{
						lj[idx] = gnb_log_joint(c, &q, labels);
						if (lj[idx] > max)
							max = lj[idx];
						continue;
					}
					if (z == 0.0)
						for (long i = 0; i < total * nt * np; i++)
							z += exp(lj[i] - max);
					p = exp(lj[idx] - max) / z;
					out->mean_log_joint += p * lj[idx];
					out->mean_g_theta += p * q.gamma_theta;
					out->mean_g_pi += p * q.gamma_pi;
					for (int i = 0; i < U; i++)
					{
						int			j = free_docs[i];
						double		s[4],
									m = -INFINITY,
									tot = 0.0;
						tiny_corpus one;

						out->marginal[j * K + labels[j]] += p;
						for (int i2 = 0; i2 < U; i2++)
							if (labels[free_docs[i2]] == labels[j])
								out->together[j * 32 + free_docs[i2]] += p;
						/* j at full weight (clamped) in class k, the others as they are */
						memcpy(&one.c, c, sizeof(*c));
						memcpy(one.label, c->label, D * sizeof(int32_t));
						one.c.label = one.label;
						for (int k = 0; k < K; k++)
						{
							int32_t		l2[32];

							one.label[j] = k;
							memcpy(l2, labels, sizeof(l2));
							l2[j] = k;
							s[k] = gnb_log_joint(&one.c, &q, l2);
							if (s[k] > m)
								m = s[k];
						}
						for (int k = 0; k < K; k++)
							tot += exp(s[k] - m);
						for (int k = 0; k < K; k++)
							out->predictive[j * K + k] += p * exp(s[k] - m) / tot;
					}
				}
	free(lj);
}

/* The gammas a run ended with, from the progress hook. */
typedef struct last_gammas
{
	double		g_theta;
	double		g_pi;
	double		log_joint;
} last_gammas;

static void
keep_last(void *arg, const gnb_sweep *sw)
{
	last_gammas *l = arg;

	l->g_theta = sw->gamma_theta;
	l->g_pi = sw->gamma_pi;
	l->log_joint = sw->log_joint;
}

static int
check_z(const char *name, const char *what, int i, double est, double se, double truth,
		double *worst)
{
	double		zs = fabs(est - truth) / (se > 1e-12 ? se : 1e-12);

	if (zs > *worst)
		*worst = zs;
	if (zs > Z_TOLERANCE)
	{
		printf("  %s: %s %d: estimate %.5f +- %.5f, exact %.5f\n", name, what, i, est, se, truth);
		return 1;
	}
	return 0;
}

/*
 * The final states of `runs` independent short chains are independent
 * draws from (nearly) the target law: their label marginals, pairwise
 * co-assignments, gammas and log joints must match the enumeration within
 * Z_TOLERANCE binomial (or sample) standard errors.  With lambda < 1 and the
 * collapsed sampler the reported label probabilities (the mean full-weight
 * predictive) are checked too.
 */
static void
check_final_states(const char *name, const gnb_corpus *c, gnb_params p, int runs,
				   int check_predictive)
{
	int			K = c->n_classes;
	int			D = c->n_docs;
	exact_law	ex;
	static double freq[32 * 4],
				tog[32 * 32],
				pred[32 * 4],
				pred2[32 * 4];
	double		gt = 0,
				gt2 = 0,
				gp = 0,
				gp2 = 0,
				lj = 0,
				lj2 = 0;
	int			bad = 0,
				checked = 0;
	double		worst = 0;
	gnb_hooks	hooks = gnb_default_hooks;
	last_gammas last;

	enumerate_law(c, &p, &ex);
	memset(freq, 0, sizeof(freq));
	memset(tog, 0, sizeof(tog));
	memset(pred, 0, sizeof(pred));
	memset(pred2, 0, sizeof(pred2));
	hooks.progress = keep_last;
	hooks.arg = &last;
	for (int r = 0; r < runs; r++)
	{
		gnb_result res;

		p.seed = 1000 + (uint64_t) r;
		gnb_train(c, &p, &hooks, &res);
		for (int j = 0; j < D; j++)
		{
			if (c->label[j] >= 0)
				continue;
			freq[j * K + res.last_labels[j]] += 1.0 / runs;
			for (int j2 = 0; j2 < D; j2++)
				if (c->label[j2] < 0 && res.last_labels[j2] == res.last_labels[j])
					tog[j * 32 + j2] += 1.0 / runs;
			for (int k = 0; k < K; k++)
			{
				pred[j * K + k] += res.label_prob[j * K + k] / runs;
				pred2[j * K + k] += res.label_prob[j * K + k] * res.label_prob[j * K + k] / runs;
			}
		}
		gt += last.g_theta / runs;
		gt2 += last.g_theta * last.g_theta / runs;
		gp += last.g_pi / runs;
		gp2 += last.g_pi * last.g_pi / runs;
		lj += last.log_joint / runs;
		lj2 += last.log_joint * last.log_joint / runs;
		gnb_result_free(&res, NULL);
	}
	for (int j = 0; j < D; j++)
	{
		if (c->label[j] >= 0)
			continue;
		for (int k = 0; k < K; k++)
		{
			double		t = ex.marginal[j * K + k];

			checked++;
			bad += check_z(name, "marginal", j * K + k, freq[j * K + k],
						   sqrt(fmax(t * (1 - t), 1.0 / runs) / runs), t, &worst);
			if (check_predictive)
			{
				double		v = fmax(pred2[j * K + k] - pred[j * K + k] * pred[j * K + k], 0);

				checked++;
				bad += check_z(name, "predictive", j * K + k, pred[j * K + k],
							   sqrt(v / runs) + 1e-9, ex.predictive[j * K + k], &worst);
			}
		}
		for (int j2 = j + 1; j2 < D; j2++)
		{
			double		t = ex.together[j * 32 + j2];

			if (c->label[j2] >= 0)
				continue;
			checked++;
			bad += check_z(name, "together", j * 32 + j2, tog[j * 32 + j2],
						   sqrt(fmax(t * (1 - t), 1.0 / runs) / runs), t, &worst);
		}
	}
	checked++;
	bad += check_z(name, "E[log joint]", 0, lj, sqrt(fmax(lj2 - lj * lj, 1e-12) / runs),
				   ex.mean_log_joint, &worst);
	if (p.sample_gamma_theta)
	{
		checked++;
		bad += check_z(name, "E[gamma_theta]", 0, gt, sqrt(fmax(gt2 - gt * gt, 1e-12) / runs),
					   ex.mean_g_theta, &worst);
	}
	if (p.sample_gamma_pi)
	{
		checked++;
		bad += check_z(name, "E[gamma_pi]", 0, gp, sqrt(fmax(gp2 - gp * gp, 1e-12) / runs),
					   ex.mean_g_pi, &worst);
	}
	CHECK(bad == 0, "%s: %d of %d estimates off the exact answer", name, bad, checked);
	printf("  %-44s %3d estimates, worst |z| = %.2f\n", name, checked, worst);
}

/* Put word `w` into unlabelled documents nowhere: move its counts to word 0. */
static void
only_in_clamped(tiny_corpus *t, int w)
{
	int64_t		pos = 0;
	int64_t		start = 0;

	for (int j = 0; j < t->c.n_docs; j++)
	{
		int64_t		end = t->doc_start[j + 1];
		int64_t		first = pos;

		for (int64_t q = start; q < end; q++)
		{
			int32_t		word = t->word[q];

			if (t->label[j] < 0 && word == w)
				word = 0;
			/* merge with an earlier entry of the same word */
			{
				int64_t		e;

				for (e = first; e < pos; e++)
					if (t->word[e] == word)
						break;
				if (e < pos)
				{
					t->count[e] += t->count[q];
					continue;
				}
			}
			t->word[pos] = word;
			t->count[pos] = t->count[q];
			pos++;
		}
		start = end;
		t->doc_start[j] = first;
		t->doc_start[j + 1] = pos;
	}
	/* and make sure a clamped document has it */
	if (t->label[0] >= 0 && t->word[t->doc_start[0]] != w)
	{
		int			has = 0;

		for (int64_t q = t->doc_start[0]; q < t->doc_start[1]; q++)
			has |= t->word[q] == w;
		if (!has)
			t->word[t->doc_start[0]] = w;
	}
}

static void
test_issue11_exactness(void)
{
	static const double grid[] = {0.1, 0.5, 2.0};

	for (int s = 0; s < 3; s++)
	{
		const char *sn = sampler_name(s);
		gnb_params	p = {0};
		tiny_corpus t;
		char		name[128];

		p.sampler = sampler_of(s);
		p.sweeps = 40;
		p.burn_in = 39;
		p.lag = 1;
		p.chains = 1;
		p.gamma_pi = 0.8;
		p.gamma_theta = 0.6;

		/* 0 < lambda < 1: the tempered posterior, both samplers */
		p.unlabeled_weight = 0.5;
		make_tiny(&t, 201, 10, 5, 2, 3, 0);
		snprintf(name, sizeof(name), "%s lambda=0.5 3 clamped", sn);
		check_final_states(name, &t.c, p, 4000, s == 1);
		p.unlabeled_weight = 0.3;
		make_tiny(&t, 202, 8, 4, 3, 0, 0);
		t.count[t.doc_start[1]] = 12;	/* an unlabelled count on the lgamma path */
		snprintf(name, sizeof(name), "%s lambda=0.3 K=3 unsupervised", sn);
		check_final_states(name, &t.c, p, 4000, 0);
		p.unlabeled_weight = 1.0;

		/*
		 * Unlabelled documents with words counted more than 8 times (the
		 * lgamma path of the collapsed conditional), built so that their
		 * classes are uncertain: an error in that path moves the marginals.
		 */
		{
			static const int32_t words[][3][2] = {
				{{0, 14}, {1, 7}, {-1, 0}},	/* clamped 0 */
				{{2, 3}, {-1, 0}, {-1, 0}},	/* clamped 1 */
				{{0, 11}, {1, 11}, {-1, 0}},
				{{0, 9}, {2, 1}, {-1, 0}},
				{{1, 10}, {-1, 0}, {-1, 0}},
				{{2, 2}, {0, 1}, {-1, 0}},
			};
			int64_t		pos = 0;

			memset(&t, 0, sizeof(t));
			for (int j = 0; j < 6; j++)
			{
				t.doc_start[j] = pos;
				for (int i = 0; i < 3 && words[j][i][0] >= 0; i++)
				{
					t.word[pos] = words[j][i][0];
					t.count[pos++] = words[j][i][1];
				}
				t.label[j] = j < 2 ? j : -1;
			}
			t.doc_start[6] = pos;
			t.c = (gnb_corpus) {6, 3, 2, t.doc_start, t.word, t.count, t.label, NULL, NULL};
		}
		snprintf(name, sizeof(name), "%s unlabelled count 11", sn);
		p.gamma_theta = 0.5;
		p.gamma_pi = 1.0;
		/*
		 * Heavy documents mix slowly in paper (its theta draws hold them):
		 * long chains, the error of their averages measured from replicates.
		 */
		p.sweeps = 20000;
		p.burn_in = 500;
		check_against_exact(name, &t.c, p, 20);
		p.sweeps = 40;
		p.burn_in = 39;
		p.gamma_theta = 0.6;
		p.gamma_pi = 0.8;

		/* an empty unlabelled document (and an empty clamped one) */
		make_tiny(&t, 204, 10, 5, 2, 4, 0);
		{
			/* documents 1 (clamped) and 6 (unlabelled) lose their words */
			int64_t		pos = 0;
			int64_t		start = 0;

			for (int j = 0; j < 10; j++)
			{
				int64_t		end = t.doc_start[j + 1];
				int64_t		first = pos;

				if (j != 1 && j != 6)
					for (int64_t q = start; q < end; q++)
					{
						t.word[pos] = t.word[q];
						t.count[pos] = t.count[q];
						pos++;
					}
				start = end;
				t.doc_start[j] = first;
				t.doc_start[j + 1] = pos;
			}
		}
		snprintf(name, sizeof(name), "%s empty documents", sn);
		check_final_states(name, &t.c, p, 4000, 0);

		/* unsupervised: co-assignment probabilities, not only E[log joint] */
		make_tiny(&t, 205, 9, 4, 2, 0, 0);
		snprintf(name, sizeof(name), "%s unsupervised co-assignment", sn);
		check_final_states(name, &t.c, p, 4000, 0);

		/* gammas sampled on a grid: labels x grid enumerated */
		p.gamma_grid = grid;
		p.n_gamma_grid = 3;
		p.sample_gamma_theta = 1;
		p.sample_gamma_pi = 1;
		make_tiny(&t, 206, 9, 4, 2, 3, 0);
		snprintf(name, sizeof(name), "%s gammas sampled on a grid", sn);
		check_final_states(name, &t.c, p, 4000, 0);
		p.unlabeled_weight = 0.5;
		p.sample_gamma_pi = 0;
		snprintf(name, sizeof(name), "%s gamma_theta on a grid, lambda=0.5", sn);
		check_final_states(name, &t.c, p, 4000, 0);
		p.gamma_grid = NULL;
		p.sample_gamma_theta = 0;
		p.unlabeled_weight = 1.0;
	}

	/*
	 * A word that occurs only in clamped documents: the paper sampler's
	 * summed-shape draw.  The run-averaged estimates of check_against_exact
	 * are sensitive to the mass that draw takes from the other words.
	 */
	for (int s = 0; s < 3; s++)
	{
		tiny_corpus t;
		gnb_params	p = {0};
		char		name[128];

		make_tiny(&t, 207, 10, 5, 2, 4, 0);
		only_in_clamped(&t, 4);
		p.sampler = sampler_of(s);
		p.sweeps = 3000;
		p.burn_in = 100;
		p.lag = 1;
		p.chains = 1;
		p.gamma_pi = 1.0;
		p.gamma_theta = 0.2;
		p.unlabeled_weight = 1.0;
		snprintf(name, sizeof(name), "%s word only in clamped documents", sampler_name(s));
		check_against_exact(name, &t.c, p, 20);
	}
}

/* ---------- ESS and split R-hat against independent references ---------- */

/* Geyer's initial monotone sequence, written out directly from its definition. */
static double
reference_ess(const double *x, int n)
{
	double		mean = 0,
				rho[4096],
				gam[2048],
				tau;
	int			m;

	for (int t = 0; t < n; t++)
		mean += x[t] / n;
	for (int lag = 0; lag < n && lag < 4096; lag++)
	{
		double		acc = 0;

		for (int t = 0; t < n - lag; t++)
			acc += (x[t] - mean) * (x[t + lag] - mean);
		rho[lag] = acc / n;
	}
	for (int lag = n < 4096 ? n - 1 : 4095; lag >= 0; lag--)
		rho[lag] /= rho[0];
	for (m = 0; 2 * m + 1 < n && 2 * m + 1 < 4096; m++)
		gam[m] = rho[2 * m] + rho[2 * m + 1];
	tau = -1;
	for (int i = 0; i < m && gam[i] > 0; i++)
	{
		if (i > 0 && gam[i] > gam[i - 1])
			gam[i] = gam[i - 1];
		tau += 2 * gam[i];
	}
	return n / tau;
}

static void
test_diagnostics(void)
{
	enum
	{
	N = 20000};
	static double x[4 * N];
	gnb_rng		rng;
	double		e,
				r;
	int32_t		locked_none[2] = {0, 0},
				locked_some[2] = {0, 3};

	/* AR(1) with phi = 0.6: ESS = n (1 - phi) / (1 + phi) = n / 4 */
	gnb_rng_seed(&rng, 77);
	x[0] = gnb_rng_normal(&rng);
	for (int t = 1; t < N; t++)
		x[t] = 0.6 * x[t - 1] + gnb_rng_normal(&rng);
	e = gnb_ess(x, N);
	CHECK(fabs(e - N / 4.0) < 0.1 * N / 4.0, "AR(1) ESS %.0f, formula %.0f", e, N / 4.0);
	printf("  AR(1) phi=0.6: ESS %.0f, formula n/4 = %.0f\n", e, N / 4.0);
	/* a short series against the direct implementation (monotone case) */
	for (int n = 8; n <= 400; n *= 7)
	{
		double		ref = reference_ess(x, n);

		e = gnb_ess(x, n);
		CHECK(fabs(e - ref) < 1e-9 * ref, "ESS of %d values %.12g, reference %.12g", n, e, ref);
	}
	/* independent draws: ESS near n */
	for (int t = 0; t < N; t++)
		x[t] = gnb_rng_normal(&rng);
	e = gnb_ess(x, N);
	CHECK(fabs(e - N) < 0.1 * N, "white noise ESS %.0f of %d", e, N);
	CHECK(isnan(gnb_ess(x, 3)), "ESS of 3 values is NaN");
	{
		double		c[10] = {2, 2, 2, 2, 2, 2, 2, 2, 2, 2};

		CHECK(isnan(gnb_ess(c, 10)), "ESS of a constant series is NaN");
	}

	/* split R-hat: a hand-computed case (BDA3 11.4), then a reference */
	{
		double		h[8] = {1, 2, 3, 4, 2, 1, 4, 3};

		r = gnb_split_r_hat(h, 2, 4);
		/* W = 0.5, B = 2/3 * 4 = 8/3, var+ = 0.25 + 4/3: sqrt(3.1666...) */
		CHECK(fabs(r - sqrt((0.25 + 8.0 / 6.0) / 0.5)) < 1e-12, "split R-hat %.15g", r);
	}
	/* four chains of the same AR(1): near 1; one shifted: above the limit */
	for (int c = 0; c < 4; c++)
	{
		x[c * N] = gnb_rng_normal(&rng);
		for (int t = 1; t < N; t++)
			x[c * N + t] = 0.6 * x[c * N + t - 1] + gnb_rng_normal(&rng);
	}
	r = gnb_split_r_hat(x, 4, N);
	CHECK(r < 1.01, "split R-hat of 4 stationary chains %.4f", r);
	{
		/* reference: the 8 halves as separate series, variance formula spelled out */
		double		means[8],
					vars[8],
					w = 0,
					b = 0,
					g = 0,
					ref;
		int			n2 = N / 2;

		for (int t = 0; t < N; t++)
			x[3 * N + t] += 1.0;
		for (int h = 0; h < 8; h++)
		{
			const double *y = x + (h / 2) * N + (h % 2) * n2;

			means[h] = 0;
			for (int t = 0; t < n2; t++)
				means[h] += y[t] / n2;
			vars[h] = 0;
			for (int t = 0; t < n2; t++)
				vars[h] += (y[t] - means[h]) * (y[t] - means[h]) / (n2 - 1);
			g += means[h] / 8;
			w += vars[h] / 8;
		}
		for (int h = 0; h < 8; h++)
			b += n2 * (means[h] - g) * (means[h] - g) / 7;
		ref = sqrt(((n2 - 1.0) / n2 * w + b / n2) / w);
		r = gnb_split_r_hat(x, 4, N);
		CHECK(fabs(r - ref) < 1e-9, "split R-hat %.12f, reference %.12f", r, ref);
		CHECK(r > GNB_R_HAT_LIMIT, "a shifted chain: split R-hat %.3f above the limit", r);
	}
	/* a trend within one chain shows in split R-hat (not in plain R-hat) */
	for (int t = 0; t < N; t++)
		x[t] = gnb_rng_normal(&rng) + 2.0 * t / N;
	r = gnb_split_r_hat(x, 1, N);
	CHECK(r > GNB_R_HAT_LIMIT, "a trending chain: split R-hat %.3f", r);

	/* the warnings */
	CHECK(gnb_diagnose(1.01, 500, locked_none, 2, 10, 0, 0.99) == 0, "no warning for a good run");
	CHECK(gnb_diagnose(1.2, 500, locked_none, 2, 10, 0, NAN) == GNB_WARN_R_HAT, "R-hat warning");
	CHECK(gnb_diagnose(1.01, 50, locked_none, 2, 10, 0, NAN) == GNB_WARN_ESS, "ESS warning");
	CHECK(gnb_diagnose(1.01, 500, locked_some, 2, 10, 0, NAN) == GNB_WARN_STUCK, "stuck warning");
	CHECK(gnb_diagnose(1.01, 500, locked_none, 2, 10, 0, 0.8) == GNB_WARN_CHAINS,
		  "chains that disagree");
	CHECK(gnb_diagnose(NAN, NAN, locked_some, 2, 0, 0, NAN) == 0,
		  "nothing sampled: no warning");
	CHECK(gnb_diagnose(NAN, 20, locked_some, 2, 0, 1, NAN) == GNB_WARN_ESS,
		  "only gammas sampled: ESS judged, no stuck chain");

	/* from real runs: a chain that cannot move, and one that mixes */
	{
		tiny_corpus tc;
		gnb_params	p = {GNB_SAMPLER_COLLAPSED, 400, 100, 1, 2, 1.0, 0.5, 1.0, 3};
		gnb_result	res;

		/* documents 0, 1 clamped to 0 and 1; 2, 3 unlabelled copies of them */
		memset(&tc, 0, sizeof(tc));
		for (int j = 0; j < 4; j++)
		{
			tc.doc_start[j] = j;
			tc.word[j] = j % 2;
			tc.count[j] = 1000;
			tc.label[j] = j < 2 ? j : -1;
		}
		tc.doc_start[4] = 4;
		tc.c = (gnb_corpus) {4, 2, 2, tc.doc_start, tc.word, tc.count, tc.label, NULL, NULL};
		gnb_train(&tc.c, &p, NULL, &res);
		CHECK(res.changed_after_burn_in[0] == 0 && res.locked[0] == 0 && res.locked[1] == 0 &&
			  !(res.warnings & GNB_WARN_STUCK),
			  "a chain whose labels are certain changes none and is not stuck (%d changed, "
			  "%d locked, warnings %d)", res.changed_after_burn_in[0], res.locked[0],
			  res.warnings);
		gnb_result_free(&res, NULL);

		/*
		 * A document held by theta: document 2, unlabelled, has ten words
		 * no other document has, five times each.  With theta and pi
		 * integrated out those words say nothing of its class, and the two
		 * classes are alike (one clamped document each, the same length):
		 * it should change class about every other sweep.  The paper
		 * sampler draws theta from its own counts, which makes its class
		 * about 6^50 times likelier than the other: it never moves.
		 */
		memset(&tc, 0, sizeof(tc));
		tc.word[0] = 0;
		tc.count[0] = 20;
		tc.word[1] = 1;
		tc.count[1] = 20;
		for (int w = 0; w < 10; w++)
		{
			tc.word[2 + w] = 2 + w;
			tc.count[2 + w] = 5;
		}
		tc.doc_start[1] = 1;
		tc.doc_start[2] = 2;
		tc.doc_start[3] = 12;
		tc.label[0] = 0;
		tc.label[1] = 1;
		tc.label[2] = -1;
		tc.c = (gnb_corpus) {3, 12, 2, tc.doc_start, tc.word, tc.count, tc.label, NULL, NULL};
		p.sampler = GNB_SAMPLER_PAPER;
		gnb_train(&tc.c, &p, NULL, &res);
		CHECK(res.locked[0] == 1 && res.locked[1] == 1 && (res.warnings & GNB_WARN_STUCK),
			  "paper: the document theta holds is locked in both chains (%d, %d; warnings %d)",
			  res.locked[0], res.locked[1], res.warnings);
		gnb_result_free(&res, NULL);
		p.sampler = GNB_SAMPLER_COLLAPSED;
		gnb_train(&tc.c, &p, NULL, &res);
		CHECK(res.changed_after_burn_in[0] > 50 && res.locked[0] == 0 &&
			  !(res.warnings & GNB_WARN_STUCK),
			  "collapsed: the same document moves (%d changes) and nothing is locked (%d)",
			  res.changed_after_burn_in[0], res.locked[0]);
		gnb_result_free(&res, NULL);

		make_tiny(&tc, 301, 10, 4, 2, 0, 0);
		p.sweeps = 3000;
		p.burn_in = 200;
		gnb_train(&tc.c, &p, NULL, &res);
		printf("  a mixing run: ESS %.0f, split R-hat %.4f, warnings %d\n",
			   res.ess_total, res.split_r_hat, res.warnings);
		CHECK(res.warnings == 0, "a mixing run: no warning (%d)", res.warnings);
		CHECK(res.ess[0] > 0 && fabs(res.ess[0] + res.ess[1] - res.ess_total) < 1e-9,
			  "ESS total is the chains' sum");
		CHECK(fabs(res.ess[0] - gnb_ess(res.kept_log_joint, res.kept_points)) < 1e-9,
			  "ESS of the kept log joints");
		gnb_result_free(&res, NULL);
		/* too short a run: the ESS warning */
		p.sweeps = 60;
		p.burn_in = 20;
		gnb_train(&tc.c, &p, NULL, &res);
		CHECK(res.warnings & GNB_WARN_ESS, "40 kept sweeps: ESS %.1f flagged", res.ess_total);
		gnb_result_free(&res, NULL);
	}
}


/*
 * The start from the labels (GNB_INIT_LABELS).  Two classes, 3% of the
 * documents labelled, short collapsed chains: started from the labelled-only
 * model a chain begins in the labels' mode and every seed ends there; the
 * uniform start is run beside it and its swapped seeds are only shown (the
 * swaps depend on the seed; the start from the labels must have none).
 */
static void
test_start_from_labels(void)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 30, 10, 1, 1, 1.0, 0.5, 1.0, 0};
	int			worst_labels = 1000,
				swapped_random = 0;

	make_synthetic(&syn, 400, 60, 2, 25, 0.03, 77);
	for (uint64_t seed = 1; seed <= 10; seed++)
	{
		for (int init = 0; init < 2; init++)
		{
			gnb_result	res;
			int			right = 0,
						hidden = 0;

			p.seed = seed;
			p.init = init ? GNB_INIT_RANDOM : GNB_INIT_LABELS;
			gnb_train(&syn.c, &p, NULL, &res);
			for (int j = 0; j < syn.c.n_docs; j++)
				if (syn.label[j] < 0)
				{
					hidden++;
					right += (res.label_prob[2 * j + 1] > 0.5) == (syn.truth[j] == 1);
				}
			if (init)
				swapped_random += right < hidden / 2;
			else if (1000 * right / hidden < worst_labels)
				worst_labels = 1000 * right / hidden;
			gnb_result_free(&res, NULL);
		}
	}
	printf("  3%% labels, 10 seeds: started from the labels, worst accuracy %.3f; "
		   "started at random, %d swapped\n", worst_labels / 1000.0, swapped_random);
	CHECK(worst_labels >= 900, "every chain started from the labels ends in their mode: %.3f",
		  worst_labels / 1000.0);
	/* what the start is for: these seeds do swap from the uniform start */
	CHECK(swapped_random > 0, "some chain started at random swaps (%d)", swapped_random);
	free_synthetic(&syn);
}

/*
 * The label check (gnb_label_check.h): quiet on a good model; on the same
 * model with its classes swapped (a chain in the class-swapped mode) it
 * finds the model worse and names the drift; its figures go to the result.
 */
static void
test_label_check(void)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 60, 20, 1, 1, 1.0, 0.5, 1.0, 5};
	gnb_result	res;
	gnb_label_check lc;
	const int	V = 60;

	make_synthetic(&syn, 600, V, 2, 25, 0.1, 78);
	gnb_train(&syn.c, &p, NULL, &res);
	gnb_check_labels(&syn.c, &p, &res, NULL, NULL, &lc);
	printf("  good model: %d labelled, agreement %.3f, labels alone %.3f, margin %.3f\n",
		   lc.n, lc.model_agreement, lc.labels_agreement, lc.margin);
	CHECK(lc.n > 30 && !lc.worse && !(res.warnings & GNB_WARN_LABELS) && lc.drift_from == -1,
		  "a good model is not worse than its labels (%.3f vs %.3f)",
		  lc.model_agreement, lc.labels_agreement);
	CHECK(lc.model_agreement > 0.85 && res.labels_agreement == lc.model_agreement &&
		  res.labels_only_agreement == lc.labels_agreement,
		  "its agreement %.3f, in the result", lc.model_agreement);
	/* the same model, classes swapped: theta-hat's rows, pi-hat, the labels' probabilities */
	for (int w = 0; w < V; w++)
	{
		double		t = res.theta[w];

		res.theta[w] = res.theta[V + w];
		res.theta[V + w] = t;
	}
	for (int j = 0; j < syn.c.n_docs; j++)
	{
		double		t = res.label_prob[2 * j];

		res.label_prob[2 * j] = res.label_prob[2 * j + 1];
		res.label_prob[2 * j + 1] = t;
	}
	{
		double		t = res.pi[0];

		res.pi[0] = res.pi[1];
		res.pi[1] = t;
	}
	/* and the unlabelled documents' mass, per class, of both sums */
	for (int m = 0; m < 2; m++)
	{
		double		t = res.unlabeled_mass[2 * m];

		res.unlabeled_mass[2 * m] = res.unlabeled_mass[2 * m + 1];
		res.unlabeled_mass[2 * m + 1] = t;
	}
	gnb_check_labels(&syn.c, &p, &res, NULL, NULL, &lc);
	printf("  swapped model: agreement %.3f, labels alone %.3f, drift %d -> %d\n",
		   lc.model_agreement, lc.labels_agreement, lc.drift_from, lc.drift_to);
	CHECK(lc.worse && (res.warnings & GNB_WARN_LABELS) && lc.drift_from == 0 &&
		  lc.drift_to == 1, "a swapped model is worse, drifted from class 0 to 1 (%d -> %d)",
		  lc.drift_from, lc.drift_to);
	gnb_result_free(&res, NULL);

	/* with lambda = 0 the model is the labels' own: never worse */
	p.unlabeled_weight = 0.0;
	gnb_train(&syn.c, &p, NULL, &res);
	gnb_check_labels(&syn.c, &p, &res, NULL, NULL, &lc);
	CHECK(!lc.worse && fabs(lc.model_agreement - lc.labels_agreement) < 0.05,
		  "lambda 0: the labels' model (%.3f vs %.3f)", lc.model_agreement, lc.labels_agreement);
	/* chains: one gives no agreement, four that find one mode agree */
	CHECK(isnan(res.chain_agreement), "one chain: no chain agreement");
	gnb_result_free(&res, NULL);
	p.unlabeled_weight = 1.0;
	p.chains = 4;
	gnb_train(&syn.c, &p, NULL, &res);
	printf("  4 chains: agreement %.4f\n", res.chain_agreement);
	CHECK(res.chain_agreement > 0.95 && res.chain_agreement <= 1.0 &&
		  !(res.warnings & GNB_WARN_CHAINS), "4 chains in one mode agree: %.4f",
		  res.chain_agreement);
	gnb_result_free(&res, NULL);
	free_synthetic(&syn);
}

/*
 * Exact sums (gnb_exact_sum): 4,000 terms of every magnitude from 2^-70 to
 * 2^40, of both signs, summed in their order, in the reverse and cut into
 * three parts merged in another: the same words, and a value within the
 * terms' rounding (2^-60 each) of a long double sum of them in magnitude
 * order; the terms negated, its negation.  Exact where doubles are not:
 * 0.1 + 0.2 - 0.3 is 2^-55 (the doubles' exact sum), 1e17 + 1 - 1e17 is 1,
 * a hundred -1e-17 are -1e-15.  A term of 2^62 or NaN makes the sum NaN.
 */
static void
test_exact_sum(void)
{
	const int	n = 4000;
	double	   *t = malloc(sizeof(double) * n);
	gnb_exact_sum forward = {0},
				backward = {0},
				negated = {0},
				cut[3] = {{0}},
				merged = {0},
				s = {0};
	long double ref = 0.0L;
	gnb_rng		rng;

	gnb_rng_seed(&rng, 5);
	for (int i = 0; i < n; i++)
	{
		double		e = -70.0 + 110.0 * gnb_rng_uniform(&rng);

		t[i] = ldexp(gnb_rng_uniform(&rng), (int) e) * (gnb_rng_uniform(&rng) < 0.3 ? -1 : 1);
	}
	for (int i = 0; i < n; i++)
	{
		gnb_exact_add(&forward, t[i]);
		gnb_exact_add(&backward, t[n - 1 - i]);
		gnb_exact_add(&negated, -t[i]);
		gnb_exact_add(&cut[i % 3], t[i]);
	}
	gnb_exact_merge(&merged, &cut[2]);
	gnb_exact_merge(&merged, &cut[0]);
	gnb_exact_merge(&merged, &cut[1]);
	CHECK(forward.lo == backward.lo && forward.hi == backward.hi && forward.lo == merged.lo &&
		  forward.hi == merged.hi && !forward.invalid,
		  "an exact sum is the same in any order and any cut");
	/* the reference: small terms first, in long double (64-bit mantissa) */
	for (int e = -80; e <= 45; e++)
		for (int i = 0; i < n; i++)
			if (fabs(t[i]) >= ldexp(1.0, e - 1) && fabs(t[i]) < ldexp(1.0, e))
				ref += t[i];
	CHECK(fabsl((long double) gnb_exact_value(&forward) - ref) <=
		  n * ldexp(1.0, -60) + fabsl(ref) * 0x1p-52,
		  "an exact sum is the sum: %.17g against %.17Lg", gnb_exact_value(&forward), ref);
	gnb_exact_add(&s, 0.1);
	gnb_exact_add(&s, 0.2);
	gnb_exact_add(&s, -0.3);
	CHECK(gnb_exact_value(&s) == 0x1p-55, "0.1 + 0.2 - 0.3: %a", gnb_exact_value(&s));
	CHECK(gnb_exact_value(&negated) == -gnb_exact_value(&forward) &&
		  negated.lo == ~forward.lo + 1 && negated.hi == ~forward.hi + (forward.lo == 0),
		  "the terms negated, the sum negated: %.17g against %.17g",
		  gnb_exact_value(&negated), gnb_exact_value(&forward));
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 100; i++)
		gnb_exact_add(&s, -1e-17);
	CHECK(fabs(gnb_exact_value(&s) + 1e-15) <= 100 * 0x1p-61,
		  "a hundred -1e-17: %.17g", gnb_exact_value(&s));
	memset(&s, 0, sizeof(s));
	gnb_exact_add(&s, 1e17);
	gnb_exact_add(&s, 1.0);
	gnb_exact_add(&s, -1e17);
	CHECK(gnb_exact_value(&s) == 1.0, "1e17 + 1 - 1e17: %g", gnb_exact_value(&s));
	memset(&s, 0, sizeof(s));
	gnb_exact_add(&s, -2.5);
	CHECK(gnb_exact_value(&s) == -2.5, "-2.5 alone: %g", gnb_exact_value(&s));
	gnb_exact_add(&s, 0x1p62);
	CHECK(isnan(gnb_exact_value(&s)), "a term of 2^62 makes the sum NaN");
	memset(&s, 0, sizeof(s));
	gnb_exact_add(&s, NAN);
	gnb_exact_merge(&forward, &s);
	CHECK(isnan(gnb_exact_value(&forward)), "a NaN term, merged, makes the sum NaN");
	free(t);
}

/*
 * Documents held elsewhere (gnb_corpus.doc_length): the label check of a
 * corpus that lists its unlabelled documents without their pairs, with
 * the result's mass (gnb_result.unlabeled_mass, their holders'), is the
 * check of the corpus that has them; with the mass of documents of no
 * length it is not (the test can fail).  The labels-only model leaves
 * their probabilities alone, and gnb_labels_only_doc gives each document
 * the probabilities gnb_labels_only_model gives it where the pairs are.
 */
static void
test_documents_held_elsewhere(void)
{
	synthetic	syn;
	const int	V = 60,
				K = 2;
	gnb_params	p = {GNB_SAMPLER_BLOCKED, 60, 20, 1, 1, 1.0, 0.5, 1.0, 9};
	gnb_corpus	here,
				held,
				checked;
	double	   *extra = calloc((size_t) V * K, sizeof(double));
	double		extra_docs[2] = {0, 0};
	int64_t    *all_count = calloc(V, sizeof(int64_t));
	int64_t    *no_pairs;
	int64_t    *u_start,
			   *c_start;
	int32_t    *u_word,
			   *u_count,
			   *u_label,
			   *c_word,
			   *c_count,
			   *c_label;
	double	   *length;
	int32_t		n_u = 0,
				n_c = 0;
	int64_t		pu = 0,
				pc = 0;
	int			same = 1,
				differs_without = 0,
				scores_same = 1;

	make_synthetic(&syn, 600, V, K, 10, 0.05, 81);
	u_start = calloc(syn.c.n_docs + 1, sizeof(int64_t));
	c_start = calloc(syn.c.n_docs + 1, sizeof(int64_t));
	u_word = calloc(syn.doc_start[syn.c.n_docs] + 1, sizeof(int32_t));
	u_count = calloc(syn.doc_start[syn.c.n_docs] + 1, sizeof(int32_t));
	c_word = calloc(syn.doc_start[syn.c.n_docs] + 1, sizeof(int32_t));
	c_count = calloc(syn.doc_start[syn.c.n_docs] + 1, sizeof(int32_t));
	u_label = calloc(syn.c.n_docs, sizeof(int32_t));
	c_label = calloc(syn.c.n_docs, sizeof(int32_t));
	length = calloc(syn.c.n_docs, sizeof(double));
	no_pairs = calloc(syn.c.n_docs + 1, sizeof(int64_t));
	/* the labelled documents as the server gives them: counts, and checked */
	for (int j = 0; j < syn.c.n_docs; j++)
	{
		int			y = syn.label[j];

		for (int64_t q = syn.doc_start[j]; q < syn.doc_start[j + 1]; q++)
			if (y >= 0)
			{
				extra[(int64_t) syn.word[q] * K + y] += syn.count[q];
				c_word[pc] = syn.word[q];
				c_count[pc++] = syn.count[q];
			}
			else
			{
				all_count[syn.word[q]] += syn.count[q];
				length[n_u] += syn.count[q];
				u_word[pu] = syn.word[q];
				u_count[pu++] = syn.count[q];
			}
		if (y >= 0)
		{
			extra_docs[y] += 1;
			c_label[n_c++] = y;
			c_start[n_c] = pc;
		}
		else
		{
			u_label[n_u++] = -1;
			u_start[n_u] = pu;
		}
	}
	memset(&here, 0, sizeof(here));
	here.n_docs = n_u;
	here.n_words = V;
	here.n_classes = K;
	here.doc_start = u_start;
	here.word = u_word;
	here.count = u_count;
	here.label = u_label;
	here.extra_word_counts = extra;
	here.extra_doc_counts = extra_docs;
	memset(&checked, 0, sizeof(checked));
	checked.n_docs = n_c;
	checked.n_words = V;
	checked.n_classes = K;
	checked.doc_start = c_start;
	checked.word = c_word;
	checked.count = c_count;
	checked.label = c_label;
	held = here;
	held.doc_start = no_pairs;
	held.all_unlabeled_count = all_count;
	held.all_n_unlabeled = n_u;
	held.doc_length = length;
	CHECK(gnb_check(&held, &p) == NULL, "a corpus of documents held elsewhere is usable");
	for (int round = 0; round < 6; round++)
	{
		gnb_result	res;
		gnb_label_check a,
					b,
					c;
		double		token_mass[2];

		p.seed = 100 + round;
		p.unlabeled_weight = round < 3 ? 1.0 : 0.5;
		gnb_train(&here, &p, NULL, &res);
		gnb_check_labels(&here, &p, &res, &checked, NULL, &a);
		gnb_check_labels(&held, &p, &res, &checked, NULL, &b);
		/* the tokens' mass of documents of no length */
		memcpy(token_mass, res.unlabeled_mass + K, sizeof(token_mass));
		memset(res.unlabeled_mass + K, 0, sizeof(token_mass));
		gnb_check_labels(&held, &p, &res, &checked, NULL, &c);
		memcpy(res.unlabeled_mass + K, token_mass, sizeof(token_mass));
		same &= a.n == b.n && a.model_right == b.model_right && a.labels_right == b.labels_right &&
			a.only_model == b.only_model && a.only_labels == b.only_labels &&
			a.worse == b.worse && a.drift_from == b.drift_from && a.drift_to == b.drift_to;
		differs_without += a.model_right != c.model_right || a.only_model != c.only_model;
		/* the labels-only model: here it scores the documents; held, not */
		{
			gnb_result	r2 = res;
			double	   *prob = malloc(sizeof(double) * K * n_u + 1);
			double	   *theta = malloc(sizeof(double) * K * V);
			double		pi[2],
						s2[2],
						one[2];

			memcpy(prob, res.label_prob, sizeof(double) * K * n_u);
			memcpy(theta, res.theta, sizeof(double) * K * V);
			memcpy(pi, res.pi, sizeof(pi));
			r2.theta = theta;
			r2.pi = pi;
			r2.label_prob = prob;
			gnb_labels_only_model(&held, &p, &r2, NULL);
			scores_same &= memcmp(prob, res.label_prob, sizeof(double) * K * n_u) == 0;
			gnb_labels_only_model(&here, &p, &res, NULL);
			for (int j = 0; j < n_u; j++)
			{
				int32_t		best = gnb_labels_only_doc(theta, pi, extra, K, V,
													   u_word + u_start[j], u_count + u_start[j],
													   u_start[j + 1] - u_start[j], s2, one);

				scores_same &= memcmp(one, res.label_prob + (int64_t) j * K, sizeof(one)) == 0 &&
					best == res.last_labels[j];
			}
			free(prob);
			free(theta);
		}
		gnb_result_free(&res, NULL);
	}
	printf("  label check of held documents: same in 6 of 6 runs: %s; with no tokens' mass, "
		   "%d of 6 differ\n", same ? "yes" : "no", differs_without);
	CHECK(same, "the label check of documents held elsewhere is the check of the documents");
	CHECK(differs_without > 0, "the tokens' mass matters to the check (%d of 6)", differs_without);
	CHECK(scores_same, "the labels-only model's scores of held documents, one by one");
	free(extra);
	free(all_count);
	free(no_pairs);
	free(u_start);
	free(c_start);
	free(u_word);
	free(u_count);
	free(c_word);
	free(c_count);
	free(u_label);
	free(c_label);
	free(length);
	free_synthetic(&syn);
}

/*
 * Chains that disagree: three clusters of documents, no labels, two
 * classes.  Each chain puts two of the clusters together, and which two
 * depends on the chain; no alignment of two classes can match partitions
 * that merged different pairs.
 */
static void
test_chains_disagree(void)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 40, 20, 1, 4, 1.0, 0.5, 1.0, 0};
	int			flagged = 0;
	double		least = 1.0;

	make_synthetic(&syn, 300, 60, 3, 30, 0.0, 79);
	syn.c.n_classes = 2;
	for (uint64_t seed = 1; seed <= 5; seed++)
	{
		gnb_result	res;

		p.seed = seed;
		gnb_train(&syn.c, &p, NULL, &res);
		if (res.chain_agreement < least)
			least = res.chain_agreement;
		flagged += (res.warnings & GNB_WARN_CHAINS) != 0;
		CHECK(((res.warnings & GNB_WARN_CHAINS) != 0) ==
			  (res.chain_agreement < GNB_AGREEMENT_LIMIT),
			  "the warning is the agreement below the limit (%.3f)", res.chain_agreement);
		gnb_result_free(&res, NULL);
	}
	printf("  3 clusters, 2 classes, 4 chains, 5 seeds: least agreement %.3f, %d flagged\n",
		   least, flagged);
	CHECK(flagged > 0 && least < GNB_AGREEMENT_LIMIT, "chains in different modes are flagged (%d, %.3f)",
		  flagged, least);
	free_synthetic(&syn);
}

/*
 * The largest gammas (GNB_GAMMA_LIMIT), which the SQL call once let past up
 * to any finite number: 1e300 reached the blocked sampler's integer sums of
 * lgamma terms (a 64-bit overflow, which UBSan in test_core_asan stops at)
 * and a conversion to int in its setup.  Past the limit gnb_check refuses;
 * at it, every sampler trains to finite estimates.
 */
static void
test_gamma_limit(void)
{
	const double gammas[] = {GNB_GAMMA_LIMIT, 1.0e300, 3.0e9};
	const double grid[2] = {1.0, GNB_GAMMA_LIMIT * (1.0 + 1e-9)};
	const gnb_params base = {.sweeps = 20, .burn_in = 10, .lag = 1, .chains = 1, .gamma_pi = 1.0,
	.gamma_theta = 1.0, .unlabeled_weight = 1.0, .seed = 5};
	tiny_corpus g;
	gnb_params	gp = base;

	for (size_t i = 0; i < sizeof(gammas) / sizeof(gammas[0]); i++)
		for (int sm = 0; sm < 3; sm++)
			for (int which = 0; which < 2; which++)
			{
				tiny_corpus t;
				gnb_params	p = base;
				gnb_result	res;
				int			finite = 1;
				const char *problem;

				make_tiny(&t, 31 + i, 8, 5, 2, 2, 0);
				p.sampler = sm == 0 ? GNB_SAMPLER_PAPER :
					sm == 1 ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_BLOCKED;
				if (which == 0)
					p.gamma_pi = gammas[i];
				else
					p.gamma_theta = gammas[i];
				problem = gnb_check(&t.c, &p);
				if (gammas[i] > GNB_GAMMA_LIMIT)
				{
					CHECK(problem != NULL, "gamma %g (%s) sampler %d: accepted", gammas[i],
						  which == 0 ? "pi" : "theta", sm);
					continue;
				}
				CHECK(problem == NULL, "gamma %g sampler %d: refused: %s", gammas[i], sm,
					  problem);
				if (problem != NULL)
					continue;
				gnb_train(&t.c, &p, NULL, &res);
				for (int64_t j = 0; j < (int64_t) t.c.n_words * t.c.n_classes; j++)
					finite &= isfinite(res.theta[j]) != 0;
				for (int32_t k = 0; k < t.c.n_classes; k++)
					finite &= isfinite(res.pi[k]) != 0;
				CHECK(finite && isfinite(res.final_log_joint),
					  "gamma %g (%s) sampler %d: estimates not finite", gammas[i],
					  which == 0 ? "pi" : "theta", sm);
				gnb_result_free(&res, NULL);
			}
	/* the messages say the limit: its text is its number */
	CHECK(strtod(GNB_GAMMA_LIMIT_TEXT, NULL) == GNB_GAMMA_LIMIT, "GNB_GAMMA_LIMIT_TEXT is %s",
		  GNB_GAMMA_LIMIT_TEXT);
	/* a grid point past the limit is refused as a fixed gamma is */
	make_tiny(&g, 41, 8, 5, 2, 2, 0);
	gp.sampler = GNB_SAMPLER_COLLAPSED;
	gp.sample_gamma_theta = 1;
	gp.gamma_grid = grid;
	gp.n_gamma_grid = 1;
	CHECK(gnb_check(&g.c, &gp) == NULL, "a grid at 1 refused");
	gp.n_gamma_grid = 2;
	CHECK(gnb_check(&g.c, &gp) != NULL, "a grid point past the limit accepted");
}

/*
 * The labels-only model (gnb_labels_only_model) with words only unlabelled
 * documents have: theta-hat sums to 1 per class, such a word has one
 * probability in every class, and the label probabilities are those of
 * Naive Bayes on the labelled documents with their own vocabulary.
 */
static void
test_labels_only_model(void)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 4, 2, 1, 1, 1.0, 0.5, 1.0, 6};
	gnb_result	res;
	gnb_label_check lc;
	const int	V = 80;
	char		known[80] = {0};
	double		L[80 * 2] = {0},
				Lk[2] = {0},
				C[2] = {0};
	int			vocabulary = 0,
				others = 0;
	double		worst_sum = 0.0,
				worst_other = 0.0,
				worst_prob = 0.0;

	make_synthetic(&syn, 200, V, 2, 20, 0.05, 80);
	gnb_train(&syn.c, &p, NULL, &res);
	gnb_check_labels(&syn.c, &p, &res, NULL, NULL, &lc);
	gnb_labels_only_model(&syn.c, &p, &res, NULL);
	for (int j = 0; j < syn.c.n_docs; j++)
		if (syn.label[j] >= 0)
		{
			C[syn.label[j]] += 1;
			for (int64_t q = syn.doc_start[j]; q < syn.doc_start[j + 1]; q++)
			{
				L[syn.word[q] * 2 + syn.label[j]] += syn.count[q];
				Lk[syn.label[j]] += syn.count[q];
				vocabulary += !known[syn.word[q]];
				known[syn.word[q]] = 1;
			}
		}
	for (int k = 0; k < 2; k++)
	{
		double		sum = 0.0;

		for (int w = 0; w < V; w++)
			sum += res.theta[k * V + w];
		worst_sum = fmax(worst_sum, fabs(sum - 1.0));
	}
	for (int w = 0; w < V; w++)
		if (!known[w])
		{
			others++;
			worst_other = fmax(worst_other, fabs(res.theta[w] - res.theta[V + w]));
		}
	for (int j = 0; j < syn.c.n_docs; j++)
		if (syn.label[j] < 0)
		{
			double		s[2];

			for (int k = 0; k < 2; k++)
			{
				s[k] = log((C[k] + 1.0) / (C[0] + C[1] + 2.0));
				for (int64_t q = syn.doc_start[j]; q < syn.doc_start[j + 1]; q++)
					if (known[syn.word[q]])
						s[k] += syn.count[q] * log((L[syn.word[q] * 2 + k] + 0.5) /
												   (Lk[k] + vocabulary * 0.5));
			}
			worst_prob = fmax(worst_prob, fabs(res.label_prob[2 * j + 1] -
											   1.0 / (1.0 + exp(s[0] - s[1]))));
		}
	printf("  labels-only model: %d of %d words only unlabelled; |sum - 1| %.1e, "
		   "their theta apart %.1e, label probabilities off %.1e\n",
		   others, V, worst_sum, worst_other, worst_prob);
	CHECK(others > 0 && worst_sum < 1e-12 && worst_other == 0.0 && worst_prob < 1e-9,
		  "the labels-only model: %d other words, %.1e, %.1e, %.1e", others, worst_sum,
		  worst_other, worst_prob);
	CHECK(res.warnings == 0 && lc.n > 0 && res.labels_agreement == lc.labels_agreement,
		  "no chain warning, the labels' agreement (%.3f)", res.labels_agreement);
	gnb_result_free(&res, NULL);
	free_synthetic(&syn);
}

/*
 * Chains are aligned whenever some class has no clamped document: with only
 * class 0 clamped, classes 1 and 2 may come out swapped between chains, and
 * averaging them unaligned blurs every label probability of those classes.
 */
static void
test_partial_alignment(void)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 200, 100, 1, 4, 1.0, 0.5, 1.0, 0};
	int			sharp = 0,
				n = 0;
	gnb_result	res;

	make_synthetic(&syn, 300, 40, 3, 40, 0.3, 31);
	for (int j = 0; j < syn.c.n_docs; j++)
		if (syn.label[j] != 0)
			syn.label[j] = -1;
	p.seed = 4;
	gnb_train(&syn.c, &p, NULL, &res);
	for (int j = 0; j < syn.c.n_docs; j++)
		if (syn.label[j] < 0 && syn.truth[j] != 0)
		{
			double		best = 0;

			for (int k = 0; k < 3; k++)
				best = fmax(best, res.label_prob[j * 3 + k]);
			sharp += best > 0.95;
			n++;
		}
	printf("  only class 0 clamped, 4 chains: %d of %d documents of classes 1, 2 sharp\n", sharp, n);
	CHECK(sharp > 0.95 * n, "4 chains aligned with one class clamped: %d of %d sharp", sharp, n);
	/* the clamped class kept its identity: its documents are still class 0 */
	for (int j = 0; j < syn.c.n_docs; j++)
		if (syn.label[j] < 0 && syn.truth[j] == 0)
			CHECK(res.label_prob[j * 3] > 0.5, "a class-0 document %d left class 0", j);
	gnb_result_free(&res, NULL);
	free_synthetic(&syn);
}


/*
 * A chain run alone, and chains combined afterwards: chains trained in any
 * order (here the last first) and combined in index order give exactly
 * gnb_train's result.
 */
/*
 * The blocked sampler's phases split over "processes": its arrays handed
 * out by the hooks (as shared memory would be), each phase's units cut
 * into `pieces` ranges drawn last range first, each by a helper of its own
 * (as a sweep worker would).  Every split gives the model of the unsplit
 * chain bit for bit, with lambda < 1 (the predictive sums) and a sampled
 * gamma_theta.
 */
typedef struct split_arg
{
	gnb_blocked_arrays arrays;
	gnb_blocked_helper *helper[8];
	int			pieces;
	int64_t		phases;
	int64_t		uncovered;		/* phases whose parts did not add up to the units */
} split_arg;

static int
split_arrays(void *arg, gnb_blocked_arrays *a)
{
	*a = ((split_arg *) arg)->arrays;
	return 1;
}

static void
split_phase(void *arg, const gnb_blocked_step *step)
{
	split_arg  *sa = arg;
	int64_t		units = gnb_blocked_units(sa->helper[0], step->phase);
	int64_t		covered = 0;

	for (int piece = sa->pieces - 1; piece >= 0; piece--)
	{
		int64_t		from,
					to;

		gnb_blocked_part(sa->helper[piece], step->phase, piece, sa->pieces, &from, &to);
		gnb_blocked_helper_run(sa->helper[piece], &sa->arrays, step, from, to);
		covered += to - from;
	}
	sa->uncovered += covered != units;
	sa->phases++;
}

static void
check_blocked_split(int32_t K, double gamma_theta, int sample_gamma, double lambda)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_BLOCKED, 60, 20, 1, 2, 0.8, gamma_theta, lambda, 91};
	gnb_result	whole;
	static const int pieces[] = {1, 2, 3, 7};

	make_synthetic(&syn, 400, 700, K, 20, 0.2, 43);
	p.sample_gamma_theta = sample_gamma;
	gnb_train(&syn.c, &p, NULL, &whole);
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
	{
		split_arg	sa;
		size_t		sizes[GNB_BLOCKED_N_ARRAYS];
		gnb_hooks	hooks = gnb_default_hooks;
		gnb_result	split;
		int			same = 1;

		memset(&sa, 0, sizeof(sa));
		gnb_blocked_sizes(syn.c.n_docs, syn.c.n_words, syn.c.n_classes, &p, sizes);
		sa.arrays.log_theta = calloc(1, sizes[GNB_BLOCKED_LOG_THETA]);
		sa.arrays.N = calloc(1, sizes[GNB_BLOCKED_N]);
		sa.arrays.log_pi = calloc(1, sizes[GNB_BLOCKED_LOG_PI]);
		sa.arrays.next_label = calloc(1, sizes[GNB_BLOCKED_NEXT_LABEL]);
		sa.arrays.pred = calloc(1, sizes[GNB_BLOCKED_PRED]);
		sa.arrays.block_lse = calloc(1, sizes[GNB_BLOCKED_BLOCK_LSE]);
		sa.pieces = pieces[i];
		for (int h = 0; h < sa.pieces; h++)
			sa.helper[h] = gnb_blocked_helper_begin(&syn.c, &p, &gnb_default_hooks);
		hooks.blocked_arrays = split_arrays;
		hooks.blocked_phase = split_phase;
		hooks.arg = &sa;
		gnb_train(&syn.c, &p, &hooks, &split);
		for (int j = 0; j < syn.c.n_docs * K; j++)
			same &= whole.label_prob[j] == split.label_prob[j];
		for (int j = 0; j < syn.c.n_words * K; j++)
			same &= whole.theta[j] == split.theta[j];
		for (int j = 0; j < 2 * p.sweeps; j++)
			same &= whole.log_joint[j] == split.log_joint[j];
		same &= whole.gamma_theta == split.gamma_theta && whole.pi[0] == split.pi[0] &&
			whole.final_log_joint == split.final_log_joint;
		/* per chain: the first theta, then labels and theta every sweep */
		CHECK(sa.phases == 2 * (1 + 2 * (int64_t) p.sweeps),
			  "blocked split in %d, K = %d: %lld phases handed out", sa.pieces, K,
			  (long long) sa.phases);
		CHECK(same, "blocked split in %d pieces, K = %d, gamma_theta %g%s, lambda %g: "
			  "the model of the unsplit chain", sa.pieces, K, gamma_theta,
			  sample_gamma ? " sampled" : "", lambda);
		CHECK(sa.uncovered == 0, "blocked split in %d pieces, K = %d: %lld phases' parts missed units",
			  sa.pieces, K, (long long) sa.uncovered);
		gnb_result_free(&split, NULL);
		for (int h = 0; h < sa.pieces; h++)
			gnb_blocked_helper_end(sa.helper[h]);
		free(sa.arrays.log_theta);
		free(sa.arrays.N);
		free(sa.arrays.log_pi);
		free(sa.arrays.next_label);
		free(sa.arrays.pred);
		free(sa.arrays.block_lse);
	}
	gnb_result_free(&whole, NULL);
	free_synthetic(&syn);
}

/*
 * The blocked sampler keys a document's draws by gnb_corpus.doc_key, not by
 * its place: the same documents in another order, each under its old index
 * as its key, give the same chain (each document's label probabilities,
 * theta, pi and the log joint's trace bit for bit).  This is what lets each
 * Citus node draw the labels of the documents it holds.  The counts are
 * exact in any order (integers at lambda = 1; below, each entry formed from
 * its clamped part and the unlabelled documents' integer counts) and S's
 * changes are summed as integers (gnb_label_blocked.c, "The blocked
 * sampler's counts").
 */
static void
check_blocked_order(int32_t K, int sample_gamma, double lambda)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_BLOCKED, 40, 10, 1, 2, 0.8, 1.5, 1.0, 17};
	gnb_result	ordered,
				shuffled;
	gnb_corpus	c;
	int32_t    *perm;
	int64_t    *doc_start;
	int32_t    *word,
			   *count,
			   *label;
	uint64_t   *key;
	gnb_rng		rng;
	int			same_labels = 1,
				same_theta = 1,
				same_trace = 1;
	int64_t		pos = 0;

	make_synthetic(&syn, 300, 500, K, 20, 0.2, 57);
	p.sample_gamma_theta = sample_gamma;
	p.unlabeled_weight = lambda;
	gnb_train(&syn.c, &p, NULL, &ordered);

	/* a shuffle of the documents, each carrying its index as its key */
	perm = malloc(syn.c.n_docs * sizeof(int32_t));
	for (int32_t j = 0; j < syn.c.n_docs; j++)
		perm[j] = j;
	gnb_rng_seed(&rng, 5);
	for (int32_t j = syn.c.n_docs - 1; j > 0; j--)
	{
		int32_t		r = (int32_t) (gnb_rng_uniform(&rng) * (j + 1));
		int32_t		t = perm[j];

		perm[j] = perm[r];
		perm[r] = t;
	}
	doc_start = malloc((syn.c.n_docs + 1) * sizeof(int64_t));
	word = malloc(syn.c.doc_start[syn.c.n_docs] * sizeof(int32_t));
	count = malloc(syn.c.doc_start[syn.c.n_docs] * sizeof(int32_t));
	label = malloc(syn.c.n_docs * sizeof(int32_t));
	key = malloc(syn.c.n_docs * sizeof(uint64_t));
	for (int32_t j = 0; j < syn.c.n_docs; j++)
	{
		int32_t		o = perm[j];

		doc_start[j] = pos;
		for (int64_t q = syn.c.doc_start[o]; q < syn.c.doc_start[o + 1]; q++, pos++)
		{
			word[pos] = syn.c.word[q];
			count[pos] = syn.c.count[q];
		}
		label[j] = syn.c.label[o];
		key[j] = (uint64_t) o;
	}
	doc_start[syn.c.n_docs] = pos;
	c = syn.c;
	c.doc_start = doc_start;
	c.word = word;
	c.count = count;
	c.label = label;
	c.doc_key = key;
	gnb_train(&c, &p, NULL, &shuffled);

	for (int32_t j = 0; j < syn.c.n_docs; j++)
		for (int32_t k = 0; k < K; k++)
			same_labels &= shuffled.label_prob[(int64_t) j * K + k] ==
				ordered.label_prob[(int64_t) perm[j] * K + k];
	for (int64_t i = 0; i < (int64_t) syn.c.n_words * K; i++)
		same_theta &= shuffled.theta[i] == ordered.theta[i];
	for (int k = 0; k < K; k++)
		same_theta &= shuffled.pi[k] == ordered.pi[k];
	same_theta &= shuffled.gamma_theta == ordered.gamma_theta;
	for (int32_t i = 0; i < p.chains * p.sweeps; i++)
		same_trace &= shuffled.log_joint[i] == ordered.log_joint[i];
	CHECK(same_labels, "blocked, K = %d%s, lambda %g, documents shuffled under their keys: the same label "
		  "probabilities", K, sample_gamma ? ", gamma sampled" : "", lambda);
	CHECK(same_theta, "blocked, K = %d%s, lambda %g, documents shuffled under their keys: the same theta, pi "
		  "and gamma", K, sample_gamma ? ", gamma sampled" : "", lambda);
	CHECK(same_trace, "blocked, K = %d%s, lambda %g, documents shuffled under their keys: the same log joint",
		  K, sample_gamma ? ", gamma sampled" : "", lambda);

	/* and the keys matter: the shuffled corpus under its own indices is another chain */
	c.doc_key = NULL;
	gnb_result_free(&shuffled, NULL);
	gnb_train(&c, &p, NULL, &shuffled);
	same_theta = 1;
	for (int64_t i = 0; i < (int64_t) syn.c.n_words * K; i++)
		same_theta &= shuffled.theta[i] == ordered.theta[i];
	CHECK(!same_theta, "blocked, K = %d, lambda %g: the shuffled documents without their keys draw "
		  "another chain", K, lambda);

	gnb_result_free(&shuffled, NULL);
	gnb_result_free(&ordered, NULL);
	free(perm);
	free(doc_start);
	free(word);
	free(count);
	free(label);
	free(key);
	free_synthetic(&syn);
}

/*
 * The blocked sampler's S with gamma_theta fixed is kept by integer sums of
 * its terms' changes (gnb_label_blocked.c): a term of a count of 10^8 is
 * lgamma about 1.7 x 10^9, past 2^63 in units of 2^-32 alone.  A labelled
 * document holds its words 10^8 and 3 x 10^8 times; unlabelled documents
 * with each word once move in and out of its class.  The last sweep's log joint must be
 * the one recomputed from the labels.
 */
static void
test_blocked_big_terms(void)
{
	tiny_corpus t;
	gnb_params	p = {GNB_SAMPLER_BLOCKED, 60, 10, 1, 1, 1.0, 1.0, 1.0, 3};
	gnb_result	r;
	int64_t		pos = 0;
	double		recomputed;

	memset(&t, 0, sizeof(t));
	t.c.n_docs = 12;
	t.c.n_words = 3;
	t.c.n_classes = 2;
	for (int j = 0; j < t.c.n_docs; j++)
	{
		t.doc_start[j] = pos;
		t.label[j] = j < 2 ? j : -1;
		for (int w = 0; w < 3; w++)
		{
			t.word[pos] = w;
			t.count[pos++] = j == 0 ? (w == 0 ? 300000000 : 100000000) : j == 1 ? 5 : 1;
		}
	}
	t.doc_start[t.c.n_docs] = pos;
	t.c.doc_start = t.doc_start;
	t.c.word = t.word;
	t.c.count = t.count;
	t.c.label = t.label;
	gnb_train(&t.c, &p, NULL, &r);
	recomputed = gnb_log_joint(&t.c, &p, r.last_labels);
	CHECK(fabs(r.log_joint[p.sweeps - 1] - recomputed) < 1e-3,
		  "blocked, counts of 1e8 and 3e8: kept log joint %.6f, recomputed %.6f",
		  r.log_joint[p.sweeps - 1], recomputed);
	gnb_result_free(&r, NULL);
}

/* The nodes of check_blocked_nodes, answering in reverse order. */
typedef struct nodes_arg
{
	gnb_node   *node[3];
	int			n;
	int64_t		calls;
	/* calls and answers as bytes (gnb_node_wire.c): the chain's shape */
	int			wire;
	int32_t		K;
	int32_t		V;
	const char *wire_error;
	int			probed;			/* probe_wire_errors ran */
	/* what the nodes said they hold, summed over the chains' starts */
	int64_t		held_docs;
	int64_t		held_tokens;
} nodes_arg;

/*
 * Bytes that are not a call or an answer of the chain's shape are refused
 * before anything is read: a call cut short or one byte long, of another
 * kind, with another magic, with log theta's count one off; an answer cut
 * short, naming an entry past the chain's, or claiming more entries than
 * it holds.
 */
static void
probe_wire_errors(nodes_arg *na, const gnb_node_call *call, const uint8_t *bytes, size_t size)
{
	uint8_t    *b = malloc(size + 1);
	gnb_node_call decoded;
	gnb_count_changes ch,
				back;
	int64_t		entry[2] = {0, 0},
				delta[2] = {3, -3},
				docs[8] = {0},
				tokens[8] = {0},
				out_entry[2],
				out_delta[2];
	uint8_t		answer[256];
	size_t		asize;

	memcpy(b, bytes, size);
	b[size] = 0;
	CHECK(gnb_node_call_decode(na->node[0], b, size, &decoded) == NULL, "the call itself decodes");
	CHECK(gnb_node_call_decode(na->node[0], b, size - 1, &decoded) != NULL, "a call cut short");
	CHECK(gnb_node_call_decode(na->node[0], b, size + 1, &decoded) != NULL, "a call a byte long");
	b[0] ^= 1;
	CHECK(gnb_node_call_decode(na->node[0], b, size, &decoded) != NULL, "a call's magic");
	b[0] ^= 1;
	b[4] = 9;
	CHECK(gnb_node_call_decode(na->node[0], b, size, &decoded) != NULL, "a call of kind 9");
	b[4] = (uint8_t) call->what;
	b[36]++;					/* log theta's count, little-endian */
	CHECK(gnb_node_call_decode(na->node[0], b, size, &decoded) != NULL,
		  "a call with log theta's count one off");
	free(b);

	memset(&ch, 0, sizeof(ch));
	ch.n_entries = 2;
	entry[1] = call->max_entries - 1;
	ch.entry = entry;
	ch.delta = delta;
	ch.docs = docs;
	ch.tokens = tokens;
	asize = gnb_count_changes_size(&ch, na->K);
	gnb_count_changes_encode(&ch, na->K, answer);
	CHECK(gnb_count_changes_decode(answer, asize, na->K, call->max_entries, out_entry, out_delta,
								   docs, tokens, &back) == NULL &&
		  back.n_entries == 2 && back.entry[1] == call->max_entries - 1 && back.delta[1] == -3,
		  "an answer decodes to itself");
	CHECK(gnb_count_changes_decode(answer, asize - 1, na->K, call->max_entries, out_entry,
								   out_delta, docs, tokens, &back) != NULL, "an answer cut short");
	CHECK(gnb_count_changes_decode(answer, asize, na->K, call->max_entries - 1, out_entry,
								   out_delta, docs, tokens, &back) != NULL,
		  "an answer naming an entry past the chain's");
	CHECK(gnb_count_changes_decode(answer, asize, na->K, 1, out_entry, out_delta, docs, tokens,
								   &back) != NULL, "an answer with more entries than allowed");
	na->probed = 1;
}

static void
nodes_answer(void *arg, const gnb_node_call *call)
{
	nodes_arg  *na = arg;
	uint8_t    *bytes = NULL;
	size_t		size = 0;
	int64_t		theta_length = call->theta_length;
	int64_t		max = call->max_entries;

	if (na->wire)
	{
		size = gnb_node_call_size(call, theta_length, na->K, na->V);
		bytes = malloc(size);
		gnb_node_call_encode(call, theta_length, na->K, na->V, bytes);
		if (!na->probed && call->what == GNB_NODE_LABELS && max > 2)
			probe_wire_errors(na, call, bytes, size);
	}
	for (int i = na->n - 1; i >= 0; i--)
	{
		gnb_node_call decoded;
		const gnb_count_changes *ch;
		gnb_count_changes back;
		int64_t    *entry,
				   *delta,
				   docs[8],
				   tokens[8];
		uint8_t    *answer;
		const char *err;

		if (!na->wire)
		{
			ch = gnb_node_run(na->node[i], call);
			na->held_docs += ch->held_docs;
			na->held_tokens += ch->held_tokens;
			call->apply(call->coordinator, ch);
			continue;
		}
		if ((err = gnb_node_call_decode(na->node[i], bytes, size, &decoded)) != NULL)
		{
			na->wire_error = err;
			continue;
		}
		ch = gnb_node_run(na->node[i], &decoded);
		answer = malloc(gnb_count_changes_size(ch, na->K));
		gnb_count_changes_encode(ch, na->K, answer);
		entry = malloc((max + 1) * sizeof(int64_t));
		delta = malloc((max + 1) * sizeof(int64_t));
		if ((err = gnb_count_changes_decode(answer, gnb_count_changes_size(ch, na->K), na->K,
											max, entry, delta, docs, tokens, &back)) != NULL)
			na->wire_error = err;
		else
		{
			na->held_docs += back.held_docs;
			na->held_tokens += back.held_tokens;
			call->apply(call->coordinator, &back);
		}
		free(answer);
		free(entry);
		free(delta);
	}
	free(bytes);
	na->calls++;
}

/*
 * The blocked chain split over nodes (gnb_nodes.h): the unlabelled
 * documents cut into 1 and 3 nodes (each document to the node a stream
 * picks, shuffled within it, under its index as its key), the clamped ones
 * given to every node and to the chain as extra counts, the chain itself
 * holding no document.  Each chain must be gnb_train_chain's on the whole
 * corpus bit for bit: theta, pi, gammas, the log joint, changed and kept
 * traces, the locked documents, and every document's label probabilities
 * and last label.  With warm, a warm start for every third document.  The
 * chains combined where the documents are (gnb_node_fold, in the nodes'
 * order and merged in the reverse one) must give gnb_combine's result on
 * the whole corpus bit for bit: chain_agreement, the mass, every
 * document's means and last label.
 */
/*
 * A node's n documents' probabilities and last labels (by their place in
 * the part) equal, bit for bit, the whole corpus's rows of their documents
 * (origin: each one's index there)?
 */
static int
node_labels_match(const double *prob, const int32_t *last, const int32_t *origin, int32_t n,
				  int32_t K, const double *label_prob, const int32_t *last_labels)
{
	int			same = 1;

	for (int32_t d = 0; d < n; d++)
	{
		int32_t		j = origin[d];

		same &= last[d] == last_labels[j];
		for (int32_t k = 0; k < K; k++)
			same &= prob[(int64_t) d * K + k] == label_prob[(int64_t) j * K + k];
	}
	return same;
}

static void
check_blocked_nodes(int32_t K, int sample_gamma, double lambda, int warm)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_BLOCKED, 40, 10, 1, 2, 0.8, 1.5, 1.0, 23};
	const int32_t V = 500;
	const int32_t D = 300;
	double	   *extra_word = calloc((size_t) V * K, sizeof(double));
	double	   *extra_docs = calloc(K, sizeof(double));
	int64_t    *all_count = calloc(V, sizeof(int64_t));
	int32_t    *init = calloc(D, sizeof(int32_t));
	int64_t		n_unlabeled = 0;
	int64_t		zero = 0;
	int32_t		no_label = -1;

	make_synthetic(&syn, D, V, K, 20, 0.2, 61);
	p.sample_gamma_theta = sample_gamma;
	p.unlabeled_weight = lambda;
	p.init = GNB_INIT_LABELS;
	for (int32_t j = 0; j < D; j++)
	{
		int32_t		label = syn.c.label[j];

		init[j] = warm && j % 3 == 0 && label < 0 ? (j / 3) % K : -1;
		if (label < 0)
			n_unlabeled++;
		else
			extra_docs[label] += 1.0;
		for (int64_t q = syn.c.doc_start[j]; q < syn.c.doc_start[j + 1]; q++)
			if (label < 0)
				all_count[syn.c.word[q]] += syn.c.count[q];
			else
				extra_word[(int64_t) syn.c.word[q] * K + label] += syn.c.count[q];
	}
	if (warm)
		syn.c.init_label = init;

	for (int n_nodes = 1; n_nodes <= 3; n_nodes += 2)
	{
		nodes_arg	na;
		gnb_corpus	part[3],
					chain_corpus;
		int32_t    *origin[3];
		int64_t    *starts[3];
		int32_t    *words[3],
				   *counts[3],
				   *labels[3],
				   *inits[3];
		uint64_t   *keys[3];
		gnb_rng		rng;
		gnb_hooks	hooks = gnb_default_hooks;
		int32_t    *node_of = calloc(D, sizeof(int32_t));
		gnb_corpus	held_corpus;
		int64_t    *held_start;
		int32_t    *held_label;
		double	   *held_length;
		gnb_combiner *whole_cb,
				   *held_cb;
		gnb_result	whole_res,
					held_res;
		int			fold_ok = 1;

		memset(&na, 0, sizeof(na));
		gnb_rng_seed(&rng, 7 + n_nodes);
		for (int32_t j = 0; j < D; j++)
			node_of[j] = (int32_t) (gnb_rng_uniform(&rng) * n_nodes);
		for (int i = 0; i < n_nodes; i++)
		{
			int32_t		n = 0;
			int64_t		pos = 0;

			origin[i] = calloc(D, sizeof(int32_t));
			starts[i] = calloc(D + 1, sizeof(int64_t));
			words[i] = calloc(syn.c.doc_start[D] + 1, sizeof(int32_t));
			counts[i] = calloc(syn.c.doc_start[D] + 1, sizeof(int32_t));
			labels[i] = calloc(D, sizeof(int32_t));
			inits[i] = calloc(D, sizeof(int32_t));
			keys[i] = calloc(D, sizeof(uint64_t));
			/* its documents, last first */
			for (int32_t j = D - 1; j >= 0; j--)
				if (node_of[j] == i && syn.c.label[j] < 0)
				{
					origin[i][n] = j;
					starts[i][n] = pos;
					for (int64_t q = syn.c.doc_start[j]; q < syn.c.doc_start[j + 1]; q++, pos++)
					{
						words[i][pos] = syn.c.word[q];
						counts[i][pos] = syn.c.count[q];
					}
					labels[i][n] = -1;
					inits[i][n] = init[j];
					keys[i][n] = (uint64_t) j;
					n++;
				}
			starts[i][n] = pos;
			memset(&part[i], 0, sizeof(part[i]));
			part[i].n_docs = n;
			part[i].n_words = V;
			part[i].n_classes = K;
			part[i].doc_start = starts[i];
			part[i].word = words[i];
			part[i].count = counts[i];
			part[i].label = labels[i];
			part[i].extra_word_counts = extra_word;
			part[i].extra_doc_counts = extra_docs;
			part[i].init_label = warm ? inits[i] : NULL;
			part[i].doc_key = keys[i];
			part[i].all_unlabeled_count = all_count;
			part[i].all_n_unlabeled = n_unlabeled;
			CHECK(gnb_check(&part[i], &p) == NULL, "node %d of %d: %s", i, n_nodes,
				  gnb_check(&part[i], &p));
			na.node[i] = gnb_node_begin(&part[i], &p, NULL);
		}
		na.n = n_nodes;
		/* three nodes over bytes (gnb_node_wire.c) */
		na.wire = n_nodes == 3;
		na.K = K;
		na.V = V;
		memset(&chain_corpus, 0, sizeof(chain_corpus));
		chain_corpus.n_words = V;
		chain_corpus.n_classes = K;
		chain_corpus.doc_start = &zero;
		chain_corpus.word = &no_label;
		chain_corpus.count = &no_label;
		chain_corpus.label = &no_label;
		chain_corpus.extra_word_counts = extra_word;
		chain_corpus.extra_doc_counts = extra_docs;
		chain_corpus.init_label = warm ? &no_label : NULL;
		chain_corpus.all_unlabeled_count = all_count;
		chain_corpus.all_n_unlabeled = n_unlabeled;
		CHECK(gnb_check(&chain_corpus, &p) == NULL, "the nodes' chain: %s",
			  gnb_check(&chain_corpus, &p));
		hooks.blocked_nodes = nodes_answer;
		hooks.arg = &na;
		/* the combiner's corpus where nodes hold the documents: no pairs, their lengths */
		held_start = calloc(n_unlabeled + 1, sizeof(int64_t));
		held_label = malloc(sizeof(int32_t) * (n_unlabeled + 1));
		held_length = calloc(n_unlabeled + 1, sizeof(double));
		for (int64_t u = 0, j = 0; j < D; j++)
			if (syn.c.label[j] < 0)
			{
				for (int64_t q = syn.c.doc_start[j]; q < syn.c.doc_start[j + 1]; q++)
					held_length[u] += syn.c.count[q];
				held_label[u++] = -1;
			}
		held_corpus = chain_corpus;
		held_corpus.n_docs = (int32_t) n_unlabeled;
		held_corpus.doc_start = held_start;
		held_corpus.label = held_label;
		held_corpus.doc_length = held_length;
		held_corpus.init_label = NULL;
		whole_cb = gnb_combine_begin(&syn.c, &p, NULL, &whole_res);
		held_cb = gnb_combine_begin(&held_corpus, &p, NULL, &held_res);
		CHECK(held_res.label_prob == NULL && held_res.last_labels == NULL,
			  "the combiner of documents held elsewhere makes no room for their estimates");

		for (int32_t c = 0; c < p.chains; c++)
		{
			gnb_chain	whole,
						split;
			int			same_model = 1,
						same_trace = 1,
						same_labels = 1;

			gnb_train_chain(&syn.c, &p, c, NULL, &whole);
			gnb_train_chain(&chain_corpus, &p, c, &hooks, &split);
			for (int64_t i = 0; i < (int64_t) V * K; i++)
				same_model &= whole.theta[i] == split.theta[i];
			for (int32_t k = 0; k < K; k++)
				same_model &= whole.pi[k] == split.pi[k];
			same_model &= whole.gamma_theta == split.gamma_theta &&
				whole.gamma_pi == split.gamma_pi;
			for (int32_t t = 0; t < p.sweeps; t++)
				same_trace &= whole.log_joint[t] == split.log_joint[t] &&
					whole.changed[t] == split.changed[t];
			for (int32_t t = 0; t < whole.kept_points; t++)
				same_trace &= whole.kept_log_joint[t] == split.kept_log_joint[t];
			same_trace &= whole.locked == split.locked &&
				whole.changed_after_burn_in == split.changed_after_burn_in &&
				whole.last_log_joint == split.last_log_joint;
			for (int i = 0; i < n_nodes; i++)
			{
				const double *prob;
				const int32_t *last;

				gnb_node_estimates(na.node[i], &prob, &last);
				same_labels &= node_labels_match(prob, last, origin[i], part[i].n_docs, K,
												 whole.label_prob, whole.last_labels);
			}
			CHECK(same_model && same_trace && same_labels,
				  "blocked, K = %d%s, lambda %g%s, %d node%s, chain %d: theta, pi, gammas %s, "
				  "traces %s, labels %s as the whole corpus's chain (locked %lld)",
				  K, sample_gamma ? ", gamma sampled" : "", lambda, warm ? ", warm" : "",
				  n_nodes, n_nodes > 1 ? "s" : "", c, same_model ? "the same" : "differ",
				  same_trace ? "the same" : "differ", same_labels ? "the same" : "differ",
				  (long long) whole.locked);
			gnb_combine_add(whole_cb, &whole);
			{
				double	   *own_prob = split.label_prob;
				int32_t    *own_last = split.last_labels;
				const int32_t *perm;
				gnb_exact_sum distance = {0};
				gnb_exact_sum part[3];

				split.label_prob = NULL;
				split.last_labels = NULL;
				perm = gnb_combine_add(held_cb, &split);
				for (int i = 0; i < n_nodes; i++)
				{
					memset(&part[i], 0, sizeof(part[i]));
					fold_ok &= gnb_node_fold(na.node[i], c, perm, &part[i]) == NULL;
					/* again: the chain folded already */
					fold_ok &= gnb_node_fold(na.node[i], c, perm, &part[i]) != NULL;
					/* the next, before it ran */
					fold_ok &= gnb_node_fold(na.node[i], c + 1, perm, &part[i]) != NULL;
				}
				for (int i = n_nodes - 1; i >= 0; i--)
					gnb_exact_merge(&distance, &part[i]);
				gnb_combine_distance(held_cb, &distance);
				split.label_prob = own_prob;
				split.last_labels = own_last;
			}
			gnb_chain_free(&whole, NULL);
			gnb_chain_free(&split, NULL);
		}
		gnb_combine_end(whole_cb);
		gnb_combine_end(held_cb);
		{
			gnb_exact_sum mass[16];
			int			same_combined = 1;

			memset(mass, 0, sizeof(mass));
			fold_ok &= gnb_node_combine_end(na.node[0], p.chains + 1, mass) != NULL;
			for (int i = 0; i < n_nodes; i++)
			{
				const double *prob;
				const int32_t *last;

				fold_ok &= gnb_node_combine_end(na.node[i], p.chains, mass) == NULL;
				gnb_node_combined(na.node[i], &prob, &last);
				same_combined &= node_labels_match(prob, last, origin[i], part[i].n_docs, K,
												   whole_res.label_prob, whole_res.last_labels);
			}
			for (int32_t k = 0; k < 2 * K; k++)
				same_combined &= gnb_exact_value(&mass[k]) == whole_res.unlabeled_mass[k];
			same_combined &= memcmp(&held_res.chain_agreement, &whole_res.chain_agreement,
									sizeof(double)) == 0 && !isnan(whole_res.chain_agreement);
			for (int64_t i = 0; i < (int64_t) V * K; i++)
				same_combined &= held_res.theta[i] == whole_res.theta[i];
			CHECK(fold_ok && same_combined,
				  "blocked, K = %d, lambda %g, %d node%s: the chains combined on the nodes %s "
				  "(chain agreement %.17g and %.17g), folds in order %s",
				  K, lambda, n_nodes, n_nodes > 1 ? "s" : "",
				  same_combined ? "as on the whole corpus" : "differ",
				  held_res.chain_agreement, whole_res.chain_agreement,
				  fold_ok ? "only" : "not enforced");
		}
		gnb_result_free(&whole_res, NULL);
		gnb_result_free(&held_res, NULL);
		free(held_start);
		free(held_label);
		free(held_length);
		/* the first labels, every sweep, the end: per chain */
		CHECK(na.calls == p.chains * (2 + (int64_t) p.sweeps),
			  "%d nodes: %lld calls", n_nodes, (long long) na.calls);
		{
			int64_t		tokens = 0;

			for (int32_t w = 0; w < V; w++)
				tokens += all_count[w];
			CHECK(na.held_docs == p.chains * n_unlabeled && na.held_tokens == p.chains * tokens,
				  "%d nodes hold %lld documents and %lld tokens at each start, of %lld and %lld",
				  n_nodes, (long long) na.held_docs / p.chains,
				  (long long) na.held_tokens / p.chains, (long long) n_unlabeled, (long long) tokens);
		}
		CHECK(na.wire_error == NULL && na.probed == na.wire, "%d nodes over bytes: %s", n_nodes,
			  na.wire_error ? na.wire_error : "probed");
		for (int i = 0; i < n_nodes; i++)
		{
			gnb_node_end(na.node[i]);
			free(origin[i]);
			free(starts[i]);
			free(words[i]);
			free(counts[i]);
			free(labels[i]);
			free(inits[i]);
			free(keys[i]);
		}
		free(node_of);
	}
	free(extra_word);
	free(extra_docs);
	free(all_count);
	free(init);
	free_synthetic(&syn);
}

/*
 * Three classes (the general layout), and two (the packed pairs and
 * log-odds): with gamma_theta sampled from below 1 and lambda < 1, and
 * fixed at 1.5 (the theta draws' summed branch) with lambda = 1.
 */
static void
test_blocked_split(void)
{
	check_blocked_split(3, 0.3, 1, 0.6);
	check_blocked_split(2, 0.3, 1, 0.6);
	check_blocked_split(2, 1.5, 0, 1.0);
	check_blocked_order(3, 0, 1.0);
	check_blocked_order(2, 0, 1.0);
	check_blocked_order(2, 1, 1.0);
	check_blocked_order(3, 1, 0.6);
	check_blocked_order(3, 0, 0.5);
	check_blocked_order(2, 0, 0.4);
	check_blocked_nodes(2, 0, 1.0, 0);
	check_blocked_nodes(3, 0, 1.0, 1);
	check_blocked_nodes(2, 1, 0.6, 1);
	check_blocked_nodes(3, 1, 0.5, 0);
	check_blocked_nodes(3, 0, 0.4, 0);
	check_blocked_nodes(2, 0, 0.0, 0);
	test_blocked_big_terms();
}

static void
test_chains_apart(void)
{
	synthetic	syn;
	gnb_params	p = {GNB_SAMPLER_PAPER, 120, 40, 2, 3, 0.8, 0.3, 0.5, 77};
	gnb_result	whole,
				parts;
	gnb_chain	chains[3];
	gnb_combiner *cb;
	int			same = 1;

	make_synthetic(&syn, 200, 30, 3, 30, 0.2, 41);
	p.sample_gamma_theta = 1;
	gnb_train(&syn.c, &p, NULL, &whole);
	for (int c = 2; c >= 0; c--)
		gnb_train_chain(&syn.c, &p, c, NULL, &chains[c]);
	cb = gnb_combine_begin(&syn.c, &p, NULL, &parts);
	for (int c = 0; c < 3; c++)
		gnb_combine_add(cb, &chains[c]);
	gnb_combine_end(cb);
	for (int i = 0; i < syn.c.n_docs * 3; i++)
		same &= whole.label_prob[i] == parts.label_prob[i];
	for (int i = 0; i < syn.c.n_words * 3; i++)
		same &= whole.theta[i] == parts.theta[i];
	for (int i = 0; i < 3 * p.sweeps; i++)
		same &= whole.log_joint[i] == parts.log_joint[i];
	same &= whole.gamma_theta == parts.gamma_theta && whole.ess_total == parts.ess_total &&
		whole.split_r_hat == parts.split_r_hat && whole.r_hat == parts.r_hat &&
		whole.final_log_joint == parts.final_log_joint && whole.warnings == parts.warnings;
	CHECK(same, "chains trained apart and combined equal gnb_train");
	for (int c = 0; c < 3; c++)
		gnb_chain_free(&chains[c], NULL);
	gnb_result_free(&whole, NULL);
	gnb_result_free(&parts, NULL);
	free_synthetic(&syn);
}

/* ---------- gamma_theta recovered from synthetic corpora ---------- */


typedef struct gamma_trace
{
	double		sum,
				sum2;
	int			n;
	int			burn_in;
} gamma_trace;

static void
collect_gamma(void *arg, const gnb_sweep *sw)
{
	gamma_trace *g = arg;

	if (sw->sweep <= g->burn_in)
		return;
	g->sum += log(sw->gamma_theta);
	g->sum2 += log(sw->gamma_theta) * log(sw->gamma_theta);
	g->n++;
}

static void
test_gamma_recovery(void)
{
	static const double truth[] = {0.05, 2.0};

	for (int i = 0; i < 2; i++)
		for (int s = 0; s < 2; s++)
		{
			synthetic	syn;
			gnb_params	p = {s == 0 ? GNB_SAMPLER_PAPER : GNB_SAMPLER_COLLAPSED,
			300, 100, 1, 1, 1.0, 1.0, 1.0, 11};
			gnb_hooks	hooks = gnb_default_hooks;
			gamma_trace gt = {0, 0, 0, 100};
			gnb_result	res;
			double		mean,
						sd;

			synthetic_gamma_theta = truth[i];
			make_synthetic(&syn, 300, 200, 2, 60, 0.3, 21 + i);
			p.sample_gamma_theta = 1;
			p.sample_gamma_pi = 1;
			hooks.progress = collect_gamma;
			hooks.arg = &gt;
			gnb_train(&syn.c, &p, &hooks, &res);
			mean = gt.sum / gt.n;
			sd = sqrt(fmax(gt.sum2 / gt.n - mean * mean, 0));
			printf("  %-9s true gamma_theta %.2f: posterior of log gamma %.3f +- %.3f (%.3f), mean gamma %.4f\n",
				   s ? "collapsed" : "paper", truth[i], mean, sd, log(truth[i]), res.gamma_theta);
			CHECK(fabs(mean - log(truth[i])) < 4 * sd + 0.05,
				  "gamma_theta %.2f: posterior log gamma %.3f +- %.3f misses the truth",
				  truth[i], mean, sd);
			gnb_result_free(&res, NULL);
			free_synthetic(&syn);
		}
	synthetic_gamma_theta = 1.0;
}

/* ---------- hooks ---------- */

typedef struct hook_counts
{
	int			progress;
	int			interrupts;
	int			last_sweep;
	size_t		live_allocs;
} hook_counts;

static void *
counting_alloc(size_t size, void *arg)
{
	((hook_counts *) arg)->live_allocs++;
	return calloc(1, size ? size : 1);
}

static void
counting_release(void *ptr, void *arg)
{
	((hook_counts *) arg)->live_allocs--;
	free(ptr);
}

static void
count_progress(void *arg, const gnb_sweep *sw)
{
	hook_counts *h = arg;

	h->progress++;
	h->last_sweep = sw->sweep;
}

static void
count_interrupts(void *arg)
{
	((hook_counts *) arg)->interrupts++;
}

static void
test_hooks(void)
{
	synthetic	s;
	hook_counts h = {0};
	gnb_hooks	hooks = {counting_alloc, counting_release, count_progress, count_interrupts, &h};
	gnb_params	p = {GNB_SAMPLER_PAPER, 7, 2, 1, 2, 1.0, 1.0, 1.0, 4};
	gnb_result	r;

	make_synthetic(&s, 5000, 10, 2, 5, 0.0, 9);
	gnb_train(&s.c, &p, &hooks, &r);
	CHECK(h.progress == 14 && h.last_sweep == 7, "progress once per sweep and chain: %d", h.progress);
	/*
	 * 5000 unlabelled documents, a check every 2048: 3 per sweep, and up to
	 * 3 per chain as its end looks for locked documents
	 */
	CHECK(h.interrupts >= 3 * 14 && h.interrupts <= 3 * 14 + 3 * 2,
		  "interrupt checks inside sweeps: %d", h.interrupts);
	gnb_result_free(&r, &hooks);
	CHECK(h.live_allocs == 0, "every allocation released: %zu left", h.live_allocs);
	free_synthetic(&s);
}

/* An allocator that knows its live bytes and their peak. */
typedef struct byte_counts
{
	size_t		live;
	size_t		peak;
} byte_counts;

static void *
bytes_alloc(size_t size, void *arg)
{
	byte_counts *b = arg;
	size_t	   *p = calloc(1, sizeof(size_t) + (size ? size : 1));

	p[0] = size;
	b->live += size;
	if (b->live > b->peak)
		b->peak = b->live;
	return p + 1;
}

static void
bytes_release(void *ptr, void *arg)
{
	size_t	   *p = (size_t *) ptr - 1;

	((byte_counts *) arg)->live -= p[0];
	free(p);
}

/*
 * gnb_memory_needed bounds what gnb_train allocates, and not loosely: the
 * peak of every run is below it and above half of it.
 */
static void
test_memory_estimate(void)
{
	static const struct
	{
		int			D, V, K;
		double		labelled;
		gnb_sampler_kind sampler;
		int			sweeps, chains;
	}			cases[] = {
		{2000, 300, 2, 0.5, GNB_SAMPLER_PAPER, 20, 1},
		{2000, 300, 2, 0.0, GNB_SAMPLER_PAPER, 20, 3},
		{500, 2000, 5, 0.2, GNB_SAMPLER_COLLAPSED, 10, 2},
		{50, 100, 8, 0.0, GNB_SAMPLER_COLLAPSED, 5000, 4},
		{20, 30, 2, 0.5, GNB_SAMPLER_COLLAPSED, 20000, 2},
		{2000, 3000, 2, 0.3, GNB_SAMPLER_BLOCKED, 20, 1},
		{500, 2000, 5, 0.0, GNB_SAMPLER_BLOCKED, 10, 2},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		synthetic	s;
		byte_counts b = {0, 0};
		gnb_hooks	hooks = {bytes_alloc, bytes_release, NULL, NULL, &b};
		gnb_params	p = {cases[i].sampler, cases[i].sweeps, cases[i].sweeps / 2, 1,
		cases[i].chains, 1.0, 1.0, 1.0, 11};
		gnb_result	r;
		uint64_t	needed;

		make_synthetic(&s, cases[i].D, cases[i].V, cases[i].K, 8, cases[i].labelled, 5 + i);
		needed = gnb_memory_needed(s.c.n_docs, s.c.n_words, s.c.n_classes,
								   s.c.doc_start[s.c.n_docs], &p);
		gnb_train(&s.c, &p, &hooks, &r);
		CHECK(b.peak <= needed, "case %zu: peak %zu bytes within the estimate %llu",
			  i, b.peak, (unsigned long long) needed);
		CHECK(needed <= 2 * b.peak, "case %zu: estimate %llu at most twice the peak %zu",
			  i, (unsigned long long) needed, b.peak);
		gnb_result_free(&r, &hooks);
		free_synthetic(&s);
	}
}

/*
 * Lending the word array (lent_word): the paper sampler with K = 2 packs
 * its pairs there instead of in a copy, and the model is the same to the bit
 * and the words come back as they were, with clamped documents between the
 * unlabelled ones or none (the server's corpus, its clamped counts lent too),
 * at full and tempered weight, with a sampled gamma_theta (drawn below 1
 * too) and several chains.  A count too large to pack beside its word makes
 * the pairs a copy again.  Without the in-place packing (pairs always
 * copied) the peaks below are equal and the checks of less memory fail;
 * without writing the words back, the words' checks fail.
 */
#ifdef GNB_DENSE_WBITS_MIN
#define GNB_TEST_WBITS_MIN GNB_DENSE_WBITS_MIN
#else
#define GNB_TEST_WBITS_MIN 1
#endif

static void
lent_word_case(const char *what, gnb_corpus *corpus, const gnb_params *p)
{
	int64_t		n_pairs = corpus->doc_start[corpus->n_docs];
	int32_t    *word = (int32_t *) corpus->word;
	int32_t    *words_before = malloc(sizeof(int32_t) * (n_pairs + 1));
	int32_t		V = corpus->n_words,
				K = corpus->n_classes,
				D = corpus->n_docs;
	byte_counts ba = {0, 0},
				bb = {0, 0};
	gnb_hooks	ha = {bytes_alloc, bytes_release, NULL, NULL, &ba};
	gnb_hooks	hb = {bytes_alloc, bytes_release, NULL, NULL, &bb};
	gnb_corpus	lent = *corpus;
	gnb_result	a,
				b;
	int			same;
	int			in_place = 1;

	/*
	 * in place only if every count fits beside the index of its word in the
	 * active words, as the core packs them (the sanitizer build leaves
	 * 3 bits: a count of 7 does not fit)
	 */
	{
		char	   *active = calloc(V, 1);
		int32_t		n_active = 0,
					max_count = 0;
		int			wbits = GNB_TEST_WBITS_MIN;

		for (int32_t j = 0; j < D; j++)
			if (corpus->label[j] < 0)
				for (int64_t q = corpus->doc_start[j]; q < corpus->doc_start[j + 1]; q++)
				{
					n_active += !active[corpus->word[q]];
					active[corpus->word[q]] = 1;
					if (corpus->count[q] > max_count)
						max_count = corpus->count[q];
				}
		while (wbits < 31 && ((int64_t) 1 << wbits) < n_active)
			wbits++;
		if ((uint32_t) max_count >= (UINT32_MAX >> wbits))
			in_place = 0;
		free(active);
	}
	memcpy(words_before, word, sizeof(int32_t) * n_pairs);
	gnb_train(corpus, p, &ha, &a);
	lent.lent_word = word;
	gnb_train(&lent, p, &hb, &b);
	same = memcmp(a.theta, b.theta, sizeof(double) * V * K) == 0 &&
		memcmp(a.pi, b.pi, sizeof(double) * K) == 0 &&
		memcmp(a.label_prob, b.label_prob, sizeof(double) * D * K) == 0 &&
		memcmp(a.log_joint, b.log_joint, sizeof(double) * p->sweeps * p->chains) == 0 &&
		a.gamma_theta == b.gamma_theta;
	CHECK(same, "%s: a lent word array changes the model", what);
	CHECK(memcmp(words_before, word, sizeof(int32_t) * n_pairs) == 0,
		  "%s: the lent words come back as they were", what);
	if (in_place)
		CHECK(bb.peak < ba.peak, "%s: pairs packed in the lent words (peak %zu, copied %zu)",
			  what, bb.peak, ba.peak);
	else
		CHECK(bb.peak == ba.peak, "%s: a count that does not fit: the pairs copied (peak %zu, %zu)",
			  what, bb.peak, ba.peak);
	gnb_result_free(&a, &ha);
	gnb_result_free(&b, &hb);
	free(words_before);
}

static void
test_lent_word(void)
{
	synthetic	s;
	int			V = 60,
				D = 400,
				K = 2;

	make_synthetic(&s, D, V, K, 30, 0.4, 17);
	for (int variant = 0; variant < 4; variant++)
	{
		gnb_params	p = {GNB_SAMPLER_PAPER, 40, 10, 1, variant == 3 ? 3 : 1,
		0.8, variant == 2 ? 0.6 : 1.0, variant == 1 ? 0.5 : 1.0, 23};
		char		what[64];

		p.sample_gamma_theta = variant == 2;
		snprintf(what, sizeof(what), "clamped documents between, variant %d", variant);
		lent_word_case(what, &s.c, &p);
	}

	/* the server's corpus: the unlabelled documents alone, clamped counts lent */
	{
		gnb_params	p = {GNB_SAMPLER_PAPER, 40, 10, 1, 2, 0.8, 1.0, 1.0, 29};
		double	   *words_before = malloc(sizeof(double) * V * K);
		server_corpus sc;
		gnb_corpus	c;
		double	   *words;

		make_server_corpus(&sc, &s, V, K);
		c = sc.c;
		words = sc.words;
		c.lent_extra_word_counts = words;
		memcpy(words_before, words, sizeof(double) * V * K);
		lent_word_case("unlabelled documents alone, counts lent", &c, &p);
		CHECK(memcmp(words_before, words, sizeof(double) * V * K) == 0,
			  "unlabelled documents alone: the lent counts come back as they were");

		/* a count that does not fit beside its word: pairs copied */
		c.lent_extra_word_counts = NULL;
		sc.count[3] = 1 << 28;
		lent_word_case("a count of 2^28", &c, &p);
		free(words_before);
		free_server_corpus(&sc);
	}
	free_synthetic(&s);
}

/*
 * theta-hat, accumulated lazily (flushed only for words whose counts move),
 * equals the eager mean over kept sweeps of (N_kw + g) / (N_k + V g): the
 * labels at each kept sweep t are those a run of t sweeps ends with (the same
 * random numbers: the sweep count changes nothing before the end), N is
 * recounted from them.  Both samplers, lambda 1 and 0.5.  (Without the flush
 * in move_doc every other test passes; this one does not.)
 */
static void
test_theta_lazy(void)
{
	enum
	{
	D = 200, V = 30, K = 2, B = 20, M = 6};
	synthetic	s;
	double	   *want = malloc(sizeof(double) * K * V);
	double	   *N = malloc(sizeof(double) * K * V);

	make_synthetic(&s, D, V, K, 12, 0.1, 41);
	for (int sm = 0; sm < 2; sm++)
		for (int l = 0; l < 2; l++)
		{
			gnb_params	p = {sm ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_PAPER, 0, B, 1, 1,
			1.0, 0.7, l ? 0.5 : 1.0, 43};
			gnb_result	r;
			double		worst = 0.0;
			int			moved = 0;
			int32_t		prev[D];

			memset(want, 0, sizeof(double) * K * V);
			for (int t = B + 1; t <= B + M; t++)
			{
				double		Nk[K] = {0, 0};

				p.sweeps = t;
				gnb_train(&s.c, &p, NULL, &r);
				memset(N, 0, sizeof(double) * K * V);
				for (int j = 0; j < D; j++)
				{
					double		w = s.c.label[j] >= 0 ? 1.0 : p.unlabeled_weight;

					if (t > B + 1 && prev[j] != r.last_labels[j])
						moved++;
					prev[j] = r.last_labels[j];
					for (int64_t q = s.c.doc_start[j]; q < s.c.doc_start[j + 1]; q++)
					{
						N[r.last_labels[j] * V + s.c.word[q]] += w * s.c.count[q];
						Nk[r.last_labels[j]] += w * s.c.count[q];
					}
				}
				for (int k = 0; k < K; k++)
					for (int w = 0; w < V; w++)
						want[k * V + w] += (N[k * V + w] + p.gamma_theta) /
							(Nk[k] + V * p.gamma_theta) / M;
				if (t < B + M)
					gnb_result_free(&r, NULL);
			}
			for (int i = 0; i < K * V; i++)
				worst = fmax(worst, fabs(r.theta[i] - want[i]) / want[i]);
			CHECK(moved > 0 && worst < 1e-12,
				  "%s lambda %g: lazy theta-hat vs eager, relative %g (%d label changes)",
				  sm ? "collapsed" : "paper", p.unlabeled_weight, worst, moved);
			gnb_result_free(&r, NULL);
		}
	free(want);
	free(N);
	free_synthetic(&s);
}

/*
 * The kept log joints are thinned, not grown without bound: gnb_kept_series's
 * closed form; a run with more kept sweeps than GNB_KEPT_SERIES_MAX holds
 * every stride-th kept sweep's log joint (checked against the trace), the
 * same for every chain; and with no_trace, gnb_memory_needed no longer grows
 * with the number of sweeps (64 chains of 10,000,000 sweeps needed GBs).
 */
static void
test_kept_series(void)
{
	synthetic	s;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 0, 0, 3, 2, 1.0, 1.0, 1.0, 29};
	gnb_result	r;
	int32_t		stride;
	int			same = 1;

	CHECK(gnb_kept_series(0, &stride) == 0 && stride == 1, "no kept sweep: no point");
	CHECK(gnb_kept_series(GNB_KEPT_SERIES_MAX, &stride) == GNB_KEPT_SERIES_MAX && stride == 1,
		  "a full series is not thinned");
	CHECK(gnb_kept_series(GNB_KEPT_SERIES_MAX + 1, &stride) == GNB_KEPT_SERIES_MAX / 2 + 1 &&
		  stride == 2, "one more: every other point");
	CHECK(gnb_kept_series(3000000000LL, &stride) == 2862 && stride == 1048576,
		  "3e9 kept sweeps: stride 2^20, 2862 points");

	/* 5,000 sweeps, 500 of burn-in, lag 3: 1,500 kept; at lag 1, 4,500: stride 2 */
	make_synthetic(&s, 30, 20, 2, 6, 0.3, 31);
	p.sweeps = 5000;
	p.burn_in = 500;
	p.lag = 1;
	gnb_train(&s.c, &p, NULL, &r);
	CHECK(r.kept == 4500 && r.kept_stride == 2 && r.kept_points == 2250,
		  "4,500 kept sweeps held as %d points at stride %d", r.kept_points, r.kept_stride);
	for (int c = 0; c < p.chains; c++)
		for (int t = 0; t < r.kept_points; t++)
		{
			/* kept sweep i = t * stride is sweep burn_in + (i + 1) * lag */
			int64_t		sweep = p.burn_in + ((int64_t) t * r.kept_stride + 1) * p.lag;

			if (r.kept_log_joint[(int64_t) c * r.kept_points + t] !=
				r.log_joint[(int64_t) c * p.sweeps + sweep - 1])
				same = 0;
		}
	CHECK(same, "the thinned series is every stride-th kept sweep's log joint, each chain");
	CHECK(fabs(r.ess[0] - gnb_ess(r.kept_log_joint, r.kept_points)) < 1e-9,
		  "ESS of the thinned series");
	gnb_result_free(&r, NULL);
	free_synthetic(&s);

	p.no_trace = 1;
	p.chains = 64;
	p.lag = 1;
	p.sweeps = 100000;
	p.burn_in = 0;
	{
		uint64_t	small = gnb_memory_needed(1000, 5000, 2, 100000, &p);
		uint64_t	big;

		p.sweeps = 10000000;
		big = gnb_memory_needed(1000, 5000, 2, 100000, &p);
		CHECK(big == small && big < 10 * 1024 * 1024,
			  "64 chains x 10,000,000 sweeps with no_trace: %llu bytes, as for 100,000 sweeps",
			  (unsigned long long) big);
	}
}

/*
 * no_trace keeps no chains x sweeps arrays, and changes nothing else: the
 * same estimates, final log joint and R-hat (from running sums), and the
 * same per-sweep values through the progress hook.
 */
typedef struct trace_copy
{
	double	   *lj;
	double	   *changed;
	int			sweeps;
} trace_copy;

static void
copy_progress(void *arg, const gnb_sweep *sw)
{
	trace_copy *t = arg;

	t->lj[sw->chain * t->sweeps + sw->sweep - 1] = sw->log_joint;
	t->changed[sw->chain * t->sweeps + sw->sweep - 1] = sw->changed;
}

static void
test_no_trace(void)
{
	synthetic	s;
	gnb_params	p = {GNB_SAMPLER_COLLAPSED, 200, 50, 2, 3, 1.0, 0.5, 1.0, 17};
	gnb_result	with,
				without;
	trace_copy	t;
	gnb_hooks	hooks = gnb_default_hooks;
	double		worst = 0.0;
	int			same_trace = 1;

	make_synthetic(&s, 300, 40, 3, 10, 0.0, 21);
	gnb_train(&s.c, &p, NULL, &with);
	t.sweeps = p.sweeps;
	t.lj = calloc((size_t) p.chains * p.sweeps, sizeof(double));
	t.changed = calloc((size_t) p.chains * p.sweeps, sizeof(double));
	hooks.progress = copy_progress;
	hooks.arg = &t;
	p.no_trace = 1;
	gnb_train(&s.c, &p, &hooks, &without);
	CHECK(without.log_joint == NULL && without.changed == NULL, "no trace arrays with no_trace");
	for (int i = 0; i < p.chains * p.sweeps; i++)
		if (t.lj[i] != with.log_joint[i] || t.changed[i] != with.changed[i])
			same_trace = 0;
	CHECK(same_trace, "the progress hook sees the same trace");
	for (int i = 0; i < s.c.n_words * s.c.n_classes; i++)
		worst = fmax(worst, fabs(with.theta[i] - without.theta[i]));
	CHECK(worst == 0.0, "the same theta-hat: max difference %g", worst);
	CHECK(with.final_log_joint == without.final_log_joint, "the same final log joint");
	CHECK(fabs(with.r_hat - without.r_hat) < 1e-9 && isfinite(with.r_hat),
		  "the same R-hat: %.12f and %.12f", with.r_hat, without.r_hat);
	gnb_result_free(&with, NULL);
	gnb_result_free(&without, NULL);
	free(t.lj);
	free(t.changed);
	free_synthetic(&s);
}

/*
 * Warm starts (gnb_corpus.init_label).  Started with every unlabelled
 * document in the last class, a poor place to start, both samplers still
 * reach the exact posterior: a warm start changes where a chain starts, not
 * what it converges to.  The start is used (another start, same seed, gives
 * another run), and on the synthetic corpus a chain started from where a
 * long chain ended begins at a log joint that a cold chain reaches only after
 * some sweeps.
 */
static void
test_warm_start(void)
{
	struct
	{
		const char *name;
		uint64_t	seed;
		int			docs,
					V,
					K,
					labelled;
		double		gpi,
					gth;
	}			cases[] = {
		{"K=2 3 clamped g<1", 102, 12, 5, 2, 3, 0.5, 0.3},
		{"K=3 2 clamped g>1", 104, 10, 6, 3, 2, 2.0, 1.5},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int sm = 0; sm < 2; sm++)
		{
			tiny_corpus t;
			int32_t		init[32];
			gnb_params	p = {0};
			char		name[128];
			gnb_result	a,
						b;

			make_tiny(&t, cases[i].seed, cases[i].docs, cases[i].V, cases[i].K,
					  cases[i].labelled, 0);
			for (int j = 0; j < cases[i].docs; j++)
				init[j] = t.label[j] >= 0 ? -1 : cases[i].K - 1;
			t.c.init_label = init;
			p.sampler = sm == 0 ? GNB_SAMPLER_PAPER : GNB_SAMPLER_COLLAPSED;
			p.sweeps = 6000;
			p.burn_in = 200;
			p.lag = 1;
			p.chains = 1;
			p.gamma_pi = cases[i].gpi;
			p.gamma_theta = cases[i].gth;
			p.unlabeled_weight = 1.0;
			snprintf(name, sizeof(name), "warm %s %s", sm == 0 ? "paper" : "collapsed",
					 cases[i].name);
			CHECK(gnb_check(&t.c, &p) == NULL, "%s: corpus rejected", name);
			check_against_exact(name, &t.c, p, 30);

			/* the start is read: another start, the same seed, another run */
			p.sweeps = 3;
			p.burn_in = 0;
			p.seed = 5;
			gnb_train(&t.c, &p, NULL, &a);
			for (int j = 0; j < cases[i].docs; j++)
				init[j] = t.label[j] >= 0 ? -1 : 0;
			gnb_train(&t.c, &p, NULL, &b);
			CHECK(memcmp(a.label_prob, b.label_prob,
						 sizeof(double) * cases[i].docs * cases[i].K) != 0,
				  "%s: the initial labels made no difference", name);
			gnb_result_free(&a, NULL);
			gnb_result_free(&b, NULL);
		}

	{
		synthetic	s;
		int			K = 3,
					V = 40,
					D = 3000;

		/* short documents, few labels: a cold chain takes some sweeps */
		make_synthetic(&s, D, V, K, 6, 0.02, 77);
		for (int sm = 0; sm < 2; sm++)
		{
			gnb_params	p = {sm ? GNB_SAMPLER_COLLAPSED : GNB_SAMPLER_PAPER, 200, 100, 1, 1,
			1.0, 1.0, 1.0, 8};
			gnb_result	cold,
						warm;
			int32_t    *init = malloc(sizeof(int32_t) * D);
			int			reach = 0;

			gnb_train(&s.c, &p, NULL, &cold);
			memcpy(init, cold.last_labels, sizeof(int32_t) * D);
			s.c.init_label = init;
			p.seed = 9;
			gnb_train(&s.c, &p, NULL, &warm);
			s.c.init_label = NULL;
			/* the first sweep at which the cold chain got as high as the warm one's first */
			while (reach < p.sweeps && cold.log_joint[reach] < warm.log_joint[0])
				reach++;
			/* a chain not warm would start about where a cold one does (sweep 1 or 2) */
			CHECK(reach >= 3, "%s: a warm chain starts no higher than a cold one's third sweep",
				  sm ? "collapsed" : "paper");
			printf("  synthetic %-9s: warm sweep 1 log joint %.1f, cold %.1f (the cold chain"
				   " reaches it at sweep %d)\n", sm ? "collapsed" : "paper", warm.log_joint[0],
				   cold.log_joint[0], reach + 1);
			gnb_result_free(&cold, NULL);
			gnb_result_free(&warm, NULL);
			free(init);
		}
		free_synthetic(&s);
	}
}

int
main(void)
{
	printf("rng streams\n");
	test_rng_streams();
	test_keyed_rng();
	printf("uniform and normal\n");
	test_uniform_and_normal();
	printf("gamma distribution\n");
	test_gamma_distribution();
	test_gamma_small_integers();
	test_gamma_pair_and_mt();
	test_fast_log();
	printf("categorical\n");
	test_exponential();
	test_normal_ziggurat();
	test_categorical();
	printf("exactness against enumeration\n");
	test_exactness();
	printf("warm starts\n");
	test_warm_start();
	printf("unlabeled_weight = 0\n");
	test_zero_unlabeled_weight();
	printf("determinism\n");
	test_determinism();
	printf("parameter checks\n");
	test_check();
	printf("supervised closed form\n");
	test_supervised_closed_form();
	printf("synthetic recovery\n");
	test_synthetic_recovery();
	printf("clamped documents as counts\n");
	test_extra_counts();
	printf("hooks\n");
	test_hooks();
	printf("memory estimate\n");
	test_memory_estimate();
	test_kept_series();
	test_theta_lazy();
	printf("a lent word array\n");
	test_lent_word();
	printf("no trace arrays\n");
	test_no_trace();
	printf("tempered posterior, sampled gammas, the paths of issue 11\n");
	test_issue11_exactness();
	printf("ESS, split R-hat, warnings\n");
	test_diagnostics();
	printf("few labels\n");
	test_start_from_labels();
	test_label_check();
	test_chains_disagree();
	test_labels_only_model();
	test_gamma_limit();
	test_exact_sum();
	test_documents_held_elsewhere();
	printf("alignment with some classes clamped\n");
	test_partial_alignment();
	printf("chains apart, combined afterwards\n");
	test_chains_apart();
	test_blocked_split();
	printf("gamma_theta recovered\n");
	test_gamma_recovery();
	return check_report();
}
