/*
 * gnb_blocked_draws.c
 *	  The blocked sampler's draws (gnb_label_blocked.c says what they are):
 *	  a range of documents' labels given (theta, pi), for a node
 *	  (gnb_node.c) or a helper, and a range of word blocks' theta, for the
 *	  chain or a helper.  Every draw keyed by what it draws, so that any
 *	  range gives the same numbers.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * draw_labels for K = 2 (sh->dense): d, the full-weight log-odds of class 1,
 * from the document's packed pairs and log_pi's three entries; class 1 with
 * chance 1 / (1 + exp(-lambda d)).
 */
static void
draw_labels2(const run_shared *sh, const gnb_blocked_arrays *a, const gnb_blocked_step *step,
			 int64_t from, int64_t to)
{
	const double lambda = sh->params->unlabeled_weight;
	const uint64_t seed = sh->params->seed;
	const double prior = a->log_pi[1] - a->log_pi[0];
	const double lz_diff = a->log_pi[2];

	for (int64_t i = from; i < to; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double		d = prior + (packed_log_odds(sh, a->log_theta, (int32_t) i) -
								 sh->doc_length[j] * lz_diff);
		double		u;

		maybe_check_interrupts(sh, (int32_t) i);
		if (step->predictive)
		{
			/* softmax of (0, d), without overflow either way */
			double		e = exp(-fabs(d));

			a->pred[2 * i + (d >= 0.0)] += 1.0 / (1.0 + e);
			a->pred[2 * i + (d < 0.0)] += e / (1.0 + e);
		}
		u = gnb_keyed_uniform(seed, step->chain, step->sweep, GNB_DRAW_LABEL,
							  gnb_doc_key(sh->corpus, j));
		a->next_label[i] = categorical2_u(u, lambda * d);
	}
}

/*
 * Draw the labels of the unlabelled documents from..to-1 (by position in
 * sh->unlabeled) given log theta and log pi, into next_label; with
 * step->predictive, each one's full-weight conditional (softmax of log pi_k
 * + sum_w W_jw log theta_kw) added to its row of pred.
 */
static void
draw_labels(const run_shared *sh, const gnb_blocked_arrays *a, const gnb_blocked_step *step,
			int64_t from, int64_t to, double *work)
{
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double lambda = sh->params->unlabeled_weight;
	const uint64_t seed = sh->params->seed;
	double	   *loglik = work;
	double	   *s = work + K;
	double	   *scratch = work + 2 * K;

	for (int64_t i = from; i < to; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double		u;

		maybe_check_interrupts(sh, (int32_t) i);
		for (int32_t k = 0; k < K; k++)
			loglik[k] = a->log_pi[k];
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			const double *row = a->log_theta + (int64_t) c->word[p] * K;
			const double cnt = c->count[p];

			for (int32_t k = 0; k < K; k++)
				loglik[k] += cnt * row[k];
		}
		for (int32_t k = 0; k < K; k++)
			s[k] = lambda * loglik[k];
		if (step->predictive)
		{
			double		max = -INFINITY;
			double		total = 0.0;

			for (int32_t k = 0; k < K; k++)
				if (loglik[k] > max)
					max = loglik[k];
			for (int32_t k = 0; k < K; k++)
				total += (scratch[k] = exp(loglik[k] - max));
			for (int32_t k = 0; k < K; k++)
				a->pred[i * K + k] += scratch[k] / total;
		}
		u = gnb_keyed_uniform(seed, step->chain, step->sweep, GNB_DRAW_LABEL,
							  gnb_doc_key(sh->corpus, j));
		a->next_label[i] = gnb_categorical_log_u(s, K, u, scratch);
	}
}

/*
 * draw_theta_block for K = 2 (sh->dense): the block's words are the rows
 * from..to-1 of N; both classes' draws of a word together, as theta_step2
 * does (sums of exponentials for small integer shapes, else Marsaglia and
 * Tsang), their log-odds into log_theta and the log of
 * each class's sum into block_lse.  work: GNB_BLOCKED_WORDS doubles.
 */
