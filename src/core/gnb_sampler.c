/*
 * gnb_sampler.c
 *	  The "paper" and "collapsed" Gibbs samplers of docs/model.md, their estimates,
 *	  and the exact log joint used by tests.
 *
 * Counts are kept word-major (N[w * K + k]) so that scoring a document reads
 * the K counts of each of its words from one cache line.  Counts are doubles
 * because unlabelled documents weigh unlabeled_weight (lambda), not 1; with
 * lambda = 1 they hold exact integers.
 */
#include "gnb_sampler.h"
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

/* How many documents of a sweep between calls of hooks->check_interrupts. */
#define GNB_INTERRUPT_EVERY 2048

/* Counts up to this are scored with a running product instead of lgamma. */
#define GNB_PRODUCT_MAX_COUNT 8
/* the same for K = 2, in products of 8 terms */
#define GNB_PRODUCT_MAX_COUNT_K2 256

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
	 * Words that occur in an unlabelled document, by increasing word id;
	 * for the paper sampler with K = 2 by increasing total count instead
	 * (see sort_active).
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
	 * paper, K = 2: the pairs of the unlabelled documents, the i-th
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
	 * until the chain writes the words back (restore_words).
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
	double		lambda;			/* unlabeled_weight */
	double		g_theta;		/* the current gammas */
	double		g_pi;
	int32_t    *z;				/* D labels */
	/* D: the document changed label since the first sweep after burn-in began */
	uint8_t    *moved;
	double	   *C;				/* K weighted document counts */
	/*
	 * V x K weighted word counts, word-major: N[w * K + k], except while a
	 * chain of the paper sampler with K = 2 samples, when word w's row is
	 * row active_pos[w] instead: the active words first, in active's order,
	 * so that the theta step reads their counts in order and the packed
	 * pairs' index is their row (permute_rows, at the chain's start and end).
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
	 * V x K, paper sampler only: log theta, word-major; with K = 2 instead
	 * log_theta[i] = log y_1w - log y_0w for the unnormalised draws y of the
	 * i-th active word w (n_active), and lz_diff = log z_1 - log z_0 for
	 * their normalisers (theta_step2).  log_theta_1: the class 1 draws'
	 * logs while gamma_theta < 1 (n_active, allocated when first needed).
	 */
	double	   *log_theta;
	double	   *log_theta_1;
	double		lz_diff;
	/* paper, K = 2: Marsaglia and Tsang's c for integer shapes */
	double	   *mt_c;			/* GNB_MT_TABLE_MAX + 1 */
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

static void *
xalloc(const gnb_hooks *hooks, size_t n, size_t size)
{
	return hooks->alloc(n * size, hooks->arg);
}

/*
 * Keep in step with the allocations of derive_shared, gnb_train and the
 * chain alignment: every array sized by the corpus or the parameters is
 * counted once, as if all were alive together (some are released earlier,
 * so this bounds the peak from above).
 */
uint64_t
gnb_memory_needed(int32_t n_docs, int32_t n_words, int32_t n_classes, int64_t n_pairs,
				  const gnb_params *params)
{
	uint64_t	D = (uint64_t) (n_docs > 0 ? n_docs : 1);
	uint64_t	V = (uint64_t) (n_words > 0 ? n_words : 1);
	uint64_t	K = (uint64_t) n_classes;
	uint64_t	vk = V * K + 1;
	uint64_t	trace = (uint64_t) params->chains * (uint64_t) params->sweeps;
	uint64_t	kept_sweeps = (uint64_t) ((params->sweeps - params->burn_in) /
											  (params->lag > 0 ? params->lag : 1));
	uint64_t	kept = (uint64_t) params->chains *
		(kept_sweeps < GNB_KEPT_SERIES_MAX ? kept_sweeps : GNB_KEPT_SERIES_MAX);
	uint64_t	doubles = 0;
	uint64_t	bytes;

	/*
	 * V x K: labelled counts (shared), N, log theta (paper), the active
	 * words' theta sums and their marks (at most V x K), the chain's theta,
	 * the result's theta; with more than one chain, the reference chain's
	 * theta.
	 */
	doubles += (params->chains > 1 ? 8 : 7) * vk;
	/*
	 * D x K: label probability sums and the result's; a chain started from
	 * the labels, its start probabilities
	 */
	doubles += 3 * (D * K + 1);
	/* the trace: log joint and share changed per sweep and chain */
	if (!params->no_trace)
		doubles += 2 * trace;
	/*
	 * the kept sweeps' log joints (ESS, split R-hat), always kept, thinned to
	 * at most GNB_KEPT_SERIES_MAX per chain: the result's and the running
	 * chain's; the running chain's own trace
	 */
	doubles += 2 * (kept + 1);
	if (!params->no_trace)
		doubles += 2 * (uint64_t) params->sweeps;
	/* gamma_theta sampled: the count summary's list and histograms */
	if (params->sample_gamma_theta)
		doubles += vk + K * 64 + K;
	/* per chain: the log joints' running sums, changed and locked counts */
	doubles += 8 * (uint64_t) params->chains;
	/*
	 * per document: lengths (the combiner's and the chain's); per class pair:
	 * the alignment's cost matrix
	 */
	doubles += 2 * D + K * K;
	/* K-sized vectors (C, Nk, S, priors, scores, sums, alignment scratch) */
	doubles += 32 * (K + 1);
	bytes = doubles * sizeof(double);
	/* int32 per document (labels, last labels, unlabelled index), per word */
	bytes += 4 * D * sizeof(int32_t) + 3 * V * sizeof(int32_t) + V;
	/* a byte per document: moved since burn-in */
	bytes += D;
	bytes += K * (sizeof(log_product) + 4 * sizeof(int32_t));
	/*
	 * paper, K = 2: the unlabelled documents' pairs (active word index and
	 * count; a copy unless they are packed in the lent words, at most two
	 * elements a pair), their offsets, the table of Marsaglia and Tsang's c,
	 * the bits that say which rows of N or theta-hat are moved; while the
	 * shared state is set up, the active words' sort keys
	 */
	if (params->sampler == GNB_SAMPLER_PAPER && K == 2)
	{
		bytes += (uint64_t) (n_pairs > 0 ? n_pairs : 0) * 2 * sizeof(uint32_t) + sizeof(uint32_t);
		bytes += (D + 1) * (2 * sizeof(int64_t) + sizeof(int32_t) + 1);
		bytes += (GNB_MT_TABLE_MAX + 1) * sizeof(double);
		bytes += V * sizeof(active_key) + V * K / 8 + 1;
	}
	/* one allocation header each, generously */
	return bytes + 64 * 64;
}

int32_t
gnb_kept_series(int64_t kept, int32_t *stride)
{
	int64_t		s = 1;

	if (kept < 0)
		kept = 0;
	while ((kept + s - 1) / s > GNB_KEPT_SERIES_MAX)
		s *= 2;
	if (stride)
		*stride = (int32_t) s;
	return (int32_t) ((kept + s - 1) / s);
}

const char *
gnb_check(const gnb_corpus *corpus, const gnb_params *params)
{
	if (params->sampler != GNB_SAMPLER_PAPER && params->sampler != GNB_SAMPLER_COLLAPSED)
		return "unknown sampler";
	if (params->sweeps <= 0)
		return "sweeps must be positive";
	if (params->burn_in < 0 || params->burn_in >= params->sweeps)
		return "burn_in must be at least 0 and less than sweeps";
	if (params->lag < 1)
		return "lag must be at least 1";
	if (params->lag > params->sweeps - params->burn_in)
		return "lag must not exceed sweeps - burn_in: no sweep would be kept";
	if (params->chains < 1)
		return "chains must be at least 1";
	if (!(params->gamma_pi > 0.0) || !isfinite(params->gamma_pi))
		return "gamma_pi must be positive and finite";
	if (!(params->gamma_theta > 0.0) || !isfinite(params->gamma_theta))
		return "gamma_theta must be positive and finite";
	if (!(params->unlabeled_weight >= 0.0 && params->unlabeled_weight <= 1.0))
		return "unlabeled_weight must be between 0 and 1";
	if (params->gamma_grid)
	{
		if (params->n_gamma_grid < 1 || params->n_gamma_grid > 64)
			return "a gamma grid needs 1 to 64 points";
		for (int32_t i = 0; i < params->n_gamma_grid; i++)
			if (!(params->gamma_grid[i] > 0.0) || !isfinite(params->gamma_grid[i]))
				return "gamma grid points must be positive and finite";
	}
	else if ((params->sample_gamma_theta &&
			  !(params->gamma_theta >= GNB_GAMMA_MIN && params->gamma_theta <= GNB_GAMMA_MAX)) ||
			 (params->sample_gamma_pi &&
			  !(params->gamma_pi >= GNB_GAMMA_MIN && params->gamma_pi <= GNB_GAMMA_MAX)))
		return "a sampled gamma must start between 0.001 and 1000";
	if (corpus->n_classes < 2)
		return "at least 2 classes are needed";
	if (corpus->n_docs < 0 || corpus->n_words < 0)
		return "negative corpus size";
	if (corpus->doc_start[0] != 0)
		return "document offsets must start at 0";
	for (int32_t j = 0; j < corpus->n_docs; j++)
	{
		if (corpus->doc_start[j + 1] < corpus->doc_start[j])
			return "document offsets must not decrease";
		if (corpus->label[j] < -1 || corpus->label[j] >= corpus->n_classes)
			return "label out of range";
	}
	for (int64_t p = 0; p < corpus->doc_start[corpus->n_docs]; p++)
	{
		if (corpus->word[p] < 0 || corpus->word[p] >= corpus->n_words)
			return "word id out of range";
		if (corpus->count[p] <= 0)
			return "word counts must be positive";
	}
	if ((corpus->extra_word_counts == NULL) != (corpus->extra_doc_counts == NULL))
		return "extra counts need both word and document counts";
	if (corpus->extra_word_counts)
	{
		for (int64_t i = 0; i < (int64_t) corpus->n_words * corpus->n_classes; i++)
			if (!(corpus->extra_word_counts[i] >= 0.0) || !isfinite(corpus->extra_word_counts[i]))
				return "extra word counts must be finite and not negative";
		for (int32_t k = 0; k < corpus->n_classes; k++)
			if (!(corpus->extra_doc_counts[k] >= 0.0) || !isfinite(corpus->extra_doc_counts[k]))
				return "extra document counts must be finite and not negative";
	}
	return NULL;
}

