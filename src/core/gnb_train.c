/*
 * gnb_train.c
 *	  The core's entry points: a chain from start to result
 *	  (gnb_train_chain), chains combined in order (gnb_combine_*), and
 *	  gnb_train, which runs them all in one process.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *
default_alloc(size_t size, void *arg)
{
	void	   *p = calloc(1, size ? size : 1);

	(void) arg;
	if (p == NULL)
		abort();
	return p;
}

static void
default_release(void *ptr, void *arg)
{
	(void) arg;
	free(ptr);
}

const gnb_hooks gnb_default_hooks = {default_alloc, default_release, NULL, NULL, NULL};

/*
 * A chain's state and its result's arrays, allocated (through hooks) and
 * started: the counts of its start, the sums over kept sweeps at zero.
 */
static void
chain_begin(chain_state *st, run_shared *sh, const gnb_corpus *corpus,
			const gnb_params *params, const gnb_hooks *hooks, int32_t chain, gnb_chain *out)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	const int32_t kept = (params->sweeps - params->burn_in) / params->lag;
	size_t		vk = (size_t) V * K;

	memset(out, 0, sizeof(*out));
	out->chain = chain;
	out->kept = kept;
	out->sweeps = params->sweeps;
	out->kept_points = gnb_kept_series(kept, &out->kept_stride);
	/* filled up to GNB_KEPT_SERIES_MAX points before it is thinned */
	out->kept_log_joint = gnb_xalloc(hooks, kept < GNB_KEPT_SERIES_MAX ? kept : GNB_KEPT_SERIES_MAX,
								 sizeof(double));
	if (!params->no_trace)
	{
		out->log_joint = gnb_xalloc(hooks, params->sweeps, sizeof(double));
		out->changed = gnb_xalloc(hooks, params->sweeps, sizeof(double));
	}
	out->last_labels = gnb_xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));

	memset(st, 0, sizeof(*st));
	st->sh = sh;
	st->z = out->last_labels;
	st->moved = gnb_xalloc(hooks, D > 0 ? D : 1, 1);
	st->C = gnb_xalloc(hooks, K, sizeof(double));
	if (params->sampler == GNB_SAMPLER_BLOCKED && hooks->blocked_arrays)
		st->blocked_shared = hooks->blocked_arrays(hooks->arg, &st->blocked);
	st->N_lent = !st->blocked_shared && gnb_lend_counts(corpus, params);
	if (st->blocked_shared)
		st->N = st->blocked.N;
	else
		st->N = st->N_lent ? corpus->lent_extra_word_counts :
			gnb_xalloc(hooks, vk + 1, sizeof(double));
	st->Nk = gnb_xalloc(hooks, K, sizeof(double));
	gnb_start_counts(st);
	if (sh->dense)
	{
		/* N by row (chain_state.N), before the arrays of the sweeps are made */
		gnb_permute_rows(hooks, st->N, V, sh->active_pos, 1);
		hooks->release(sh->active_pos, hooks->arg);
		sh->active_pos = NULL;
	}
	st->S = gnb_xalloc(hooks, K, sizeof(double));
	st->log_prior = gnb_xalloc(hooks, K, sizeof(double));
	st->log_prior_own = gnb_xalloc(hooks, K, sizeof(double));
	st->log_pred = gnb_xalloc(hooks, K, sizeof(double));
	st->log_pred_own = gnb_xalloc(hooks, K, sizeof(double));
	/* K = 2: the active words' log-odds */
	if (params->sampler == GNB_SAMPLER_PAPER)
		st->log_theta = gnb_xalloc(hooks, K != 2 ? vk + 1 : (size_t) sh->n_active + 1,
							  sizeof(double));
	if (params->sampler == GNB_SAMPLER_BLOCKED)
	{
		/* the arrays of gnb_blocked_arrays, unless the hooks gave them */
		if (!st->blocked_shared)
		{
			size_t		sizes[GNB_BLOCKED_N_ARRAYS];

			gnb_blocked_sizes(D, V, K, params, sizes);
			st->blocked.log_theta = gnb_xalloc(hooks, sizes[GNB_BLOCKED_LOG_THETA], 1);
			st->blocked.N = st->N;
			st->blocked.log_pi = gnb_xalloc(hooks, sizes[GNB_BLOCKED_LOG_PI], 1);
			st->blocked.next_label = gnb_xalloc(hooks, sizes[GNB_BLOCKED_NEXT_LABEL], 1);
			st->blocked.pred = gnb_xalloc(hooks, sizes[GNB_BLOCKED_PRED], 1);
			st->blocked.block_lse = gnb_xalloc(hooks, sizes[GNB_BLOCKED_BLOCK_LSE], 1);
		}
		st->log_theta = st->blocked.log_theta;
		st->blocked_work = gnb_xalloc(hooks, GNB_BLOCKED_WORK(K), sizeof(double));
	}
	if (params->sampler == GNB_SAMPLER_BLOCKED && !params->sample_gamma_theta)
	{
		st->S_start = gnb_xalloc(hooks, K, sizeof(double));
		st->S_change = gnb_xalloc(hooks, 2 * (size_t) K, sizeof(int64_t));
	}
	if (keeps_split_counts(params))
	{
		st->clamped_N = gnb_xalloc(hooks, vk + 1, sizeof(double));
		st->unlabeled_N = gnb_xalloc(hooks, vk + 1, sizeof(double));
		st->split_totals = gnb_xalloc(hooks, 4 * (size_t) K, sizeof(double));
	}
	st->scores = gnb_xalloc(hooks, K, sizeof(double));
	st->pred = gnb_xalloc(hooks, K, sizeof(double));
	st->scratch = gnb_xalloc(hooks, K, sizeof(double));
	st->products = gnb_xalloc(hooks, K, sizeof(log_product));
	if (params->sample_gamma_theta)
	{
		st->cs.hist = gnb_xalloc(hooks, (size_t) K * GNB_HIST_MAX, sizeof(double));
		st->cs.rest = gnb_xalloc(hooks, vk + 1, sizeof(double));
		st->cs.rest_end = gnb_xalloc(hooks, K, sizeof(int64_t));
	}
	/* the sums become the chain's means in place */
	st->prob_sum = out->label_prob = gnb_xalloc(hooks, (size_t) D * K + 1, sizeof(double));
	st->theta_sum = gnb_xalloc(hooks, (size_t) sh->n_active * K + 1, sizeof(double));
	st->theta_mark = gnb_xalloc(hooks, (size_t) sh->n_active * K + 1, sizeof(double));
	st->inv_sum = gnb_xalloc(hooks, K, sizeof(double));
	st->g_inv_sum = gnb_xalloc(hooks, K, sizeof(double));
	st->pi_sum = out->pi = gnb_xalloc(hooks, K, sizeof(double));
	/* blocked: its documents are a node, here or (hooks->blocked_nodes) elsewhere */
	if (params->sampler == GNB_SAMPLER_BLOCKED && !hooks->blocked_nodes)
		st->node = gnb_node_local(st);
}

