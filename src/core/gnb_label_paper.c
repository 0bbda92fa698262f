/*
 * gnb_label_paper.c
 *	  The label step of the "paper" sampler: each unlabelled document's
 *	  label drawn given theta-hat, over the packed pairs (the hot loop).
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * move_doc for the paper sampler with K = 2, the i-th unlabelled document,
 * from its packed pairs: a word's index in active is its row of N and of
 * theta_sum (see chain_state.N).  Each entry of N changes by the same
 * operations as in move_doc; S's running products take the words in the
 * pairs' order (count 1 first).
 */
static void
move_doc_packed(chain_state *st, int32_t i, int32_t a, int32_t b)
{
	const run_shared *sh = st->sh;
	const uint32_t *pr = sh->dense + sh->dense_start[i];
	const int64_t n = sh->dense_end[i] - sh->dense_start[i];
	const int64_t n_ones = sh->dense_ones[i];
	const int32_t j = sh->unlabeled[i];
	const double lambda = st->lambda;
	double		delta_a = 0.0;
	double		delta_b = 0.0;

	st->z[j] = b;
	if (lambda == 0.0)
		return;
	if (lambda == 1.0)
	{
		log_product pa,
					pb;

		log_product_init(&pa);
		log_product_init(&pb);
		for (int64_t p = 0; p < n; p++)
		{
			int32_t		cnt;
			int64_t		base = 2 * (int64_t) packed_pair(sh, pr, n_ones, &p, &cnt);

			move_word(st, base, base, cnt, a, b, &pa, &pb, &delta_a, &delta_b);
		}
		delta_a -= log_product_value(&pa);
		delta_b += log_product_value(&pb);
	}
	else
	{
		for (int64_t p = 0; p < n; p++)
		{
			int32_t		cnt;
			int64_t		base = 2 * (int64_t) packed_pair(sh, pr, n_ones, &p, &cnt);

			move_word_tempered(st, base, base, lambda * cnt, a, b, &delta_a, &delta_b);
		}
	}
	move_doc_totals(st, j, a, b, delta_a, delta_b);
}

/*
 * add_doc_counts for the paper and blocked samplers with K = 2: the i-th unlabelled
 * document, from its packed pairs, into N's rows by index in active.
 */
void
gnb_add_doc_packed(chain_state *st, int32_t i, int32_t k, double weight)
{
	const run_shared *sh = st->sh;
	const uint32_t *pr = sh->dense + sh->dense_start[i];
	const int64_t n = sh->dense_end[i] - sh->dense_start[i];
	const int64_t n_ones = sh->dense_ones[i];

	for (int64_t p = 0; p < n; p++)
	{
		int32_t		cnt;
		int64_t		row = packed_pair(sh, pr, n_ones, &p, &cnt);

		st->N[2 * row + k] += weight * cnt;
	}
	st->Nk[k] += weight * sh->doc_length[sh->unlabeled[i]];
	st->C[k] += weight;
}

/*
 * The paper's label step, tempered (docs/model.md):
 *   s_k = [lgamma(C_k^-j + lambda + g_pi) - lgamma(C_k^-j + g_pi)]
 *       + lambda * sum_w W_jw log theta_kw
 * which is log(C_k^-j + g_pi) + sum_w W_jw log theta_kw at lambda = 1.  On a
 * kept sweep with lambda < 1 the full-weight conditional (the document's
 * label as if it were new) goes to the label probability sums.
 */
static int32_t
label_step_paper2(chain_state *st)
{
	const run_shared *sh = st->sh;
	const double lambda = st->lambda;
	const int	predictive = st->kept_sweep && lambda != 1.0;
	const double *lt = st->log_theta;
	int32_t		changed = 0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		int32_t		b;
		double		l;
		double		s0,
					s1;

		maybe_check_interrupts(sh, i);
		/* sum_w W_jw (log theta_1w - log theta_0w), see theta_step2 */
		l = packed_log_odds(sh, lt, i);
		l -= sh->doc_length[j] * st->lz_diff;
		/* the scores up to a shift common to both classes */
		s0 = a == 0 ? st->log_prior_own[0] : st->log_prior[0];
		s1 = (a == 1 ? st->log_prior_own[1] : st->log_prior[1]) + lambda * l;
		if (predictive)
		{
			st->pred[0] = a == 0 ? st->log_pred_own[0] : st->log_pred[0];
			st->pred[1] = l + (a == 1 ? st->log_pred_own[1] : st->log_pred[1]);
			add_probabilities(st, j, st->pred);
		}
		b = categorical2(&st->rng, s0, s1);
		if (b != a)
		{
			move_doc_packed(st, i, a, b);
			st->moved[j] = 1;
			changed++;
		}
	}
	return changed;
}

int32_t
gnb_label_step_paper(chain_state *st)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double lambda = st->lambda;
	const int	predictive = st->kept_sweep && lambda != 1.0;
	double	   *s = st->scores;
	double	   *loglik = st->pred;
	int32_t		changed = 0;

	if (K == 2)
		return label_step_paper2(st);
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		int32_t		b;

		maybe_check_interrupts(sh, i);
		for (int32_t k = 0; k < K; k++)
			loglik[k] = 0.0;
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			const double *row = st->log_theta + (int64_t) c->word[p] * K;
			double		cnt = c->count[p];

			for (int32_t k = 0; k < K; k++)
				loglik[k] += cnt * row[k];
		}
		for (int32_t k = 0; k < K; k++)
			s[k] = (k == a ? st->log_prior_own[k] : st->log_prior[k]) + lambda * loglik[k];
		if (predictive)
		{
			for (int32_t k = 0; k < K; k++)
				loglik[k] += k == a ? st->log_pred_own[k] : st->log_pred[k];
			add_probabilities(st, j, loglik);
		}
		b = gnb_rng_categorical_log(&st->rng, s, K, st->scratch);
		if (b != a)
		{
			move_doc(st, j, a, b);
			st->moved[j] = 1;
			changed++;
		}
	}
	return changed;
}