/* Weight of document j in the counts: 1 if clamped, lambda if not. */
static inline double
doc_weight(const run_shared *sh, int32_t j)
{
	return sh->corpus->label[j] >= 0 ? 1.0 : sh->params->unlabeled_weight;
}

/* Add document j, with weight w, to the counts of class k (S not updated). */
static void
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
static void
compute_word_terms(int32_t V, int32_t K, double g, const double *N, double *S)
{
	double		lg = lgamma(g);

	for (int32_t k = 0; k < K; k++)
		S[k] = 0.0;
	for (int64_t i = 0; i < (int64_t) V * K; i++)
		if (N[i] != 0.0)
			S[i % K] += lgamma(N[i] + g) - lg;
}

/* log P(L, W) from the class totals and S (docs/model.md, the exact posterior). */
static double
log_joint_from_counts(int32_t K, int32_t V, double g_theta, double g_pi,
					  const double *C, const double *Nk, const double *S)
{
	double		gp = g_pi;
	double		vg = V * g_theta;
	double		total = 0.0;
	double		lj = 0.0;

	for (int32_t k = 0; k < K; k++)
	{
		total += C[k];
		lj += lgamma(C[k] + gp) - lgamma(gp);
		lj += lgamma(vg) - lgamma(Nk[k] + vg) + S[k];
	}
	lj += lgamma(K * gp) - lgamma(total + K * gp);
	return lj;
}

