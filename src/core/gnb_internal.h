/*
 * gnb_internal.h
 *	  What the files of the sampler core share, and nothing outside src/core
 *	  may use: the chain's state, what its chains share, and the inline
 *	  pieces of the steps (counts moved, priors, products of factors).
 *
 * Counts are kept word-major (N[w * K + k]) so that scoring a document reads
 * the K counts of each of its words from one cache line.  Counts are doubles
 * because unlabelled documents weigh unlabeled_weight (lambda), not 1; with
 * lambda = 1 they hold exact integers.  The steps' per-pair helpers are
 * inline here, so that each step's hot loop compiles as it did in one file.
 */
#ifndef GNB_INTERNAL_H
#define GNB_INTERNAL_H

#include "gnb_sampler.h"
#include "gnb_nodes.h"
#include "gnb_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * The label steps read a row of N or log theta per document-word pair, in
 * the corpus's order: rows this many pairs ahead are prefetched.
 */
#define GNB_PREFETCH_AHEAD 16
#if defined(__GNUC__) || defined(__clang__)
#define gnb_prefetch(p) __builtin_prefetch(p)
#else
#define gnb_prefetch(p) ((void) 0)
#endif

/*
 * The fewest bits of a packed pair (run_shared.dense) for the word: the
 * unit tests' sanitizer build sets 29, leaving 3 bits for the count, so that
 * their counts of 7 and more take the escape path.
 */
#ifndef GNB_DENSE_WBITS_MIN
#define GNB_DENSE_WBITS_MIN 1
#endif

/*
 * The blocked sampler's theta draws: the words come in blocks of this many
 * (active words with two classes, word ids with more: sort_blocks), each
 * block's draws from a stream of its own (gnb_label_blocked.c).
 */
#define GNB_BLOCKED_WORDS 256
/* the draws of a block logged together, this many at a time (at least GNB_MAX_CLASSES) */
#define GNB_BLOCKED_BUF 2048
/* the doubles of a blocked draw's scratch for K classes */
#define GNB_BLOCKED_WORK(K) (3 * (size_t) (K) + GNB_BLOCKED_BUF)
/*
 * K = 2: a word whose two shapes are integers adding up to at most this
 * takes its draws as sums of exponentials (draw_gamma_pairs).  (Up to 5:
 * with 4, 6, 7 or 8 a paper sweep took the same time within the noise.)
 */
#define GNB_PAIR_EXP_MAX 5
/*
 * The relative work of a word's theta draws, K = 2, for splitting the theta
 * phase: shared exponentials, or Marsaglia and Tsang for each class.  With
 * every word 1, the thread drawing the low word ids (the frequent words,
 * when the blocks were word ids) took 1.4x the other's time in the theta
 * phase (and 1.3x in the label phase, split by pairs: part of it is the
 * thread's, not the split's); 2 and 5 split the SpamAssassin corpus's
 * sweeps over two threads best of (2, 2), (2, 3), (2, 5): 0.61x one
 * thread's time against 0.72x, medians of 4 (bench_core with
 * BENCH_THREADS=2, on a noisy machine).
 */
#define GNB_BLOCKED_PAIR_WORK	2
#define GNB_BLOCKED_MT_WORK		5

/* How many documents of a sweep between calls of hooks->check_interrupts. */
#define GNB_INTERRUPT_EVERY 2048

/* Counts up to this are scored with a running product instead of lgamma. */
#define GNB_PRODUCT_MAX_COUNT 8
/* the same for K = 2, in products of 8 terms */
#define GNB_PRODUCT_MAX_COUNT_K2 256

/*
 * Does a chain keep its counts as clamped and unlabelled parts
 * (chain_state.clamped_N)?  The blocked sampler's, when lambda weighs the
 * unlabelled documents' counts by other than 0 or 1.
 */
static inline int
keeps_split_counts(const gnb_params *params)
{
	return params->sampler == GNB_SAMPLER_BLOCKED && params->unlabeled_weight > 0.0 &&
		params->unlabeled_weight < 1.0;
}

/* The key that names document j's draws in the blocked sampler. */
static inline uint64_t
gnb_doc_key(const gnb_corpus *c, int32_t j)
{
	return c->doc_key ? c->doc_key[j] : (uint64_t) j;
}

/*
 * A sum of logs kept as a running product, taking the log only when the
 * product nears overflow or underflow: log() costs ten times a multiply.
 */
typedef struct log_product
{
	double		prod;
	double		log_sum;
} log_product;

static inline void
log_product_init(log_product *p)
{
	p->prod = 1.0;
	p->log_sum = 0.0;
}

static inline void
log_product_mul(log_product *p, double x)
{
	p->prod *= x;
	if (p->prod > 1e200 || p->prod < 1e-200)
	{
		p->log_sum += log(p->prod);
		p->prod = 1.0;
	}
}

