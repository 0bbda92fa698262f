/*
 * gnb_node.c
 *	  A node of a blocked chain (gnb_nodes.h): some of its unlabelled
 *	  documents, with their labels, whether they moved and their predictive
 *	  sums.  Each sweep it draws their labels given (theta, pi), moves them,
 *	  and answers with what that changed in the counts, which the chain holds.
 *
 * A node's words are laid out as the chain lays them out (gnb_setup_shared
 * from the whole corpus's summary), so that an entry of its changes names
 * the same count on every node.  The chain's own documents are a node of
 * this kind too (gnb_node_local), drawn with the chain's arrays and helpers.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* an entry no move of the call touched (gnb_node.pending) */
#define UNTOUCHED INT64_MIN

struct gnb_node
{
	const run_shared *sh;		/* own_sh, or the chain's */
	run_shared	own_sh;
	const gnb_params *params;
	const gnb_hooks *hooks;
	int			local;			/* the chain's own documents: its arrays, its helpers */
	int32_t    *z;				/* D */
	uint8_t    *moved;			/* D: changed label since burn-in */
	/*
	 * D x K: the kept sweeps' sums (lambda = 1: of their labels), then
	 * their means
	 */
	double	   *prob_sum;
	int32_t    *next_label;		/* by unlabelled position */
	/* by unlabelled position x K (lambda < 1): the kept sweeps' predictive sums */
	double	   *pred;
	double	   *work;			/* GNB_BLOCKED_WORK(K) */
	/*
	 * the call's changes: each entry's running change (n_active x K,
	 * UNTOUCHED until a move touches it), the entries touched in the order
	 * first touched, and their changes once the call is done
	 */
	int64_t    *pending;
	int64_t    *entry;
	int64_t    *delta;
	int64_t    *docs;			/* K */
	int64_t    *tokens;			/* K */
	gnb_count_changes changes;
	/* GNB_NODE_END: the chain's last counts, as gnb_count_locked reads a chain */
	chain_state view;
	/* a call decoded from bytes: its arrays, allocated when first needed */
	gnb_node_buffers buf;
	/*
	 * the chains combined (gnb_node_fold): the last chain ended, the chains
	 * folded into combined (D x K, allocated by the first), their sums made
	 * means
	 */
	int32_t		ended_chain;
	int32_t		folded;
	int			combine_ended;
	double	   *combined;
};

static void
alloc_changes(gnb_node *node)
{
	const gnb_hooks *hooks = node->hooks;
	const int32_t K = node->sh->K;
	const size_t n = (size_t) node->sh->n_active * K + 1;

	node->pending = gnb_xalloc(hooks, n, sizeof(int64_t));
	for (size_t e = 0; e < n; e++)
		node->pending[e] = UNTOUCHED;
	node->entry = gnb_xalloc(hooks, n, sizeof(int64_t));
	node->delta = gnb_xalloc(hooks, n, sizeof(int64_t));
	node->docs = gnb_xalloc(hooks, K, sizeof(int64_t));
	node->tokens = gnb_xalloc(hooks, K, sizeof(int64_t));
	node->changes.entry = node->entry;
	node->changes.delta = node->delta;
	node->changes.docs = node->docs;
	node->changes.tokens = node->tokens;
	node->view.log_prior = gnb_xalloc(hooks, K, sizeof(double));
	node->view.log_prior_own = gnb_xalloc(hooks, K, sizeof(double));
	node->view.log_pred = gnb_xalloc(hooks, K, sizeof(double));
	node->view.log_pred_own = gnb_xalloc(hooks, K, sizeof(double));
	node->view.pred = gnb_xalloc(hooks, K, sizeof(double));
	node->view.scratch = gnb_xalloc(hooks, K, sizeof(double));
	node->view.products = gnb_xalloc(hooks, K, sizeof(log_product));
}

/*
 * The chain's own documents as its node: the chain's run_shared, labels,
 * sums and arrays (which its helpers may share), only the changes its own.
 */
gnb_node *
gnb_node_local(chain_state *st)
{
	const gnb_hooks *hooks = st->sh->hooks;
	gnb_node   *node = gnb_xalloc(hooks, 1, sizeof(gnb_node));

	node->sh = st->sh;
	node->params = st->sh->params;
	node->hooks = hooks;
	node->local = 1;
	node->z = st->z;
	node->moved = st->moved;
	node->prob_sum = st->prob_sum;
	node->next_label = st->blocked.next_label;
	node->pred = st->blocked.pred;
	node->work = st->blocked_work;
	alloc_changes(node);
	return node;
}