/*
 * A chain's estimates from its sums over the kept sweeps: theta-hat in N's
 * room (unless N is lent, which goes back as it was), pi-hat, the label
 * probabilities, the gammas' means, and its figures.
 */
static void
chain_estimates(chain_state *st, run_shared *sh, const gnb_corpus *corpus,
				const gnb_params *params, const gnb_hooks *hooks, const chain_sums *sums,
				gnb_chain *out)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	const int32_t kept = (params->sweeps - params->burn_in) / params->lag;
	size_t		vk = (size_t) V * K;

	/*
	 * theta-hat: every active entry brought up to date, the sums over all
	 * kept sweeps; an inactive word's N never changed, so its sum is what
	 * flushing it would give, N inv_sum.  The arrays only sampling needs go
	 * before theta-hat is allocated.
	 */
	for (int32_t i = 0; i < sh->n_active; i++)
		for (int32_t k = 0; k < K; k++)
			flush_theta(st, (int64_t) (sh->dense ? i : sh->active[i]) * K + k,
						(int64_t) i * K + k, k);
	hooks->release(st->theta_mark, hooks->arg);
	if (st->log_theta && !st->blocked_shared)
		hooks->release(st->log_theta, hooks->arg);
	if (st->log_theta_1)
		hooks->release(st->log_theta_1, hooks->arg);
	if (st->blocked_work)
	{
		if (!st->blocked_shared)
		{
			hooks->release(st->blocked.log_pi, hooks->arg);
			hooks->release(st->blocked.next_label, hooks->arg);
			hooks->release(st->blocked.pred, hooks->arg);
			hooks->release(st->blocked.block_lse, hooks->arg);
		}
		hooks->release(st->blocked_work, hooks->arg);
	}
	if (sh->dense)
	{
		int32_t    *pos;

		/*
		 * The unlabelled documents' counts out of a lent N while it is by
		 * row, then N word-major again: the rows' permutation from active
		 * as gnb_setup_shared made it.
		 */
		if (st->N_lent)
			for (int32_t i = 0; i < sh->n_unlabeled; i++)
			{
				const uint32_t *pr = sh->dense + sh->dense_start[i];
				const int64_t n = sh->dense_end[i] - sh->dense_start[i];
				const int32_t z = st->z[sh->unlabeled[i]];

				for (int64_t p = 0; p < n; p++)
				{
					int32_t		cnt;
					int64_t		row = packed_pair(sh, pr, sh->dense_ones[i], &p, &cnt);

					st->N[2 * row + z] -= cnt;
				}
			}
		pos = gnb_xalloc(hooks, V > 0 ? V : 1, sizeof(int32_t));
		for (int32_t w = 0; w < V; w++)
			pos[w] = -1;
		for (int32_t i = 0; i < sh->n_active; i++)
			pos[sh->active[i]] = i;
		for (int32_t w = 0, r = sh->n_active; w < V; w++)
			if (pos[w] < 0)
				pos[w] = r++;
		gnb_permute_rows(hooks, st->N, V, pos, 0);
		hooks->release(pos, hooks->arg);
	}
	/* in N's own room, entry by entry, unless N is lent or shared */
	out->theta = st->N_lent || st->blocked_shared ? gnb_xalloc(hooks, vk + 1, sizeof(double)) :
		st->N;
	for (int64_t idx = 0; idx < (int64_t) vk; idx++)
	{
		int32_t		k = (int32_t) (idx % K);

		out->theta[idx] = st->N[idx] * st->inv_sum[k] + st->g_inv_sum[k];
		out->theta[idx] /= kept;
	}
	if (st->N_lent)
	{
		/*
		 * The lent counts back as they were: every document's counts taken
		 * out of its last class.  All integers, so exactly.
		 */
		for (int32_t j = 0; j < D; j++)
			if (!sh->dense || corpus->label[j] >= 0)
				for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
					st->N[(int64_t) corpus->word[p] * K + st->z[j]] -= corpus->count[p];
	}
	st->N = NULL;
	if (sh->dense_in_place)
		gnb_restore_words(sh);
	for (int32_t i = 0; i < sh->n_active; i++)
		for (int32_t k = 0; k < K; k++)
		{
			int64_t		idx = (int64_t) sh->active[i] * K + k;

			out->theta[idx] = st->theta_sum[(int64_t) i * K + k] + st->g_inv_sum[k];
			out->theta[idx] /= kept;
		}
	hooks->release(st->theta_sum, hooks->arg);
	for (int32_t k = 0; k < K; k++)
		out->pi[k] /= kept;
	/* (the blocked sampler's nodes made their means) */
	for (int32_t i = 0; i < sh->n_unlabeled && params->sampler != GNB_SAMPLER_BLOCKED; i++)
	{
		int64_t		j = sh->unlabeled[i];

		for (int32_t k = 0; k < K; k++)
			out->label_prob[j * K + k] /= kept;
	}
	out->gamma_theta = st->g_theta_sum / kept;
	out->gamma_pi = st->g_pi_sum / kept;
	out->last_log_joint = sums->last;
	out->changed_after_burn_in = sums->changed_after_burn_in;
	out->locked = sums->locked;
}

