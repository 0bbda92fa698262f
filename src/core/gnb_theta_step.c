/*
 * gnb_theta_step.c
 *	  The theta step of the "paper" sampler: theta drawn from its Dirichlet
 *	  given the counts, only the words of unlabelled documents explicitly.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Draw theta_k ~ Dirichlet(N_k + g) for every class, as log theta, from the
 * counts N.  Only words that occur in an unlabelled document are drawn one
 * by one: no other word's theta is ever read, and together they are one
 * Gamma draw of their summed shapes (the aggregation property).
 */
/*
 * gnb_theta_step for K = 2.  The K = 2 label step needs only the log-odds of
 * the two classes' theta per word: log y_1w - log y_0w, less the difference
 * of the normalisers per token.  So one log per word rather than per (word,
 * class), and the label step reads one contiguous array: log_theta[i] for
 * the i-th active word (the only words it reads; sh->dense).  The counts
 * are N's first n_active rows, in the same order (chain_state.N).
 *
 * With gamma_theta >= 1 (no underflow) both classes' draws of a word are
 * made together, word by word, then the inactive words' class 0 and class 1
 * lumps; the ratios y_1w / y_0w, logged in a vectorised pass
 * (gnb_log_array_to), are the log-odds.  The words go in blocks of
 * GNB_THETA_BLOCK: a block's class 0 draws wait on the stack for that pass,
 * not in an array of n_active (a ratio that is not a normal number sends
 * only its own block to libm's log, gnb_log_array_to's fallback).  A
 * block's draws, and their sums and ratios, are draw_gamma_pairs and
 * sum_gamma_ratios (gnb_internal.h, inline: the blocked sampler's theta
 * blocks make theirs alike).  The words come in order of their total count
 * (sort_active), so the method and the number of exponentials change rarely
 * from one word to the next.  Below 1 the draws are logs
 * (gnb_rng_log_gamma), made class by class into log_theta and log_theta_1
 * until their differences replace them.
 */
/* Words per block of the theta step (even: the sums' lanes go on across blocks). */
#define GNB_THETA_BLOCK 256
#if GNB_THETA_BLOCK % 2 != 0
#error "GNB_THETA_BLOCK must be even"
#endif

static void
theta_step2(chain_state *st)
{
	const run_shared *sh = st->sh;
	const double g = st->g_theta;
	const int32_t n_active = sh->n_active;
	const double *counts = st->N;
	double	   *lt = st->log_theta;
	double		lz[2];

	if (g >= 1.0)
	{
		/*
		 * Shapes at least 1: no underflow, normalised as they are.  In each
		 * block the draws y_1w go to lt, the y_0w to y0s, and are summed
		 * afterwards (in this loop, with calls for rejections in it, running
		 * sums would live in memory); the sums in two halves each, even and
		 * odd words, over all blocks; the ratios in y0s's place, then their
		 * logs in lt.
		 */
		double		y0s[GNB_THETA_BLOCK];
		double		s0[2] = {0.0, 0.0},
					s1[2] = {0.0, 0.0};
		double		t0 = 0.0,
					t1 = 0.0;
		int			tail = 0;
		double		sum0,
					sum1;
		gnb_rng		rng = st->rng;

		for (int32_t from = 0; from < n_active; from += GNB_THETA_BLOCK)
		{
			const int32_t m = n_active - from < GNB_THETA_BLOCK ? n_active - from : GNB_THETA_BLOCK;
			const double *nd = counts + 2 * (int64_t) from;
			double	   *l = lt + from;
			int32_t		i;

			draw_gamma_pairs(&rng, nd, g, m, y0s, l);
			i = sum_gamma_ratios(y0s, l, m, s0, s1);
			if (i < m)
			{
				/* an odd last word (blocks are even): summed after the halves */
				t0 = y0s[i];
				t1 = l[i];
				tail = 1;
				y0s[i] = l[i] / y0s[i];
			}
			gnb_log_array_to(y0s, l, m);
		}
		st->rng = rng;
		if (tail)
		{
			s0[0] += t0;
			s1[0] += t1;
		}
		sum0 = s0[0] + s0[1];
		sum1 = s1[0] + s1[1];
		for (int32_t k = 0; k < 2; k++)
		{
			double		inactive_shape = sh->inactive_count[k] + sh->n_inactive * g;

			if (inactive_shape > 0.0)
			{
				if (k == 0)
					sum0 += gnb_rng_gamma(&st->rng, inactive_shape);
				else
					sum1 += gnb_rng_gamma(&st->rng, inactive_shape);
			}
		}
		st->lz_diff = log(sum1) - log(sum0);
		return;
	}
	if (st->log_theta_1 == NULL)
		st->log_theta_1 = gnb_xalloc(sh->hooks, (size_t) n_active + 1, sizeof(double));
	for (int32_t k = 0; k < 2; k++)
	{
		double	   *y = k == 0 ? lt : st->log_theta_1;
		double		inactive_shape = sh->inactive_count[k] + sh->n_inactive * g;
		double		sum = 0.0;
		double		lmax = -INFINITY;
		double		lrest = -INFINITY;

		for (int32_t i = 0; i < n_active; i++)
		{
			y[i] = gnb_rng_log_gamma(&st->rng, counts[2 * (int64_t) i + k] + g);
			if (y[i] > lmax)
				lmax = y[i];
		}
		if (inactive_shape > 0.0)
		{
			lrest = gnb_rng_log_gamma(&st->rng, inactive_shape);
			if (lrest > lmax)
				lmax = lrest;
		}
		for (int32_t i = 0; i < n_active; i++)
			sum += exp(y[i] - lmax);
		sum += exp(lrest - lmax);
		lz[k] = lmax + log(sum);
	}
	for (int32_t i = 0; i < n_active; i++)
		lt[i] = st->log_theta_1[i] - lt[i];
	st->lz_diff = lz[1] - lz[0];
}