gnb_node *
gnb_node_begin(const gnb_corpus *part, const gnb_params *params, const gnb_hooks *hooks)
{
	gnb_node   *node;
	const int32_t K = part->n_classes;
	const size_t D = part->n_docs > 0 ? (size_t) part->n_docs : 1;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	node = gnb_xalloc(hooks, 1, sizeof(gnb_node));
	gnb_setup_shared(&node->own_sh, part, params, hooks, GNB_SETUP_CHAIN);
	node->sh = &node->own_sh;
	node->params = params;
	node->hooks = hooks;
	node->z = gnb_xalloc(hooks, D, sizeof(int32_t));
	node->moved = gnb_xalloc(hooks, D, 1);
	node->prob_sum = gnb_xalloc(hooks, D * K, sizeof(double));
	node->next_label = gnb_xalloc(hooks, D, sizeof(int32_t));
	node->pred = gnb_xalloc(hooks, params->unlabeled_weight != 1.0 ? D * K : 1, sizeof(double));
	node->work = gnb_xalloc(hooks, GNB_BLOCKED_WORK(K), sizeof(double));
	node->ended_chain = -1;
	alloc_changes(node);
	return node;
}

/* Entry e's count changes by d in the call's answer. */
static inline void
touch(gnb_node *node, int64_t e, int64_t d)
{
	if (node->pending[e] == UNTOUCHED)
	{
		node->pending[e] = 0;
		node->entry[node->changes.n_entries++] = e;
	}
	node->pending[e] += d;
}

/*
 * Unlabelled document i (index in sh->unlabeled) from class a to class b in
 * the call's answer (a < 0: into class b, its first label): every entry of
 * its words in both classes, its tokens and itself.
 */
static void
record_move(gnb_node *node, int32_t i, int32_t a, int32_t b)
{
	const run_shared *sh = node->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const int32_t j = sh->unlabeled[i];
	const int64_t first = sh->dense ? sh->dense_start[i] : c->doc_start[j];
	const int64_t n = (sh->dense ? sh->dense_end[i] : c->doc_start[j + 1]) - first;
	const int64_t length = (int64_t) sh->doc_length[j];

	for (int64_t p = 0; p < n; p++)
	{
		int32_t		cnt;
		int64_t		base;

		if (sh->dense)
			base = 2 * (int64_t) packed_pair(sh, sh->dense + first, sh->dense_ones[i], &p, &cnt);
		else
		{
			cnt = c->count[first + p];
			base = (int64_t) sh->active_pos[c->word[first + p]] * K;
		}
		if (a >= 0)
			touch(node, base + a, -cnt);
		touch(node, base + b, cnt);
	}
	if (a >= 0)
	{
		node->docs[a]--;
		node->tokens[a] -= length;
	}
	node->docs[b]++;
	node->tokens[b] += length;
}

/*
 * GNB_NODE_START: every document's first label (first_label, from its
 * keyed uniform), counted in unless lambda is 0.
 */
static void
node_start(gnb_node *node, const gnb_node_call *call)
{
	const run_shared *sh = node->sh;
	const gnb_params *params = node->params;

	memset(node->prob_sum, 0, (size_t) sh->D * sh->K * sizeof(double));
	if (params->unlabeled_weight != 1.0)
		memset(node->pred, 0, (size_t) sh->n_unlabeled * sh->K * sizeof(double));
	memset(node->moved, 0, (size_t) sh->D);
	node->changes.held_docs = sh->n_unlabeled;
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
		node->changes.held_tokens += (int64_t) sh->doc_length[sh->unlabeled[i]];
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double		u = gnb_keyed_uniform(params->seed, call->chain, 0, GNB_DRAW_START,
										  gnb_doc_key(sh->corpus, j));
		int32_t		k = first_label(sh, i, u);

		maybe_check_interrupts(sh, i);
		node->z[j] = k;
		if (params->unlabeled_weight != 0.0)
			record_move(node, i, -1, k);
	}
}

/*
 * GNB_NODE_LABELS: every label drawn given (theta, pi) (by the chain's
 * helpers for its own documents, when it has them), in a kept sweep below
 * lambda = 1 with its predictive probabilities added to their sums where it
 * is drawn; then, in document order, the documents whose label changed
 * moved.
 */
