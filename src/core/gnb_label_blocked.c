/*
 * gnb_label_blocked.c
 *	  The "blocked" sampler (docs/model.md): pi drawn each sweep, then every
 *	  unlabelled label independently given (theta, pi), then theta; and its
 *	  sweeps split over processes (gnb_sampler.h, "The blocked sampler's
 *	  sweeps split").
 *
 * Every random number here is a keyed draw (gnb_keyed_uniform,
 * gnb_rng_keyed): a document's label in a sweep depends on the seed, the
 * chain, the sweep and the document's index, and a class's theta on the
 * block of GNB_BLOCKED_WORDS word ids it falls in, not on the order in which
 * documents or blocks are visited.  The labels of a sweep are drawn first,
 * all from the same (theta, pi), and only then applied to the counts, in
 * document order; the normaliser of theta is summed block by block and the
 * blocks' sums in block order.  So a phase's units (documents, or a class's
 * blocks of words) can be drawn by any number of processes, each taking a
 * range of them, and the chain is the same bit for bit.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What a process needs to draw its share of a phase. */
struct gnb_blocked_helper
{
	run_shared	sh;
	double	   *work;			/* GNB_BLOCKED_WORK(K) */
	/*
	 * The work before each unit of a phase: the pairs of the unlabelled
	 * documents before the i-th (n_unlabeled + 1), the active words of the
	 * blocks before the b-th (blocks + 1)
	 */
	int64_t    *pairs_before;
	int64_t    *words_before;
};

/* log(exp(a) + exp(b)), either may be -inf */
static inline double
log_add(double a, double b)
{
	double		m = a > b ? a : b;

	if (m == -INFINITY)
		return m;
	return m + log(exp(a - m) + exp(b - m));
}

static int32_t
n_word_blocks(const run_shared *sh)
{
	return (sh->V + GNB_BLOCKED_WORDS - 1) / GNB_BLOCKED_WORDS;
}

/*
 * Draw the labels of the unlabelled documents from..to-1 (by position in
 * sh->unlabeled) given log theta and log pi, into next_label; with
 * step->predictive, each one's full-weight conditional (softmax of log pi_k
 * + sum_w W_jw log theta_kw) into its row of pred.
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
		if (K == 2)
		{
			/*
			 * two classes: two sums in two lanes each (one addition's
			 * latency a pair would be the pace otherwise)
			 */
			double		l0[2] = {0.0, 0.0},
						l1[2] = {0.0, 0.0};
			int64_t		p = c->doc_start[j];
			const int64_t end = c->doc_start[j + 1];

			for (; p + 2 <= end; p += 2)
			{
				const double *r0 = a->log_theta + 2 * (int64_t) c->word[p];
				const double *r1 = a->log_theta + 2 * (int64_t) c->word[p + 1];
				const double c0 = c->count[p];
				const double c1 = c->count[p + 1];

				l0[0] += c0 * r0[0];
				l1[0] += c0 * r0[1];
				l0[1] += c1 * r1[0];
				l1[1] += c1 * r1[1];
			}
			if (p < end)
			{
				l0[0] += c->count[p] * a->log_theta[2 * (int64_t) c->word[p]];
				l1[0] += c->count[p] * a->log_theta[2 * (int64_t) c->word[p] + 1];
			}
			loglik[0] = a->log_pi[0] + (l0[0] + l0[1]);
			loglik[1] = a->log_pi[1] + (l1[0] + l1[1]);
		}
		else
		{
			for (int32_t k = 0; k < K; k++)
				loglik[k] = a->log_pi[k];
			for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
			{
				const double *row = a->log_theta + (int64_t) c->word[p] * K;
				const double cnt = c->count[p];

				for (int32_t k = 0; k < K; k++)
					loglik[k] += cnt * row[k];
			}
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
				a->pred[i * K + k] = scratch[k] / total;
		}
		u = gnb_keyed_uniform(seed, step->chain, step->sweep, GNB_DRAW_LABEL, (uint32_t) j);
		a->next_label[i] = gnb_categorical_log_u(s, K, u, scratch);
	}
}