double
gnb_log_joint(const gnb_corpus *corpus, const gnb_params *params,
			  const int32_t *labels)
{
	const gnb_hooks *hooks = &gnb_default_hooks;
	run_shared	sh;
	int32_t		K = corpus->n_classes;
	int32_t		V = corpus->n_words;
	double	   *N = xalloc(hooks, (size_t) V * K, sizeof(double));
	double	   *Nk = xalloc(hooks, K, sizeof(double));
	double	   *C = xalloc(hooks, K, sizeof(double));
	double	   *S = xalloc(hooks, K, sizeof(double));
	double	   *len = xalloc(hooks, corpus->n_docs > 0 ? corpus->n_docs : 1, sizeof(double));
	double		lj;

	memset(&sh, 0, sizeof(sh));
	sh.corpus = corpus;
	sh.params = params;
	sh.K = K;
	sh.V = V;
	sh.doc_length = len;
	for (int32_t j = 0; j < corpus->n_docs; j++)
	{
		for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
			len[j] += corpus->count[p];
		add_doc_counts(&sh, N, Nk, C, j, labels[j], doc_weight(&sh, j));
	}
	if (corpus->extra_word_counts)
	{
		for (int32_t w = 0; w < V; w++)
			for (int32_t k = 0; k < K; k++)
			{
				N[(int64_t) w * K + k] += corpus->extra_word_counts[(int64_t) w * K + k];
				Nk[k] += corpus->extra_word_counts[(int64_t) w * K + k];
			}
		for (int32_t k = 0; k < K; k++)
			C[k] += corpus->extra_doc_counts[k];
	}
	compute_word_terms(V, K, params->gamma_theta, N, S);
	lj = log_joint_from_counts(K, V, params->gamma_theta, params->gamma_pi, C, Nk, S);
	hooks->release(N, hooks->arg);
	hooks->release(Nk, hooks->arg);
	hooks->release(C, hooks->arg);
	hooks->release(S, hooks->arg);
	hooks->release(len, hooks->arg);
	return lj;
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
static void
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
 * add_doc_counts for the paper sampler with K = 2: the i-th unlabelled
 * document, from its packed pairs, into N's rows by index in active.
 */
static void
add_doc_packed(chain_state *st, int32_t i, int32_t k, double weight)
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
 * Draw theta_k ~ Dirichlet(N_k + g) for every class, as log theta, from the
 * counts N.  Only words that occur in an unlabelled document are drawn one
 * by one: no other word's theta is ever read, and together they are one
 * Gamma draw of their summed shapes (the aggregation property).
 */
/*
 * theta_step for K = 2.  The K = 2 label step needs only the log-odds of
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
 * only its own block to libm's log, gnb_log_array_to's fallback).  A word
 * whose two shapes are integers adding up to at most GNB_PAIR_EXP_MAX takes them as sums of
 * exponentials (gnb_rng_gamma_pair_exp); every other word both by Marsaglia
 * and Tsang, with c from a table for integer shapes.  The words come in
 * order of their total count (sort_active), so the method and the number of
 * exponentials change rarely from one word to the next.  (Up to 5: with 4,
 * 6, 7 or 8 a sweep took the same time within the noise.)  Below 1 the draws
 * are logs (gnb_rng_log_gamma), made class by class into log_theta and
 * log_theta_1 until their differences replace them.
 */
#define GNB_PAIR_EXP_MAX 5

/* Words per block of the theta step (even: the sums' lanes go on across blocks). */
#define GNB_THETA_BLOCK 256
#if GNB_THETA_BLOCK % 2 != 0
#error "GNB_THETA_BLOCK must be even"
#endif

static inline double
mt_c_of(const double *table, double shape)
{
	if (shape <= GNB_MT_TABLE_MAX && shape == (double) (int) shape)
		return table[(int) shape];
	return gnb_rng_mt_c(shape);
}

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
		const double *ct = st->mt_c;
		double		y0s[GNB_THETA_BLOCK];
		double		s0[2] = {0.0, 0.0},
					s1[2] = {0.0, 0.0};
		double		t0 = 0.0,
					t1 = 0.0;
		int			tail = 0;
		double		sum0,
					sum1;
		gnb_rng		rng = st->rng;
#if defined(__GNUC__) || defined(__clang__)
		/* the same operations, lane by lane, in SSE2 registers */
		typedef double v2d __attribute__((vector_size(16)));
		v2d			v0 = {0.0, 0.0},
					v1 = {0.0, 0.0};
#endif

		for (int32_t from = 0; from < n_active; from += GNB_THETA_BLOCK)
		{
			const int32_t m = n_active - from < GNB_THETA_BLOCK ? n_active - from : GNB_THETA_BLOCK;
			const double *nd = counts + 2 * (int64_t) from;
			double	   *l = lt + from;
			int32_t		i;

			for (i = 0; i < m; i++)
			{
				const double a0 = nd[2 * i] + g;
				const double a1 = nd[2 * i + 1] + g;

				if (a0 + a1 <= GNB_PAIR_EXP_MAX &&
					a0 == (double) (int) a0 && a1 == (double) (int) a1)
					gnb_rng_gamma_pair_exp(&rng, (int) a0, (int) a1, &y0s[i], &l[i]);
				else
				{
					y0s[i] = gnb_rng_gamma_mt_c(&rng, a0, mt_c_of(ct, a0));
					l[i] = gnb_rng_gamma_mt_c(&rng, a1, mt_c_of(ct, a1));
				}
			}
#if defined(__GNUC__) || defined(__clang__)
			for (i = 0; i + 2 <= m; i += 2)
			{
				v2d			a,
							b;

				memcpy(&a, y0s + i, sizeof(a));
				memcpy(&b, l + i, sizeof(b));
				v0 += a;
				v1 += b;
				b /= a;
				memcpy(y0s + i, &b, sizeof(b));
			}
#else
			for (i = 0; i + 2 <= m; i += 2)
			{
				s0[0] += y0s[i];
				s0[1] += y0s[i + 1];
				s1[0] += l[i];
				s1[1] += l[i + 1];
				y0s[i] = l[i] / y0s[i];
				y0s[i + 1] = l[i + 1] / y0s[i + 1];
			}
#endif
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
#if defined(__GNUC__) || defined(__clang__)
		s0[0] = v0[0];
		s0[1] = v0[1];
		s1[0] = v1[0];
		s1[1] = v1[1];
#endif
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
		st->log_theta_1 = xalloc(sh->hooks, (size_t) n_active + 1, sizeof(double));
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

static void
theta_step(chain_state *st, const double *N)
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
categorical2(gnb_rng *rng, double s0, double s1)
{
	double		u = gnb_rng_uniform(rng);
	double		d = s1 - s0;

	if (d < -40.0)
		return 0;
	if (d > 40.0 && u != 0.0)
		return 1;
	return u * (1.0 + exp(d)) < 1.0 ? 0 : 1;
}

static inline void
maybe_check_interrupts(const run_shared *sh, int32_t i)
{
	if (sh->hooks->check_interrupts && (i % GNB_INTERRUPT_EVERY) == 0)
		sh->hooks->check_interrupts(sh->hooks->arg);
}

/* Add softmax(s) to the label probability sums of document j. */
static void
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
	const int	wbits = sh->dense_wbits;
	const uint32_t wmask = sh->dense_wmask;
	int32_t		changed = 0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		int32_t		b;
		const uint32_t *pr = sh->dense + sh->dense_start[i];
		const int64_t n = sh->dense_end[i] - sh->dense_start[i];
		const int64_t n_ones = sh->dense_ones[i];
		double		l = 0.0;
		double		s0,
					s1;

		maybe_check_interrupts(sh, i);
		/*
		 * l: sum_w W_jw (log theta_1w - log theta_0w), see theta_step2; in
		 * four partial sums, not one: one addition's latency per pair would
		 * be the loop's pace
		 */
		{
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
			l = (l4[0] + l4[1]) + (l4[2] + l4[3]);
		}
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

static int32_t
label_step_paper(chain_state *st)
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

#if defined(__GNUC__) || defined(__clang__)
/*
 * collapsed_full_scores2 works on both classes at once, in the compiler's
 * vector types (two doubles: SSE2 on x86-64, NEON on ARM).  Each lane's
 * operations are the scalar IEEE ones (no contraction into fused
 * multiply-adds without -march), so the results do not depend on it.
 */
#define GNB_VEC2 1
typedef double gnb_v2d __attribute__((vector_size(16)));
typedef uint64_t gnb_v2u __attribute__((vector_size(16)));

/*
 * The product of a document's rising factorials is kept as m 2^e, m brought
 * back into [1, 2) after every four factors by its exponent bits (exact, no
 * log, no branch).  A factor (below) is at most (x + 3)^4 < 2^241 and at
 * least min(x, 1) when x = N_kw + g lies in [GNB_X_MIN, GNB_X_MAX], so m
 * times four factors stays normal and finite.  That holds for every word
 * when g >= GNB_X_MIN and N_k + g <= GNB_X_MAX (N_kw <= N_k), checked per
 * document.  (With lambda < 1 the counts less a document's share carry a
 * rounding residue of about 1e-16 N_kw, which a gamma_theta that small need
 * not dominate: then x, and the scores on any path, are not determined by
 * the state.)
 */
#define GNB_X_MAX 0x1p60
#define GNB_X_MIN 0x1p-60
#define GNB_LN2 0.693147180559945309417232121458176568

/*
 * rising_poly[c] for c = 1 .. 4: the coefficients a0 .. a4 of the rising
 * factorial x (x + 1) ... (x + c - 1) = a0 + a1 x + ... + a4 x^4;
 * rising_poly[0] and [5] are the constant 1.
 */
static const double rising_poly[6][5] = {
	{1, 0, 0, 0, 0},
	{0, 1, 0, 0, 0},
	{0, 1, 1, 0, 0},
	{0, 2, 3, 1, 0},
	{0, 6, 11, 6, 1},
	{1, 0, 0, 0, 0},
};

/*
 * What the first pass over a document needs per count c, column min(c, 5) of
 * a table built per document (rising_table): own * c for the document's own
 * class (0 for c > 4), the coefficients of rising_poly, each twice (one per
 * class), and whether the pair is set aside (c > 4: then the polynomial is
 * the constant 1).  A table load, not a comparison, chooses: the compiler
 * cannot turn it into branches on the count, which varies from word to word
 * and would be mispredicted on most words.  Stored field by field (one
 * vector per column), so that a column's fields are at fixed distances from
 * its first: one shifted index addresses them all.
 */
#define GNB_COLS 6
enum
{
	RT_OWNC = 0,
	RT_A0 = GNB_COLS,			/* a0 .. a4: RT_A0 + i * GNB_COLS */
	RT_SIZE = 6 * GNB_COLS
};

/* rising_big[2 c]: 1 if a pair with count c is set aside (16 bytes a column, as table's) */
static const int64_t rising_big[2 * GNB_COLS] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};

static void
rising_table(gnb_v2d *t, gnb_v2d own)
{
	for (int32_t c = 0; c < GNB_COLS; c++)
	{
		const gnb_v2d zero = {0.0, 0.0};

		t[RT_OWNC + c] = c <= 4 ? own * (double) c : zero;
		for (int32_t i = 0; i < 5; i++)
		{
			t[RT_A0 + i * GNB_COLS + c][0] = rising_poly[c][i];
			t[RT_A0 + i * GNB_COLS + c][1] = rising_poly[c][i];
		}
	}
}

/* the polynomial of column t (t = table + c) at x, in each lane, by Horner's rule */
static inline gnb_v2d
rising_eval(gnb_v2d x, const gnb_v2d *t)
{
	return (((t[RT_A0 + 4 * GNB_COLS] * x + t[RT_A0 + 3 * GNB_COLS]) * x +
			 t[RT_A0 + 2 * GNB_COLS]) * x + t[RT_A0 + GNB_COLS]) * x + t[RT_A0];
}

/* m (positive, normal) brought into [1, 2); its biased exponent added to *e */
static inline gnb_v2d
renormalise(gnb_v2d m, gnb_v2u *e)
{
	const gnb_v2u mantissa = {UINT64_C(0x000fffffffffffff), UINT64_C(0x000fffffffffffff)};
	const gnb_v2u one = {UINT64_C(0x3ff0000000000000), UINT64_C(0x3ff0000000000000)};
	gnb_v2u		bits = (gnb_v2u) m;

	*e += bits >> 52;
	return (gnb_v2d) ((bits & mantissa) | one);
}

/*
 * The factor of pair p in the first pass over a document: its rising
 * factorial if its count is at most 4, else 1 and the pair is set aside (its
 * offset in the block written to big[*n_big], kept by counting it).
 */
static inline gnb_v2d
pair_factor(const int32_t *word, const int32_t *count, const double *N,
			const gnb_v2d *table, gnb_v2d gv, int64_t p, int32_t offset,
			int32_t *big, int64_t *n_big)
{
	int32_t		cnt = count[p];
	int64_t		col = cnt < 5 ? cnt : 5;
	const gnb_v2d *t = table + col;
	gnb_v2d		x;

	memcpy(&x, N + 2 * (int64_t) word[p], sizeof(x));
	x = (x - t[RT_OWNC]) + gv;
	big[*n_big] = offset;
	*n_big += rising_big[2 * col];
	return rising_eval(x, t);
}

/*
 * collapsed_full_scores for K = 2: both classes in one pass.  The pairs with
 * counts up to 4 (nine in ten) contribute their rising factorials at once,
 * four pairs per renormalisation, without a branch on the count.  The others
 * are set aside, a block of GNB_BLOCK pairs at a time, without a branch
 * either (the next slot is written always and kept when the count is above
 * 4), and their factors are multiplied in afterwards, eight per pass, each
 * pass keeping the pairs that still need more.  Past
 * GNB_PRODUCT_MAX_COUNT_K2 factors the rest is lgamma(x + c) - lgamma(x +
 * done), by lgamma_diff.
 *
 * Returns 0, leaving s alone, when some x = N_kw + g may lie outside
 * [GNB_X_MIN, GNB_X_MAX] (the caller then takes the general path).
 */
#define GNB_BLOCK 256

static int
collapsed_full_scores2(chain_state *st, int32_t j, int32_t a, double *s)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t *word = c->word;
	const int32_t *count = c->count;
	const double *N = st->N;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double R = sh->doc_length[j];
	const double own0 = a == 0 ? st->lambda : 0.0;
	const double own1 = a == 1 ? st->lambda : 0.0;
	const double nk0 = st->Nk[0] - own0 * R + vg;
	const double nk1 = st->Nk[1] - own1 * R + vg;
	const gnb_v2d own = {own0, own1};
	const gnb_v2d gv = {g, g};
	const int64_t end = c->doc_start[j + 1];
	const int64_t ahead_end = sh->n_pairs - GNB_PREFETCH_AHEAD;
	gnb_v2d		table[RT_SIZE];
	gnb_v2d		m = {1.0, 1.0};
	gnb_v2u		e = {0, 0};
	int64_t		steps = 0;		/* renormalisations, each adding the bias 1023 to e */
	double		l0 = 0.0,
				l1 = 0.0;
	double		big_x[2 * GNB_BLOCK] __attribute__((aligned(16)));
	int32_t		big_c[GNB_BLOCK];
	int32_t		big[GNB_BLOCK];

	if (!(g >= GNB_X_MIN && st->Nk[0] + g <= GNB_X_MAX && st->Nk[1] + g <= GNB_X_MAX))
		return 0;
	rising_table(table, own);
	for (int64_t block = c->doc_start[j]; block < end; block += GNB_BLOCK)
	{
		const int64_t block_end = end - block > GNB_BLOCK ? block + GNB_BLOCK : end;
		const int64_t fast_end = block_end < ahead_end ? block_end : ahead_end;
		int64_t		n_big = 0;
		int64_t		p;

		for (p = block; p + 3 < fast_end; p += 4)
		{
			gnb_v2d		f0,
						f1,
						f2,
						f3;

			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD]);
			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD + 1]);
			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD + 2]);
			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD + 3]);
			f0 = pair_factor(word, count, N, table, gv, p, (int32_t) (p - block), big, &n_big);
			f1 = pair_factor(word, count, N, table, gv, p + 1, (int32_t) (p + 1 - block), big, &n_big);
			f2 = pair_factor(word, count, N, table, gv, p + 2, (int32_t) (p + 2 - block), big, &n_big);
			f3 = pair_factor(word, count, N, table, gv, p + 3, (int32_t) (p + 3 - block), big, &n_big);
			m = renormalise(m * ((f0 * f1) * (f2 * f3)), &e);
			steps++;
		}
		for (; p < block_end; p++)
		{
			if (p < ahead_end)
				gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD]);
			m = renormalise(m * pair_factor(word, count, N, table, gv, p, (int32_t) (p - block),
											big, &n_big), &e);
			steps++;
		}

		/*
		 * The pairs set aside: their x, their first eight factors (of the
		 * second four as many as the count has); those with more kept.
		 */
		{
			int64_t		n_more = 0;

			for (int64_t i = 0; i < n_big; i++)
			{
				int64_t		q = block + big[i];
				int32_t		cnt = count[q];
				int32_t		left = cnt - 4;
				gnb_v2d		x;

				memcpy(&x, N + 2 * (int64_t) word[q], sizeof(x));
				x = (x - own * (double) cnt) + gv;
				m = renormalise(m * (rising_eval(x, table + 4) *
									 rising_eval(x + 4.0, table + (left < 4 ? left : 4))), &e);
				memcpy(big_x + 2 * n_more, &x, sizeof(x));
				big_c[n_more] = cnt;
				n_more += cnt > 8;
			}
			steps += n_big;
			n_big = n_more;
		}
		/* the factors from x + done on, eight per pass */
		for (int32_t done = 8; n_big > 0; done += 8)
		{
			int64_t		n_more = 0;

			if (done >= GNB_PRODUCT_MAX_COUNT_K2)
			{
				for (int64_t i = 0; i < n_big; i++)
				{
					l0 += lgamma_diff(big_x[2 * i] + done, big_c[i] - done);
					l1 += lgamma_diff(big_x[2 * i + 1] + done, big_c[i] - done);
				}
				break;
			}
			steps += n_big;
			for (int64_t i = 0; i < n_big; i++)
			{
				int32_t		left = big_c[i] - done;
				int32_t		i1 = left < 4 ? left : 4;
				/* left - 4 clamped to [0, 4] (0: the constant 1), by masks */
				int32_t		i2 = (left - 4) & -(int32_t) (left > 4);
				gnb_v2d		x;
				gnb_v2d		xd;

				i2 = i2 < 4 ? i2 : 4;
				memcpy(&x, big_x + 2 * i, sizeof(x));
				xd = x + (double) done;
				m = renormalise(m * (rising_eval(xd, table + i1) *
									 rising_eval(xd + 4.0, table + i2)), &e);
				memcpy(big_x + 2 * n_more, &x, sizeof(x));
				big_c[n_more] = big_c[i];
				n_more += left > 8;
			}
			n_big = n_more;
		}
	}
	s[0] = (a == 0 ? st->log_pred_own[0] : st->log_pred[0]) -
		lgamma_diff(nk0, R) + l0 +
		(log(m[0]) + (double) ((int64_t) e[0] - 1023 * steps) * GNB_LN2);
	s[1] = (a == 1 ? st->log_pred_own[1] : st->log_pred[1]) -
		lgamma_diff(nk1, R) + l1 +
		(log(m[1]) + (double) ((int64_t) e[1] - 1023 * steps) * GNB_LN2);
	return 1;
}
#endif							/* GNB_VEC2 */

