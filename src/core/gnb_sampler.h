/*
 * gnb_sampler.h
 *	  The Gibbs samplers of docs/model.md over a corpus in compressed sparse rows.
 *
 * Pure C, no PostgreSQL headers: the same code runs in the background worker,
 * the unit tests and the benchmarks.  Memory comes from the caller's
 * allocator (gnb_hooks) so that in the server it lives in a memory context
 * and an error thrown from a hook (cancellation) leaks nothing.
 */
#ifndef GNB_SAMPLER_H
#define GNB_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef enum gnb_sampler_kind
{
	GNB_SAMPLER_PAPER,			/* theta sampled, pi integrated out */
	GNB_SAMPLER_COLLAPSED,		/* theta and pi integrated out */
	GNB_SAMPLER_BLOCKED			/* theta and pi drawn; labels independent given them */
} gnb_sampler_kind;

/*
 * Documents as compressed sparse rows: the distinct words of document j are
 * word[doc_start[j] .. doc_start[j + 1]), with their counts in count[].
 * label[j] is the clamped class of document j, or -1 if it is unlabelled.
 */
/*
 * How the unlabelled documents' labels start (docs/model.md, "The start").
 * GNB_INIT_LABELS: each drawn from its posterior under the model of the
 * clamped documents alone (multinomial Naive Bayes, posterior-mean theta and
 * pi with the starting gammas), when every class has a clamped document;
 * otherwise as GNB_INIT_RANDOM: uniformly over the K classes.  Either way
 * the chain's stationary law is the posterior.
 */
typedef enum gnb_init_kind
{
	GNB_INIT_LABELS,
	GNB_INIT_RANDOM
} gnb_init_kind;

typedef struct gnb_corpus
{
	int32_t		n_docs;
	int32_t		n_words;		/* vocabulary size V */
	int32_t		n_classes;		/* K */
	const int64_t *doc_start;	/* n_docs + 1 offsets */
	const int32_t *word;		/* word ids in [0, n_words) */
	const int32_t *count;		/* occurrences, > 0 */
	const int32_t *label;		/* n_docs entries: class or -1 */

	/*
	 * Optional: clamped documents given only by their counts, not listed
	 * above (both samplers use clamped documents through their counts
	 * alone).  extra_word_counts is V x K word-major, extra_doc_counts K
	 * long; both NULL when there are none.
	 */
	const double *extra_word_counts;
	const double *extra_doc_counts;

	/*
	 * Optional: a warm start.  n_docs entries; an unlabelled document j
	 * starts every chain in class init_label[j] instead of one drawn from
	 * its prior marginal (-1: drawn as usual), and the paper sampler's first
	 * theta is drawn given those labels too.  NULL: a cold start.
	 */
	const int32_t *init_label;

	/*
	 * Optional: extra_word_counts itself, lent likewise.  A chain then keeps
	 * its V x K counts in it (they start as these) and takes the documents'
	 * counts out again before it returns, when that gives them back
	 * exactly (unlabeled_weight 1, integer counts); otherwise it is only
	 * read.  A hook that abandons the run leaves them changed; not for a
	 * corpus that chains read at the same time.
	 */
	double	   *lent_extra_word_counts;

	/*
	 * Optional: word itself, lent likewise.  A chain of the paper sampler
	 * with K = 2 then packs its unlabelled documents' pairs (a word's index
	 * and its count in 32 bits) into it, each document's in its own place,
	 * rather than into a copy, when every count fits, and writes the words
	 * back (by count) before it returns.  A hook that abandons the run
	 * leaves them changed; not for a corpus that chains read at the same
	 * time.
	 */
	int32_t    *lent_word;

	/*
	 * Optional, for the blocked sampler: n_docs keys, one a document, that
	 * name its draws (its starting label, its label in each sweep) instead of
	 * its index, so that the chain does not depend on the documents' order
	 * or on which of them a process holds: the same documents under the same
	 * keys draw the same labels in any corpus.  Distinct for the unlabelled
	 * documents (the caller's duty: two documents with one key would share
	 * their draws).  NULL: a document's index is its key.
	 */
	const uint64_t *doc_key;

	/*
	 * Optional, for the blocked sampler's chain split over nodes
	 * (gnb_nodes.h): the corpus is a node's part of the unlabelled
	 * documents, or none of them (the chain's own), and these describe the
	 * whole corpus: each word's count over all its unlabelled documents
	 * (n_words) and their number.  They decide which words the chain draws
	 * and in what order, so that every part lays them out alike.  NULL: the
	 * corpus is the whole.  (A chain's corpus with no documents signals a
	 * warm start by a non-NULL init_label.)
	 */
	const int64_t *all_unlabeled_count;
	int64_t		all_n_unlabeled;

	/*
	 * Optional, with all_unlabeled_count: the documents are listed (their
	 * labels, keys) but held by nodes, without their pairs here, and these
	 * are their numbers of tokens (n_docs).  gnb_labels_only_model leaves
	 * their probabilities to whoever holds them (gnb_labels_only_doc); the
	 * label check takes their mass from the result (unlabeled_mass, their
	 * holders').  May be filled after gnb_check.
	 */
	const double *doc_length;
} gnb_corpus;