static void
node_labels(gnb_node *node, const gnb_node_call *call)
{
	const run_shared *sh = node->sh;
	const gnb_params *params = node->params;
	const int32_t K = sh->K;
	const double lambda = params->unlabeled_weight;
	const int	predictive = call->kept && lambda != 1.0;
	gnb_blocked_arrays a;
	gnb_blocked_step step;

	memset(&a, 0, sizeof(a));
	a.log_theta = (double *) call->log_theta;
	a.log_pi = (double *) call->log_pi;
	a.next_label = node->next_label;
	a.pred = node->pred;
	step.chain = call->chain;
	step.sweep = call->sweep;
	step.phase = GNB_PHASE_LABELS;
	step.predictive = predictive;
	step.g_theta = 0.0;
	if (node->local && node->hooks->blocked_phase)
		node->hooks->blocked_phase(node->hooks->arg, &step);
	else
		gnb_blocked_run_units(sh, &a, &step, 0, sh->n_unlabeled, node->work);
	if (call->sweep == params->burn_in + 1)
		memset(node->moved, 0, (size_t) sh->D);
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		from = node->z[j];
		int32_t		to = node->next_label[i];

		if (to != from)
		{
			if (lambda != 0.0)
				record_move(node, i, from, to);
			node->z[j] = to;
			node->moved[j] = 1;
			node->changes.changed++;
		}
		/* with lambda = 1 a kept sweep's label is its probabilities' sample */
		if (call->kept && lambda == 1.0)
			node->prob_sum[(int64_t) j * K + to] += 1.0;
	}
}

/*
 * GNB_NODE_END: the documents locked against the chain's last counts
 * (gnb_count_locked, through a view of the chain made of them), and the
 * label probabilities' sums made means (below lambda = 1, pred's).
 */
static void
node_end(gnb_node *node, const gnb_node_call *call)
{
	const run_shared *sh = node->sh;
	const gnb_params *params = node->params;
	const int32_t K = sh->K;
	const int32_t kept = (params->sweeps - params->burn_in) / params->lag;
	chain_state *v = &node->view;

	v->sh = sh;
	v->z = node->z;
	v->moved = node->moved;
	v->N = (double *) call->N;
	v->Nk = (double *) call->Nk;
	v->C = (double *) call->C;
	v->lambda = params->unlabeled_weight;
	v->g_theta = call->g_theta;
	v->g_pi = call->g_pi;
	for (int32_t k = 0; k < K; k++)
		refresh_prior(v, k);
	node->ended_chain = call->chain;
	node->changes.locked = gnb_count_locked(v, params->sweeps - params->burn_in);
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int64_t		j = sh->unlabeled[i];

		/* below lambda = 1 the sums were made where the labels were drawn */
		if (params->unlabeled_weight != 1.0)
			for (int32_t k = 0; k < K; k++)
				node->prob_sum[j * K + k] = node->pred[i * K + k];
		for (int32_t k = 0; k < K; k++)
			node->prob_sum[j * K + k] /= kept;
	}
}

const gnb_count_changes *
gnb_node_run(gnb_node *node, const gnb_node_call *call)
{
	const int32_t K = node->sh->K;
	gnb_count_changes *ch = &node->changes;

	/* a chain's estimates are there to fold only until the next call */
	node->ended_chain = -1;
	ch->n_entries = 0;
	ch->changed = 0;
	ch->locked = 0;
	ch->held_docs = 0;
	ch->held_tokens = 0;
	memset(node->docs, 0, K * sizeof(int64_t));
	memset(node->tokens, 0, K * sizeof(int64_t));
	if (call->what == GNB_NODE_START)
		node_start(node, call);
	else if (call->what == GNB_NODE_LABELS)
		node_labels(node, call);
	else if (call->what == GNB_NODE_END)
		node_end(node, call);
	/* each entry's change, and the entry untouched again */
	for (int64_t e = 0; e < ch->n_entries; e++)
	{
		node->delta[e] = node->pending[node->entry[e]];
		node->pending[node->entry[e]] = UNTOUCHED;
	}
	return ch;
}

void
gnb_node_estimates(const gnb_node *node, const double **label_prob, const int32_t **last_labels)
{
	*label_prob = node->prob_sum;
	*last_labels = node->z;
}

const char *
gnb_node_fold(gnb_node *node, int32_t chain, const int32_t *perm, gnb_exact_sum *distance)
{
	const run_shared *sh = node->sh;
	const int32_t K = sh->K;

	if (node->local || node->combine_ended || chain != node->folded ||
		chain != node->ended_chain)
		return "the chain to fold is not the one that ended next";
	if (node->combined == NULL)
		node->combined = gnb_xalloc(node->hooks, (size_t) sh->D * K + 1, sizeof(double));
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int64_t		j = sh->unlabeled[i];

		if (node->hooks->check_interrupts && (i & 4095) == 0)
			node->hooks->check_interrupts(node->hooks->arg);
		gnb_exact_add(distance, gnb_fold_document(node->combined + j * K,
												  node->prob_sum + j * K, K, chain, perm));
	}
	node->folded++;
	return NULL;
}