/* What the chain's state holds besides its result. */
static void
chain_end(chain_state *st, run_shared *sh, const gnb_hooks *hooks)
{
	if (st->node)
		gnb_node_end(st->node);
	hooks->release(st->inv_sum, hooks->arg);
	hooks->release(st->g_inv_sum, hooks->arg);
	hooks->release(st->moved, hooks->arg);
	hooks->release(st->C, hooks->arg);
	hooks->release(st->Nk, hooks->arg);
	hooks->release(st->S, hooks->arg);
	hooks->release(st->log_prior, hooks->arg);
	hooks->release(st->log_prior_own, hooks->arg);
	hooks->release(st->log_pred, hooks->arg);
	hooks->release(st->log_pred_own, hooks->arg);
	hooks->release(st->scores, hooks->arg);
	hooks->release(st->pred, hooks->arg);
	hooks->release(st->scratch, hooks->arg);
	hooks->release(st->products, hooks->arg);
	if (st->S_start)
	{
		hooks->release(st->S_start, hooks->arg);
		hooks->release(st->S_change, hooks->arg);
	}
	if (st->clamped_N)
	{
		hooks->release(st->clamped_N, hooks->arg);
		hooks->release(st->unlabeled_N, hooks->arg);
		hooks->release(st->split_totals, hooks->arg);
	}
	if (st->cs.hist)
	{
		hooks->release(st->cs.hist, hooks->arg);
		hooks->release(st->cs.rest, hooks->arg);
		hooks->release(st->cs.rest_end, hooks->arg);
	}
	gnb_release_shared(sh);
}