static inline double
log_product_value(const log_product *p)
{
	return p->log_sum + log(p->prod);
}

/*
 * lgamma(x + c) - lgamma(x) for x > 0, c >= 0.  From x = GNB_STIRLING_MIN on
 * by Stirling's series, written so that nothing cancels:
 *   (x - 1/2) log1p(c / x) + c (log(x + c) - 1) + t(x + c) - t(x),
 *   t(z) = 1/(12 z) - 1/(360 z^3) + 1/(1260 z^5) - 1/(1680 z^7),
 * whose truncation error is below the next term, 1/(1188 z^9) < 2e-17 at z =
 * 32.  Its rounding error is a few ulps of c log(x + c); the difference of
 * two lgamma values loses a few ulps of lgamma(x + c) itself (10^-9 for the
 * class totals of a large corpus), and costs two lgamma calls instead of a
 * log and a log1p.  Below GNB_STIRLING_MIN: lgamma.
 */
#define GNB_STIRLING_MIN 32.0

static inline double
stirling_tail(double z)
{
	double		r = 1.0 / z;
	double		r2 = r * r;

	return r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 * (1.0 / 1680))));
}

static inline double
lgamma_diff(double x, double c)
{
	if (x >= GNB_STIRLING_MIN)
		return (x - 0.5) * log1p(c / x) + c * (log(x + c) - 1.0) +
			(stirling_tail(x + c) - stirling_tail(x));
	return lgamma(x + c) - lgamma(x);
}

/*
 * x (x + 1) ... (x + c - 1) for 1 <= c <= 4, meant without a branch on c:
 * (c > 1 ? x + 1 : 1) = 1 + [c > 1] x, and so on.  (gcc compiles the masks
 * into compares and jumps all the same; the K = 2 collapsed scores, where
 * that cost most, choose by a table load instead.)
 */
static inline double
rising_small(double x, int32_t c)
{
	double		b2 = c > 1,
				b3 = c > 2,
				b4 = c > 3;

	return x * (1.0 + b2 * x) * (1.0 + b3 * (x + 1.0)) * (1.0 + b4 * (x + 2.0));
}

/*
 * lgamma(n + c + g) - lgamma(n + g) for a count c >= 1: log of the rising
 * factorial (n + g)(n + g + 1)...(n + g + c - 1).  Small c goes into the
 * running product *p while its factor stays below 1e100 (so the product, at
 * most 1e200 before it is logged, cannot overflow) and x is not below 1e-100
 * (nor can it underflow); otherwise the value is returned directly.
 */
static inline double
log_rising(log_product *p, double n_plus_g, int32_t c)
{
	if (c <= 4 && n_plus_g <= 1e24 && n_plus_g >= 1e-100)
	{
		log_product_mul(p, rising_small(n_plus_g, c));
		return 0.0;
	}
	if (c <= GNB_PRODUCT_MAX_COUNT && n_plus_g <= 1e12 && n_plus_g >= 1e-100)
	{
		double		f = n_plus_g;

		for (int32_t i = 1; i < c; i++)
			f *= n_plus_g + i;
		log_product_mul(p, f);
		return 0.0;
	}
	if (n_plus_g < 1e-100)
		return log(n_plus_g) + lgamma_diff(n_plus_g + 1.0, c - 1);
	return lgamma_diff(n_plus_g, c);
}

/*
 * An active word's total count and its first pair in the unlabelled
 * documents (an index in corpus->word, which names the word), to sort them
 * (sort_active).  16 bytes: the sort's own copy is as large again.
 */
typedef struct active_key
{
	double		total;
	int64_t		first;
} active_key;

