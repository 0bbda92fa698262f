/*
 * gnb_gamma_step.c
 *	  The gamma moves: the Dirichlet hyperparameters sampled by
 *	  slice-free Metropolis moves on log gamma (docs/model.md, "Sampling the
 *	  hyperparameters").
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the gamma moves (docs/model.md, "Sampling the hyperparameters") ---- */

/* Summarise N for the gamma_theta likelihood (see count_summary). */
static void
summarise_counts(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	count_summary *cs = &st->cs;
	int64_t		pos = 0;

	memset(cs->hist, 0, (size_t) K * GNB_HIST_MAX * sizeof(double));
	for (int32_t k = 0; k < K; k++)
	{
		for (int32_t w = 0; w < sh->V; w++)
		{
			double		n = st->N[(int64_t) w * K + k];

			/* rounding of weighted counts: a count this close to 0 is 0 */
			if (n < 1e-9)
				continue;
			if (n < GNB_HIST_MAX && n == floor(n))
				cs->hist[k * GNB_HIST_MAX + (int32_t) n] += 1.0;
			else
				cs->rest[pos++] = n;
		}
		cs->rest_end[k] = pos;
	}
}

/* S_k for gamma_theta = g from the count summary. */
static void
word_terms_from_summary(const chain_state *st, double g, double *S)
{
	const run_shared *sh = st->sh;
	const count_summary *cs = &st->cs;
	double		lg = lgamma(g);
	int64_t		pos = 0;

	for (int32_t k = 0; k < sh->K; k++)
	{
		double		sk = 0.0;

		for (int32_t n = 1; n < GNB_HIST_MAX; n++)
			if (cs->hist[k * GNB_HIST_MAX + n] > 0.0)
				sk += cs->hist[k * GNB_HIST_MAX + n] * (lgamma(n + g) - lg);
		for (; pos < cs->rest_end[k]; pos++)
			sk += lgamma(cs->rest[pos] + g) - lg;
		S[k] = sk;
	}
}

/* log P(L, W | gamma_theta = g) up to terms free of g. */
static double
gamma_theta_loglik(const chain_state *st, double g)
{
	const run_shared *sh = st->sh;
	double		vg = sh->V * g;
	double		ll = 0.0;

	word_terms_from_summary(st, g, st->scratch);
	for (int32_t k = 0; k < sh->K; k++)
		ll += lgamma(vg) - lgamma(st->Nk[k] + vg) + st->scratch[k];
	return ll;
}

/* log P(L | gamma_pi = g) up to terms free of g. */
static double
gamma_pi_loglik(const chain_state *st, double g)
{
	const int32_t K = st->sh->K;
	double		total = 0.0;
	double		ll = 0.0;

	for (int32_t k = 0; k < K; k++)
	{
		total += st->C[k];
		ll += lgamma(st->C[k] + g) - lgamma(g);
	}
	return ll + lgamma(K * g) - lgamma(total + K * g);
}

typedef double (*gamma_loglik) (const chain_state *st, double g);

/*
 * One update of a gamma given the labels.  With a grid: an exact draw from
 * the posterior over the grid points (uniform prior).  Otherwise one slice
 * sampling update (Neal 2003, stepping out and shrinkage) of u = log gamma,
 * whose prior is uniform on [log GNB_GAMMA_MIN, log GNB_GAMMA_MAX].
 */
static double
gamma_move(chain_state *st, double current, gamma_loglik f)
{
	const gnb_params *params = st->sh->params;
	const double lo = log(GNB_GAMMA_MIN);
	const double hi = log(GNB_GAMMA_MAX);
	const double width = 1.0;
	double		u0,
				y,
				left,
				right;
	int			steps_left,
				steps_right;

	if (params->gamma_grid)
	{
		int32_t		n = params->n_gamma_grid;
		double		best = -INFINITY;
		double		total = 0.0;
		double		r;
		double		lp[64];

		for (int32_t i = 0; i < n; i++)
		{
			lp[i] = f(st, params->gamma_grid[i]);
			if (lp[i] > best)
				best = lp[i];
		}
		for (int32_t i = 0; i < n; i++)
			total += (lp[i] = exp(lp[i] - best));
		r = gnb_rng_uniform(&st->rng) * total;
		for (int32_t i = 0; i < n - 1; i++)
		{
			if (r < lp[i])
				return params->gamma_grid[i];
			r -= lp[i];
		}
		return params->gamma_grid[n - 1];
	}

	u0 = log(current);
	y = f(st, current) + log(gnb_rng_uniform_pos(&st->rng));
	left = u0 - width * gnb_rng_uniform(&st->rng);
	right = left + width;
	steps_left = (int) (10 * gnb_rng_uniform(&st->rng));
	steps_right = 9 - steps_left;
	while (steps_left-- > 0 && left > lo && f(st, exp(left)) > y)
		left -= width;
	while (steps_right-- > 0 && right < hi && f(st, exp(right)) > y)
		right += width;
	if (left < lo)
		left = lo;
	if (right > hi)
		right = hi;
	for (int tries = 0; tries < 200; tries++)
	{
		double		u1 = left + gnb_rng_uniform(&st->rng) * (right - left);

		if (f(st, exp(u1)) > y)
			return exp(u1);
		if (u1 < u0)
			left = u1;
		else
			right = u1;
	}
	return current;
}

/* The gamma moves of one sweep, keeping S and the prior terms in step. */
void
gnb_gamma_step(chain_state *st)
{
	const run_shared *sh = st->sh;

	if (sh->params->sample_gamma_theta)
	{
		summarise_counts(st);
		st->g_theta = gamma_move(st, st->g_theta, gamma_theta_loglik);
		word_terms_from_summary(st, st->g_theta, st->S);
	}
	if (sh->params->sample_gamma_pi)
	{
		st->g_pi = gamma_move(st, st->g_pi, gamma_pi_loglik);
		for (int32_t k = 0; k < sh->K; k++)
			refresh_prior(st, k);
	}
}