/* One chain, from its start to its estimates (gnb_sampler.h). */
void
gnb_train_chain(const gnb_corpus *corpus, const gnb_params *params, int32_t chain,
				const gnb_hooks *hooks, gnb_chain *out)
{
	run_shared	sh;
	chain_state st;
	chain_sums	sums;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	gnb_setup_shared(&sh, corpus, params, hooks, GNB_SETUP_CHAIN);
	chain_begin(&st, &sh, corpus, params, hooks, chain, out);
	/* chain c's stream: the seed's, jumped c times */
	gnb_rng_seed(&st.rng, params->seed);
	for (int32_t c = 0; c < chain; c++)
		gnb_rng_jump(&st.rng);
	memset(&sums, 0, sizeof(sums));
	gnb_run_chain(&st, chain, out->log_joint, out->changed, &sums, out->kept_log_joint);
	chain_estimates(&st, &sh, corpus, params, hooks, &sums, out);
	chain_end(&st, &sh, hooks);
}

void
gnb_chain_free(gnb_chain *chain, const gnb_hooks *hooks)
{
	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	hooks->release(chain->label_prob, hooks->arg);
	if (chain->theta)
		hooks->release(chain->theta, hooks->arg);
	hooks->release(chain->pi, hooks->arg);
	hooks->release(chain->kept_log_joint, hooks->arg);
	if (chain->log_joint)
		hooks->release(chain->log_joint, hooks->arg);
	if (chain->changed)
		hooks->release(chain->changed, hooks->arg);
	hooks->release(chain->last_labels, hooks->arg);
	memset(chain, 0, sizeof(*chain));
}

/* What combining keeps between chains. */
struct gnb_combiner
{
	const gnb_corpus *corpus;
	const gnb_params *params;
	const gnb_hooks *hooks;
	gnb_result *result;
	run_shared	sh;
	chain_sums *sums;			/* per chain */
	double	   *ref_theta;		/* chain 0's theta-hat (only with chains > 1) */
	int32_t    *perm;
	int32_t		added;
	int			held;			/* the documents' estimates are their holders' */
};

