/*
 * gnb_chain.c
 *	  One chain's sweeps: the start, label, theta and gamma steps in turn, the
 *	  sums over kept sweeps, and the documents locked at the end
 *	  (gnb_locked.c).
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Add the current state to the sums over kept sweeps. */
static void
accumulate_kept(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double gp = st->g_pi;
	double		total = 0.0;

	/*
	 * with lambda < 1 the label step added the full-weight conditionals (the
	 * blocked sampler's nodes add either)
	 */
	if (st->lambda == 1.0 && sh->params->sampler != GNB_SAMPLER_BLOCKED)
		for (int32_t i = 0; i < sh->n_unlabeled; i++)
		{
			int32_t		j = sh->unlabeled[i];

			st->prob_sum[(int64_t) j * K + st->z[j]] += 1.0;
		}
	/* theta-hat lazily (see chain_state) */
	for (int32_t k = 0; k < K; k++)
	{
		double		inv = 1.0 / (st->Nk[k] + vg);

		st->inv_sum[k] += inv;
		st->g_inv_sum[k] += g * inv;
		total += st->C[k];
	}
	for (int32_t k = 0; k < K; k++)
		st->pi_sum[k] += (st->C[k] + gp) / (total + K * gp);
	st->g_theta_sum += g;
	st->g_pi_sum += gp;
}

void
gnb_chain_sums_add(chain_sums *s, double x)
{
	double		d = x - s->mean;

	s->n++;
	s->mean += d / s->n;
	s->m2 += d * (x - s->mean);
}

/*
 * A chain's counts from the clamped documents, word-major: the documents of
 * the corpus that have a label, and the extra counts.  Their counts alone
 * give the paper sampler's initial theta.
 */
void
gnb_start_counts(chain_state *st)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const int32_t V = sh->V;

	memset(st->C, 0, K * sizeof(double));
	memset(st->Nk, 0, K * sizeof(double));
	if (!st->N_lent)
		memset(st->N, 0, (size_t) V * K * sizeof(double));
	for (int32_t j = 0; j < sh->D; j++)
		if (c->label[j] >= 0)
		{
			st->z[j] = c->label[j];
			add_doc_counts(sh, st->N, st->Nk, st->C, j, c->label[j], 1.0);
		}
	if (c->extra_word_counts)
	{
		for (int32_t w = 0; w < V; w++)
			for (int32_t k = 0; k < K; k++)
			{
				double		n = c->extra_word_counts[(int64_t) w * K + k];

				/* a lent N holds them already (and integers: same sum) */
				if (!st->N_lent)
					st->N[(int64_t) w * K + k] += n;
				st->Nk[k] += n;
			}
		for (int32_t k = 0; k < K; k++)
			st->C[k] += c->extra_doc_counts[k];
	}
}

/*
 * The rows of N (K = 2: two counts a row) moved in place by a permutation:
 * with to_rows, word w's row to row pos[w], else back.  A bit per row says
 * which rows hold what they are to hold.
 */
void
gnb_permute_rows(const gnb_hooks *hooks, double *N, int32_t V, const int32_t *pos, int to_rows)
{
	uint8_t    *done = gnb_xalloc(hooks, (size_t) V / 8 + 1, 1);

	for (int32_t s = 0; s < V; s++)
	{
		int32_t		at = s;
		double		held0 = N[2 * (int64_t) s];
		double		held1 = N[2 * (int64_t) s + 1];

		if (done[s >> 3] & (1 << (s & 7)))
			continue;
		for (;;)
		{
			int32_t		other = pos[at];
			double	   *row;

			if (to_rows)
			{
				/* the row held to where it goes; the one there is held next */
				double		next0 = N[2 * (int64_t) other];
				double		next1 = N[2 * (int64_t) other + 1];

				row = N + 2 * (int64_t) other;
				row[0] = held0;
				row[1] = held1;
				held0 = next0;
				held1 = next1;
				done[other >> 3] |= 1 << (other & 7);
				at = other;
				if (at == s)
					break;
			}
			else
			{
				/* row `at` gets word at's row, from row pos[at] (or held: row s's) */
				row = N + 2 * (int64_t) at;
				done[at >> 3] |= 1 << (at & 7);
				if (other == s)
				{
					row[0] = held0;
					row[1] = held1;
					break;
				}
				row[0] = N[2 * (int64_t) other];
				row[1] = N[2 * (int64_t) other + 1];
				at = other;
			}
		}
	}
	hooks->release(done, hooks->arg);
}

/*
 * The first theta of a sampler that draws it: from the clamped documents'
 * counts alone, or with a warm start's labels in them too (the blocked
 * sampler's keyed as sweep 0).
 */
static void
first_theta(chain_state *st)
{
	if (st->sh->params->sampler == GNB_SAMPLER_PAPER)
		gnb_theta_step(st, st->N);
	else if (st->sh->params->sampler == GNB_SAMPLER_BLOCKED)
		gnb_theta_step_blocked(st);
}

/*
 * Set a chain to its starting state and run all its sweeps.  The trace
 * arrays may be NULL (no_trace); sums gets the kept sweeps' log joints,
 * kept_trace (gnb_kept_series points long) the kept sweeps' log joints,
 * thinned as gnb_kept_series describes.
 */