const char *
gnb_node_combine_end(gnb_node *node, int32_t chains, gnb_exact_sum *mass)
{
	const run_shared *sh = node->sh;
	const int32_t K = sh->K;

	if (node->combined == NULL || node->combine_ended || chains != node->folded)
		return "the chains folded are not the job's";
	/* the means and their mass as gnb_combine_end makes the result's */
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int64_t		j = sh->unlabeled[i];

		if (node->hooks->check_interrupts && (i & 4095) == 0)
			node->hooks->check_interrupts(node->hooks->arg);
		for (int32_t k = 0; k < K; k++)
			node->combined[j * K + k] /= chains;
		gnb_mass_document(mass, node->combined + j * K, sh->doc_length[j], K);
	}
	node->combine_ended = 1;
	return NULL;
}

void
gnb_node_combined(const gnb_node *node, const double **label_prob, const int32_t **last_labels)
{
	*label_prob = node->combined;
	*last_labels = node->z;
}

int64_t
gnb_node_theta_length(const gnb_node *node)
{
	return node->sh->dense ? node->sh->n_active : (int64_t) node->sh->V * node->sh->K;
}

void
gnb_node_shape(const gnb_node *node, int32_t *K, int32_t *V, int64_t *theta_length)
{
	*K = node->sh->K;
	*V = node->sh->V;
	*theta_length = gnb_node_theta_length(node);
}

/*
 * The node's arrays for what a call of this kind carries, allocated the
 * first time: log theta and log pi for LABELS, the counts for END.
 */
void
gnb_node_buffers_for(gnb_node *node, int32_t what, gnb_node_buffers *buf)
{
	const gnb_hooks *hooks = node->hooks;
	const int32_t K = node->sh->K;

	if (what == GNB_NODE_LABELS && !node->buf.log_theta)
	{
		node->buf.log_theta = gnb_xalloc(hooks, (size_t) gnb_node_theta_length(node) + 1,
										 sizeof(double));
		node->buf.log_pi = gnb_xalloc(hooks, (size_t) K + 1, sizeof(double));
	}
	if (what == GNB_NODE_END && !node->buf.N)
	{
		node->buf.N = gnb_xalloc(hooks, (size_t) node->sh->V * K + 1, sizeof(double));
		node->buf.Nk = gnb_xalloc(hooks, K, sizeof(double));
		node->buf.C = gnb_xalloc(hooks, K, sizeof(double));
	}
	*buf = node->buf;
}

void
gnb_node_end(gnb_node *node)
{
	const gnb_hooks *hooks = node->hooks;

	if (!node->local)
	{
		gnb_release_shared(&node->own_sh);
		hooks->release(node->z, hooks->arg);
		hooks->release(node->moved, hooks->arg);
		hooks->release(node->prob_sum, hooks->arg);
		hooks->release(node->next_label, hooks->arg);
		hooks->release(node->pred, hooks->arg);
		hooks->release(node->work, hooks->arg);
		if (node->combined)
			hooks->release(node->combined, hooks->arg);
	}
	hooks->release(node->pending, hooks->arg);
	hooks->release(node->entry, hooks->arg);
	hooks->release(node->delta, hooks->arg);
	hooks->release(node->docs, hooks->arg);
	hooks->release(node->tokens, hooks->arg);
	hooks->release(node->view.log_prior, hooks->arg);
	hooks->release(node->view.log_prior_own, hooks->arg);
	hooks->release(node->view.log_pred, hooks->arg);
	hooks->release(node->view.log_pred_own, hooks->arg);
	hooks->release(node->view.pred, hooks->arg);
	hooks->release(node->view.scratch, hooks->arg);
	hooks->release(node->view.products, hooks->arg);
	if (node->buf.log_theta)
	{
		hooks->release(node->buf.log_theta, hooks->arg);
		hooks->release(node->buf.log_pi, hooks->arg);
	}
	if (node->buf.N)
	{
		hooks->release(node->buf.N, hooks->arg);
		hooks->release(node->buf.Nk, hooks->arg);
		hooks->release(node->buf.C, hooks->arg);
	}
	hooks->release(node, hooks->arg);
}