gnb_combiner *
gnb_combine_begin(const gnb_corpus *corpus, const gnb_params *params,
				  const gnb_hooks *hooks, gnb_result *result)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	size_t		vk = (size_t) V * K;
	gnb_combiner *cb;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	cb = gnb_xalloc(hooks, 1, sizeof(gnb_combiner));
	cb->corpus = corpus;
	cb->params = params;
	cb->hooks = hooks;
	cb->result = result;
	gnb_setup_shared(&cb->sh, corpus, params, hooks, GNB_SETUP_COMBINE);

	memset(result, 0, sizeof(*result));
	result->n_docs = D;
	result->n_words = V;
	result->n_classes = K;
	result->chains = params->chains;
	result->sweeps = params->sweeps;
	result->kept = (params->sweeps - params->burn_in) / params->lag;
	/*
	 * the documents' estimates, unless others hold the documents
	 * (doc_length): theirs stay with them (gnb_node_combined)
	 */
	if (corpus->doc_length == NULL)
	{
		result->label_prob = gnb_xalloc(hooks, (size_t) D * K + 1, sizeof(double));
		result->last_labels = gnb_xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));
	}
	result->unlabeled_mass = gnb_xalloc(hooks, 2 * (size_t) K, sizeof(double));
	/* theta-hat when the first chain is added: not beside a sampling chain's arrays */
	result->theta = NULL;
	result->pi = gnb_xalloc(hooks, K, sizeof(double));
	if (!params->no_trace)
	{
		result->log_joint = gnb_xalloc(hooks, (size_t) params->chains * params->sweeps, sizeof(double));
		result->changed = gnb_xalloc(hooks, (size_t) params->chains * params->sweeps, sizeof(double));
	}
	result->kept_points = gnb_kept_series(result->kept, &result->kept_stride);
	result->kept_log_joint = gnb_xalloc(hooks, (size_t) params->chains * result->kept_points,
									sizeof(double));
	result->ess = gnb_xalloc(hooks, params->chains, sizeof(double));
	result->changed_after_burn_in = gnb_xalloc(hooks, params->chains, sizeof(int32_t));
	result->locked = gnb_xalloc(hooks, params->chains, sizeof(int32_t));
	result->chain_agreement = NAN;
	result->labels_agreement = result->labels_only_agreement = NAN;
	result->drift_from = result->drift_to = -1;
	cb->sums = gnb_xalloc(hooks, params->chains, sizeof(chain_sums));
	if (params->chains > 1)
		cb->ref_theta = gnb_xalloc(hooks, vk + 1, sizeof(double));
	cb->perm = gnb_xalloc(hooks, K, sizeof(int32_t));
	return cb;
}

/*
 * A V x K word-major array in place as K x V class-major: element w * K + k
 * to k * V + w, cycle by cycle, a bit per element saying which hold what
 * they are to hold.
 */
static void
transpose_in_place(const gnb_hooks *hooks, double *a, int32_t V, int32_t K)
{
	const int64_t n = (int64_t) V * K;
	uint8_t    *done = gnb_xalloc(hooks, (size_t) n / 8 + 1, 1);

	for (int64_t s = 0; s < n; s++)
	{
		int64_t		at = s;
		double		held = a[s];

		if (done[s >> 3] & (1 << (s & 7)))
			continue;
		do
		{
			int64_t		to = (at % K) * V + at / K;
			double		next = a[to];

			a[to] = held;
			held = next;
			done[to >> 3] |= 1 << (to & 7);
			at = to;
		} while (at != s);
	}
	hooks->release(done, hooks->arg);
}

static const int32_t *combine_add(gnb_combiner *cb, gnb_chain *chain, int take_theta);

const int32_t *
gnb_combine_add(gnb_combiner *cb, const gnb_chain *chain)
{
	return combine_add(cb, (gnb_chain *) chain, 0);
}

/*
 * chain_agreement after a chain other than the first: distance is the sum
 * over the unlabelled documents (the whole corpus's, wherever they are
 * held) of gnb_fold_document's distances.
 */
void
gnb_combine_distance(gnb_combiner *cb, const gnb_exact_sum *distance)
{
	gnb_result *result = cb->result;
	double		d;

	if (cb->added < 2 || cb->sh.n_unlabeled_all == 0)
		return;
	d = 0.5 * gnb_exact_value(distance) / (double) cb->sh.n_unlabeled_all;
	if (isnan(result->chain_agreement) || 1.0 - d < result->chain_agreement)
		result->chain_agreement = 1.0 - d;
}

/*
 * gnb_combine_add; with take_theta, the first chain's theta-hat becomes the
 * result's, transposed in place (chain->theta is then NULL): the sum it
 * starts is then never beside it.  The same values: 0 + x is x.
 */
