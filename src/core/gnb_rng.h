/*
 * gnb_rng.h
 *	  Random numbers for the sampler core: xoshiro256++ and the distributions
 *	  the samplers draw from.
 *
 * Pure C, no PostgreSQL headers.  The generator is our own (not pg_prng) so
 * that a seed gives the same model on every PostgreSQL version and in the
 * stand-alone test and benchmark binaries.
 */
#ifndef GNB_RNG_H
#define GNB_RNG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gnb_zig.h"

typedef struct gnb_rng
{
	uint64_t	s[4];
} gnb_rng;

/* Seed the generator; every 64-bit seed gives a distinct, valid state. */
extern void gnb_rng_seed(gnb_rng *rng, uint64_t seed);

/* Advance by 2^128 draws: gives non-overlapping streams for chains. */
extern void gnb_rng_jump(gnb_rng *rng);

static inline uint64_t
gnb_rng_rotl(const uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* Next 64 random bits (xoshiro256++, Blackman & Vigna 2019). */
static inline uint64_t
gnb_rng_next(gnb_rng *rng)
{
	uint64_t   *s = rng->s;
	const uint64_t result = gnb_rng_rotl(s[0] + s[3], 23) + s[0];
	const uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = gnb_rng_rotl(s[3], 45);
	return result;
}

/* Uniform on [0, 1), 53 random bits. */
static inline double
gnb_rng_uniform(gnb_rng *rng)
{
	return (double) (gnb_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* Uniform on (0, 1]: safe to take the log of. */
static inline double
gnb_rng_uniform_pos(gnb_rng *rng)
{
	return (double) ((gnb_rng_next(rng) >> 11) + 1) * 0x1.0p-53;
}

#if defined(__GNUC__) || defined(__clang__)
#define GNB_LIKELY(x) __builtin_expect(!!(x), 1)
#define GNB_INLINE static inline __attribute__((always_inline))
#else
#define GNB_LIKELY(x) (x)
#define GNB_INLINE static inline
#endif

/*
 * A call on the rare path of an inline draw, with a copy of the generator
 * (cold_rng) that goes back to *rng afterwards: the generator itself is
 * never passed to a function, so that a caller's local copy of it can live
 * in registers (GCC keeps an aggregate whose address escapes in memory, and
 * loads and stores its state at every draw).
 */
#define GNB_RNG_COLD_CALL(rng, call) \
	do { \
		gnb_rng		cold_rng = *(rng); \
		call; \
		*(rng) = cold_rng; \
	} while (0)

/*
 * The ziggurat's rejected draws (layer i, position x outside the layer's
 * rectangle): the base layer's tail, or the wedge under the curve, or a new
 * draw.  Only for gnb_rng_exponential's inline fast path.
 */
extern double gnb_rng_exponential_reject(gnb_rng *rng, int i, double x);

/*
 * Exp(1), by the ziggurat method (gnb_zig.h): one 64-bit draw gives the
 * layer (its low 8 bits) and the position in it (its top 53 bits); about 99
 * draws in 100 end in the layer's rectangle under the curve, here inline,
 * without a log or exp.
 */
GNB_INLINE double
gnb_rng_exponential(gnb_rng *rng)
{
	uint64_t	bits = gnb_rng_next(rng);
	int			i = (int) (bits & 255);
	double		x = (double) (bits >> 11) * 0x1.0p-53 * gnb_zig_x[i];

	if (GNB_LIKELY(x < gnb_zig_x[i + 1]))
		return x;
	GNB_RNG_COLD_CALL(rng, x = gnb_rng_exponential_reject(&cold_rng, i, x));
	return x;
}

extern double gnb_rng_normal_reject(gnb_rng *rng, int i, double x, double sign);

/*
 * Standard normal by the ziggurat (gnb_zig.h, the half-normal's tables): one
 * 64-bit draw gives the layer (its low 8 bits), the sign (bit 8) and the
 * position in the layer (its top 53 bits); about 99 draws in 100 end in the
 * layer's rectangle under the curve, here inline, without a log or exp.
 */
GNB_INLINE double
gnb_rng_normal(gnb_rng *rng)
{
	uint64_t	bits = gnb_rng_next(rng);
	int			i = (int) (bits & 255);
	/* +-1.0 by bit 8 moved to the sign bit: a branch on it would miss half the time */
	uint64_t	sign_bits = UINT64_C(0x3ff0000000000000) | ((bits & 256) << 55);
	double		sign;
	double		x = (double) (bits >> 11) * 0x1.0p-53 * gnb_zign_x[i];

	memcpy(&sign, &sign_bits, sizeof(sign));

	if (GNB_LIKELY(x < gnb_zign_x[i + 1]))
		return sign * x;
	GNB_RNG_COLD_CALL(rng, x = gnb_rng_normal_reject(&cold_rng, i, x, sign));
	return x;
}

/*
 * Largest integer shape drawn as a sum of exponentials: an inline ziggurat
 * draw costs a fraction of Marsaglia and Tsang's normal, uniform and cube,
 * up to about this many terms (test/bench/bench_core gamma).
 */
#define GNB_SUM_EXP_MAX 4

extern double gnb_rng_gamma_mt_reject(gnb_rng *rng, double d, double c,
									  double x, double v, double u);

/*
 * Marsaglia and Tsang's constant c = 1 / sqrt(9 d), d = shape - 1/3,
 * computed for every draw.  (A table of c for integer shapes, used during
 * 0.2.0's development, was slower: with unlabeled_weight < 1 and an integer
 * gamma_theta a word's two shapes are often an integer and a fraction in an
 * order that follows its documents' classes, and the branch that chose the
 * table was mispredicted where the square root and the division it saved
 * overlap the draw; see docs/performance.md.)
 */
GNB_INLINE double
gnb_rng_mt_c(double shape)
{
	return 1.0 / sqrt(9.0 * (shape - 1.0 / 3.0));
}

/*
 * Gamma(shape, 1) for shape >= 1 by Marsaglia & Tsang (2000), given
 * c = gnb_rng_mt_c(shape): d v for v = (1 + c x)^3, x standard normal,
 * d = shape - 1/3, accepted by the squeeze nearly always (here, inline),
 * otherwise by the exact test or a new candidate (gnb_rng_gamma_mt_reject).
 */
GNB_INLINE double
gnb_rng_gamma_mt_c(gnb_rng *rng, double shape, double c)
{
	const double d = shape - 1.0 / 3.0;
	double		x,
				v,
				u;

	do
	{
		x = gnb_rng_normal(rng);
		v = 1.0 + c * x;
	} while (v <= 0.0);
	v = v * v * v;
	u = gnb_rng_uniform_pos(rng);
	if (GNB_LIKELY(u < 1.0 - 0.0331 * (x * x) * (x * x)))
		return d * v;
	GNB_RNG_COLD_CALL(rng, v = gnb_rng_gamma_mt_reject(&cold_rng, d, c, x, v, u));
	return v;
}

/* Gamma(shape, 1) for shape >= 1 by Marsaglia & Tsang (2000). */
GNB_INLINE double
gnb_rng_gamma_mt(gnb_rng *rng, double shape)
{
	return gnb_rng_gamma_mt_c(rng, shape, gnb_rng_mt_c(shape));
}

/*
 * Gamma(shape, 1) draws.  gnb_rng_gamma is for shape >= 1, where a draw
 * never underflows; gnb_rng_log_gamma returns the log of a draw for any
 * shape > 0 and stays finite for tiny shapes (docs/model.md: plain draws with
 * shape 0.01 are exactly 0 about once in 2,000 draws).
 *
 * Integer shapes m up to GNB_SUM_EXP_MAX are the sum of m exponentials (an
 * exact Erlang draw, no log); with gamma_theta = 1 every shape N_kw + 1 of
 * the theta step is an integer and most words are rare, so this inline path
 * is the common case.  Other shapes use Marsaglia & Tsang (2000).
 */
GNB_INLINE double
gnb_rng_gamma(gnb_rng *rng, double shape)
{
	if (shape <= GNB_SUM_EXP_MAX && shape == (double) (int) shape)
	{
		int			m = (int) shape;
		double		sum = gnb_rng_exponential(rng);

		for (int i = 1; i < m; i++)
			sum += gnb_rng_exponential(rng);
		return sum;
	}
	return gnb_rng_gamma_mt(rng, shape);
}

/*
 * Two Gamma draws of integer shapes m0, m1 >= 1 as m0 + m1 exponentials:
 * *y0 the sum of the first m0, *y1 that of the rest (the same draws and the
 * same sums as gnb_rng_gamma(m0) then gnb_rng_gamma(m1)).  The first is
 * y0's and the last y1's; each of the m0 + m1 - 2 between goes to its sum by
 * a mask, not a branch: when the theta step's words come in order of
 * m0 + m1 (their total count), the only branches that depend on the draws
 * are the ziggurat's rare rejections, whatever the split of the total
 * between the classes.  Adding +0.0 to a sum of positive numbers leaves it
 * unchanged.
 */
GNB_INLINE void
gnb_rng_gamma_pair_exp(gnb_rng *rng, int m0, int m1, double *y0, double *y1)
{
	const int	m = m0 + m1;
	/* the first exponential is y0's and the last y1's, whatever the split */
	double		s0 = gnb_rng_exponential(rng),
				s1 = 0.0;

	for (int r = 1; r < m - 1; r++)
	{
		double		e = gnb_rng_exponential(rng);
		uint64_t	bits,
					mask = (uint64_t) 0 - (uint64_t) (r < m0);
		double		e0,
					e1;

		memcpy(&bits, &e, sizeof(bits));
		bits &= mask;
		memcpy(&e0, &bits, sizeof(e0));
		memcpy(&bits, &e, sizeof(bits));
		bits &= ~mask;
		memcpy(&e1, &bits, sizeof(e1));
		s0 += e0;
		s1 += e1;
	}
	*y0 = s0;
	*y1 = s1 + gnb_rng_exponential(rng);
}

extern double gnb_rng_log_gamma(gnb_rng *rng, double shape);

/*
 * log x for a positive normal double x (DBL_MIN <= x <= DBL_MAX), with the
 * error of fdlibm's log (under 1 ulp; it may differ from libm's log in the
 * last bit): x = 2^k m with m in [sqrt(2)/2, sqrt(2)), f = m - 1,
 * s = f / (2 + f), log m = 2 atanh s by the minimax polynomial in s^2.
 * Branch-free and in 64-bit integer and double operations only (k comes to
 * a double through the exponent field of 2^52), so that a loop of them is
 * vectorised by the compiler with SSE2 (gnb_log_array) and gives the same
 * bits as the scalar code on any x86-64.  No FMA: without -march flags the
 * compiler contracts nothing.
 */
GNB_INLINE double
gnb_log_normal(double x)
{
	const double ln2_hi = 6.93147180369123816490e-01;	/* 0x3fe62e42fee00000 */
	const double ln2_lo = 1.90821492927058770002e-10;	/* 0x3dea39ef35793c76 */
	const double Lg1 = 6.666666666666735130e-01;
	const double Lg2 = 3.999999999940941908e-01;
	const double Lg3 = 2.857142874366239149e-01;
	const double Lg4 = 2.222219843214978396e-01;
	const double Lg5 = 1.818357216161805012e-01;
	const double Lg6 = 1.531383769920937332e-01;
	const double Lg7 = 1.479819860511658591e-01;
	uint64_t	ix,
				hx,
				kbits;
	double		m,
				dk,
				f,
				hfsq,
				s,
				z,
				w,
				t1,
				t2,
				r;

	memcpy(&ix, &x, sizeof(ix));
	/* the high word, shifted so that its exponent field is k + 1023 */
	hx = (ix >> 32) + (0x3ff00000 - 0x3fe6a09e);
	kbits = UINT64_C(0x4330000000000000) | (hx >> 20);
	memcpy(&dk, &kbits, sizeof(dk));
	dk -= 0x1p52 + 1023.0;
	/* m: x's mantissa with the exponent of [sqrt(2)/2, sqrt(2)) */
	hx = (hx & 0x000fffff) + 0x3fe6a09e;
	ix = (hx << 32) | (ix & 0xffffffff);
	memcpy(&m, &ix, sizeof(m));
	f = m - 1.0;
	hfsq = 0.5 * f * f;
	s = f / (2.0 + f);
	z = s * s;
	w = z * z;
	t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
	t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
	r = t2 + t1;
	return s * (hfsq + r) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

/*
 * x[i] = log x[i] for i in [0, n): by gnb_log_normal, two at a time (the
 * compiler vectorises the pair), when every x[i] is a positive normal
 * number; otherwise by libm's log, so that 0, subnormals, infinities, NaN
 * and negative numbers give what log gives.
 */
extern void gnb_log_array(double *x, int64_t n);

/*
 * y[i] = log x[i] for i in [0, n), the same results as gnb_log_array, in
 * one pass when all are normal (x and y do not overlap).
 */
extern void gnb_log_array_to(const double *x, double *y, int64_t n);

/*
 * Draw an index from unnormalised log weights (scores).  scratch must hold
 * k doubles.  Returns an index in [0, k).
 */
extern int	gnb_rng_categorical_log(gnb_rng *rng, const double *scores, int k,
									double *scratch);

/* The same draw, given its uniform u in [0, 1). */
extern int	gnb_categorical_log_u(const double *scores, int k, double u, double *scratch);

/*
 * Counter-based random numbers, for the blocked sampler (docs/model.md): a
 * draw is a function of the seed and of a counter naming it (the chain, the
 * sweep, what is drawn and for which item: a document, a block of words),
 * not of the draws made before it, so it is the same whichever process makes
 * it and in whatever order.  gnb_philox is Philox4x32-10 (Salmon et al.,
 * SC 2011), checked against its authors' known answers in the unit tests.
 * "what" is one of GNB_DRAW_* (below 2^8), the chain below 2^16; item any
 * 64 bits (a document's key, gnb_corpus.doc_key, or a block's number).
 */
#define GNB_DRAW_START	1		/* a document's starting label */
#define GNB_DRAW_LABEL	2		/* a document's label in a sweep */
#define GNB_DRAW_PI		3		/* pi in a sweep */
#define GNB_DRAW_THETA	4		/* theta over a block of words */
#define GNB_DRAW_THETA_REST 5	/* a class's summed mass of the words no unlabelled document has */

extern void gnb_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]);

/* One uniform on [0, 1) (53 bits) for the draw so named. */
extern double gnb_keyed_uniform(uint64_t seed, int32_t chain, int32_t sweep, uint32_t what,
								uint64_t item);

/*
 * A generator whose whole state comes from the draw so named (two Philox
 * blocks), for a draw that needs an unknown number of random numbers (a
 * Gamma's rejections): its stream is used for that draw alone.
 */
extern void gnb_rng_keyed(gnb_rng *rng, uint64_t seed, int32_t chain, int32_t sweep,
						  uint32_t what, uint64_t item);

#endif							/* GNB_RNG_H */