/*
 * The collapsed conditional of document j at full weight, against the counts
 * with j's weighted share taken out (docs/model.md):
 *   s_k = log(C_k^-j + g_pi)
 *       + sum_w [lgamma(N_kw^-j + W_jw + g) - lgamma(N_kw^-j + g)]
 *       - [lgamma(N_k^-j + R_j + Vg) - lgamma(N_k^-j + Vg)]
 * Document j is not taken out of the counts; its own share is subtracted for
 * its current class as the scores are built.  Integer increments: running
 * products of rising factorials.
 */
static void
collapsed_full_scores(chain_state *st, int32_t j, int32_t a, double *s)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double lambda = st->lambda;
	const double R = sh->doc_length[j];
	log_product *prod = st->products;

#ifdef GNB_VEC2
	if (K == 2 && collapsed_full_scores2(st, j, a, s))
		return;
#endif
	for (int32_t k = 0; k < K; k++)
	{
		double		nk = st->Nk[k] - (k == a ? lambda * R : 0.0) + vg;

		s[k] = (k == a ? st->log_pred_own[k] : st->log_pred[k]) -
			lgamma_diff(nk, R);
		log_product_init(&prod[k]);
	}
	for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
	{
		const double *row = st->N + (int64_t) c->word[p] * K;
		int32_t		cnt = c->count[p];
		double		own = lambda * cnt;

		for (int32_t k = 0; k < K; k++)
		{
			double		n = row[k] - (k == a ? own : 0.0);

			s[k] += log_rising(&prod[k], n + g, cnt);
		}
	}
	for (int32_t k = 0; k < K; k++)
		s[k] += log_product_value(&prod[k]);
}

/*
 * The tempered collapsed conditional (lambda < 1): the same ratio with j's
 * weighted counts lambda W_jw and lambda R_j, through lgamma, and the
 * prior term with its weight.  At lambda = 0 every class scores 0.
 */
static void
collapsed_tempered_scores(chain_state *st, int32_t j, int32_t a, double *s)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double lambda = st->lambda;
	const double lr = lambda * sh->doc_length[j];

	if (lambda == 0.0)
	{
		for (int32_t k = 0; k < K; k++)
			s[k] = 0.0;
		return;
	}
	for (int32_t k = 0; k < K; k++)
	{
		double		nk = st->Nk[k] - (k == a ? lr : 0.0) + vg;

		s[k] = (k == a ? st->log_prior_own[k] : st->log_prior[k]) -
			lgamma_diff(nk, lr);
	}
	for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
	{
		const double *row = st->N + (int64_t) c->word[p] * K;
		double		add = lambda * c->count[p];

		for (int32_t k = 0; k < K; k++)
		{
			double		n = row[k] - (k == a ? add : 0.0) + g;

			s[k] += lgamma_diff(n, add);
		}
	}
}

/*
 * The collapsed label step: full-weight scores at lambda = 1, tempered ones
 * otherwise (then, on a kept sweep, the full-weight conditional goes to the
 * label probability sums).
 */
static int32_t
label_step_collapsed(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const int	tempered = st->lambda != 1.0;
	double	   *s = st->scores;
	int32_t		changed = 0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		int32_t		b;

		maybe_check_interrupts(sh, i);
		if (tempered)
		{
			collapsed_tempered_scores(st, j, a, s);
			if (st->kept_sweep)
			{
				collapsed_full_scores(st, j, a, st->pred);
				add_probabilities(st, j, st->pred);
			}
		}
		else
			collapsed_full_scores(st, j, a, s);
		if (K == 2)
			b = categorical2(&st->rng, s[0], s[1]);
		else
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
static void
gamma_step(chain_state *st)
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

	/* with lambda < 1 the label step added the full-weight conditionals */
	if (st->lambda == 1.0)
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

static void
chain_sums_add(chain_sums *s, double x)
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
static void
start_counts(chain_state *st)
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
static void
permute_rows(const gnb_hooks *hooks, double *N, int32_t V, const int32_t *pos, int to_rows)
{
	uint8_t    *done = xalloc(hooks, (size_t) V / 8 + 1, 1);

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
 * The conditional of the i-th unlabelled document with theta and pi
 * integrated out, at full weight (collapsed_full_scores), whichever sampler
 * runs the chain: both keep the counts N, Nk, C and the prior terms.  For
 * the paper sampler with K = 2, N is by row and the words are packed pairs
 * (chain_state.N), read so here; scalar, since it runs once per document at
 * the chain's end.
 */
static void
integrated_scores(chain_state *st, int32_t i, double *s)
{
	const run_shared *sh = st->sh;
	const int32_t j = sh->unlabeled[i];
	const int32_t a = st->z[j];
	const double g = st->g_theta;
	const double R = sh->doc_length[j];
	log_product *prod = st->products;

	if (!sh->dense)
	{
		collapsed_full_scores(st, j, a, s);
		return;
	}
	for (int32_t k = 0; k < 2; k++)
	{
		double		nk = st->Nk[k] - (k == a ? st->lambda * R : 0.0) + sh->V * g;

		s[k] = (k == a ? st->log_pred_own[k] : st->log_pred[k]) - lgamma_diff(nk, R);
		log_product_init(&prod[k]);
	}
	{
		const uint32_t *pr = sh->dense + sh->dense_start[i];
		const int64_t n = sh->dense_end[i] - sh->dense_start[i];

		for (int64_t p = 0; p < n; p++)
		{
			int32_t		cnt;
			int64_t		row = packed_pair(sh, pr, sh->dense_ones[i], &p, &cnt);

			for (int32_t k = 0; k < 2; k++)
			{
				double		c = st->N[2 * row + k] - (k == a ? st->lambda * cnt : 0.0);

				s[k] += log_rising(&prod[k], c + g, cnt);
			}
		}
	}
	for (int32_t k = 0; k < 2; k++)
		s[k] += log_product_value(&prod[k]);
}

/*
 * The documents of a chain that kept their label through all `after` sweeps
 * after burn-in although, by their conditionals with theta and pi integrated
 * out at the chain's end, the chance of that is below GNB_LOCKED_CHANCE.
 * Judged by those conditionals, not the sampler's own: the collapsed
 * sampler's are them, and a chain of the paper sampler whose theta holds a
 * document in place (its own counts drew theta) changes it as seldom as its
 * own conditionals say, however often the integrated ones say it should.  A
 * document whose label is simply certain is not locked.
 */
static int64_t
count_locked(chain_state *st, int32_t after)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	int64_t		locked = 0;

	if (after <= 0)
		return 0;
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double		max = -INFINITY;
		double		total = 0.0;
		double		stay;

		maybe_check_interrupts(sh, i);
		if (st->moved[j])
			continue;
		integrated_scores(st, i, st->pred);
		for (int32_t k = 0; k < K; k++)
			if (st->pred[k] > max)
				max = st->pred[k];
		for (int32_t k = 0; k < K; k++)
			total += exp(st->pred[k] - max);
		stay = exp(st->pred[st->z[j]] - max) / total;
		/* (1 - q)^after below the chance, q = 1 - stay */
		if (stay < 1.0 && after * log(stay) < log(GNB_LOCKED_CHANCE))
			locked++;
	}
	return locked;
}

/*
 * Set a chain to its starting state and run all its sweeps.  The trace
 * arrays may be NULL (no_trace); sums gets the kept sweeps' log joints,
 * kept_trace (gnb_kept_series points long) the kept sweeps' log joints,
 * thinned as gnb_kept_series describes.
 */
static void
run_chain(chain_state *st, int32_t chain, double *log_joint_trace,
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

	/* the clamped documents' counts are in (start_counts) */
	if (params->sampler == GNB_SAMPLER_PAPER && sh->n_unlabeled > 0 && !c->init_label)
		theta_step(st, st->N);

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
	 * either way.  A warm start gives the labels, and the first theta is
	 * drawn given them.
	 */
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double		u = gnb_rng_uniform(&st->rng);
		int32_t		k = (int32_t) (u * K);

		if (sh->start_prob)
		{
			const double *p = sh->start_prob + (int64_t) i * K;

			for (k = 0; k < K - 1 && u >= p[k]; k++)
				u -= p[k];
		}
		if (c->init_label && c->init_label[j] >= 0 && c->init_label[j] < K)
			k = c->init_label[j];
		st->z[j] = k;
		if (sh->dense)
			add_doc_packed(st, i, k, params->unlabeled_weight);
		else
			add_doc_counts(sh, st->N, st->Nk, st->C, j, k, params->unlabeled_weight);
	}
	if (params->sampler == GNB_SAMPLER_PAPER && sh->n_unlabeled > 0 && c->init_label)
		theta_step(st, st->N);
	compute_word_terms(V, K, st->g_theta, st->N, st->S);
	for (int32_t k = 0; k < K; k++)
		refresh_prior(st, k);

	for (int32_t t = 1; t <= params->sweeps; t++)
	{
		int32_t		changed = 0;
		gnb_sweep	info;

		st->kept_sweep = t > params->burn_in && (t - params->burn_in) % params->lag == 0;
		if (t == params->burn_in + 1)
			memset(st->moved, 0, (size_t) sh->D);
		if (sh->n_unlabeled > 0)
		{
			if (params->sampler == GNB_SAMPLER_PAPER)
				changed = label_step_paper(st);
			else
				changed = label_step_collapsed(st);
		}
		gamma_step(st);
		if (params->sampler == GNB_SAMPLER_PAPER && sh->n_unlabeled > 0)
			theta_step(st, st->N);
		info.chain = chain;
		info.sweep = t;
		info.log_joint = log_joint_from_counts(K, V, st->g_theta, st->g_pi,
											   st->C, st->Nk, st->S);
		info.changed = sh->n_unlabeled > 0 ? (double) changed / sh->n_unlabeled : 0.0;
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
			chain_sums_add(sums, info.log_joint);
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
	sums->locked = count_locked(st, params->sweeps - params->burn_in);
}

