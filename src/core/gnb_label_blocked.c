/*
 * gnb_label_blocked.c
 *	  The "blocked" sampler (docs/model.md): pi drawn each sweep, then every
 *	  unlabelled label independently given (theta, pi), then theta; and its
 *	  sweeps split over processes (gnb_sampler.h, "The blocked sampler's
 *	  sweeps split").
 *
 * Every random number here is a keyed draw (gnb_keyed_uniform,
 * gnb_rng_keyed): a document's label in a sweep depends on the seed, the
 * chain, the sweep and the document's key (gnb_corpus.doc_key), and a
 * class's theta on the block of GNB_BLOCKED_WORDS words it falls in, not
 * on the order in which documents or blocks are visited.  The labels of a
 * sweep are drawn first, all from the same (theta, pi), and only then
 * applied to the counts, in document order; the normaliser of theta is
 * summed block by block and the blocks' sums in block order.  So a phase's
 * units (documents, or blocks of words) can be drawn by any number of
 * processes, each taking a range of them, and the chain is the same bit for
 * bit.  (A block's unit draws every class of its words.)  The counts and S
 * are kept so that they do not depend on the documents' order either (see
 * "The blocked sampler's counts" below): the same documents in another
 * order, under the same keys, give the same chain, and so do the same
 * documents held by other processes or servers, the chain holding only the
 * counts (gnb_nodes.h).
 *
 * With two classes the sampler keeps the paper sampler's layout (sh->dense,
 * theta_step2): the active words numbered in the theta step's order
 * (sort_blocks: by total count, the blocks its runs), N by their rows,
 * the unlabelled documents as packed pairs, and log_theta[i] the log-odds
 * log y_1 - log y_0 of the i-th active word's unnormalised draws, their
 * normalisers' difference in log_pi[2]: one sum a document in the label
 * phase, one logarithm a word in the theta phase.
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
	 * The work before each unlabelled document: the pairs of the documents
	 * before the i-th (n_unlabeled + 1); a block's is sh.block_work
	 */
	int64_t    *pairs_before;
	/* the labels' step whose log theta it last read through (K = 2) */
	int32_t		pulled_chain;
	int32_t		pulled_sweep;
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


gnb_blocked_helper *
gnb_blocked_helper_begin(const gnb_corpus *corpus, const gnb_params *params,
						 const gnb_hooks *hooks)
{
	gnb_blocked_helper *h = gnb_xalloc(hooks, 1, sizeof(gnb_blocked_helper));

	gnb_setup_shared(&h->sh, corpus, params, hooks, GNB_SETUP_HELPER);
	h->work = gnb_xalloc(hooks, GNB_BLOCKED_WORK(corpus->n_classes), sizeof(double));
	h->pairs_before = gnb_xalloc(hooks, (size_t) h->sh.n_unlabeled + 1, sizeof(int64_t));
	h->pulled_chain = -1;
	for (int32_t i = 0; i < h->sh.n_unlabeled; i++)
	{
		int32_t		j = h->sh.unlabeled[i];

		h->pairs_before[i + 1] = h->pairs_before[i] + corpus->doc_start[j + 1] -
			corpus->doc_start[j];
	}
	return h;
}

int64_t
gnb_blocked_units(const gnb_blocked_helper *h, int32_t phase)
{
	return phase == GNB_PHASE_LABELS ? h->sh.n_unlabeled : gnb_word_blocks(&h->sh);
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
	 * words' draws (the corpus alone decides, so every process agrees)
	 */
	const int64_t *before = phase == GNB_PHASE_LABELS ? h->pairs_before : h->sh.block_work;
	int64_t		n = gnb_blocked_units(h, phase);
	double		total = (double) before[n];

	*from = part == 0 ? 0 : first_at_least(before, n, total * part / parts);
	*to = part == parts - 1 ? n : first_at_least(before, n, total * (part + 1) / parts);
}

void
gnb_blocked_helper_run(gnb_blocked_helper *h, const gnb_blocked_arrays *a,
					   const gnb_blocked_step *step, int64_t from, int64_t to)
{
	/*
	 * Some of the documents, the first this process draws of the step: log
	 * theta was drawn by the parts' processes, read it through once
	 */
	if (step->phase == GNB_PHASE_LABELS && h->sh.dense &&
		(from > 0 || to < h->sh.n_unlabeled) &&
		(step->chain != h->pulled_chain || step->sweep != h->pulled_sweep))
	{
		gnb_blocked_pull_log_theta(&h->sh, a);
		h->pulled_chain = step->chain;
		h->pulled_sweep = step->sweep;
	}
	gnb_blocked_run_units(&h->sh, a, step, from, to, h->work);
}