typedef struct gnb_params
{
	gnb_sampler_kind sampler;
	int32_t		sweeps;			/* T */
	int32_t		burn_in;		/* B, 0 <= B < T */
	int32_t		lag;			/* keep every lag-th sweep after burn-in */
	int32_t		chains;
	double		gamma_pi;
	double		gamma_theta;
	double		unlabeled_weight;	/* lambda in [0, 1] */
	uint64_t	seed;
	gnb_init_kind init;
	/*
	 * Nonzero: sample gamma_theta (gamma_pi) every sweep given the labels, by
	 * slice sampling on its log under the prior log gamma ~ Uniform(log
	 * GNB_GAMMA_MIN, log GNB_GAMMA_MAX); gamma_theta (gamma_pi) above is then
	 * the starting value.  With gamma_grid set, the prior is instead uniform
	 * on those n_gamma_grid points and the move an exact draw over them (a
	 * test mode: the posterior can then be enumerated).
	 */
	int32_t		sample_gamma_theta;
	int32_t		sample_gamma_pi;
	const double *gamma_grid;
	int32_t		n_gamma_grid;
	/*
	 * Nonzero: keep no chains x sweeps trace arrays (result->log_joint and
	 * ->changed are NULL); the caller takes each sweep from hooks->progress.
	 * R-hat and the final log joint come from running sums either way.
	 */
	int32_t		no_trace;
} gnb_params;

/*
 * The samplers' names, as gibbs_nb_train takes them and models record them:
 * gnb_sampler_from_name returns -1 for a name that is none of them.
 */
extern const char *gnb_sampler_name(gnb_sampler_kind kind);
extern int	gnb_sampler_from_name(const char *name);

/* The support of the continuous prior of a sampled gamma. */
#define GNB_GAMMA_MIN 1e-3
#define GNB_GAMMA_MAX 1e3

/*
 * The largest gamma a chain takes (gnb_check): the blocked sampler keeps its
 * log joint's word terms, lgamma(count + gamma_theta), as exact integer sums
 * in 64 bits, which a gamma near 1e300 overflows; a pseudocount of a million
 * for every word already outweighs any corpus.
 */
#define GNB_GAMMA_LIMIT 1e6
#define GNB_GAMMA_LIMIT_TEXT "1000000"

/* What the progress hook hears after every sweep of every chain. */
typedef struct gnb_sweep
{
	int32_t		chain;
	int32_t		sweep;			/* 1 .. sweeps */
	double		log_joint;		/* tempered log density of the state */
	double		changed;		/* share of unlabelled labels changed */
	double		gamma_theta;	/* the values this sweep ended with */
	double		gamma_pi;
} gnb_sweep;

