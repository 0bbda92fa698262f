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

#include <stdint.h>

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

/* Standard normal. */
extern double gnb_rng_normal(gnb_rng *rng);

/* Exp(1), by the ziggurat method. */
extern double gnb_rng_exponential(gnb_rng *rng);

/*
 * Gamma(shape, 1) draws.  gnb_rng_gamma is for shape >= 1, where a draw
 * never underflows; gnb_rng_log_gamma returns the log of a draw for any
 * shape > 0 and stays finite for tiny shapes (docs/model.md: plain draws with
 * shape 0.01 are exactly 0 about once in 2,000 draws).
 */
extern double gnb_rng_gamma(gnb_rng *rng, double shape);
extern double gnb_rng_log_gamma(gnb_rng *rng, double shape);

/*
 * Draw an index from unnormalised log weights (scores).  scratch must hold
 * k doubles.  Returns an index in [0, k).
 */
extern int	gnb_rng_categorical_log(gnb_rng *rng, const double *scores, int k,
									double *scratch);

#endif							/* GNB_RNG_H */