/* What every chain of a run shares: derived once from the corpus. */
typedef struct run_shared
{
	const gnb_corpus *corpus;
	const gnb_params *params;
	const gnb_hooks *hooks;
	int32_t		K;
	int32_t		V;
	int32_t		D;
	int64_t		n_pairs;		/* doc_start[D] */
	int32_t    *unlabeled;		/* ids of unlabelled documents */
	int32_t		n_unlabeled;
	/*
	 * the unlabelled documents of the whole corpus: n_unlabeled, or for a
	 * part (corpus->all_unlabeled_count) all parts' (gnb_nodes.h)
	 */
	int64_t		n_unlabeled_all;
	/*
	 * Words that occur in an unlabelled document, by increasing word id;
	 * for the paper sampler with K = 2 by increasing total count instead
	 * (see sort_active), for the blocked sampler in the theta step's order
	 * (see sort_blocks).
	 */
	int32_t    *active;
	int32_t		n_active;
	/*
	 * for a chain: V, the index in active of each word, -1 for the others.
	 * Only active words' counts ever change, so theta-hat is summed lazily
	 * for them alone: an inactive word's counts are its clamped ones
	 * throughout, and its theta-hat follows from them and the sums of
	 * inv_k (see chain_state).  paper, K = 2: instead every word's row in
	 * the chain's N while it samples (chain_state.N), and only until N is
	 * laid out so (NULL after).
	 */
	int32_t    *active_pos;
	/*
	 * blocked: the active words of word block b (gnb_word_blocks) are
	 * active[block_active[b] .. block_active[b + 1]), in the order the
	 * theta step draws them (sort_blocks)
	 */
	int32_t    *block_active;
	/*
	 * blocked: the theta phase's estimated work before each block (nb + 1),
	 * by the draws its words take (sort_blocks): the split of a phase
	 * (gnb_blocked_part) gives each process about equal work
	 */
	int64_t    *block_work;
	/*
	 * paper and blocked, K = 2: the pairs of the unlabelled documents, the i-th
	 * unlabelled document's from dense_start[i] to dense_end[i]: first its
	 * dense_ones[i] words of count 1, as the index in active of the word
	 * (the label step reads the log-odds of the active words only, from a
	 * dense array, see theta_step2), then the others in their order, the
	 * index in the low dense_wbits bits and the count in the others; a
	 * count of dense_cmax or more has dense_cmax there and itself in the
	 * next element (and dense_escape[i] is set).  The label step streams
	 * them every sweep: 4 bytes a pair, not 8, and most pairs (count 1) need
	 * no multiplication.  They are either packed, document after document,
	 * into an array of their own (dense_end is then dense_start + 1), or,
	 * with the word array lent and no count escaped (dense_in_place), each
	 * document's into its own place in corpus->lent_word, which holds them
	 * until the chain writes the words back (gnb_restore_words).
	 */
	uint32_t   *dense;
	int64_t    *dense_start;	/* n_unlabeled + 1 */
	int64_t    *dense_end;		/* n_unlabeled */
	int32_t    *dense_ones;		/* n_unlabeled */
	char	   *dense_escape;	/* n_unlabeled */
	int64_t		n_dense;
	int			dense_in_place;
	int64_t		max_doc_pairs;	/* of an unlabelled document */
	int			dense_wbits;
	uint32_t	dense_wmask;
	uint32_t	dense_cmax;
	/*
	 * K: summed clamped counts of the other words; with their number, the
	 * summed Dirichlet shape of those words for the current gamma_theta.
	 */
	double	   *inactive_count;
	int32_t		n_inactive;
	double	   *doc_length;		/* D: R_j */
	char	   *class_clamped;	/* K: some clamped document has class k */
	int			all_classes_clamped;
	/*
	 * for a chain started from the labels (GNB_INIT_LABELS): n_unlabeled x
	 * K, the i-th unlabelled document's probabilities under the model of
	 * the clamped documents alone (start_probabilities); NULL otherwise.
	 */
	double	   *start_prob;
} run_shared;

/*
 * The blocked sampler's blocks of words (sort_blocks): with two classes of
 * GNB_BLOCKED_WORDS active words, else of GNB_BLOCKED_WORDS word ids.  At
 * most (V + GNB_BLOCKED_WORDS - 1) / GNB_BLOCKED_WORDS either way (what
 * gnb_blocked_sizes gives room for).
 */
static inline int32_t
gnb_word_blocks(const run_shared *sh)
{
	if (sh->K == 2)
		return (sh->n_active + GNB_BLOCKED_WORDS - 1) / GNB_BLOCKED_WORDS;
	return (sh->V + GNB_BLOCKED_WORDS - 1) / GNB_BLOCKED_WORDS;
}

/*
 * The counts N as the gamma_theta move needs them: how many (class, word)
 * entries hold each small integer count, per class, and the other nonzero
 * entries listed class by class.  Evaluating the collapsed likelihood of a
 * gamma_theta then costs a few lgamma calls per distinct count, not per entry.
 */
#define GNB_HIST_MAX 64
typedef struct count_summary
{
	double	   *hist;			/* K x GNB_HIST_MAX: entries with N = n */
	double	   *rest;			/* the other nonzero N, class by class */
	int64_t    *rest_end;		/* K: end of class k's entries in rest */
} count_summary;