static const int32_t *
combine_add(gnb_combiner *cb, gnb_chain *chain, int take_theta)
{
	const run_shared *sh = &cb->sh;
	const gnb_params *params = cb->params;
	gnb_result *result = cb->result;
	const int32_t K = sh->K;
	const int32_t V = sh->V;
	const int32_t c = cb->added++;
	size_t		vk = (size_t) V * K;
	int32_t    *perm = cb->perm;

	for (int32_t k = 0; k < K; k++)
		perm[k] = k;
	if (c == 0)
	{
		if (cb->ref_theta)
			memcpy(cb->ref_theta, chain->theta, vk * sizeof(double));
		if (take_theta)
		{
			transpose_in_place(cb->hooks, chain->theta, V, K);
			result->theta = chain->theta;
			chain->theta = NULL;
		}
		else
			result->theta = gnb_xalloc(cb->hooks, vk + 1, sizeof(double));
	}
	else if (!sh->all_classes_clamped)
		gnb_align_classes(sh, cb->ref_theta, chain->theta, perm);

	/* summed over chains class-major, as theta-hat goes out */
	if (chain->theta)
		for (int32_t k = 0; k < K; k++)
		{
			double	   *row = result->theta + (int64_t) perm[k] * V;

			for (int32_t w = 0; w < V; w++)
				row[w] += chain->theta[(int64_t) w * K + k];
		}
	for (int32_t k = 0; k < K; k++)
		result->pi[perm[k]] += chain->pi[k];
	/*
	 * The documents' estimates summed under the alignment, and
	 * chain_agreement: this chain against the mean of those before it,
	 * whose sum the label probabilities hold so far.  Documents held
	 * elsewhere: their holders fold them with perm.
	 */
	if (chain->label_prob)
	{
		gnb_exact_sum distance = {0};

		for (int32_t i = 0; i < sh->n_unlabeled; i++)
		{
			int64_t		j = sh->unlabeled[i];

			gnb_exact_add(&distance, gnb_fold_document(result->label_prob + j * K,
													   chain->label_prob + j * K, K, c,
													   perm));
		}
		gnb_combine_distance(cb, &distance);
	}
	else
		cb->held = 1;
	result->gamma_theta += chain->gamma_theta / params->chains;
	result->gamma_pi += chain->gamma_pi / params->chains;
	memcpy(result->kept_log_joint + (int64_t) c * result->kept_points, chain->kept_log_joint,
		   (size_t) result->kept_points * sizeof(double));
	for (int32_t t = 0; t < result->kept_points; t++)
		gnb_chain_sums_add(&cb->sums[c], chain->kept_log_joint[t]);
	cb->sums[c].last = chain->last_log_joint;
	cb->sums[c].changed_after_burn_in = chain->changed_after_burn_in;
	cb->sums[c].locked = chain->locked;
	if (result->log_joint && chain->log_joint)
	{
		memcpy(result->log_joint + (int64_t) c * params->sweeps, chain->log_joint,
			   (size_t) params->sweeps * sizeof(double));
		memcpy(result->changed + (int64_t) c * params->sweeps, chain->changed,
			   (size_t) params->sweeps * sizeof(double));
	}
	if (chain->last_labels)
		memcpy(result->last_labels, chain->last_labels, (size_t) sh->D * sizeof(int32_t));
	return perm;
}