uint64_t
gnb_blocked_helper_memory(int32_t n_docs, int32_t n_words, int32_t n_classes, int64_t n_pairs)
{
	uint64_t	D = (uint64_t) (n_docs > 0 ? n_docs : 1);
	uint64_t	V = (uint64_t) (n_words > 0 ? n_words : 1);
	uint64_t	K = (uint64_t) n_classes;
	uint64_t	bytes;

	/*
	 * per document: its index if unlabelled, its length, the pairs before
	 * it; per word: whether it is active, its index, its place in active,
	 * its sort key; the clamped counts while they are summed (V x K); per
	 * block its first active word and the words before it; the scratch; a
	 * header each
	 */
	bytes = D * (sizeof(int32_t) + sizeof(double) + sizeof(int64_t)) +
		V * (1 + 2 * sizeof(int32_t) + sizeof(active_key)) + V * K * sizeof(double) +
		(V / GNB_BLOCKED_WORDS + 2) * (sizeof(int32_t) + sizeof(int64_t)) +
		K * (sizeof(double) + 1) +
		GNB_BLOCKED_WORK(K) * sizeof(double) + sizeof(gnb_blocked_helper) + 32 * 64;
	/* K = 2: the packed pairs (at most two elements a pair), their offsets */
	if (K == 2)
		bytes += (uint64_t) (n_pairs > 0 ? n_pairs : 0) * 2 * sizeof(uint32_t) +
			(D + 1) * (2 * sizeof(int64_t) + sizeof(int32_t) + 1);
	return bytes;
}

void
gnb_blocked_helper_end(gnb_blocked_helper *h)
{
	const gnb_hooks *hooks = h->sh.hooks;

	gnb_release_shared(&h->sh);
	hooks->release(h->work, hooks->arg);
	hooks->release(h->pairs_before, hooks->arg);
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
	/* K = 2: and theta's normalisers' difference (gnb_theta_step_blocked) */
	sizes[GNB_BLOCKED_LOG_PI] = (size_t) (n_classes + 1) * sizeof(double);
	sizes[GNB_BLOCKED_NEXT_LABEL] = ((size_t) n_docs + 1) * sizeof(int32_t);
	sizes[GNB_BLOCKED_PRED] = ((params->unlabeled_weight != 1.0 ? (size_t) n_docs * n_classes : 0) +
							   1) * sizeof(double);
	sizes[GNB_BLOCKED_BLOCK_LSE] = ((size_t) n_classes * blocks + 1) * sizeof(double);
}

/*
 * The theta phase of the chain's sweep: split by the hooks (every process
 * draws its range), or drawn here whole.  The same draws either way.  (The
 * labels' phase is the nodes', gnb_node.c.)
 */