/* The state of one chain. */
typedef struct chain_state
{
	const run_shared *sh;
	gnb_rng		rng;
	int32_t		chain;			/* its index: part of the blocked sampler's keys */
	int32_t		sweep;			/* the sweep under way, 0 before the first */
	double		lambda;			/* unlabeled_weight */
	double		g_theta;		/* the current gammas */
	double		g_pi;
	int32_t    *z;				/* D labels */
	/* D: the document changed label since the first sweep after burn-in began */
	uint8_t    *moved;
	double	   *C;				/* K weighted document counts */
	/*
	 * V x K weighted word counts, word-major: N[w * K + k], except while a
	 * chain of the paper or blocked sampler with K = 2 samples (sh->dense),
	 * when word w's row is
	 * row active_pos[w] instead: the active words first, in active's order,
	 * so that the theta step reads their counts in order and the packed
	 * pairs' index is their row (gnb_permute_rows, at the chain's start and end).
	 */
	double	   *N;
	int			N_lent;			/* N is corpus->lent_extra_word_counts */
	double	   *Nk;				/* K: sum over w of N */
	double	   *S;				/* K: sum over w of lgamma(N + g) - lgamma(g) */
	/*
	 * The prior terms of the conditionals, kept up to date as documents
	 * move rather than recomputed for every class of every document.  With
	 * the document's own weight lambda: lgamma(C_k + lambda + g_pi) -
	 * lgamma(C_k + g_pi) (log(C_k + g_pi) when lambda = 1), and the same of
	 * C_k - lambda for a document's own class.  At full weight (the
	 * predictive label probabilities when lambda < 1): log(C_k + g_pi) and
	 * log(C_k - lambda + g_pi).
	 */
	double	   *log_prior;		/* K */
	double	   *log_prior_own;	/* K */
	double	   *log_pred;		/* K */
	double	   *log_pred_own;	/* K */
	/*
	 * V x K, paper and blocked: log theta, word-major; with K = 2 instead
	 * log_theta[i] = log y_1w - log y_0w for the unnormalised draws y of the
	 * i-th active word w (n_active), and lz_diff = log z_1 - log z_0 for
	 * their normalisers (theta_step2; the blocked sampler's is in
	 * blocked.log_pi[2], where its helpers read it).  log_theta_1 (paper):
	 * the class 1 draws' logs while gamma_theta < 1 (n_active, allocated
	 * when first needed).
	 */
	double	   *log_theta;
	double	   *log_theta_1;
	double		lz_diff;
	/*
	 * blocked only: its arrays (log_theta and N are the same as above),
	 * shared with other processes (blocked_shared, by hooks->blocked_arrays)
	 * or the chain's own, and the label draws' scratch (3 K).
	 */
	gnb_blocked_arrays blocked;
	int			blocked_shared;
	double	   *blocked_work;
	/*
	 * blocked with 0 < lambda < 1 (keeps_split_counts), else NULL: N, Nk and
	 * C formed entry by entry as clamped + lambda x unlabelled, the clamped
	 * documents' part fixed at the chain's start, the unlabelled documents'
	 * integer counts by class (exact whatever order documents move in), so
	 * that the weighted counts, and every draw made from them, do not depend
	 * on the documents' order (gnb_label_blocked.c).  clamped_N and
	 * unlabeled_N in N's layout; split_totals: C and Nk, clamped then
	 * unlabelled (4 K).
	 */
	double	   *clamped_N;
	double	   *unlabeled_N;
	double	   *split_totals;
	/*
	 * blocked with gamma_theta fixed, else NULL: S kept as its value at the
	 * chain's start (K) plus the changes of its entries' terms since, each
	 * term lgamma(N + g) as its whole part and its fraction rounded to units
	 * of 2^-32, the changes summed as integers (K wholes, then K fractions):
	 * the same S whatever order the entries changed in (the gamma moves form
	 * S from the counts instead).
	 */
	double	   *S_start;
	int64_t    *S_change;
	/*
	 * blocked: the chain's own documents as a node (gnb_nodes.h), unless
	 * hooks->blocked_nodes runs nodes elsewhere; what the nodes' answers to
	 * a call added up to; whether they are the first labels' counts
	 */
	gnb_node   *node;
	int64_t		nodes_changed;
	int64_t		nodes_locked;
	int			nodes_starting;
	double	   *scores;			/* K scratch */
	double	   *pred;			/* K scratch */
	double	   *scratch;		/* K scratch */
	log_product *products;		/* K scratch */
	count_summary cs;			/* gamma_theta sampled only */
	int			kept_sweep;		/* the sweep under way will be kept */
	/* sums over kept sweeps */
	double	   *prob_sum;		/* D x K */
	/*
	 * theta-hat, lazily: theta-hat_kw is the mean over kept sweeps t of
	 * (N_kw(t) + g(t)) inv_k(t), inv_k(t) = 1 / (N_k(t) + V g(t)).  With
	 * inv_sum_k the running sum of inv_k over kept sweeps and g_inv_sum_k
	 * that of g inv_k, the sum over kept sweeps so far is
	 *   theta_sum_kw + N_kw (inv_sum_k - theta_mark_kw) + g_inv_sum_k
	 * where theta_sum_kw is brought up to date (flush_theta) only when N_kw
	 * is about to change: O(K) per kept sweep instead of O(V K), the rest
	 * paid by the words of documents that move.  Only active words' N
	 * changes, so both arrays are n_active x K, by index in active; an
	 * inactive word's sum is N_kw inv_sum_k + g_inv_sum_k at the end.
	 */
	double	   *theta_sum;		/* n_active x K */
	double	   *theta_mark;		/* n_active x K: inv_sum_k when last brought up to date */
	double	   *inv_sum;		/* K */
	double	   *g_inv_sum;		/* K */
	double	   *pi_sum;			/* K */
	double		g_theta_sum;
	double		g_pi_sum;
} chain_state;