/*
 * Theta over the word ids of block b, every class: each word that occurs in
 * an unlabelled document drawn, class after class, as Gamma(N_kw + g) from
 * the block's keyed stream, in the block's order (block_word); their logs into log_theta, and
 * per class the log of their sum (-inf for a block without such a word)
 * into block_lse.  Words of no unlabelled document are never read: their
 * summed mass is drawn once (gnb_theta_step_blocked).  work: K doubles and
 * GNB_BLOCKED_BUF more.
 */
static void
draw_theta_block(const run_shared *sh, const gnb_blocked_arrays *a,
				 const gnb_blocked_step *step, int32_t b, double *work)
{
	const int32_t K = sh->K;
	const int32_t nb = n_word_blocks(sh);
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
			 * pass.  Two classes of small integer shapes share their
			 * exponentials (gnb_rng_gamma_pair_exp).
			 */
			for (int32_t i = c0; i < c1; i++)
			{
				const double *row = a->N + (int64_t) sh->block_word[i] * K;
				double	   *y = buf + (int64_t) (i - c0) * K;

				if (K == 2 && row[0] + row[1] + 2 * g <= GNB_BLOCKED_PAIR_EXP_MAX &&
					row[0] + g == (double) (int) (row[0] + g) &&
					row[1] + g == (double) (int) (row[1] + g))
					gnb_rng_gamma_pair_exp(&rng, (int) (row[0] + g), (int) (row[1] + g),
										   &y[0], &y[1]);
				else
					for (int32_t k = 0; k < K; k++)
						y[k] = gnb_rng_gamma(&rng, row[k] + g);
				for (int32_t k = 0; k < K; k++)
					lse[k] += y[k];
			}
			gnb_log_array(buf, n);
		}
		else
		{
			/* logs of the draws; their sums after the block's largest is known */
			for (int32_t i = c0; i < c1; i++)
			{
				const double *row = a->N + (int64_t) sh->block_word[i] * K;

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
			double	   *lt = a->log_theta + (int64_t) sh->block_word[i] * K;
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
				sum += exp(a->log_theta[(int64_t) sh->block_word[i] * K + k] - x);
			x += log(sum);
		}
		a->block_lse[(int64_t) k * nb + b] = x;
	}
}

/* Units from..to of a phase: documents, or blocks of words. */
static void
run_units(const run_shared *sh, const gnb_blocked_arrays *a, const gnb_blocked_step *step,
		  int64_t from, int64_t to, double *work)
{
	if (step->phase == GNB_PHASE_LABELS)
	{
		draw_labels(sh, a, step, from, to, work);
		return;
	}
	for (int64_t u = from; u < to; u++)
	{
		if ((u - from) % 64 == 0)
			maybe_check_interrupts(sh, 0);
		draw_theta_block(sh, a, step, (int32_t) u, work);
	}
}

gnb_blocked_helper *
gnb_blocked_helper_begin(const gnb_corpus *corpus, const gnb_params *params,
						 const gnb_hooks *hooks)
{
	gnb_blocked_helper *h = gnb_xalloc(hooks, 1, sizeof(gnb_blocked_helper));

	gnb_setup_shared(&h->sh, corpus, params, hooks, GNB_SETUP_HELPER);
	h->work = gnb_xalloc(hooks, GNB_BLOCKED_WORK(corpus->n_classes), sizeof(double));
	h->pairs_before = gnb_xalloc(hooks, (size_t) h->sh.n_unlabeled + 1, sizeof(int64_t));
	for (int32_t i = 0; i < h->sh.n_unlabeled; i++)
	{
		int32_t		j = h->sh.unlabeled[i];

		h->pairs_before[i + 1] = h->pairs_before[i] + corpus->doc_start[j + 1] -
			corpus->doc_start[j];
	}
	h->words_before = gnb_xalloc(hooks, (size_t) n_word_blocks(&h->sh) + 1, sizeof(int64_t));
	for (int32_t b = 0; b <= n_word_blocks(&h->sh); b++)
		h->words_before[b] = h->sh.block_active[b];
	return h;
}

