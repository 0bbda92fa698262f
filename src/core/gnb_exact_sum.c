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

void
gnb_exact_add(gnb_exact_sum *s, double v)
{
	double		whole;
	int64_t		w;
	int64_t		f;

	/* beyond 2^62 the whole part would not fit: the sum is not a number */
	if (!(fabs(v) < 0x1p62))
	{
		s->invalid = 1;
		return;
	}
	whole = floor(v);
	w = (int64_t) whole;
	/* v - whole is exact; its multiple of 2^-60, rounded, at most 2^60 */
	f = llround(ldexp(v - whole, GNB_EXACT_FRACTION_BITS));
	if (f == INT64_C(1) << GNB_EXACT_FRACTION_BITS)
	{
		f = 0;
		w++;
	}

	/*
	 * w * 2^60 + f as (hi, lo): hi = floor(w / 16), lo's top 4 bits w's
	 * lowest 4 (two's complement), its other 60 bits f
	 */
	add_words(s, (uint64_t) (w >= 0 ? w / 16 : -((-w + 15) / 16)),
			  ((uint64_t) w << GNB_EXACT_FRACTION_BITS) | (uint64_t) f);
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
	if (s->invalid)
		return NAN;
	/* hi * 2^64 + lo in units of 2^-60: hi * 16 + lo * 2^-60 */
	return (double) (int64_t) s->hi * 16.0 + ldexp((double) s->lo, -GNB_EXACT_FRACTION_BITS);
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