/* Warnings of gnb_result.warnings (bits); gnb_warning_text says them. */
#define GNB_WARN_R_HAT		0x1 /* split R-hat of the log joint > 1.05 */
#define GNB_WARN_ESS		0x2 /* effective sample size < 100 */
#define GNB_WARN_STUCK		0x4 /* a chain has locked documents (gnb_chain.locked) */
#define GNB_WARN_CHAINS		0x8 /* chains disagree on the labels (chain_agreement) */
#define GNB_WARN_LABELS		0x10	/* worse than the labels alone (gnb_label_check.h) */
#define GNB_R_HAT_LIMIT 1.05
#define GNB_ESS_LIMIT 100.0
#define GNB_AGREEMENT_LIMIT 0.9
/*
 * A document is locked when it kept its label through the n sweeps after
 * burn-in although its conditional with theta and pi integrated out, at the
 * chain's end, gives a chance below GNB_LOCKED_CHANCE of that:
 * (1 - q)^n < GNB_LOCKED_CHANCE for q the chance it leaves its class.
 */
#define GNB_LOCKED_CHANCE 1e-6

/*
 * The blocked sampler's sweeps split over processes.  Each sweep of a chain
 * of the blocked sampler has two phases whose units are independent: the
 * labels (a unit per unlabelled document, by position among them) and theta
 * (a unit per block of GNB_BLOCKED_WORDS words, every class of its words).
 * The chain runs in one process; with hooks->blocked_arrays its arrays below
 * are in memory other processes see too, and with hooks->blocked_phase it
 * hands each phase to the caller, who has every unit drawn once (by any
 * number of processes, each calling gnb_blocked_helper_run on ranges of
 * them: a unit drawn twice would add its predictive probabilities twice)
 * before it returns.  The draws are keyed by what they draw, so the chain
 * is the same bit for bit however the units are split.
 */
typedef struct gnb_blocked_arrays
{
	/*
	 * V x K, word-major: read by labels, written by theta; with K = 2 the
	 * active words' unnormalised log-odds instead, by their rows of N
	 */
	double	   *log_theta;
	/* V x K: the chain's counts, read by theta; with K = 2 by the rows of log_theta's words first */
	double	   *N;
	/* K: read by labels; K = 2: then log z_1 - log z_0 of theta's normalisers */
	double	   *log_pi;
	int32_t    *next_label;		/* by unlabelled position: written by labels */
	/*
	 * by unlabelled position x K: the chain's kept sweeps' predictive
	 * probabilities, summed (added to by labels when predictive; zeroed
	 * at its start): so each row stays with the process that draws it, not
	 * read by the chain at every sweep
	 */
	double	   *pred;
	double	   *block_lse;		/* K x blocks: written by theta */
} gnb_blocked_arrays;

/* gnb_blocked_sizes's indices: the bytes of each array above, in its order */
#define GNB_BLOCKED_LOG_THETA	0
#define GNB_BLOCKED_N			1
#define GNB_BLOCKED_LOG_PI		2
#define GNB_BLOCKED_NEXT_LABEL	3
#define GNB_BLOCKED_PRED		4
#define GNB_BLOCKED_BLOCK_LSE	5
#define GNB_BLOCKED_N_ARRAYS	6

#define GNB_PHASE_LABELS	1
#define GNB_PHASE_THETA		2

/* What a phase's draws depend on besides the arrays. */
typedef struct gnb_blocked_step
{
	int32_t		chain;
	int32_t		sweep;			/* 0: the first theta, before the first sweep */
	int32_t		phase;			/* GNB_PHASE_* */
	int32_t		predictive;		/* labels: add to pred (a kept sweep with lambda < 1) */
	double		g_theta;		/* theta: the current gamma_theta */
} gnb_blocked_step;

/* a call of a chain to the nodes holding its documents (gnb_nodes.h) */
struct gnb_node_call;