/*
 * Hungarian algorithm (Kuhn-Munkres, O(n^3)) on an n x n cost matrix:
 * assign[row] = column, minimising the summed cost.
 */
static void
hungarian(const gnb_hooks *hooks, const double *cost, int32_t n, int32_t *assign)
{
	double	   *u = xalloc(hooks, n + 1, sizeof(double));
	double	   *v = xalloc(hooks, n + 1, sizeof(double));
	double	   *minv = xalloc(hooks, n + 1, sizeof(double));
	int32_t    *p = xalloc(hooks, n + 1, sizeof(int32_t));
	int32_t    *way = xalloc(hooks, n + 1, sizeof(int32_t));
	char	   *used = xalloc(hooks, n + 1, 1);

	for (int32_t i = 1; i <= n; i++)
	{
		int32_t		j0 = 0;

		p[0] = i;
		for (int32_t j = 0; j <= n; j++)
		{
			minv[j] = INFINITY;
			used[j] = 0;
		}
		do
		{
			int32_t		i0 = p[j0];
			int32_t		j1 = 0;
			double		delta = INFINITY;

			used[j0] = 1;
			for (int32_t j = 1; j <= n; j++)
				if (!used[j])
				{
					double		cur = cost[(int64_t) (i0 - 1) * n + (j - 1)] - u[i0] - v[j];

					if (cur < minv[j])
					{
						minv[j] = cur;
						way[j] = j0;
					}
					if (minv[j] < delta)
					{
						delta = minv[j];
						j1 = j;
					}
				}
			for (int32_t j = 0; j <= n; j++)
			{
				if (used[j])
				{
					u[p[j]] += delta;
					v[j] -= delta;
				}
				else
					minv[j] -= delta;
			}
			j0 = j1;
		} while (p[j0] != 0);
		do
		{
			int32_t		j1 = way[j0];

			p[j0] = p[j1];
			j0 = j1;
		} while (j0);
	}
	for (int32_t j = 1; j <= n; j++)
		assign[p[j] - 1] = j - 1;
	hooks->release(u, hooks->arg);
	hooks->release(v, hooks->arg);
	hooks->release(minv, hooks->arg);
	hooks->release(p, hooks->arg);
	hooks->release(way, hooks->arg);
	hooks->release(used, hooks->arg);
}

/*
 * perm[l] = the class of the reference chain that class l of this chain is:
 * the matching that minimises the summed L1 distance between theta-hats.
 * A class with a clamped document is its own identity in every chain: it
 * may only match itself.
 */
static void
align_classes(const run_shared *sh, const double *ref_theta,
			  const double *theta, int32_t *perm)
{
	const int32_t K = sh->K;
	double	   *cost = xalloc(sh->hooks, (size_t) K * K, sizeof(double));
	int32_t    *assign = xalloc(sh->hooks, K, sizeof(int32_t));

	for (int32_t w = 0; w < sh->V; w++)
		for (int32_t k = 0; k < K; k++)
			for (int32_t l = 0; l < K; l++)
				cost[k * K + l] += fabs(ref_theta[(int64_t) w * K + k] -
										theta[(int64_t) w * K + l]);
	/* an L1 distance of distributions is at most 2: 1e6 is never chosen */
	for (int32_t k = 0; k < K; k++)
		for (int32_t l = 0; l < K; l++)
			if (k != l && (sh->class_clamped[k] || sh->class_clamped[l]))
				cost[k * K + l] = 1e6;
	hungarian(sh->hooks, cost, K, assign);
	for (int32_t k = 0; k < K; k++)
		perm[assign[k]] = k;
	sh->hooks->release(cost, sh->hooks->arg);
	sh->hooks->release(assign, sh->hooks->arg);
}

/*
 * The potential scale reduction of the log joint over the kept sweeps of m
 * chains (Gelman and Rubin): NaN with fewer than 2 chains or 2 kept sweeps.
 */
static double
r_hat(const chain_sums *sums, int32_t m)
{
	int64_t		n;
	double		grand = 0.0,
				between = 0.0,
				within = 0.0;

	if (m < 2)
		return NAN;
	n = sums[0].n;
	if (n < 2)
		return NAN;
	for (int32_t c = 0; c < m; c++)
		grand += sums[c].mean / m;
	for (int32_t c = 0; c < m; c++)
	{
		within += sums[c].m2 / (n - 1) / m;
		between += (sums[c].mean - grand) * (sums[c].mean - grand) * n / (m - 1);
	}
	/* constant traces: equal means give 1, rounding aside */
	if (within <= 1e-24 * (grand * grand + 1.0))
		return between <= 1e-24 * (grand * grand + 1.0) ? 1.0 : INFINITY;
	return sqrt(((n - 1.0) / n * within + between / n) / within);
}

/* Autocorrelations beyond this lag are not summed (bounds the cost). */
#define GNB_ESS_MAX_LAG 5000

double
gnb_ess(const double *x, int64_t n)
{
	double		mean = 0.0;
	double		c0 = 0.0;
	double		tau;
	double		prev_pair = INFINITY;
	double		sum_pairs = 0.0;

	if (n < 4)
		return NAN;
	for (int64_t t = 0; t < n; t++)
		mean += x[t];
	mean /= n;
	for (int64_t t = 0; t < n; t++)
		c0 += (x[t] - mean) * (x[t] - mean);
	c0 /= n;
	if (!(c0 > 1e-24 * (mean * mean + 1.0)))
		return NAN;

	/*
	 * Geyer: Gamma_m = rho(2m) + rho(2m + 1), summed while positive, each
	 * capped by the one before (the initial monotone sequence); the
	 * integrated autocorrelation time is then -1 + 2 sum Gamma_m.
	 */
	for (int64_t m = 0; 2 * m + 1 < n && 2 * m + 1 <= GNB_ESS_MAX_LAG; m++)
	{
		double		pair = 0.0;

		for (int64_t lag = 2 * m; lag <= 2 * m + 1; lag++)
		{
			double		c = 0.0;

			for (int64_t t = 0; t + lag < n; t++)
				c += (x[t] - mean) * (x[t + lag] - mean);
			pair += c / n / c0;
		}
		if (pair <= 0.0)
			break;
		if (pair > prev_pair)
			pair = prev_pair;
		prev_pair = pair;
		sum_pairs += pair;
	}
	tau = -1.0 + 2.0 * sum_pairs;
	/* an antithetic series can give tau < 1; the estimate is capped at n log10 n (Stan's cap) */
	if (tau < 1.0 / log10((double) n))
		tau = 1.0 / log10((double) n);
	return n / tau;
}

double
gnb_split_r_hat(const double *x, int32_t m, int64_t n)
{
	int64_t		half = n / 2;
	int32_t		mm = 2 * m;
	double		grand = 0.0,
				between = 0.0,
				within = 0.0;

	if (n < 4 || m < 1)
		return NAN;
	/* halves: series c's first half x[c n .. c n + half), its second the last half values */
	for (int32_t h = 0; h < mm; h++)
	{
		const double *y = x + (int64_t) (h / 2) * n + (h % 2 ? n - half : 0);
		double		mean = 0.0,
					var = 0.0;

		for (int64_t t = 0; t < half; t++)
			mean += y[t];
		mean /= half;
		for (int64_t t = 0; t < half; t++)
			var += (y[t] - mean) * (y[t] - mean);
		var /= half - 1;
		within += var / mm;
		grand += mean / mm;
	}
	for (int32_t h = 0; h < mm; h++)
	{
		const double *y = x + (int64_t) (h / 2) * n + (h % 2 ? n - half : 0);
		double		mean = 0.0;

		for (int64_t t = 0; t < half; t++)
			mean += y[t];
		mean /= half;
		between += (mean - grand) * (mean - grand);
	}
	between *= (double) half / (mm - 1);
	if (within <= 1e-24 * (grand * grand + 1.0))
		return between <= 1e-24 * (grand * grand + 1.0) ? 1.0 : INFINITY;
	return sqrt(((half - 1.0) / half * within + between / half) / within);
}

int32_t
gnb_diagnose(double split_r_hat, double ess_total,
			 const int32_t *locked, int32_t chains,
			 int32_t n_unlabeled, int sampled_gamma, double chain_agreement)
{
	int32_t		w = 0;

	if (n_unlabeled == 0 && !sampled_gamma)
		return 0;
	if (split_r_hat > GNB_R_HAT_LIMIT)
		w |= GNB_WARN_R_HAT;
	if (ess_total < GNB_ESS_LIMIT)
		w |= GNB_WARN_ESS;
	if (n_unlabeled > 0)
		for (int32_t c = 0; c < chains; c++)
			if (locked[c] > 0)
				w |= GNB_WARN_STUCK;
	if (chain_agreement < GNB_AGREEMENT_LIMIT)
		w |= GNB_WARN_CHAINS;
	return w;
}

const char *
gnb_warning_text(int32_t warning)
{
	switch (warning)
	{
		case GNB_WARN_R_HAT:
			return "the chains (or the two halves of one chain) disagree: run more sweeps, a longer burn_in or more chains";
		case GNB_WARN_ESS:
			return "the log joint is strongly autocorrelated: run more sweeps";
		case GNB_WARN_STUCK:
			return "the chain is stuck on them: the collapsed sampler, unlabeled_weight < 1 "
				"or more chains help";
		case GNB_WARN_LABELS:
			return "the model disagrees with its own labels more than a model of the labels "
				"alone does";
		case GNB_WARN_CHAINS:
			return "the chains found different labellings: the data hold more than one "
				"mode; compare the chains' labels, or keep more labels";
	}
	return "unknown warning";
}

static int
cmp_active_key(const void *a, const void *b)
{
	const active_key *x = a;
	const active_key *y = b;

	if (x->total != y->total)
		return x->total < y->total ? -1 : 1;
	return (x->first > y->first) - (x->first < y->first);
}