void
gnb_theta_step(chain_state *st, const double *N)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const double g = st->g_theta;
	double	   *lt = st->log_theta;

	if (K == 2)
	{
		theta_step2(st);
		return;
	}
	for (int32_t k = 0; k < K; k++)
	{
		double		lmax = -INFINITY;
		double		lrest = -INFINITY;
		double		sum = 0.0;
		double		lz;
		double		inactive_shape = sh->inactive_count[k] + sh->n_inactive * g;

		if (g >= 1.0)
		{
			/*
			 * Every shape is at least 1: the draws cannot underflow, so they
			 * are normalised as they are (no exp per draw) and logged once.
			 * The same random numbers as gnb_rng_log_gamma would use.
			 */
			for (int32_t i = 0; i < sh->n_active; i++)
			{
				int64_t		idx = (int64_t) sh->active[i] * K + k;
				double		y = gnb_rng_gamma(&st->rng, N[idx] + g);

				lt[idx] = y;
				sum += y;
			}
			if (inactive_shape > 0.0)
				sum += gnb_rng_gamma(&st->rng, inactive_shape);
			lz = log(sum);
			for (int32_t i = 0; i < sh->n_active; i++)
			{
				int64_t		idx = (int64_t) sh->active[i] * K + k;

				lt[idx] = log(lt[idx]) - lz;
			}
			continue;
		}
		for (int32_t i = 0; i < sh->n_active; i++)
		{
			int64_t		idx = (int64_t) sh->active[i] * K + k;
			double		ly = gnb_rng_log_gamma(&st->rng, N[idx] + g);

			lt[idx] = ly;
			if (ly > lmax)
				lmax = ly;
		}
		if (inactive_shape > 0.0)
		{
			lrest = gnb_rng_log_gamma(&st->rng, inactive_shape);
			if (lrest > lmax)
				lmax = lrest;
		}
		for (int32_t i = 0; i < sh->n_active; i++)
			sum += exp(lt[(int64_t) sh->active[i] * K + k] - lmax);
		sum += exp(lrest - lmax);
		lz = lmax + log(sum);
		for (int32_t i = 0; i < sh->n_active; i++)
			lt[(int64_t) sh->active[i] * K + k] -= lz;
	}
}