typedef struct gnb_hooks
{
	/* zero-filled allocation; must not return NULL (may longjmp instead) */
	void	   *(*alloc) (size_t size, void *arg);
	void		(*release) (void *ptr, void *arg);
	/* after every sweep of every chain; may longjmp to abandon the run */
	void		(*progress) (void *arg, const gnb_sweep *sweep);
	/* every few thousand documents within a sweep; may longjmp */
	void		(*check_interrupts) (void *arg);
	void	   *arg;
	/*
	 * Optional, blocked sampler (see gnb_blocked_arrays): fill *arrays with
	 * memory of gnb_blocked_sizes's sizes and return nonzero, or return 0
	 * for private arrays; and have a phase's units drawn.  Either may
	 * longjmp.
	 */
	int			(*blocked_arrays) (void *arg, gnb_blocked_arrays *arrays);
	void		(*blocked_phase) (void *arg, const gnb_blocked_step *step);
	/*
	 * Optional, blocked sampler, a corpus with all_unlabeled_count: have
	 * every node answer the call (gnb_nodes.h), handing each one's changes
	 * to call->apply before it returns.  May longjmp.
	 */
	void		(*blocked_nodes) (void *arg, const struct gnb_node_call *call);
} gnb_hooks;

/*
 * The sizes in bytes of the arrays of gnb_blocked_arrays, by GNB_BLOCKED_*
 * (pred is written only with unlabeled_weight < 1: one element otherwise).
 */
extern void gnb_blocked_sizes(int32_t n_docs, int32_t n_words, int32_t n_classes,
							  const gnb_params *params, size_t *sizes);

/*
 * A process that draws units of a chain's phases: what it derives once
 * from the corpus and parameters (the chain's own), the number of units of
 * a phase, and the drawing of units from..to-1 of a step into the arrays
 * (mapped in this process).
 */
typedef struct gnb_blocked_helper gnb_blocked_helper;
extern gnb_blocked_helper *gnb_blocked_helper_begin(const gnb_corpus *corpus,
													const gnb_params *params,
													const gnb_hooks *hooks);
extern int64_t gnb_blocked_units(const gnb_blocked_helper *helper, int32_t phase);
/*
 * The units from..to-1 of part `part` of a phase split in `parts`: about
 * equal work each (documents by their pairs, blocks by their words' draws), the
 * parts in order and covering every unit once.
 */
extern void gnb_blocked_part(const gnb_blocked_helper *helper, int32_t phase, int32_t part,
							 int32_t parts, int64_t *from, int64_t *to);
/*
 * Units from..to-1 of a step; a process may draw several ranges of one step
 * (a labels step's log theta is read through before the first of them).
 */
extern void gnb_blocked_helper_run(gnb_blocked_helper *helper, const gnb_blocked_arrays *arrays,
								   const gnb_blocked_step *step, int64_t from, int64_t to);
extern void gnb_blocked_helper_end(gnb_blocked_helper *helper);
/* An upper bound, in bytes, on what gnb_blocked_helper_begin allocates through hooks->alloc. */
extern uint64_t gnb_blocked_helper_memory(int32_t n_docs, int32_t n_words, int32_t n_classes,
										  int64_t n_pairs);

/*
 * A sum of doubles that is the same in whatever order its terms come
 * (gnb_exact_sum.c): each term rounded to a multiple of 2^-60 (the same
 * term, the same multiple), the multiples added exactly as a 128-bit
 * integer (lo, then hi with the carry).  For sums over documents that
 * whoever holds them adds up: a node's part merged into the chain's gives
 * the sum the chain would make of all of them.  Zeroed, it is 0; a term of
 * 2^62 or more in magnitude, or not a number, makes the sum NaN.  The sum
 * itself must stay below 2^67 in magnitude (beyond, it wraps): sums over
 * documents of probabilities and of probabilities times lengths (at most the
 * corpus's tokens) stay far below.
 */