static void
draw_theta_block2(const run_shared *sh, const gnb_blocked_arrays *a,
				  const gnb_blocked_step *step, int32_t b, double *work)
{
	const int32_t nb = gnb_word_blocks(sh);
	const int32_t from = sh->block_active[b];
	const int32_t n = sh->block_active[b + 1] - from;
	const double g = step->g_theta;
	const double *N = a->N + 2 * (int64_t) from;
	double	   *lt = a->log_theta + from;
	double	   *y0 = work;
	double		lse0,
				lse1;
	gnb_rng		rng;

	if (n == 0)
	{
		a->block_lse[b] = a->block_lse[nb + b] = -INFINITY;
		return;
	}
	gnb_rng_keyed(&rng, sh->params->seed, step->chain, step->sweep, GNB_DRAW_THETA,
				  (uint32_t) b);
	if (g >= 1.0)
	{
		/*
		 * no draw underflows: the draws summed as they are (even and odd
		 * words in two lanes), the ratios logged in one pass
		 */
		double		s0[2] = {0.0, 0.0},
					s1[2] = {0.0, 0.0};
		int32_t		i;
		gnb_rng		pairs_rng = rng;

		/*
		 * A copy whose address never leaves this function: GCC keeps an
		 * aggregate whose address escapes (rng's, to gnb_rng_keyed and
		 * gnb_rng_log_gamma) in memory, and stored its four words at
		 * every draw (gnb_rng.h, GNB_RNG_COLD_CALL); 5% of the sweep
		 * (docs/performance.md).
		 */
		draw_gamma_pairs(&pairs_rng, N, g, n, y0, lt);
		i = sum_gamma_ratios(y0, lt, n, s0, s1);
		if (i < n)
		{
			s0[0] += y0[i];
			s1[0] += lt[i];
			y0[i] = lt[i] / y0[i];
		}
		gnb_log_array_to(y0, lt, n);
		lse0 = log(s0[0] + s0[1]);
		lse1 = log(s1[0] + s1[1]);
	}
	else
	{
		/* logs of the draws: class 0's in work, class 1's in log_theta, then their difference */
		double		m0 = -INFINITY,
					m1 = -INFINITY,
					s0 = 0.0,
					s1 = 0.0;

		for (int32_t i = 0; i < n; i++)
		{
			y0[i] = gnb_rng_log_gamma(&rng, N[2 * i] + g);
			lt[i] = gnb_rng_log_gamma(&rng, N[2 * i + 1] + g);
			m0 = y0[i] > m0 ? y0[i] : m0;
			m1 = lt[i] > m1 ? lt[i] : m1;
		}
		for (int32_t i = 0; i < n; i++)
		{
			s0 += exp(y0[i] - m0);
			s1 += exp(lt[i] - m1);
			lt[i] -= y0[i];
		}
		lse0 = m0 + log(s0);
		lse1 = m1 + log(s1);
	}
	a->block_lse[b] = lse0;
	a->block_lse[nb + b] = lse1;
}

/*
 * Theta over the word ids of block b, every class (K > 2): each word that
 * occurs in an unlabelled document drawn, class after class, as Gamma(N_kw
 * + g) from the block's keyed stream, in the block's order (sh->active);
 * their logs into log_theta, and per class the log of their sum (-inf for
 * a block without such a word) into block_lse.  Words of no unlabelled document are never read: their
 * summed mass is drawn once (gnb_theta_step_blocked).  work: K doubles and
 * GNB_BLOCKED_BUF more.
 */