/*
 * paper, K = 2: put the active words in order of their total count over
 * both classes, N_0w + N_1w, which moving documents never changes.  The theta step's two
 * Gamma shapes of a word add up to that total plus 2 gamma_theta, so the
 * words whose shapes it draws by the same method (theta_step2), with the
 * same number of exponentials, come one after another and the branches
 * that choose are predicted; and the label step's frequent words are close
 * together in log_theta.  Ties go by the word's first pair in the
 * unlabelled documents (the order of the label step's reads; one word a
 * pair: the order is the same on every machine), so that the many words
 * seen once are read in order.  labelled_count: the clamped (and extra)
 * counts, V x 2, or NULL if there are none.
 */
static void
sort_active(run_shared *sh, const double *labelled_count)
{
	const gnb_corpus *c = sh->corpus;
	const gnb_hooks *hooks = sh->hooks;
	const double lambda = sh->params->unlabeled_weight;
	const int32_t *at = sh->active_pos;
	active_key *keys = xalloc(hooks, sh->n_active > 0 ? sh->n_active : 1, sizeof(active_key));

	/* keys[i] the i-th active word's, found by active_pos (word order still) */
	for (int32_t i = 0; i < sh->n_active; i++)
	{
		int32_t		w = sh->active[i];

		keys[i].total = labelled_count ?
			labelled_count[2 * (int64_t) w] + labelled_count[2 * (int64_t) w + 1] : 0.0;
		keys[i].first = -1;
	}
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];

		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			active_key *key = &keys[at[c->word[p]]];

			key->total += lambda * c->count[p];
			if (key->first < 0)
				key->first = p;
		}
	}
	qsort(keys, sh->n_active, sizeof(active_key), cmp_active_key);
	for (int32_t i = 0; i < sh->n_active; i++)
		sh->active[i] = c->word[keys[i].first];
	hooks->release(keys, hooks->arg);
}

/*
 * paper, K = 2: the unlabelled documents' pairs packed (run_shared.dense),
 * in place in the lent word array when it is there and no count needs an
 * escape, else into an array of their own.  index: each word's index in
 * active.
 */
static void
pack_pairs(run_shared *sh, const int32_t *index)
{
	const gnb_corpus *corpus = sh->corpus;
	const gnb_hooks *hooks = sh->hooks;
	int64_t		n_pairs = 0;

	/* bits for an index in active (n_active < 2^31: at least one is left) */
	sh->dense_wbits = GNB_DENSE_WBITS_MIN;
	while (sh->dense_wbits < 31 && ((int64_t) 1 << sh->dense_wbits) < sh->n_active)
		sh->dense_wbits++;
	sh->dense_wmask = ((uint32_t) 1 << sh->dense_wbits) - 1;
	sh->dense_cmax = UINT32_MAX >> sh->dense_wbits;
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int64_t		len = corpus->doc_start[j + 1] - corpus->doc_start[j];

		for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
			sh->n_dense += corpus->count[p] >= (int64_t) sh->dense_cmax ? 2 : 1;
		n_pairs += len;
		if (len > sh->max_doc_pairs)
			sh->max_doc_pairs = len;
	}
	sh->dense_in_place = corpus->lent_word != NULL && corpus->lent_word == corpus->word &&
		sh->n_dense == n_pairs;
	sh->dense_start = xalloc(hooks, (size_t) sh->n_unlabeled + 1, sizeof(int64_t));
	sh->dense_ones = xalloc(hooks, (size_t) sh->n_unlabeled + 1, sizeof(int32_t));
	sh->dense_escape = xalloc(hooks, (size_t) sh->n_unlabeled + 1, 1);
	if (sh->dense_in_place)
	{
		/*
		 * Each document's pairs where its words were: its words of count 1
		 * first, each written at or before where it is read; the others
		 * wait in `rest` meanwhile.
		 */
		uint32_t   *rest = xalloc(hooks, (size_t) sh->max_doc_pairs + 1, sizeof(uint32_t));
		uint32_t   *dense = (uint32_t *) corpus->lent_word;

		sh->dense = dense;
		sh->dense_end = xalloc(hooks, (size_t) sh->n_unlabeled + 1, sizeof(int64_t));
		for (int32_t i = 0; i < sh->n_unlabeled; i++)
		{
			int32_t		j = sh->unlabeled[i];
			int64_t		q = corpus->doc_start[j];
			int64_t		n_rest = 0;

			sh->dense_start[i] = q;
			sh->dense_end[i] = corpus->doc_start[j + 1];
			for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
			{
				uint32_t	word = (uint32_t) index[corpus->word[p]];

				if (corpus->count[p] == 1)
					dense[q++] = word;
				else
					rest[n_rest++] = word | ((uint32_t) corpus->count[p] << sh->dense_wbits);
			}
			sh->dense_ones[i] = (int32_t) (q - sh->dense_start[i]);
			memcpy(dense + q, rest, n_rest * sizeof(uint32_t));
		}
		hooks->release(rest, hooks->arg);
		return;
	}
	sh->dense = xalloc(hooks, (size_t) sh->n_dense + 1, sizeof(uint32_t));
	sh->dense_end = sh->dense_start + 1;
	for (int64_t i = 0, q = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int64_t		p;

		sh->dense_start[i] = q;
		for (p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
			if (corpus->count[p] == 1)
				sh->dense[q++] = (uint32_t) index[corpus->word[p]];
		sh->dense_ones[i] = (int32_t) (q - sh->dense_start[i]);
		for (p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
		{
			uint32_t	word = (uint32_t) index[corpus->word[p]];

			if (corpus->count[p] == 1)
				continue;
			if (corpus->count[p] < (int64_t) sh->dense_cmax)
				sh->dense[q++] = word | ((uint32_t) corpus->count[p] << sh->dense_wbits);
			else
			{
				sh->dense[q++] = word | (sh->dense_cmax << sh->dense_wbits);
				sh->dense[q++] = (uint32_t) corpus->count[p];
				sh->dense_escape[i] = 1;
			}
		}
		sh->dense_start[i + 1] = q;
	}
}

/*
 * The words of the lent word array back from the pairs packed in it: a
 * document's words of count 1 (by corpus->count, which was not changed) come
 * from its first pairs, in order, the others from the rest.  Its words of
 * count 1 wait in `ones`, as every other word is read at or after where it
 * is written.
 */
static void
restore_words(const run_shared *sh)
{
	const gnb_corpus *corpus = sh->corpus;
	const gnb_hooks *hooks = sh->hooks;
	uint32_t   *ones = xalloc(hooks, (size_t) sh->max_doc_pairs + 1, sizeof(uint32_t));
	const uint32_t *dense = sh->dense;
	int32_t    *word = corpus->lent_word;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int64_t		n_ones = sh->dense_ones[i];
		int64_t		one = 0;
		int64_t		q = sh->dense_start[i] + n_ones;

		memcpy(ones, dense + sh->dense_start[i], n_ones * sizeof(uint32_t));
		for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
		{
			if (corpus->count[p] == 1)
				word[p] = sh->active[ones[one++]];
			else
				word[p] = sh->active[dense[q++] & sh->dense_wmask];
		}
	}
	hooks->release(ones, hooks->arg);
}

/*
 * sh->start_prob: each unlabelled document's class probabilities under the
 * model of the clamped documents alone, the multinomial Naive Bayes a user
 * would train on the labelled rows: posterior-mean theta_kw = (L_kw + g) /
 * (L_k + V g) and pi_k = (C_k + g_pi) / (C + K g_pi) from the clamped counts
 * L (labelled_count, V x K) and documents C, with the starting gammas.
 */
static void
start_probabilities(run_shared *sh, const double *labelled_count)
{
	const gnb_corpus *c = sh->corpus;
	const gnb_hooks *hooks = sh->hooks;
	const int32_t K = sh->K;
	const int32_t V = sh->V;
	const double g = sh->params->gamma_theta;
	const double gp = sh->params->gamma_pi;
	double	   *docs = xalloc(hooks, K, sizeof(double));
	double	   *log_total = xalloc(hooks, K, sizeof(double));

	for (int32_t j = 0; j < sh->D; j++)
		if (c->label[j] >= 0)
			docs[c->label[j]] += 1.0;
	if (c->extra_doc_counts)
		for (int32_t k = 0; k < K; k++)
			docs[k] += c->extra_doc_counts[k];
	for (int32_t w = 0; w < V; w++)
		for (int32_t k = 0; k < K; k++)
			log_total[k] += labelled_count[(int64_t) w * K + k];
	for (int32_t k = 0; k < K; k++)
	{
		log_total[k] = log(log_total[k] + V * g);
		docs[k] = log(docs[k] + gp);
	}
	sh->start_prob = xalloc(hooks, (size_t) sh->n_unlabeled * K + 1, sizeof(double));
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		double	   *p = sh->start_prob + (int64_t) i * K;
		double		max = -INFINITY;
		double		total = 0.0;

		maybe_check_interrupts(sh, i);
		for (int32_t k = 0; k < K; k++)
			p[k] = docs[k] - sh->doc_length[j] * log_total[k];
		for (int64_t q = c->doc_start[j]; q < c->doc_start[j + 1]; q++)
		{
			const double *row = labelled_count + (int64_t) c->word[q] * K;

			for (int32_t k = 0; k < K; k++)
				p[k] += c->count[q] * log(row[k] + g);
		}
		for (int32_t k = 0; k < K; k++)
			if (p[k] > max)
				max = p[k];
		for (int32_t k = 0; k < K; k++)
			total += (p[k] = exp(p[k] - max));
		for (int32_t k = 0; k < K; k++)
			p[k] /= total;
	}
	hooks->release(docs, hooks->arg);
	hooks->release(log_total, hooks->arg);
}

/*
 * Derive what all chains share: unlabelled documents, active words, shapes;
 * for a chain to run (for_chain) the paper sampler's dense pairs too.
 */