typedef struct gnb_exact_sum
{
	uint64_t	lo;
	uint64_t	hi;
	int32_t		invalid;
} gnb_exact_sum;

extern void gnb_exact_add(gnb_exact_sum *sum, double term);
extern void gnb_exact_merge(gnb_exact_sum *sum, const gnb_exact_sum *part);
extern double gnb_exact_value(const gnb_exact_sum *sum);

typedef struct gnb_result
{
	int32_t		n_docs;
	int32_t		n_words;
	int32_t		n_classes;
	int32_t		chains;
	int32_t		sweeps;
	int32_t		kept;			/* kept sweeps per chain */
	/* n_docs x K, row-major; NULL for documents held elsewhere (gnb_corpus.doc_length) */
	double	   *label_prob;
	/*
	 * 2K: over the unlabelled documents, the sum of each class's probability
	 * (label_prob), then of its probability times the document's length
	 * (tokens), each an exact sum (gnb_exact_sum), so that whoever holds
	 * the documents makes the same; the label check's expected totals.  The
	 * chains' model's: a labels-only model that replaces it
	 * (gnb_labels_only_model) leaves it as it was, and nothing reads it after.
	 */
	double	   *unlabeled_mass;
	double	   *theta;			/* K x V, row-major: theta[k * V + w] */
	double	   *pi;				/* K */
	double	   *log_joint;		/* chains x sweeps: log P(L, W) per sweep (NULL with no_trace) */
	double	   *changed;		/* chains x sweeps: share of labels changed (NULL with no_trace) */
	int32_t    *last_labels;	/* n_docs: the last chain's labels at its end (as label_prob) */
	double		final_log_joint;	/* mean over chains of the last sweep's */
	double		r_hat;			/* of the log joint; NaN with one chain */
	/* diagnostics of the kept sweeps' log joints (docs/model.md) */
	/*
	 * The kept sweeps' log joints, thinned to at most GNB_KEPT_SERIES_MAX
	 * points per chain (gnb_kept_series): chains x kept_points, chain c's
	 * at kept_log_joint[c * kept_points + t], every kept_stride-th kept sweep
	 * from the first.  ESS and both R-hats are of this series.
	 */
	double	   *kept_log_joint;
	int32_t		kept_points;
	int32_t		kept_stride;
	double	   *ess;			/* chains: effective sample size per chain */
	double		ess_total;		/* their sum; NaN if not estimable */
	double		split_r_hat;	/* over 2 x chains half-chains; NaN if < 4 kept */
	int32_t    *changed_after_burn_in;	/* chains: labels changed after burn-in */
	int32_t    *locked;			/* chains: locked documents (GNB_LOCKED_CHANCE) */
	/*
	 * With several chains: the least, over chains c >= 1, of 1 - the mean
	 * over unlabelled documents of the total variation distance between
	 * chain c's label probabilities and the mean of chains 0 .. c-1's (after
	 * alignment).  1: every chain gives the same probabilities.  NaN with
	 * one chain or no unlabelled document.
	 */
	double		chain_agreement;
	/*
	 * Set by gnb_check_labels (NaN, -1 until then): the clamped documents'
	 * leave-one-out agreement with their labels, by the trained model and
	 * by the labels-only model; when the model is worse, a class whose
	 * documents it mostly puts in another.
	 */
	double		labels_agreement;
	double		labels_only_agreement;
	int32_t		drift_from;
	int32_t		drift_to;
	int32_t		warnings;		/* GNB_WARN_* bits */
	/* posterior means over kept sweeps and chains (the fixed value if not sampled) */
	double		gamma_theta;
	double		gamma_pi;
} gnb_result;

/*
 * The kept sweeps' log joints are held thinned, so that their memory does not
 * grow with the number of sweeps: every kept sweep while they fit in
 * GNB_KEPT_SERIES_MAX points, then every 2nd, 4th, ... (the stride doubles,
 * dropping every other point held, each time they would not fit).
 * gnb_kept_series gives, for `kept` kept sweeps, the number of points held
 * at the end (*stride: the final stride): the smallest power of two s with
 * ceil(kept / s) <= GNB_KEPT_SERIES_MAX, and ceil(kept / s).
 */
