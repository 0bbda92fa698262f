/*
 * gnb_locked.c
 *	  The documents a chain left locked (gnb_chain.locked): judged at the
 *	  chain's end by their conditionals with theta and pi integrated out,
 *	  by the chain itself or, for the blocked sampler, by each node for its
 *	  documents (gnb_node.c).
 */
#include "gnb_internal.h"

#include <math.h>

/*
 * The conditional of the i-th unlabelled document with theta and pi
 * integrated out, at full weight (gnb_collapsed_full_scores), whichever sampler
 * runs the chain: all keep the counts N, Nk, C and the prior terms.  For
 * the paper and blocked samplers with K = 2, N is by row and the words are packed pairs
 * (chain_state.N), read so here; scalar, since it runs once per document at
 * the chain's end.
 */
static void
integrated_scores(chain_state *st, int32_t i, double *s)
{
	const run_shared *sh = st->sh;
	const int32_t j = sh->unlabeled[i];
	const int32_t a = st->z[j];
	const double g = st->g_theta;
	const double R = sh->doc_length[j];
	log_product *prod = st->products;

	if (!sh->dense)
	{
		gnb_collapsed_full_scores(st, j, a, s);
		return;
	}
	for (int32_t k = 0; k < 2; k++)
	{
		double		nk = st->Nk[k] - (k == a ? st->lambda * R : 0.0) + sh->V * g;

		s[k] = (k == a ? st->log_pred_own[k] : st->log_pred[k]) - lgamma_diff(nk, R);
		log_product_init(&prod[k]);
	}
	{
		const uint32_t *pr = sh->dense + sh->dense_start[i];
		const int64_t n = sh->dense_end[i] - sh->dense_start[i];

		for (int64_t p = 0; p < n; p++)
		{
			int32_t		cnt;
			int64_t		row = packed_pair(sh, pr, sh->dense_ones[i], &p, &cnt);

			for (int32_t k = 0; k < 2; k++)
			{
				double		c = st->N[2 * row + k] - (k == a ? st->lambda * cnt : 0.0);

				s[k] += log_rising(&prod[k], c + g, cnt);
			}
		}
	}
	for (int32_t k = 0; k < 2; k++)
		s[k] += log_product_value(&prod[k]);
}

/*
 * The documents of a chain that kept their label through all `after` sweeps
 * after burn-in although, by their conditionals with theta and pi integrated
 * out at the chain's end, the chance of that is below GNB_LOCKED_CHANCE.
 * Judged by those conditionals, not the sampler's own: the collapsed
 * sampler's are them, and a chain of the paper sampler whose theta holds a
 * document in place (its own counts drew theta) changes it as seldom as its
 * own conditionals say, however often the integrated ones say it should.  A
 * document whose label is simply certain is not locked.
 */
int64_t
gnb_count_locked(chain_state *st, int32_t after)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	int64_t		locked = 0;

	if (after <= 0)
		return 0;
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double		max = -INFINITY;
		double		total = 0.0;
		double		stay;

		maybe_check_interrupts(sh, i);
		if (st->moved[j])
			continue;
		integrated_scores(st, i, st->pred);
		for (int32_t k = 0; k < K; k++)
			if (st->pred[k] > max)
				max = st->pred[k];
		for (int32_t k = 0; k < K; k++)
			total += exp(st->pred[k] - max);
		stay = exp(st->pred[st->z[j]] - max) / total;
		/* (1 - q)^after below the chance, q = 1 - stay */
		if (stay < 1.0 && after * log(stay) < log(GNB_LOCKED_CHANCE))
			locked++;
	}
	return locked;
}