static void
setup_shared(run_shared *sh, const gnb_corpus *corpus, const gnb_params *params,
			 const gnb_hooks *hooks, int for_chain)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	const int	packed = for_chain && params->sampler == GNB_SAMPLER_PAPER && K == 2;
	char	   *is_active = xalloc(hooks, V > 0 ? V : 1, 1);
	int			clamped_docs = 0;
	double	   *clamped_count = NULL;
	const double *labelled_count;

	memset(sh, 0, sizeof(*sh));
	sh->corpus = corpus;
	sh->params = params;
	sh->hooks = hooks;
	sh->K = K;
	sh->V = V;
	sh->D = D;
	sh->n_pairs = corpus->doc_start[D];
	sh->unlabeled = xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));
	sh->doc_length = xalloc(hooks, D > 0 ? D : 1, sizeof(double));
	sh->inactive_count = xalloc(hooks, K, sizeof(double));
	sh->class_clamped = xalloc(hooks, K, 1);
	for (int32_t j = 0; j < D; j++)
		if (corpus->label[j] >= 0)
			clamped_docs = 1;
	/*
	 * The clamped counts, V x K: the extra counts themselves when no
	 * document of the corpus is clamped (as in the server, which gives
	 * them only so), else a sum of both; NULL if there are none.
	 */
	if (clamped_docs)
		clamped_count = xalloc(hooks, (size_t) V * K + 1, sizeof(double));
	labelled_count = clamped_count ? clamped_count : corpus->extra_word_counts;
	for (int32_t j = 0; j < D; j++)
	{
		int32_t		label = corpus->label[j];

		for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
		{
			sh->doc_length[j] += corpus->count[p];
			if (label < 0)
				is_active[corpus->word[p]] = 1;
			else
				clamped_count[(int64_t) corpus->word[p] * K + label] += corpus->count[p];
		}
		if (label < 0)
			sh->unlabeled[sh->n_unlabeled++] = j;
		else
			sh->class_clamped[label] = 1;
	}
	if (corpus->extra_word_counts)
	{
		if (clamped_count)
			for (int64_t i = 0; i < (int64_t) V * K; i++)
				clamped_count[i] += corpus->extra_word_counts[i];
		for (int32_t k = 0; k < K; k++)
			if (corpus->extra_doc_counts[k] > 0.0)
				sh->class_clamped[k] = 1;
	}
	sh->all_classes_clamped = 1;
	for (int32_t k = 0; k < K; k++)
		if (!sh->class_clamped[k])
			sh->all_classes_clamped = 0;
	/* before the words are packed; a class with no label: a uniform start */
	if (for_chain && params->init == GNB_INIT_LABELS && sh->n_unlabeled > 0 &&
		sh->all_classes_clamped)
		start_probabilities(sh, labelled_count);
	for (int32_t w = 0; w < V; w++)
		if (is_active[w])
			sh->n_active++;
		else
		{
			sh->n_inactive++;
			if (labelled_count)
				for (int32_t k = 0; k < K; k++)
					sh->inactive_count[k] += labelled_count[(int64_t) w * K + k];
		}
	/* the active words themselves only for a chain: combining needs their number */
	if (for_chain)
	{
		int32_t		n = 0;

		sh->active = xalloc(hooks, sh->n_active > 0 ? sh->n_active : 1, sizeof(int32_t));
		/* the index in active of each word, -1 for an inactive one */
		sh->active_pos = xalloc(hooks, V > 0 ? V : 1, sizeof(int32_t));
		for (int32_t w = 0; w < V; w++)
		{
			sh->active_pos[w] = is_active[w] ? n : -1;
			if (is_active[w])
				sh->active[n++] = w;
		}
		if (packed)
		{
			sort_active(sh, labelled_count);
			for (int32_t i = 0; i < sh->n_active; i++)
				sh->active_pos[sh->active[i]] = i;
			pack_pairs(sh, sh->active_pos);
			/* the inactive words' rows of N after the active words' */
			for (int32_t w = 0, r = sh->n_active; w < V; w++)
				if (!is_active[w])
					sh->active_pos[w] = r++;
		}
	}
	hooks->release(is_active, hooks->arg);
	if (clamped_count)
		hooks->release(clamped_count, hooks->arg);
}

static void
release_shared(run_shared *sh)
{
	const gnb_hooks *hooks = sh->hooks;

	hooks->release(sh->unlabeled, hooks->arg);
	hooks->release(sh->doc_length, hooks->arg);
	hooks->release(sh->inactive_count, hooks->arg);
	hooks->release(sh->class_clamped, hooks->arg);
	if (sh->active)
		hooks->release(sh->active, hooks->arg);
	if (sh->active_pos)
		hooks->release(sh->active_pos, hooks->arg);
	if (sh->start_prob)
		hooks->release(sh->start_prob, hooks->arg);
	if (sh->dense)
	{
		if (sh->dense_in_place)
			hooks->release(sh->dense_end, hooks->arg);
		else
			hooks->release(sh->dense, hooks->arg);
		hooks->release(sh->dense_start, hooks->arg);
		hooks->release(sh->dense_ones, hooks->arg);
		hooks->release(sh->dense_escape, hooks->arg);
	}
}

/*
 * May a chain keep its counts N in the lent clamped counts
 * (corpus->lent_extra_word_counts)?  Only if taking the unlabelled
 * documents' counts out again at the end gives them back exactly: full
 * weight (lambda = 1), and every count an integer with all of them summed
 * below 2^53, so that every sum on the way is exact.
 */
static int
lend_counts(const gnb_corpus *corpus, const gnb_params *params)
{
	int64_t		n = (int64_t) corpus->n_words * corpus->n_classes;
	double		total = 0.0;

	if (corpus->lent_extra_word_counts == NULL ||
		corpus->lent_extra_word_counts != corpus->extra_word_counts ||
		params->unlabeled_weight != 1.0)
		return 0;
	for (int64_t i = 0; i < n; i++)
	{
		double		x = corpus->extra_word_counts[i];

		if (x != floor(x))
			return 0;
		total += x;
	}
	for (int64_t p = 0; p < corpus->doc_start[corpus->n_docs]; p++)
		total += corpus->count[p];
	return total < 9007199254740992.0 / 2;
}