/*
 * The i-th unlabelled document's first label from its uniform u: with
 * GNB_INIT_LABELS drawn from its probabilities under the model of the
 * clamped documents alone (sh->start_prob), else from its prior marginal,
 * uniform over the classes; a warm start's label instead when it has one
 * (gnb_run_chain says why).
 */
static inline int32_t
first_label(const run_shared *sh, int32_t i, double u)
{
	const int32_t K = sh->K;
	const int32_t *init = sh->corpus->init_label;
	const int32_t j = sh->unlabeled[i];
	int32_t		k = (int32_t) (u * K);

	if (sh->start_prob)
	{
		const double *p = sh->start_prob + (int64_t) i * K;

		for (k = 0; k < K - 1 && u >= p[k]; k++)
			u -= p[k];
	}
	if (init && init[j] >= 0 && init[j] < K)
		k = init[j];
	return k;
}

/* Weight of document j in the counts: 1 if clamped, lambda if not. */
static inline double
doc_weight(const run_shared *sh, int32_t j)
{
	return sh->corpus->label[j] >= 0 ? 1.0 : sh->params->unlabeled_weight;
}

/* Add document j, with weight w, to the counts of class k (S not updated). */
static inline void
add_doc_counts(const run_shared *sh, double *N, double *Nk, double *C,
			   int32_t j, int32_t k, double weight)
{
	const gnb_corpus *c = sh->corpus;
	int32_t		K = sh->K;

	for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		N[(int64_t) c->word[p] * K + k] += weight * c->count[p];
	Nk[k] += weight * sh->doc_length[j];
	C[k] += weight;
}

/* S_k = sum over w of lgamma(N_kw + g) - lgamma(g), from scratch. */
static inline void
compute_word_terms(int32_t V, int32_t K, double g, const double *N, double *S)
{
	double		lg = lgamma(g);

	for (int32_t k = 0; k < K; k++)
		S[k] = 0.0;
	for (int64_t i = 0; i < (int64_t) V * K; i++)
		if (N[i] != 0.0)
			S[i % K] += lgamma(N[i] + g) - lg;
}

/*
 * The prior term of a document's conditional for a class with (weighted)
 * document count c: lgamma(c + lambda + g_pi) - lgamma(c + g_pi), the ratio
 * of the Dirichlet-multinomial normalisers when the document comes back with
 * its own weight lambda.
 */
static inline double
prior_term(double c, double lambda, double gp)
{
	if (lambda == 1.0)
		return log(c + gp);
	if (lambda == 0.0)
		return 0.0;
	return lgamma(c + lambda + gp) - lgamma(c + gp);
}

static inline void
refresh_prior(chain_state *st, int32_t k)
{
	const double gp = st->g_pi;
	const double lambda = st->lambda;

	st->log_prior[k] = prior_term(st->C[k], lambda, gp);
	st->log_prior_own[k] = prior_term(st->C[k] - lambda, lambda, gp);
	st->log_pred[k] = log(st->C[k] + gp);
	st->log_pred_own[k] = log(st->C[k] - lambda + gp);
}

/*
 * Bring theta_sum up to date for class k of an active word before N
 * changes: nidx its entry in N, tidx in theta_sum.
 */
static inline void
flush_theta(chain_state *st, int64_t nidx, int64_t tidx, int32_t k)
{
	st->theta_sum[tidx] += st->N[nidx] * (st->inv_sum[k] - st->theta_mark[tidx]);
	st->theta_mark[tidx] = st->inv_sum[k];
}

/* What moving document j from class a to b does beyond its words' counts. */
static inline void
move_doc_totals(chain_state *st, int32_t j, int32_t a, int32_t b, double delta_a,
				double delta_b)
{
	const double lambda = st->lambda;
	const double len = st->sh->doc_length[j];

	st->S[a] += delta_a;
	st->S[b] += delta_b;
	st->Nk[a] -= lambda * len;
	st->Nk[b] += lambda * len;
	st->C[a] -= lambda;
	st->C[b] += lambda;
	refresh_prior(st, a);
	refresh_prior(st, b);
}

/*
 * One word's part in moving a document from class a to class b: its counts
 * in row N[base..] move by cnt (its theta-hat sums, at tbase, flushed
 * first), and the change of S is taken as running products (lambda = 1) ...
 */
static inline void
move_word(chain_state *st, int64_t base, int64_t tbase, int32_t cnt, int32_t a, int32_t b,
		  log_product *pa, log_product *pb, double *delta_a, double *delta_b)
{
	double	   *row = st->N + base;
	const double g = st->g_theta;

	flush_theta(st, base + a, tbase + a, a);
	flush_theta(st, base + b, tbase + b, b);
	row[a] -= cnt;
	/* removing: lgamma(n_new + g) - lgamma(n_new + cnt + g) */
	*delta_a -= log_rising(pa, row[a] + g, cnt);
	*delta_b += log_rising(pb, row[b] + g, cnt);
	row[b] += cnt;
}