static void
draw_theta_block(const run_shared *sh, const gnb_blocked_arrays *a,
				 const gnb_blocked_step *step, int32_t b, double *work)
{
	const int32_t K = sh->K;
	const int32_t nb = gnb_word_blocks(sh);
	const int32_t from = sh->block_active[b];
	const int32_t to = sh->block_active[b + 1];
	const double g = step->g_theta;
	double	   *lse = work;
	double	   *buf = work + K;
	const int32_t per_chunk = GNB_BLOCKED_BUF / K;
	gnb_rng		rng;

	for (int32_t k = 0; k < K; k++)
		lse[k] = g >= 1.0 ? 0.0 : -INFINITY;
	if (from < to)
		gnb_rng_keyed(&rng, sh->params->seed, step->chain, step->sweep, GNB_DRAW_THETA,
					  (uint32_t) b);
	for (int32_t c0 = from; c0 < to; c0 += per_chunk)
	{
		const int32_t c1 = c0 + per_chunk < to ? c0 + per_chunk : to;
		const int64_t n = (int64_t) (c1 - c0) * K;

		if (g >= 1.0)
		{
			/*
			 * Every shape at least 1: no draw underflows, so they are summed
			 * as they are (in lse, for now) and logged in one vectorised
			 * pass.  (Two classes take draw_theta_block2.)
			 */
			gnb_rng		gamma_rng = rng;	/* in registers: see draw_theta_block2 */

			for (int32_t i = c0; i < c1; i++)
			{
				const double *row = a->N + (int64_t) sh->active[i] * K;
				double	   *y = buf + (int64_t) (i - c0) * K;

				for (int32_t k = 0; k < K; k++)
					y[k] = gnb_rng_gamma(&gamma_rng, row[k] + g);
				for (int32_t k = 0; k < K; k++)
					lse[k] += y[k];
			}
			rng = gamma_rng;
			gnb_log_array(buf, n);
		}
		else
		{
			/* logs of the draws; their sums after the block's largest is known */
			for (int32_t i = c0; i < c1; i++)
			{
				const double *row = a->N + (int64_t) sh->active[i] * K;

				for (int32_t k = 0; k < K; k++)
				{
					double		ly = gnb_rng_log_gamma(&rng, row[k] + g);

					buf[(int64_t) (i - c0) * K + k] = ly;
					lse[k] = ly > lse[k] ? ly : lse[k];
				}
			}
		}
		for (int32_t i = c0; i < c1; i++)
		{
			double	   *lt = a->log_theta + (int64_t) sh->active[i] * K;
			const double *y = buf + (int64_t) (i - c0) * K;

			for (int32_t k = 0; k < K; k++)
				lt[k] = y[k];
		}
	}
	for (int32_t k = 0; k < K; k++)
	{
		double		x = lse[k];

		if (from == to)
			x = -INFINITY;
		else if (g >= 1.0)
			x = log(x);
		else
		{
			/* lse[k] holds the largest log: the sum relative to it */
			double		sum = 0.0;

			for (int32_t i = from; i < to; i++)
				sum += exp(a->log_theta[(int64_t) sh->active[i] * K + k] - x);
			x += log(sum);
		}
		a->block_lse[(int64_t) k * nb + b] = x;
	}
}

/*
 * Read log theta (K = 2: the active words' log-odds) through once, a cache
 * line at a time, before some of the documents' labels are drawn: when the
 * phases are split, other processes drew part of it on other cores, and the
 * documents' scattered reads would each wait for a line to come from there;
 * read in order, the lines stream (2 processes on the spam corpus, 96,145
 * active words: 1.47 -> 1.36 ms a sweep, docs/performance.md).  The sum
 * only keeps the reads from being dropped.
 */
void
gnb_blocked_pull_log_theta(const run_shared *sh, const gnb_blocked_arrays *a)
{
	const double *lt = a->log_theta;
	double		sum = 0.0;
	volatile double sink;

	for (int64_t w = 0; w < sh->n_active; w += 64 / sizeof(double))
		sum += lt[w];
	sink = sum;
	(void) sink;
}

/* Units from..to of a phase: documents, or blocks of words. */
void
gnb_blocked_run_units(const run_shared *sh, const gnb_blocked_arrays *a,
					  const gnb_blocked_step *step, int64_t from, int64_t to, double *work)
{
	if (step->phase == GNB_PHASE_LABELS)
	{
		if (sh->dense)
			draw_labels2(sh, a, step, from, to);
		else
			draw_labels(sh, a, step, from, to, work);
		return;
	}
	for (int64_t u = from; u < to; u++)
	{
		/* by the block's own number: a range is often a chunk of a few blocks */
		if (u % 64 == 0)
			maybe_check_interrupts(sh, 0);
		if (sh->dense)
			draw_theta_block2(sh, a, step, (int32_t) u, work);
		else
			draw_theta_block(sh, a, step, (int32_t) u, work);
	}
}
