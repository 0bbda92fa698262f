/*
 * gnb_rng.c
 *	  xoshiro256++ and the Normal, Gamma and categorical draws of the samplers.
 */
#include "gnb_rng.h"

#include <float.h>
#include <math.h>

/* splitmix64: spreads a 64-bit seed over the 256-bit state. */
static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t	z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void
gnb_rng_seed(gnb_rng *rng, uint64_t seed)
{
	uint64_t	x = seed;

	for (int i = 0; i < 4; i++)
		rng->s[i] = splitmix64(&x);
	/* splitmix64 never yields four zero words, but be explicit about it */
	if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0)
		rng->s[0] = 1;
}

void
gnb_rng_jump(gnb_rng *rng)
{
	static const uint64_t jump[] = {0x180ec6d33cfd0abaULL, 0xd5a61266f0c9392cULL,
	0xa9582618e03fc9aaULL, 0x39abdc4529b1661cULL};
	uint64_t	t[4] = {0, 0, 0, 0};

	for (int i = 0; i < 4; i++)
		for (int b = 0; b < 64; b++)
		{
			if (jump[i] & (UINT64_C(1) << b))
				for (int j = 0; j < 4; j++)
					t[j] ^= rng->s[j];
			(void) gnb_rng_next(rng);
		}
	for (int j = 0; j < 4; j++)
		rng->s[j] = t[j];
}

/*
 * The rest of the ziggurat's standard normal draw (gnb_rng_normal,
 * gnb_rng.h) when its position x in layer i is not in the layer's rectangle.
 * The tail beyond r (the base layer) is drawn by Marsaglia's method: r + a
 * with a = E_1 / r, accepted when 2 E_2 >= a^2, the E exponentials; in the
 * other layers x is accepted under the curve, or a new draw starts.
 */
double
gnb_rng_normal_reject(gnb_rng *rng, int i, double x, double sign)
{
	if (i == 0)
	{
		double		a,
					b;

		do
		{
			a = gnb_rng_exponential(rng) / GNB_ZIGN_R;
			b = gnb_rng_exponential(rng);
		} while (b + b < a * a);
		return sign * (GNB_ZIGN_R + a);
	}
	if (gnb_zign_f[i] + gnb_rng_uniform(rng) * (gnb_zign_f[i + 1] - gnb_zign_f[i]) <
		exp(-0.5 * x * x))
		return sign * x;
	return gnb_rng_normal(rng);
}

/*
 * The rest of the ziggurat's Exp(1) draw (gnb_rng_exponential, gnb_rng.h)
 * when its position x in layer i is not in the layer's rectangle.  The tail
 * beyond r (the base layer) is r + Exp(1), Exp(1) being memoryless; in the
 * other layers x is accepted under the curve, or a new draw starts.
 */
double
gnb_rng_exponential_reject(gnb_rng *rng, int i, double x)
{
	if (i == 0)
		return GNB_ZIG_R - log(gnb_rng_uniform_pos(rng));
	if (gnb_zig_f[i] + gnb_rng_uniform(rng) * (gnb_zig_f[i + 1] - gnb_zig_f[i]) < exp(-x))
		return x;
	return gnb_rng_exponential(rng);
}

/*
 * The rest of Marsaglia and Tsang's Gamma(shape, 1) draw (gnb_rng_gamma,
 * gnb_rng.h) when its first candidate d v is not accepted by the squeeze:
 * the exact test with logs, then new candidates until one is accepted.
 */
double
gnb_rng_gamma_mt_reject(gnb_rng *rng, double d, double c, double x, double v, double u)
{
	for (;;)
	{
		if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
			return d * v;
		do
		{
			x = gnb_rng_normal(rng);
			v = 1.0 + c * x;
		} while (v <= 0.0);
		v = v * v * v;
		u = gnb_rng_uniform_pos(rng);
		if (u < 1.0 - 0.0331 * (x * x) * (x * x))
			return d * v;
	}
}

/*
 * log of a Gamma(shape, 1) draw, for any shape > 0.  For shape < 1 we use
 * Gamma(a) = Gamma(a + 1) * U^(1/a), taken in logs, so that tiny shapes give
 * very negative but finite values instead of exact zeros.
 */
double
gnb_rng_log_gamma(gnb_rng *rng, double shape)
{
	if (shape >= 1.0)
		return log(gnb_rng_gamma(rng, shape));
	return log(gnb_rng_gamma(rng, shape + 1.0)) +
		log(gnb_rng_uniform_pos(rng)) / shape;
}

void
gnb_log_array(double *x, int64_t n)
{
	int			normal = 1;
	int64_t		i;

	/* min and max of the array, without a branch per element */
	for (i = 0; i + 2 <= n; i += 2)
		normal &= (x[i] >= DBL_MIN) & (x[i] <= DBL_MAX) &
			(x[i + 1] >= DBL_MIN) & (x[i + 1] <= DBL_MAX);
	if (i < n)
		normal &= (x[i] >= DBL_MIN) & (x[i] <= DBL_MAX);
	if (!normal)
	{
		for (i = 0; i < n; i++)
			x[i] = log(x[i]);
		return;
	}
	for (i = 0; i + 2 <= n; i += 2)
	{
		double		a = gnb_log_normal(x[i]);
		double		b = gnb_log_normal(x[i + 1]);

		x[i] = a;
		x[i + 1] = b;
	}
	if (i < n)
		x[i] = gnb_log_normal(x[i]);
}