#define GNB_KEPT_SERIES_MAX 4096
extern int32_t gnb_kept_series(int64_t kept, int32_t *stride);

/*
 * Check a corpus and parameters; returns NULL if they are usable, else a
 * message naming the first problem.
 */
extern const char *gnb_check(const gnb_corpus *corpus, const gnb_params *params);

/*
 * An upper bound, in bytes, on what gnb_train allocates through hooks->alloc
 * at any one time for a corpus of this shape (n_docs unlabelled documents,
 * n_words words, n_classes classes, n_pairs document-word pairs in all) and
 * these parameters, result included.
 * The corpus itself is the caller's and not counted.  Callers check it
 * against their memory budget before they train.
 */
extern uint64_t gnb_memory_needed(int32_t n_docs, int32_t n_words, int32_t n_classes,
								  int64_t n_pairs, const gnb_params *params);

/*
 * Run params->chains chains and fill *result (allocated with hooks->alloc).
 * The corpus and parameters must have passed gnb_check.
 */
extern void gnb_train(const gnb_corpus *corpus, const gnb_params *params,
					  const gnb_hooks *hooks, gnb_result *result);

/*
 * One chain's outputs, to be combined with the other chains' afterwards: a
 * chain can run on its own (in another process, say) from the same corpus
 * and parameters, and the result depends only on the seed and the chain's
 * index, not on where or when it ran.
 */
typedef struct gnb_chain
{
	int32_t		chain;			/* its index: its random stream is the seed's, jumped this often */
	int32_t		kept;
	int32_t		sweeps;
	double	   *label_prob;		/* n_docs x K: the chain's estimates (unlabelled rows) */
	double	   *theta;			/* V x K word-major: theta[w * K + k] */
	double	   *pi;				/* K */
	double	   *kept_log_joint; /* kept_points: thinned as in gnb_result */
	int32_t		kept_points;
	int32_t		kept_stride;
	double	   *log_joint;		/* sweeps (NULL with no_trace) */
	double	   *changed;		/* sweeps (NULL with no_trace) */
	int32_t    *last_labels;	/* n_docs */
	double		last_log_joint;
	int64_t		changed_after_burn_in;
	int64_t		locked;			/* documents locked (GNB_LOCKED_CHANCE) */
	double		gamma_theta;	/* means over the kept sweeps */
	double		gamma_pi;
} gnb_chain;

/*
 * Run chain number `chain` (0 .. params->chains - 1) alone and fill *out
 * (allocated with hooks->alloc; release with gnb_chain_free).
 */
extern void gnb_train_chain(const gnb_corpus *corpus, const gnb_params *params,
							int32_t chain, const gnb_hooks *hooks, gnb_chain *out);
extern void gnb_chain_free(gnb_chain *chain, const gnb_hooks *hooks);

/*
 * Combine chains into a result: begin, add each chain in the order 0, 1,
 * ... (classes are aligned to chain 0's), end.  gnb_train is exactly
 * gnb_train_chain for every chain, each added as it ends.  The corpus and
 * parameters must stay valid until gnb_combine_end, which frees the
 * combiner; the result is then complete.
 *
 * A chain whose unlabelled documents others hold (nodes, gnb_nodes.h) is
 * added with label_prob and last_labels NULL: gnb_combine_add returns the
 * alignment (the chain's class k is the result's perm[k]; the combiner's
 * until the next add), with which the holders fold their documents'
 * estimates into their sums (gnb_fold_document, as the combiner folds its
 * own), and for every chain after the first the distance they sum goes to
 * gnb_combine_distance.  Such a corpus (gnb_corpus.doc_length) gets no
 * label_prob or last_labels (NULL: the holders keep their documents' means,
 * gnb_node_combine_end), and gnb_combine_end leaves unlabeled_mass to the
 * caller (it has no clamped document of its own, gnb_check).
 */