int64_t
gnb_blocked_units(const gnb_blocked_helper *h, int32_t phase)
{
	return phase == GNB_PHASE_LABELS ? h->sh.n_unlabeled : n_word_blocks(&h->sh);
}

/* The first index i of cum[0 .. n] (increasing) with cum[i] >= x. */
static int64_t
first_at_least(const int64_t *cum, int64_t n, double x)
{
	int64_t		lo = 0,
				hi = n;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if ((double) cum[mid] >= x)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void
gnb_blocked_part(const gnb_blocked_helper *h, int32_t phase, int32_t part, int32_t parts,
				 int64_t *from, int64_t *to)
{
	/*
	 * Equal work, not equal units: documents by their pairs, blocks by their
	 * active words (the corpus alone decides, so every process agrees)
	 */
	const int64_t *before = phase == GNB_PHASE_LABELS ? h->pairs_before : h->words_before;
	int64_t		n = gnb_blocked_units(h, phase);
	double		total = (double) before[n];

	*from = part == 0 ? 0 : first_at_least(before, n, total * part / parts);
	*to = part == parts - 1 ? n : first_at_least(before, n, total * (part + 1) / parts);
}

void
gnb_blocked_helper_run(gnb_blocked_helper *h, const gnb_blocked_arrays *a,
					   const gnb_blocked_step *step, int64_t from, int64_t to)
{
	run_units(&h->sh, a, step, from, to, h->work);
}

uint64_t
gnb_blocked_helper_memory(int32_t n_docs, int32_t n_words, int32_t n_classes)
{
	uint64_t	D = (uint64_t) (n_docs > 0 ? n_docs : 1);
	uint64_t	V = (uint64_t) (n_words > 0 ? n_words : 1);
	uint64_t	K = (uint64_t) n_classes;

	/*
	 * per document: its index if unlabelled, its length, the pairs before
	 * it; per word: whether it is active, its index, its place in active
	 * and in its block's order, its sort key; the clamped counts while they
	 * are summed (V x K); per block its first active word and the words
	 * before it; the scratch; a header each
	 */
	return D * (sizeof(int32_t) + sizeof(double) + sizeof(int64_t)) +
		V * (1 + 3 * sizeof(int32_t) + sizeof(active_key)) + V * K * sizeof(double) +
		(V / GNB_BLOCKED_WORDS + 2) * (sizeof(int32_t) + sizeof(int64_t)) +
		K * (sizeof(double) + 1) +
		GNB_BLOCKED_WORK(K) * sizeof(double) + sizeof(gnb_blocked_helper) + 16 * 64;
}

void
gnb_blocked_helper_end(gnb_blocked_helper *h)
{
	const gnb_hooks *hooks = h->sh.hooks;

	gnb_release_shared(&h->sh);
	hooks->release(h->work, hooks->arg);
	hooks->release(h->pairs_before, hooks->arg);
	hooks->release(h->words_before, hooks->arg);
	hooks->release(h, hooks->arg);
}

void
gnb_blocked_sizes(int32_t n_docs, int32_t n_words, int32_t n_classes, const gnb_params *params,
				  size_t *sizes)
{
	size_t		vk = (size_t) n_words * n_classes + 1;
	size_t		blocks = (size_t) (n_words + GNB_BLOCKED_WORDS - 1) / GNB_BLOCKED_WORDS;

	sizes[GNB_BLOCKED_LOG_THETA] = vk * sizeof(double);
	sizes[GNB_BLOCKED_N] = vk * sizeof(double);
	sizes[GNB_BLOCKED_LOG_PI] = (size_t) n_classes * sizeof(double);
	sizes[GNB_BLOCKED_NEXT_LABEL] = ((size_t) n_docs + 1) * sizeof(int32_t);
	sizes[GNB_BLOCKED_PRED] = ((params->unlabeled_weight != 1.0 ? (size_t) n_docs * n_classes : 0) +
							   1) * sizeof(double);
	sizes[GNB_BLOCKED_BLOCK_LSE] = ((size_t) n_classes * blocks + 1) * sizeof(double);
}

/*
 * A phase of the chain's sweep: split by the hooks (every process draws its
 * range), or drawn here whole.  The same draws either way.
 */
static void
run_phase(chain_state *st, int32_t phase)
{
	const run_shared *sh = st->sh;
	gnb_blocked_step step;

	step.chain = st->chain;
	step.sweep = st->sweep;
	step.phase = phase;
	step.predictive = st->kept_sweep && st->lambda != 1.0;
	step.g_theta = st->g_theta;
	if (sh->hooks->blocked_phase)
		sh->hooks->blocked_phase(sh->hooks->arg, &step);
	else
		run_units(sh, &st->blocked, &step, 0,
				  phase == GNB_PHASE_LABELS ? sh->n_unlabeled : n_word_blocks(sh),
				  st->blocked_work);
}

/* pi ~ Dirichlet(C + g_pi), as log pi, from this sweep's keyed stream. */
static void
draw_pi(chain_state *st)
{
	const int32_t K = st->sh->K;
	const double gp = st->g_pi;
	double	   *log_pi = st->blocked.log_pi;
	gnb_rng		rng;
	double		lz = -INFINITY;

	gnb_rng_keyed(&rng, st->sh->params->seed, st->chain, st->sweep, GNB_DRAW_PI, 0);
	for (int32_t k = 0; k < K; k++)
	{
		log_pi[k] = gnb_rng_log_gamma(&rng, st->C[k] + gp);
		lz = log_add(lz, log_pi[k]);
	}
	for (int32_t k = 0; k < K; k++)
		log_pi[k] -= lz;
}

/*
 * The label step: pi drawn, every label drawn given (theta, pi), then, in
 * document order, the predictive probabilities added to the sums and the
 * documents whose label changed moved in the counts (so that the counts,
 * the word terms and the theta-hat sums come out the same whoever drew the
 * labels).
 */
int32_t
gnb_label_step_blocked(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const gnb_blocked_arrays *a = &st->blocked;
	const int	predictive = st->kept_sweep && st->lambda != 1.0;
	int32_t		changed = 0;

	draw_pi(st);
	run_phase(st, GNB_PHASE_LABELS);
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		from = st->z[j];
		int32_t		to = a->next_label[i];

		if (predictive)
			for (int32_t k = 0; k < K; k++)
				st->prob_sum[(int64_t) j * K + k] += a->pred[(int64_t) i * K + k];
		if (to != from)
		{
			move_doc(st, j, from, to);
			st->moved[j] = 1;
			changed++;
		}
	}
	return changed;
}