void
gnb_log_array_to(const double *x, double *y, int64_t n)
{
	int			normal = 1;
	int64_t		i;

	/* the logs and, without a branch per element, whether they hold */
	for (i = 0; i + 2 <= n; i += 2)
	{
		double		a = gnb_log_normal(x[i]);
		double		b = gnb_log_normal(x[i + 1]);

		normal &= (x[i] >= DBL_MIN) & (x[i] <= DBL_MAX) &
			(x[i + 1] >= DBL_MIN) & (x[i + 1] <= DBL_MAX);
		y[i] = a;
		y[i + 1] = b;
	}
	if (i < n)
	{
		normal &= (x[i] >= DBL_MIN) & (x[i] <= DBL_MAX);
		y[i] = gnb_log_normal(x[i]);
	}
	if (!normal)
		for (i = 0; i < n; i++)
			y[i] = log(x[i]);
}

int
gnb_rng_categorical_log(gnb_rng *rng, const double *scores, int k,
						double *scratch)
{
	return gnb_categorical_log_u(scores, k, gnb_rng_uniform(rng), scratch);
}

int
gnb_categorical_log_u(const double *scores, int k, double u, double *scratch)
{
	double		max = scores[0];
	double		total = 0.0;

	for (int i = 1; i < k; i++)
		if (scores[i] > max)
			max = scores[i];
	for (int i = 0; i < k; i++)
	{
		total += exp(scores[i] - max);
		scratch[i] = total;
	}
	u *= total;
	for (int i = 0; i < k - 1; i++)
		if (u < scratch[i])
			return i;
	return k - 1;
}

/*
 * Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as
 * easy as 1, 2, 3", SC 2011): ten rounds of two 32 x 32 -> 64-bit products,
 * the key bumped by the Weyl constants between rounds.
 */
void
gnb_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4])
{
	uint32_t	k0 = key[0],
				k1 = key[1];
	uint32_t	c0 = ctr[0],
				c1 = ctr[1],
				c2 = ctr[2],
				c3 = ctr[3];

	for (int round = 0; round < 10; round++)
	{
		uint64_t	p0 = (uint64_t) 0xD2511F53U * c0;
		uint64_t	p1 = (uint64_t) 0xCD9E8D57U * c2;
		uint32_t	n0 = (uint32_t) (p1 >> 32) ^ c1 ^ k0;
		uint32_t	n2 = (uint32_t) (p0 >> 32) ^ c3 ^ k1;

		c1 = (uint32_t) p1;
		c3 = (uint32_t) p0;
		c0 = n0;
		c2 = n2;
		k0 += 0x9E3779B9U;
		k1 += 0xBB67AE85U;
	}
	out[0] = c0;
	out[1] = c1;
	out[2] = c2;
	out[3] = c3;
}

/*
 * The counter of a keyed draw (see gnb_keyed_uniform): the item's 64 bits,
 * the sweep, and the chain (below 2^16), what (below 2^8) and the block
 * number within the draw (below 2^8) in the last word.
 */
static void
keyed_block(uint64_t seed, int32_t chain, int32_t sweep, uint32_t what,
			uint64_t item, uint32_t block, uint32_t out[4])
{
	uint32_t	key[2] = {(uint32_t) seed, (uint32_t) (seed >> 32)};
	uint32_t	ctr[4] = {(uint32_t) item, (uint32_t) (item >> 32), (uint32_t) sweep,
		(uint32_t) chain << 16 | (what & 0xff) << 8 | block};

	gnb_philox(key, ctr, out);
}

double
gnb_keyed_uniform(uint64_t seed, int32_t chain, int32_t sweep, uint32_t what,
				  uint64_t item)
{
	uint32_t	out[4];

	keyed_block(seed, chain, sweep, what, item, 0, out);
	return (double) ((((uint64_t) out[0] << 32) | out[1]) >> 11) * 0x1.0p-53;
}

void
gnb_rng_keyed(gnb_rng *rng, uint64_t seed, int32_t chain, int32_t sweep, uint32_t what,
			  uint64_t item)
{
	uint32_t	a[4],
				b[4];

	keyed_block(seed, chain, sweep, what, item, 0, a);
	keyed_block(seed, chain, sweep, what, item, 1, b);
	rng->s[0] = (uint64_t) a[0] << 32 | a[1];
	rng->s[1] = (uint64_t) a[2] << 32 | a[3];
	rng->s[2] = (uint64_t) b[0] << 32 | b[1];
	rng->s[3] = (uint64_t) b[2] << 32 | b[3];
	/* xoshiro's one bad state; Philox gives it with chance 2^-256 */
	if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0)
		rng->s[0] = 1;
}