/* ... or, with the count weighted by lambda < 1, as lgamma differences. */
static inline void
move_word_tempered(chain_state *st, int64_t base, int64_t tbase, double add, int32_t a,
				   int32_t b, double *delta_a, double *delta_b)
{
	double	   *row = st->N + base;
	const double g = st->g_theta;

	flush_theta(st, base + a, tbase + a, a);
	flush_theta(st, base + b, tbase + b, b);
	*delta_a += lgamma(row[a] - add + g) - lgamma(row[a] + g);
	*delta_b += lgamma(row[b] + add + g) - lgamma(row[b] + g);
	row[a] -= add;
	row[b] += add;
}

/*
 * Move unlabelled document j from class a to class b, keeping N, Nk, C, the
 * prior terms and the word terms S up to date.  With lambda = 1 the change of S is a log of
 * rising factorials, taken as running products; otherwise lgamma.
 */
static inline void
move_doc(chain_state *st, int32_t j, int32_t a, int32_t b)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const double lambda = st->lambda;
	const int32_t K = sh->K;
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
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
			move_word(st, (int64_t) c->word[p] * K, (int64_t) sh->active_pos[c->word[p]] * K,
					  c->count[p], a, b, &pa, &pb, &delta_a, &delta_b);
		delta_a -= log_product_value(&pa);
		delta_b += log_product_value(&pb);
	}
	else
	{
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
			move_word_tempered(st, (int64_t) c->word[p] * K,
							   (int64_t) sh->active_pos[c->word[p]] * K,
							   lambda * c->count[p], a, b, &delta_a, &delta_b);
	}
	move_doc_totals(st, j, a, b, delta_a, delta_b);
}

/*
 * A chain's kept log joints as running sums (Welford), so that R-hat needs no
 * trace, and its last sweep's log joint.
 */
typedef struct chain_sums
{
	int64_t		n;
	double		mean;
	double		m2;
	double		last;
	int64_t		changed_after_burn_in;
	int64_t		locked;
} chain_sums;

/*
 * The p-th element of a document's packed pairs (run_shared.dense), n_ones
 * of count 1 first: the word's index in active, its count in *cnt; an
 * escaped count moves p past its second element.
 */
static inline uint32_t
packed_pair(const run_shared *sh, const uint32_t *pr, int64_t n_ones, int64_t *p, int32_t *cnt)
{
	uint32_t	x = pr[*p];

	if (*p < n_ones)
	{
		*cnt = 1;
		return x;
	}
	*cnt = (int32_t) (x >> sh->dense_wbits);
	if ((uint32_t) *cnt == sh->dense_cmax)
		*cnt = (int32_t) pr[++*p];
	return x & sh->dense_wmask;
}

/*
 * A draw from two classes with log scores s0, s1: class 0 with probability
 * 1 / (1 + exp(s1 - s0)), from one uniform and one exp (an infinite exp
 * gives class 1, an underflowing one class 0).
 *
 * Most documents' scores are far apart, and then the exp is not needed for
 * the same answer: below -40, exp < 2^-54 and 1 + exp is 1, so u < 1 gives
 * class 0; above 40 any u but 0 (at least 2^-53) times 1 + exp (more than
 * 2^57) is more than 1, class 1.
 */
static inline int32_t
categorical2_u(double u, double d)
{
	if (d < -40.0)
		return 0;
	if (d > 40.0 && u != 0.0)
		return 1;
	return u * (1.0 + exp(d)) < 1.0 ? 0 : 1;
}

/* categorical2_u from the stream, d = s1 - s0 */
static inline int32_t
categorical2(gnb_rng *rng, double s0, double s1)
{
	return categorical2_u(gnb_rng_uniform(rng), s1 - s0);
}

/*
 * sum_w W_jw lt[w] over the i-th unlabelled document's packed pairs
 * (run_shared.dense): the K = 2 label steps' log-odds of the words.  In
 * four partial sums, not one: one addition's latency per pair would be the
 * loop's pace.
 */