void
gnb_train_chain(const gnb_corpus *corpus, const gnb_params *params, int32_t chain,
				const gnb_hooks *hooks, gnb_chain *out)
{
	run_shared	sh;
	chain_state st;
	chain_sums	sums;
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	const int32_t kept = (params->sweeps - params->burn_in) / params->lag;
	size_t		vk = (size_t) V * K;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	setup_shared(&sh, corpus, params, hooks, 1);

	memset(out, 0, sizeof(*out));
	out->chain = chain;
	out->kept = kept;
	out->sweeps = params->sweeps;
	out->kept_points = gnb_kept_series(kept, &out->kept_stride);
	/* filled up to GNB_KEPT_SERIES_MAX points before it is thinned */
	out->kept_log_joint = xalloc(hooks, kept < GNB_KEPT_SERIES_MAX ? kept : GNB_KEPT_SERIES_MAX,
								 sizeof(double));
	if (!params->no_trace)
	{
		out->log_joint = xalloc(hooks, params->sweeps, sizeof(double));
		out->changed = xalloc(hooks, params->sweeps, sizeof(double));
	}
	out->last_labels = xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));

	memset(&st, 0, sizeof(st));
	st.sh = &sh;
	st.z = out->last_labels;
	st.moved = xalloc(hooks, D > 0 ? D : 1, 1);
	st.C = xalloc(hooks, K, sizeof(double));
	st.N_lent = lend_counts(corpus, params);
	st.N = st.N_lent ? corpus->lent_extra_word_counts : xalloc(hooks, vk + 1, sizeof(double));
	st.Nk = xalloc(hooks, K, sizeof(double));
	start_counts(&st);
	if (sh.dense)
	{
		/* N by row (chain_state.N), before the arrays of the sweeps are made */
		permute_rows(hooks, st.N, V, sh.active_pos, 1);
		hooks->release(sh.active_pos, hooks->arg);
		sh.active_pos = NULL;
	}
	st.S = xalloc(hooks, K, sizeof(double));
	st.log_prior = xalloc(hooks, K, sizeof(double));
	st.log_prior_own = xalloc(hooks, K, sizeof(double));
	st.log_pred = xalloc(hooks, K, sizeof(double));
	st.log_pred_own = xalloc(hooks, K, sizeof(double));
	/* K = 2: the active words' log-odds */
	if (params->sampler == GNB_SAMPLER_PAPER)
		st.log_theta = xalloc(hooks, K != 2 ? vk + 1 : (size_t) sh.n_active + 1,
							  sizeof(double));
	if (sh.dense)
	{
		st.mt_c = xalloc(hooks, GNB_MT_TABLE_MAX + 1, sizeof(double));
		gnb_mt_c_table(st.mt_c);
	}
	st.scores = xalloc(hooks, K, sizeof(double));
	st.pred = xalloc(hooks, K, sizeof(double));
	st.scratch = xalloc(hooks, K, sizeof(double));
	st.products = xalloc(hooks, K, sizeof(log_product));
	if (params->sample_gamma_theta)
	{
		st.cs.hist = xalloc(hooks, (size_t) K * GNB_HIST_MAX, sizeof(double));
		st.cs.rest = xalloc(hooks, vk + 1, sizeof(double));
		st.cs.rest_end = xalloc(hooks, K, sizeof(int64_t));
	}
	/* the sums become the chain's means in place */
	st.prob_sum = out->label_prob = xalloc(hooks, (size_t) D * K + 1, sizeof(double));
	st.theta_sum = xalloc(hooks, (size_t) sh.n_active * K + 1, sizeof(double));
	st.theta_mark = xalloc(hooks, (size_t) sh.n_active * K + 1, sizeof(double));
	st.inv_sum = xalloc(hooks, K, sizeof(double));
	st.g_inv_sum = xalloc(hooks, K, sizeof(double));
	st.pi_sum = out->pi = xalloc(hooks, K, sizeof(double));

	/* chain c's stream: the seed's, jumped c times */
	gnb_rng_seed(&st.rng, params->seed);
	for (int32_t c = 0; c < chain; c++)
		gnb_rng_jump(&st.rng);
	memset(&sums, 0, sizeof(sums));
	run_chain(&st, chain, out->log_joint, out->changed, &sums, out->kept_log_joint);

	/*
	 * theta-hat: every active entry brought up to date, the sums over all
	 * kept sweeps; an inactive word's N never changed, so its sum is what
	 * flushing it would give, N inv_sum.  The arrays only sampling needs go
	 * before theta-hat is allocated.
	 */
	for (int32_t i = 0; i < sh.n_active; i++)
		for (int32_t k = 0; k < K; k++)
			flush_theta(&st, (int64_t) (sh.dense ? i : sh.active[i]) * K + k,
						(int64_t) i * K + k, k);
	hooks->release(st.theta_mark, hooks->arg);
	if (st.log_theta)
		hooks->release(st.log_theta, hooks->arg);
	if (st.log_theta_1)
		hooks->release(st.log_theta_1, hooks->arg);
	if (sh.dense)
	{
		int32_t    *pos;

		hooks->release(st.mt_c, hooks->arg);
		/*
		 * The unlabelled documents' counts out of a lent N while it is by
		 * row, then N word-major again: the rows' permutation from active
		 * as setup_shared made it.
		 */
		if (st.N_lent)
			for (int32_t i = 0; i < sh.n_unlabeled; i++)
			{
				const uint32_t *pr = sh.dense + sh.dense_start[i];
				const int64_t n = sh.dense_end[i] - sh.dense_start[i];
				const int32_t z = st.z[sh.unlabeled[i]];

				for (int64_t p = 0; p < n; p++)
				{
					int32_t		cnt;
					int64_t		row = packed_pair(&sh, pr, sh.dense_ones[i], &p, &cnt);

					st.N[2 * row + z] -= cnt;
				}
			}
		pos = xalloc(hooks, V > 0 ? V : 1, sizeof(int32_t));
		for (int32_t w = 0; w < V; w++)
			pos[w] = -1;
		for (int32_t i = 0; i < sh.n_active; i++)
			pos[sh.active[i]] = i;
		for (int32_t w = 0, r = sh.n_active; w < V; w++)
			if (pos[w] < 0)
				pos[w] = r++;
		permute_rows(hooks, st.N, V, pos, 0);
		hooks->release(pos, hooks->arg);
	}
	/* in N's own room, entry by entry, unless N is lent */
	out->theta = st.N_lent ? xalloc(hooks, vk + 1, sizeof(double)) : st.N;
	for (int64_t idx = 0; idx < (int64_t) vk; idx++)
	{
		int32_t		k = (int32_t) (idx % K);

		out->theta[idx] = st.N[idx] * st.inv_sum[k] + st.g_inv_sum[k];
		out->theta[idx] /= kept;
	}
	if (st.N_lent)
	{
		/*
		 * The lent counts back as they were: every document's counts taken
		 * out of its last class.  All integers, so exactly.
		 */
		for (int32_t j = 0; j < D; j++)
			if (!sh.dense || corpus->label[j] >= 0)
				for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
					st.N[(int64_t) corpus->word[p] * K + st.z[j]] -= corpus->count[p];
	}
	st.N = NULL;
	if (sh.dense_in_place)
		restore_words(&sh);
	for (int32_t i = 0; i < sh.n_active; i++)
		for (int32_t k = 0; k < K; k++)
		{
			int64_t		idx = (int64_t) sh.active[i] * K + k;

			out->theta[idx] = st.theta_sum[(int64_t) i * K + k] + st.g_inv_sum[k];
			out->theta[idx] /= kept;
		}
	hooks->release(st.theta_sum, hooks->arg);
	for (int32_t k = 0; k < K; k++)
		out->pi[k] /= kept;
	for (int32_t i = 0; i < sh.n_unlabeled; i++)
	{
		int64_t		j = sh.unlabeled[i];

		for (int32_t k = 0; k < K; k++)
			out->label_prob[j * K + k] /= kept;
	}
	out->gamma_theta = st.g_theta_sum / kept;
	out->gamma_pi = st.g_pi_sum / kept;
	out->last_log_joint = sums.last;
	out->changed_after_burn_in = sums.changed_after_burn_in;
	out->locked = sums.locked;

	hooks->release(st.inv_sum, hooks->arg);
	hooks->release(st.g_inv_sum, hooks->arg);
	hooks->release(st.moved, hooks->arg);
	hooks->release(st.C, hooks->arg);
	hooks->release(st.Nk, hooks->arg);
	hooks->release(st.S, hooks->arg);
	hooks->release(st.log_prior, hooks->arg);
	hooks->release(st.log_prior_own, hooks->arg);
	hooks->release(st.log_pred, hooks->arg);
	hooks->release(st.log_pred_own, hooks->arg);
	hooks->release(st.scores, hooks->arg);
	hooks->release(st.pred, hooks->arg);
	hooks->release(st.scratch, hooks->arg);
	hooks->release(st.products, hooks->arg);
	if (st.cs.hist)
	{
		hooks->release(st.cs.hist, hooks->arg);
		hooks->release(st.cs.rest, hooks->arg);
		hooks->release(st.cs.rest_end, hooks->arg);
	}
	release_shared(&sh);
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
	cb = xalloc(hooks, 1, sizeof(gnb_combiner));
	cb->corpus = corpus;
	cb->params = params;
	cb->hooks = hooks;
	cb->result = result;
	setup_shared(&cb->sh, corpus, params, hooks, 0);

	memset(result, 0, sizeof(*result));
	result->n_docs = D;
	result->n_words = V;
	result->n_classes = K;
	result->chains = params->chains;
	result->sweeps = params->sweeps;
	result->kept = (params->sweeps - params->burn_in) / params->lag;
	result->label_prob = xalloc(hooks, (size_t) D * K + 1, sizeof(double));
	/* theta-hat when the first chain is added: not beside a sampling chain's arrays */
	result->theta = NULL;
	result->pi = xalloc(hooks, K, sizeof(double));
	if (!params->no_trace)
	{
		result->log_joint = xalloc(hooks, (size_t) params->chains * params->sweeps, sizeof(double));
		result->changed = xalloc(hooks, (size_t) params->chains * params->sweeps, sizeof(double));
	}
	result->kept_points = gnb_kept_series(result->kept, &result->kept_stride);
	result->kept_log_joint = xalloc(hooks, (size_t) params->chains * result->kept_points,
									sizeof(double));
	result->ess = xalloc(hooks, params->chains, sizeof(double));
	result->changed_after_burn_in = xalloc(hooks, params->chains, sizeof(int32_t));
	result->locked = xalloc(hooks, params->chains, sizeof(int32_t));
	result->chain_agreement = NAN;
	result->labels_agreement = result->labels_only_agreement = NAN;
	result->drift_from = result->drift_to = -1;
	result->last_labels = xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));
	cb->sums = xalloc(hooks, params->chains, sizeof(chain_sums));
	if (params->chains > 1)
		cb->ref_theta = xalloc(hooks, vk + 1, sizeof(double));
	cb->perm = xalloc(hooks, K, sizeof(int32_t));
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
	uint8_t    *done = xalloc(hooks, (size_t) n / 8 + 1, 1);

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

static void combine_add(gnb_combiner *cb, gnb_chain *chain, int take_theta);

void
gnb_combine_add(gnb_combiner *cb, const gnb_chain *chain)
{
	combine_add(cb, (gnb_chain *) chain, 0);
}

/*
 * gnb_combine_add; with take_theta, the first chain's theta-hat becomes the
 * result's, transposed in place (chain->theta is then NULL): the sum it
 * starts is then never beside it.  The same values: 0 + x is x.
 */
static void
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
			result->theta = xalloc(cb->hooks, vk + 1, sizeof(double));
	}
	else if (!sh->all_classes_clamped)
		align_classes(sh, cb->ref_theta, chain->theta, perm);

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
	 * chain_agreement: this chain against the mean of those before it,
	 * whose sum the label probabilities hold so far
	 */
	if (c > 0 && sh->n_unlabeled > 0)
	{
		double		distance = 0.0;

		for (int32_t i = 0; i < sh->n_unlabeled; i++)
		{
			int64_t		j = sh->unlabeled[i];

			for (int32_t k = 0; k < K; k++)
				distance += fabs(chain->label_prob[j * K + k] -
								 result->label_prob[j * K + perm[k]] / c);
		}
		distance = 0.5 * distance / sh->n_unlabeled;
		if (isnan(result->chain_agreement) || 1.0 - distance < result->chain_agreement)
			result->chain_agreement = 1.0 - distance;
	}
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int64_t		j = sh->unlabeled[i];

		for (int32_t k = 0; k < K; k++)
			result->label_prob[j * K + perm[k]] += chain->label_prob[j * K + k];
	}
	result->gamma_theta += chain->gamma_theta / params->chains;
	result->gamma_pi += chain->gamma_pi / params->chains;
	memcpy(result->kept_log_joint + (int64_t) c * result->kept_points, chain->kept_log_joint,
		   (size_t) result->kept_points * sizeof(double));
	for (int32_t t = 0; t < result->kept_points; t++)
		chain_sums_add(&cb->sums[c], chain->kept_log_joint[t]);
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
	memcpy(result->last_labels, chain->last_labels, (size_t) sh->D * sizeof(int32_t));
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
		result->theta = xalloc(hooks, (size_t) V * K + 1, sizeof(double));
	for (int64_t i = 0; i < (int64_t) V * K; i++)
		result->theta[i] /= params->chains;
	for (int32_t k = 0; k < K; k++)
		result->pi[k] /= params->chains;
	for (int32_t j = 0; j < D; j++)
	{
		if (corpus->label[j] >= 0)
			result->label_prob[(int64_t) j * K + corpus->label[j]] = 1.0;
		else
			for (int32_t k = 0; k < K; k++)
				result->label_prob[(int64_t) j * K + k] /= params->chains;
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
	result->r_hat = r_hat(cb->sums, params->chains);
	result->split_r_hat = gnb_split_r_hat(result->kept_log_joint, params->chains,
										  result->kept_points);
	result->warnings = gnb_diagnose(result->split_r_hat, result->ess_total,
									result->locked, params->chains, sh->n_unlabeled,
									params->sample_gamma_theta || params->sample_gamma_pi,
									result->chain_agreement);
	hooks->release(cb->sums, hooks->arg);
	if (cb->ref_theta)
		hooks->release(cb->ref_theta, hooks->arg);
	hooks->release(cb->perm, hooks->arg);
	release_shared(&cb->sh);
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
	hooks->release(result->label_prob, hooks->arg);
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
	hooks->release(result->last_labels, hooks->arg);
	memset(result, 0, sizeof(*result));
}