void
gnb_combine_end(gnb_combiner *cb)
{
	const run_shared *sh = &cb->sh;
	const gnb_corpus *corpus = cb->corpus;
	const gnb_params *params = cb->params;
	const gnb_hooks *hooks = cb->hooks;
	gnb_result *result = cb->result;
	const int32_t K = sh->K;
	const int32_t V = sh->V;
	const int32_t D = sh->D;
	int			n_ess = 0;

	/* Average over chains. */
	if (result->theta == NULL)
		result->theta = gnb_xalloc(hooks, (size_t) V * K + 1, sizeof(double));
	for (int64_t i = 0; i < (int64_t) V * K; i++)
		result->theta[i] /= params->chains;
	for (int32_t k = 0; k < K; k++)
		result->pi[k] /= params->chains;
	/*
	 * The documents' means, and their mass (exact sums, as their holders
	 * make it when others hold them: gnb_node_combine_end)
	 */
	if (!cb->held)
	{
		gnb_exact_sum *mass = gnb_xalloc(hooks, 2 * (size_t) K, sizeof(gnb_exact_sum));

		for (int32_t j = 0; j < D; j++)
		{
			if (corpus->label[j] >= 0)
				result->label_prob[(int64_t) j * K + corpus->label[j]] = 1.0;
			else
				for (int32_t k = 0; k < K; k++)
					result->label_prob[(int64_t) j * K + k] /= params->chains;
		}
		for (int32_t i = 0; i < sh->n_unlabeled; i++)
		{
			int64_t		j = sh->unlabeled[i];

			gnb_mass_document(mass, result->label_prob + j * K,
							  (corpus->doc_length ? corpus->doc_length[j] : 0.0) + sh->doc_length[j],
							  K);
		}
		for (int32_t k = 0; k < 2 * K; k++)
			result->unlabeled_mass[k] = gnb_exact_value(&mass[k]);
		hooks->release(mass, hooks->arg);
	}
	for (int32_t chain = 0; chain < params->chains; chain++)
	{
		result->final_log_joint += cb->sums[chain].last / params->chains;
		result->changed_after_burn_in[chain] =
			cb->sums[chain].changed_after_burn_in > INT32_MAX ? INT32_MAX :
			(int32_t) cb->sums[chain].changed_after_burn_in;
		result->locked[chain] = (int32_t) cb->sums[chain].locked;
		result->ess[chain] = gnb_ess(result->kept_log_joint + (int64_t) chain * result->kept_points,
									 result->kept_points);
		if (!isnan(result->ess[chain]))
		{
			result->ess_total += result->ess[chain];
			n_ess++;
		}
	}
	if (n_ess == 0)
		result->ess_total = NAN;
	result->r_hat = gnb_r_hat(cb->sums, params->chains);
	result->split_r_hat = gnb_split_r_hat(result->kept_log_joint, params->chains,
										  result->kept_points);
	/* (the whole corpus's unlabelled documents, wherever they are held) */
	result->warnings = gnb_diagnose(result->split_r_hat, result->ess_total,
									result->locked, params->chains,
									sh->n_unlabeled_all > INT32_MAX ? INT32_MAX :
									(int32_t) sh->n_unlabeled_all,
									params->sample_gamma_theta || params->sample_gamma_pi,
									result->chain_agreement);
	hooks->release(cb->sums, hooks->arg);
	if (cb->ref_theta)
		hooks->release(cb->ref_theta, hooks->arg);
	hooks->release(cb->perm, hooks->arg);
	gnb_release_shared(&cb->sh);
	hooks->release(cb, hooks->arg);
}

void
gnb_train(const gnb_corpus *corpus, const gnb_params *params,
		  const gnb_hooks *hooks, gnb_result *result)
{
	gnb_combiner *cb = gnb_combine_begin(corpus, params, hooks, result);

	for (int32_t c = 0; c < params->chains; c++)
	{
		gnb_chain	chain;

		gnb_train_chain(corpus, params, c, hooks, &chain);
		combine_add(cb, &chain, 1);
		gnb_chain_free(&chain, hooks);
	}
	gnb_combine_end(cb);
}

void
gnb_result_free(gnb_result *result, const gnb_hooks *hooks)
{
	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	if (result->label_prob)
		hooks->release(result->label_prob, hooks->arg);
	hooks->release(result->unlabeled_mass, hooks->arg);
	hooks->release(result->theta, hooks->arg);
	hooks->release(result->pi, hooks->arg);
	if (result->log_joint)
		hooks->release(result->log_joint, hooks->arg);
	if (result->changed)
		hooks->release(result->changed, hooks->arg);
	hooks->release(result->kept_log_joint, hooks->arg);
	hooks->release(result->ess, hooks->arg);
	hooks->release(result->changed_after_burn_in, hooks->arg);
	hooks->release(result->locked, hooks->arg);
	if (result->last_labels)
		hooks->release(result->last_labels, hooks->arg);
	memset(result, 0, sizeof(*result));
}
