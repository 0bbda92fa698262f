/*
 * gnb_exact_sum.c
 *	  Sums of doubles that do not depend on the order of their terms
 *	  (gnb_sampler.h, gnb_exact_sum): each term rounded once to a multiple of
 *	  2^-60, the multiples added as 128-bit integers; and the per-document
 *	  terms of the chains' combination that go into them, the same code for
 *	  the combiner's own documents and a node's (gnb_fold_document,
 *	  gnb_mass_document).
 *
 * Whoever holds a document adds its terms (a node on another server, or the
 * chain's own process), and the holders' sums are merged in whatever order
 * they answer: a sum in doubles would round otherwise for every cut of the
 * documents, and a model trained on nodes must be the one trained locally
 * bit for bit.  Two 64-bit words rather than a compiler's 128-bit integer:
 * PostgreSQL builds where there is none.
 */
#include "gnb_sampler.h"

#include <math.h>

/* the units of the fixed point: 2^-GNB_EXACT_FRACTION_BITS */
#define GNB_EXACT_FRACTION_BITS 60

/* Add the 128-bit integer (hi, lo) to s, with the carry. */
static inline void
add_words(gnb_exact_sum *s, uint64_t hi, uint64_t lo)
{
	s->lo += lo;
	s->hi += hi + (s->lo < lo);
}

/* -(hi, lo), two's complement */
static inline void
negate_words(uint64_t *hi, uint64_t *lo)
{
	*lo = ~*lo + 1;
	*hi = ~*hi + (*lo == 0);
}

void
gnb_exact_add(gnb_exact_sum *s, double v)
{
	double		m = fabs(v);
	double		whole;
	uint64_t	w;
	uint64_t	f;
	uint64_t	hi,
				lo;

	/* beyond 2^62 the whole part would not fit: the sum is not a number */
	if (!(m < 0x1p62))
	{
		s->invalid = 1;
		return;
	}

	/*
	 * |v| as its whole part and its fraction (m - floor(m) is exact for m >=
	 * 0), the fraction's multiple of 2^-60 rounded (at most 2^60: then a
	 * whole one more); the sign applied to the 128-bit image, so that -v is
	 * the negation of v's
	 */
	whole = floor(m);
	w = (uint64_t) whole;
	f = (uint64_t) llround(ldexp(m - whole, GNB_EXACT_FRACTION_BITS));
	if (f == UINT64_C(1) << GNB_EXACT_FRACTION_BITS)
	{
		f = 0;
		w++;
	}
	/* w * 2^60 + f: w's top bits (w < 2^63) in hi, its lowest 4 above f in lo */
	hi = w >> (64 - GNB_EXACT_FRACTION_BITS);
	lo = (w << GNB_EXACT_FRACTION_BITS) | f;
	if (v < 0.0)
		negate_words(&hi, &lo);
	add_words(s, hi, lo);
}

void
gnb_exact_merge(gnb_exact_sum *s, const gnb_exact_sum *t)
{
	add_words(s, t->hi, t->lo);
	s->invalid |= t->invalid;
}

double
gnb_exact_value(const gnb_exact_sum *s)
{
	uint64_t	hi = s->hi,
				lo = s->lo;
	int			negative = (hi >> 63) != 0;
	double		magnitude;

	if (s->invalid)
		return NAN;
	/* the magnitude's hi * 2^64 + lo in units of 2^-60: hi * 16 + lo * 2^-60 */
	if (negative)
		negate_words(&hi, &lo);
	magnitude = ldexp((double) hi, 64 - GNB_EXACT_FRACTION_BITS) +
		ldexp((double) lo, -GNB_EXACT_FRACTION_BITS);
	return negative ? -magnitude : magnitude;
}

double
gnb_fold_document(double *sum, const double *prob, int32_t K, int32_t chain,
				  const int32_t *perm)
{
	double		distance = 0.0;

	if (chain > 0)
		for (int32_t k = 0; k < K; k++)
			distance += fabs(prob[k] - sum[perm[k]] / chain);
	for (int32_t k = 0; k < K; k++)
		sum[perm[k]] += prob[k];
	return distance;
}

void
gnb_mass_document(gnb_exact_sum *mass, const double *prob, double length, int32_t K)
{
	for (int32_t k = 0; k < K; k++)
	{
		gnb_exact_add(&mass[k], prob[k]);
		gnb_exact_add(&mass[K + k], prob[k] * length);
	}
}