/*
 * theta_k ~ Dirichlet(N_k + g) for every class, as log theta of the words
 * of unlabelled documents: block by block (run_phase), the blocks' sums
 * added here in block order with the other words' summed mass (one draw of
 * their summed shapes, keyed by the class alone), then every drawn word
 * normalised.
 */
void
gnb_theta_step_blocked(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const int32_t nb = n_word_blocks(sh);
	const gnb_blocked_arrays *a = &st->blocked;

	run_phase(st, GNB_PHASE_THETA);
	for (int32_t k = 0; k < K; k++)
	{
		double		lz = -INFINITY;
		double		rest = sh->inactive_count[k] + sh->n_inactive * st->g_theta;

		for (int32_t b = 0; b < nb; b++)
			lz = log_add(lz, a->block_lse[(int64_t) k * nb + b]);
		if (rest > 0.0)
		{
			gnb_rng		rng;

			gnb_rng_keyed(&rng, sh->params->seed, st->chain, st->sweep, GNB_DRAW_THETA_REST,
						  (uint32_t) k);
			lz = log_add(lz, gnb_rng_log_gamma(&rng, rest));
		}
		for (int32_t i = 0; i < sh->n_active; i++)
			a->log_theta[(int64_t) sh->active[i] * K + k] -= lz;
	}
}