static inline double
packed_log_odds(const run_shared *sh, const double *lt, int32_t i)
{
	const uint32_t *pr = sh->dense + sh->dense_start[i];
	const int64_t n = sh->dense_end[i] - sh->dense_start[i];
	const int64_t n_ones = sh->dense_ones[i];
	const int	wbits = sh->dense_wbits;
	const uint32_t wmask = sh->dense_wmask;
	double		l4[4] = {0.0, 0.0, 0.0, 0.0};
	int64_t		p;

	for (p = 0; p + 4 <= n_ones; p += 4)
	{
		l4[0] += lt[pr[p]];
		l4[1] += lt[pr[p + 1]];
		l4[2] += lt[pr[p + 2]];
		l4[3] += lt[pr[p + 3]];
	}
	for (; p < n_ones; p++)
		l4[0] += lt[pr[p]];
	if (GNB_LIKELY(!sh->dense_escape[i]))
	{
		for (; p + 4 <= n; p += 4)
		{
			l4[0] += (int32_t) (pr[p] >> wbits) * lt[pr[p] & wmask];
			l4[1] += (int32_t) (pr[p + 1] >> wbits) * lt[pr[p + 1] & wmask];
			l4[2] += (int32_t) (pr[p + 2] >> wbits) * lt[pr[p + 2] & wmask];
			l4[3] += (int32_t) (pr[p + 3] >> wbits) * lt[pr[p + 3] & wmask];
		}
		for (; p < n; p++)
			l4[0] += (int32_t) (pr[p] >> wbits) * lt[pr[p] & wmask];
	}
	else
	{
		/* a count too large for its bits follows in the next element */
		for (; p < n; p++)
		{
			uint32_t	cnt = pr[p] >> wbits;
			double		x = lt[pr[p] & wmask];

			if (cnt == sh->dense_cmax)
				cnt = pr[++p];
			l4[0] += (int32_t) cnt * x;
		}
	}
	return (l4[0] + l4[1]) + (l4[2] + l4[3]);
}

/*
 * K = 2, gamma_theta g >= 1: both classes' Gamma draws of m words, shapes
 * N[2i] + g and N[2i + 1] + g, into y0[i] and y1[i], word after word: sums
 * of exponentials when the shapes are integers adding up to at most
 * GNB_PAIR_EXP_MAX (gnb_rng_gamma_pair_exp), else Marsaglia and Tsang
 * (gnb_rng_gamma_mt).  The theta steps of the paper sampler
 * (theta_step2) and of the blocked one (draw_theta_block2).
 */
static inline void
draw_gamma_pairs(gnb_rng *rng, const double *N, double g, int32_t m, double *y0, double *y1)
{
	for (int32_t i = 0; i < m; i++)
	{
		const double a0 = N[2 * i] + g;
		const double a1 = N[2 * i + 1] + g;
		const double sum = a0 + a1;

		/*
		 * The sum first: it is the word's total plus 2 g, which does not
		 * depend on the classes of the word's documents (up to rounding),
		 * so in words ordered by total it decides the branch predictably
		 * for every word but those whose sum is an integer of at most
		 * GNB_PAIR_EXP_MAX.  Which of a word's shapes is an integer
		 * follows the classes of its documents: where words are not in
		 * the order of their documents (the blocked sampler's ties go by
		 * word id), a test of a0 first was mispredicted for about every
		 * other word seen once (docs/performance.md).  The test is the
		 * same: two integers add up to an integer, and with both shapes
		 * at least 1 a sum of at most GNB_PAIR_EXP_MAX keeps every cast
		 * in range.
		 */
		if (sum <= GNB_PAIR_EXP_MAX && sum == (double) (int) sum &&
			a0 == (double) (int) a0 && a1 == (double) (int) a1)
			gnb_rng_gamma_pair_exp(rng, (int) a0, (int) a1, &y0[i], &y1[i]);
		else
		{
			y0[i] = gnb_rng_gamma_mt(rng, a0);
			y1[i] = gnb_rng_gamma_mt(rng, a1);
		}
	}
}

/*
 * The draws of draw_gamma_pairs summed and their ratios taken, two words at
 * a time: y0[i] and y1[i] added to lane i % 2 of s0 and s1, and y0[i]
 * replaced by y1[i] / y0[i], for the first m - m % 2 words; returns that
 * number (an odd last word is the caller's).  The lanes go on from what s0
 * and s1 hold: the same operations, in the same order, however the words
 * are cut into calls of even length.
 */
static inline int32_t
sum_gamma_ratios(double *y0, const double *y1, int32_t m, double *s0, double *s1)
{
	int32_t		i;
#if defined(__GNUC__) || defined(__clang__)
	/* the same operations, lane by lane, in SSE2 registers */
	typedef double v2d __attribute__((vector_size(16)));
	v2d			v0 = {s0[0], s0[1]},
				v1 = {s1[0], s1[1]};

	for (i = 0; i + 2 <= m; i += 2)
	{
		v2d			a,
					b;

		memcpy(&a, y0 + i, sizeof(a));
		memcpy(&b, y1 + i, sizeof(b));
		v0 += a;
		v1 += b;
		b /= a;
		memcpy(y0 + i, &b, sizeof(b));
	}
	s0[0] = v0[0];
	s0[1] = v0[1];
	s1[0] = v1[0];
	s1[1] = v1[1];
#else
	for (i = 0; i + 2 <= m; i += 2)
	{
		s0[0] += y0[i];
		s0[1] += y0[i + 1];
		s1[0] += y1[i];
		s1[1] += y1[i + 1];
		y0[i] = y1[i] / y0[i];
		y0[i + 1] = y1[i + 1] / y0[i + 1];
	}
#endif
	return i;
}