static void
run_theta_phase(chain_state *st)
{
	const run_shared *sh = st->sh;
	gnb_blocked_step step;

	step.chain = st->chain;
	step.sweep = st->sweep;
	step.phase = GNB_PHASE_THETA;
	step.predictive = 0;
	step.g_theta = st->g_theta;
	if (sh->hooks->blocked_phase)
		sh->hooks->blocked_phase(sh->hooks->arg, &step);
	else
		gnb_blocked_run_units(sh, &st->blocked, &step, 0, gnb_word_blocks(sh), st->blocked_work);
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
 * The blocked sampler's counts, kept so that they come out the same in
 * whatever order the documents move (a node holding other documents, say).
 * With lambda = 1 the counts are integers, exact in any order; with
 * 0 < lambda < 1 they are the split counts (keeps_split_counts): N_kw is
 * clamped_kw + lambda U_kw, U_kw the integer count of word w in the
 * unlabelled documents of class k, where summing lambda x count document
 * by document would round by the documents' order.  S, with gamma_theta
 * fixed, is S_start plus the changes of its entries' terms, each term
 * lgamma(n + g) taken as its whole part and its fraction in units of 2^-32
 * (two integers: a term of a count of 10^8 passes 2^31, its units 2^63),
 * the changes summed as integers (the other samplers take S's change move
 * by move in doubles; with gamma_theta sampled the gamma moves form S from
 * the counts); C, Nk and the prior terms once the moves are done
 * (settle_counts).  The moves come from the nodes holding the documents
 * (gnb_node.c; the chain's own documents are one) as each entry's summed
 * change in a sweep: the counts and S are the same as if they had come
 * document by document.
 */

/* sign x an entry's term of S, lgamma(n + g), into S_change for class k */
static inline void
add_word_term(chain_state *st, int32_t k, double n, int64_t sign)
{
	double		v = lgamma(n + st->g_theta);
	double		whole = floor(v);

	st->S_change[k] += sign * (int64_t) whole;
	st->S_change[st->sh->K + k] += sign * (int64_t) llround(ldexp(v - whole, 32));
}

/* Entry idx (of class k) of N, cnt more occurrences (fewer if negative). */
static inline void
count_entry(chain_state *st, int64_t idx, int32_t k, int64_t cnt)
{
	double		was = st->N[idx];

	if (st->unlabeled_N)
	{
		st->unlabeled_N[idx] += (double) cnt;
		st->N[idx] = st->clamped_N[idx] + st->lambda * st->unlabeled_N[idx];
	}
	else
		st->N[idx] += (double) cnt;
	if (st->S_change)
	{
		add_word_term(st, k, st->N[idx], 1);
		add_word_term(st, k, was, -1);
	}
}

/*
 * A node's answer to a call (gnb_nodes.h) into the chain: each entry its
 * documents touched has its theta-hat sums brought up to date (not for the
 * first labels' counts) and its count changed, and the classes' documents
 * and tokens change.  Every change an integer, every entry's change of S
 * telescoping to the change of its term: the same counts and S however the
 * documents are cut into nodes and in whatever order they answer.  With
 * lambda = 0 the nodes' documents touch no count.
 */
static void
apply_changes(void *coordinator, const gnb_count_changes *ch)
{
	chain_state *st = coordinator;
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	double	   *t = st->split_totals;

	st->nodes_changed += ch->changed;
	st->nodes_locked += ch->locked;
	for (int64_t e = 0; e < ch->n_entries; e++)
	{
		const int64_t entry = ch->entry[e];
		const int32_t k = (int32_t) (entry % K);
		const int64_t idx = sh->dense ? entry : (int64_t) sh->active[entry / K] * K + k;

		if (!st->nodes_starting)
			flush_theta(st, idx, entry, k);
		count_entry(st, idx, k, ch->delta[e]);
	}
	for (int32_t k = 0; k < K; k++)
		if (t)
		{
			t[2 * K + k] += (double) ch->docs[k];
			t[3 * K + k] += (double) ch->tokens[k];
		}
		else
		{
			st->C[k] += (double) ch->docs[k];
			st->Nk[k] += (double) ch->tokens[k];
		}
}

/* Have the chain's nodes (its own documents, or hooks->blocked_nodes's) answer a call. */
static void
call_nodes(chain_state *st, gnb_node_call *call)
{
	const run_shared *sh = st->sh;
	const gnb_hooks *hooks = sh->hooks;

	call->chain = st->chain;
	call->theta_length = sh->dense ? sh->n_active : (int64_t) sh->V * sh->K;
	call->max_entries = (int64_t) sh->n_active * sh->K;
	call->apply = apply_changes;
	call->coordinator = st;
	st->nodes_changed = 0;
	st->nodes_locked = 0;
	if (st->node)
		apply_changes(st, gnb_node_run(st->node, call));
	else
		hooks->blocked_nodes(hooks->arg, call);
}

/*
 * Once documents moved: C and Nk from their parts (the split counts), the
 * prior terms that follow from C, and S from its start and its change.
 */
static void
settle_counts(chain_state *st)
{
	const int32_t K = st->sh->K;
	const double *t = st->split_totals;

	for (int32_t k = 0; k < K; k++)
	{
		if (st->unlabeled_N)
		{
			st->C[k] = t[k] + st->lambda * t[2 * K + k];
			st->Nk[k] = t[K + k] + st->lambda * t[3 * K + k];
		}
		refresh_prior(st, k);
		if (st->S_change)
			st->S[k] = st->S_start[k] + ((double) st->S_change[k] +
										 ldexp((double) st->S_change[K + k], -32));
	}
}

/*
 * At a chain's start, once S is formed from its first counts: S's changes
 * are counted from there.
 */
void
gnb_blocked_word_terms_start(chain_state *st)
{
	if (!st->S_change)
		return;
	for (int32_t k = 0; k < st->sh->K; k++)
	{
		st->S_start[k] = st->S[k];
		st->S_change[k] = st->S_change[st->sh->K + k] = 0;
	}
}

/*
 * At a chain's start, before its unlabelled documents are counted: what N,
 * Nk and C hold then is the clamped part.
 */
void
gnb_split_counts_begin(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const size_t vk = (size_t) sh->V * K;

	if (!st->clamped_N)
		return;
	memcpy(st->clamped_N, st->N, vk * sizeof(double));
	memset(st->unlabeled_N, 0, vk * sizeof(double));
	memcpy(st->split_totals, st->C, K * sizeof(double));
	memcpy(st->split_totals + K, st->Nk, K * sizeof(double));
	memset(st->split_totals + 2 * K, 0, 2 * K * sizeof(double));
}

/*
 * The chain's first labels: the nodes draw them and count their documents
 * in (neither S nor the theta-hat sums yet: S is formed from these counts
 * afterwards, gnb_blocked_word_terms_start); with the split counts, N, Nk
 * and C are then formed from their parts.
 */
void
gnb_blocked_start(chain_state *st)
{
	gnb_node_call call;
	int64_t    *S_change = st->S_change;

	memset(&call, 0, sizeof(call));
	call.what = GNB_NODE_START;
	st->S_change = NULL;
	st->nodes_starting = 1;
	call_nodes(st, &call);
	st->nodes_starting = 0;
	if (st->clamped_N)
		settle_counts(st);
	st->S_change = S_change;
}

/*
 * The label step: pi drawn, then every node draws its documents' labels
 * given (theta, pi), adds their predictive probabilities to its sums and
 * answers with the changes of the counts (gnb_node.c); the chain applies
 * them.  So the counts, the word terms and the theta-hat sums come out the
 * same whoever drew the labels, and in whatever order the documents are.
 */
int64_t
gnb_label_step_blocked(chain_state *st)
{
	gnb_node_call call;

	draw_pi(st);
	memset(&call, 0, sizeof(call));
	call.what = GNB_NODE_LABELS;
	call.sweep = st->sweep;
	call.kept = st->kept_sweep;
	call.log_theta = st->blocked.log_theta;
	call.log_pi = st->blocked.log_pi;
	call_nodes(st, &call);
	if (st->nodes_changed > 0 && st->lambda != 0.0)
		settle_counts(st);
	return st->nodes_changed;
}

/*
 * The chain's end: the nodes count their locked documents against the last
 * counts and take their label probabilities' means.  Returns the locked
 * documents.
 */
int64_t
gnb_blocked_end(chain_state *st)
{
	gnb_node_call call;

	memset(&call, 0, sizeof(call));
	call.what = GNB_NODE_END;
	call.sweep = st->sweep;
	call.N = st->N;
	call.Nk = st->Nk;
	call.C = st->C;
	call.g_theta = st->g_theta;
	call.g_pi = st->g_pi;
	call_nodes(st, &call);
	return st->nodes_locked;
}

/*
 * theta_k ~ Dirichlet(N_k + g) for every class, as log theta of the words
 * of unlabelled documents: block by block (run_theta_phase), the blocks' sums
 * added here in block order with the other words' summed mass (one draw of
 * their summed shapes, keyed by the class alone), then every drawn word
 * normalised; with K = 2 the log-odds stay as they are and the normalisers'
 * difference goes to log_pi[2].
 */
void
gnb_theta_step_blocked(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const int32_t nb = gnb_word_blocks(sh);
	const gnb_blocked_arrays *a = &st->blocked;
	double		lz_k[2] = {0.0, 0.0};

	run_theta_phase(st);
	for (int32_t k = 0; k < K; k++)
	{
		const double *lse = a->block_lse + (int64_t) k * nb;
		double		lz = -INFINITY;
		double		rest = sh->inactive_count[k] + sh->n_inactive * st->g_theta;

		/* the blocks' sums relative to the largest: one exp a block */
		for (int32_t b = 0; b < nb; b++)
			lz = lse[b] > lz ? lse[b] : lz;
		if (lz > -INFINITY)
		{
			double		sum = 0.0;

			for (int32_t b = 0; b < nb; b++)
				sum += exp(lse[b] - lz);
			lz += log(sum);
		}
		if (rest > 0.0)
		{
			gnb_rng		rng;

			gnb_rng_keyed(&rng, sh->params->seed, st->chain, st->sweep, GNB_DRAW_THETA_REST,
						  (uint32_t) k);
			lz = log_add(lz, gnb_rng_log_gamma(&rng, rest));
		}
		if (sh->dense)
			lz_k[k] = lz;
		else
			for (int32_t i = 0; i < sh->n_active; i++)
				a->log_theta[(int64_t) sh->active[i] * K + k] -= lz;
	}
	/* K = 2: the log-odds stay unnormalised, their correction per token is here */
	if (sh->dense)
		a->log_pi[2] = lz_k[1] - lz_k[0];
}