void
gnb_run_chain(chain_state *st, int32_t chain, double *log_joint_trace,
		  double *changed_trace, chain_sums *sums, double *kept_trace)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const gnb_params *params = sh->params;
	const int32_t K = sh->K;
	const int32_t V = sh->V;
	int64_t		n_kept = 0;		/* kept sweeps so far */
	int32_t		n_points = 0;	/* of them in kept_trace */
	int64_t		stride = 1;

	memset(st->prob_sum, 0, (size_t) sh->D * K * sizeof(double));
	memset(st->theta_sum, 0, (size_t) sh->n_active * K * sizeof(double));
	memset(st->theta_mark, 0, (size_t) sh->n_active * K * sizeof(double));
	memset(st->inv_sum, 0, K * sizeof(double));
	memset(st->g_inv_sum, 0, K * sizeof(double));
	memset(st->pi_sum, 0, K * sizeof(double));
	st->lambda = params->unlabeled_weight;
	st->g_theta = params->gamma_theta;
	st->g_pi = params->gamma_pi;
	st->g_theta_sum = 0.0;
	st->g_pi_sum = 0.0;
	st->kept_sweep = 0;
	st->chain = chain;
	st->sweep = 0;

	/* the clamped documents' counts are in (gnb_start_counts) */
	gnb_split_counts_begin(st);
	if (sh->n_unlabeled_all > 0 && !c->init_label)
		first_theta(st);

	/*
	 * Unlabelled documents: with GNB_INIT_LABELS each label drawn from its
	 * probabilities under the model of the clamped documents alone
	 * (start_probabilities), so that a chain starts near the labels' mode
	 * rather than in a class-swapped one it may never leave (a single
	 * document's move cannot undo a swap); else from its prior marginal,
	 * which with pi integrated out is uniform over the K classes.  (Drawing
	 * one pi from Dir(g_pi) first would, for small g_pi, often put nearly
	 * every document in one class, a state the collapsed sampler leaves only
	 * very slowly when g_theta is small too.)  One uniform draw a document
	 * either way (first_label; the blocked sampler's nodes draw theirs keyed
	 * by the document, so that whoever draws it gets the same).  A warm
	 * start gives the labels, and the first theta is drawn given them.
	 */
	if (params->sampler == GNB_SAMPLER_BLOCKED)
		gnb_blocked_start(st);
	else
		for (int32_t i = 0; i < sh->n_unlabeled; i++)
		{
			int32_t		j = sh->unlabeled[i];
			int32_t		k = first_label(sh, i, gnb_rng_uniform(&st->rng));

			st->z[j] = k;
			if (sh->dense)
				gnb_add_doc_packed(st, i, k, params->unlabeled_weight);
			else
				add_doc_counts(sh, st->N, st->Nk, st->C, j, k, params->unlabeled_weight);
		}
	if (sh->n_unlabeled_all > 0 && c->init_label)
		first_theta(st);
	compute_word_terms(V, K, st->g_theta, st->N, st->S);
	gnb_blocked_word_terms_start(st);
	for (int32_t k = 0; k < K; k++)
		refresh_prior(st, k);

	for (int32_t t = 1; t <= params->sweeps; t++)
	{
		int64_t		changed = 0;
		gnb_sweep	info;

		st->sweep = t;
		st->kept_sweep = t > params->burn_in && (t - params->burn_in) % params->lag == 0;
		if (t == params->burn_in + 1)
			memset(st->moved, 0, (size_t) sh->D);
		if (sh->n_unlabeled_all > 0)
		{
			if (params->sampler == GNB_SAMPLER_PAPER)
				changed = gnb_label_step_paper(st);
			else if (params->sampler == GNB_SAMPLER_BLOCKED)
				changed = gnb_label_step_blocked(st);
			else
				changed = gnb_label_step_collapsed(st);
		}
		gnb_gamma_step(st);
		if (params->sampler == GNB_SAMPLER_PAPER && sh->n_unlabeled > 0)
			gnb_theta_step(st, st->N);
		else if (params->sampler == GNB_SAMPLER_BLOCKED && sh->n_unlabeled_all > 0)
			gnb_theta_step_blocked(st);
		info.chain = chain;
		info.sweep = t;
		info.log_joint = gnb_log_joint_from_counts(K, V, st->g_theta, st->g_pi,
											   st->C, st->Nk, st->S);
		info.changed = sh->n_unlabeled_all > 0 ? (double) changed / sh->n_unlabeled_all : 0.0;
		info.gamma_theta = st->g_theta;
		info.gamma_pi = st->g_pi;
		if (log_joint_trace)
		{
			log_joint_trace[t - 1] = info.log_joint;
			changed_trace[t - 1] = info.changed;
		}
		sums->last = info.log_joint;
		if (t > params->burn_in)
			sums->changed_after_burn_in += changed;
		if (st->kept_sweep)
		{
			accumulate_kept(st);
			gnb_chain_sums_add(sums, info.log_joint);
			if (n_kept % stride == 0)
			{
				if (n_points == GNB_KEPT_SERIES_MAX)
				{
					/* full: keep every other point, at twice the stride */
					for (int32_t i = 0; i < GNB_KEPT_SERIES_MAX / 2; i++)
						kept_trace[i] = kept_trace[2 * i];
					n_points = GNB_KEPT_SERIES_MAX / 2;
					stride *= 2;
				}
				if (n_kept % stride == 0)
					kept_trace[n_points++] = info.log_joint;
			}
			n_kept++;
		}
		if (sh->hooks->progress)
			sh->hooks->progress(sh->hooks->arg, &info);
	}
	sums->locked = params->sampler == GNB_SAMPLER_BLOCKED ? gnb_blocked_end(st) :
		gnb_count_locked(st, params->sweeps - params->burn_in);
}