static inline void
maybe_check_interrupts(const run_shared *sh, int32_t i)
{
	if (sh->hooks->check_interrupts && (i % GNB_INTERRUPT_EVERY) == 0)
		sh->hooks->check_interrupts(sh->hooks->arg);
}

/* Add softmax(s) to the label probability sums of document j. */
static inline void
add_probabilities(chain_state *st, int32_t j, const double *s)
{
	const int32_t K = st->sh->K;
	double		max = s[0];
	double		total = 0.0;

	for (int32_t k = 1; k < K; k++)
		if (s[k] > max)
			max = s[k];
	for (int32_t k = 0; k < K; k++)
		total += (st->scratch[k] = exp(s[k] - max));
	for (int32_t k = 0; k < K; k++)
		st->prob_sum[(int64_t) j * K + k] += st->scratch[k] / total;
}

/* gnb_align.c */
extern void gnb_align_classes(const run_shared *sh, const double *ref_theta, const double *theta, int32_t *perm);

/* gnb_chain.c */
extern void gnb_chain_sums_add(chain_sums *s, double x);
extern void gnb_start_counts(chain_state *st);
extern void gnb_permute_rows(const gnb_hooks *hooks, double *N, int32_t V, const int32_t *pos, int to_rows);
extern void gnb_run_chain(chain_state *st, int32_t chain, double *log_joint_trace, double *changed_trace, chain_sums *sums, double *kept_trace);

/* gnb_convergence.c */
extern double gnb_r_hat(const chain_sums *sums, int32_t m);

/* gnb_gamma_step.c */
extern void gnb_gamma_step(chain_state *st);

/* gnb_label_blocked.c */
extern int64_t gnb_label_step_blocked(chain_state *st);
extern void gnb_theta_step_blocked(chain_state *st);
extern void gnb_split_counts_begin(chain_state *st);
extern void gnb_blocked_start(chain_state *st);
extern int64_t gnb_blocked_end(chain_state *st);
extern void gnb_blocked_word_terms_start(chain_state *st);

/* gnb_blocked_draws.c */
extern void gnb_blocked_run_units(const run_shared *sh, const gnb_blocked_arrays *a, const gnb_blocked_step *step, int64_t from, int64_t to, double *work);
extern void gnb_blocked_pull_log_theta(const run_shared *sh, const gnb_blocked_arrays *a);

/* gnb_node.c */
/* a node's own copies of what a call decoded from bytes carries (gnb_node_wire.c) */
typedef struct gnb_node_buffers
{
	double	   *log_theta;
	double	   *log_pi;
	double	   *N;
	double	   *Nk;
	double	   *C;
} gnb_node_buffers;
extern gnb_node *gnb_node_local(chain_state *st);
extern void gnb_node_shape(const gnb_node *node, int32_t *K, int32_t *V, int64_t *theta_length);
extern void gnb_node_buffers_for(gnb_node *node, int32_t what, gnb_node_buffers *buf);

/* gnb_label_collapsed.c */
extern void gnb_collapsed_full_scores(chain_state *st, int32_t j, int32_t a, double *s);
extern int32_t gnb_label_step_collapsed(chain_state *st);

/* gnb_label_paper.c */
extern void gnb_add_doc_packed(chain_state *st, int32_t i, int32_t k, double weight);
extern int32_t gnb_label_step_paper(chain_state *st);

/* gnb_locked.c */
extern int64_t gnb_count_locked(chain_state *st, int32_t after);

/* gnb_log_joint.c */
extern double gnb_log_joint_from_counts(int32_t K, int32_t V, double g_theta, double g_pi, const double *C, const double *Nk, const double *S);

/* gnb_memory.c */
extern void *gnb_xalloc(const gnb_hooks *hooks, size_t n, size_t size);

/* gnb_setup.c: what gnb_setup_shared derives, by whom it is for */
#define GNB_SETUP_COMBINE	0	/* combining chains: no active words' list */
#define GNB_SETUP_CHAIN		1	/* a chain: everything */
#define GNB_SETUP_HELPER	2	/* a blocked helper: the active words, no start */
extern void gnb_restore_words(const run_shared *sh);
extern void gnb_setup_shared(run_shared *sh, const gnb_corpus *corpus, const gnb_params *params, const gnb_hooks *hooks, int for_chain);
extern void gnb_release_shared(run_shared *sh);
extern int gnb_lend_counts(const gnb_corpus *corpus, const gnb_params *params);

/* gnb_theta_step.c */
extern void gnb_theta_step(chain_state *st, const double *N);

/* PROTOTYPES */

#endif							/* GNB_INTERNAL_H */