typedef struct gnb_combiner gnb_combiner;
extern gnb_combiner *gnb_combine_begin(const gnb_corpus *corpus, const gnb_params *params,
									   const gnb_hooks *hooks, gnb_result *result);
extern const int32_t *gnb_combine_add(gnb_combiner *combiner, const gnb_chain *chain);
extern void gnb_combine_distance(gnb_combiner *combiner, const gnb_exact_sum *distance);
extern void gnb_combine_end(gnb_combiner *combiner);

/*
 * One document's estimates by chain `chain` (K, in the chain's classes)
 * into its sum over the chains before (K, in the result's: perm as
 * gnb_combine_add gives it); returns, for chain > 0, its distance from
 * their mean (the sum of the K absolute differences; chain_agreement's
 * term).  gnb_mass_document adds a document's means (K) and their products
 * with its length to the 2K exact sums of unlabeled_mass.
 */
extern double gnb_fold_document(double *sum, const double *prob, int32_t K, int32_t chain,
								const int32_t *perm);
extern void gnb_mass_document(gnb_exact_sum *mass, const double *prob, double length,
							  int32_t K);

/* Release what gnb_train allocated in *result. */
extern void gnb_result_free(gnb_result *result, const gnb_hooks *hooks);

/*
 * log P(L, W | gamma) up to a constant that depends on neither L nor the
 * gammas, with theta and pi integrated out (docs/model.md, "The exact
 * posterior"), for the full labelling `labels` (every entry a class) and the
 * gammas of params.  Counts of unlabelled documents are weighted by
 * params->unlabeled_weight: with lambda < 1 this is the tempered density.
 */
extern double gnb_log_joint(const gnb_corpus *corpus, const gnb_params *params,
							const int32_t *labels);

/*
 * Effective sample size of a series x[0 .. n) by Geyer's initial monotone
 * sequence estimator (Geyer 1992): NaN if n < 4 or the series is constant.
 */
extern double gnb_ess(const double *x, int64_t n);

/*
 * Split R-hat (Gelman et al., BDA3 11.4) of m series of n values each, x[c * n
 * + t]: every series halved, the potential scale reduction over the 2m
 * halves.  NaN if n < 4; 1 for identical constant halves, infinity if the
 * halves are constant but differ.
 */
extern double gnb_split_r_hat(const double *x, int32_t m, int64_t n);

/*
 * The warnings (GNB_WARN_* bits) for these diagnostics: split R-hat above
 * GNB_R_HAT_LIMIT, ess_total below GNB_ESS_LIMIT, a chain with locked
 * documents, chain_agreement below GNB_AGREEMENT_LIMIT.  Nothing is judged
 * when nothing is sampled (no unlabelled document, no sampled gamma).
 */
extern int32_t gnb_diagnose(double split_r_hat, double ess_total,
							const int32_t *locked, int32_t chains,
							int32_t n_unlabeled, int sampled_gamma,
							double chain_agreement);

/* What one GNB_WARN_* bit suggests, and what helps. */
extern const char *gnb_warning_text(int32_t warning);

/*
 * The place of the largest of s[0 .. n), the first of equal ones (0 when n
 * is 0 or s[0] is NaN; a NaN after s[0] is passed over): the class a model
 * labels with, from its scores or probabilities.  Inline: the prediction
 * path calls it per row.
 */
static inline int32_t
gnb_argmax(const double *s, int32_t n)
{
	int32_t		best = 0;

	for (int32_t k = 1; k < n; k++)
		if (s[k] > s[best])
			best = k;
	return best;
}

/* Default hooks: calloc/free, no progress, no interrupts. */
extern const gnb_hooks gnb_default_hooks;

#endif							/* GNB_SAMPLER_H */
