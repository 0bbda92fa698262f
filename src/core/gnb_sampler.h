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
	GNB_SAMPLER_COLLAPSED		/* theta and pi integrated out */
} gnb_sampler_kind;

/*
 * Documents as compressed sparse rows: the distinct words of document j are
 * word[doc_start[j] .. doc_start[j + 1]), with their counts in count[].
 * label[j] is the clamped class of document j, or -1 if it is unlabelled.
 */
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
	/*
	 * Nonzero: keep no chains x sweeps trace arrays (result->log_joint and
	 * ->changed are NULL); the caller takes each sweep from hooks->progress.
	 * R-hat and the final log joint come from running sums either way.
	 */
	int32_t		no_trace;
} gnb_params;

typedef struct gnb_hooks
{
	/* zero-filled allocation; must not return NULL (may longjmp instead) */
	void	   *(*alloc) (size_t size, void *arg);
	void		(*release) (void *ptr, void *arg);
	/* after every sweep of every chain; may longjmp to abandon the run */
	void		(*progress) (void *arg, int chain, int sweep,
							 double log_joint, double changed);
	/* every few thousand documents within a sweep; may longjmp */
	void		(*check_interrupts) (void *arg);
	void	   *arg;
} gnb_hooks;

typedef struct gnb_result
{
	int32_t		n_docs;
	int32_t		n_words;
	int32_t		n_classes;
	int32_t		chains;
	int32_t		sweeps;
	int32_t		kept;			/* kept sweeps per chain */
	double	   *label_prob;		/* n_docs x K, row-major */
	double	   *theta;			/* K x V, row-major: theta[k * V + w] */
	double	   *pi;				/* K */
	double	   *log_joint;		/* chains x sweeps: log P(L, W) per sweep (NULL with no_trace) */
	double	   *changed;		/* chains x sweeps: share of labels changed (NULL with no_trace) */
	int32_t    *last_labels;	/* n_docs: the last chain's labels at its end */
	double		final_log_joint;	/* mean over chains of the last sweep's */
	double		r_hat;			/* of the log joint; NaN with one chain */
} gnb_result;

/*
 * Check a corpus and parameters; returns NULL if they are usable, else a
 * message naming the first problem.
 */
extern const char *gnb_check(const gnb_corpus *corpus, const gnb_params *params);

/*
 * An upper bound, in bytes, on what gnb_train allocates through hooks->alloc
 * at any one time for a corpus of this shape (n_docs unlabelled documents,
 * n_words words, n_classes classes) and these parameters, result included.
 * The corpus itself is the caller's and not counted.  Callers check it
 * against their memory budget before they train.
 */
extern uint64_t gnb_memory_needed(int32_t n_docs, int32_t n_words, int32_t n_classes,
								  const gnb_params *params);

/*
 * Run params->chains chains and fill *result (allocated with hooks->alloc).
 * The corpus and parameters must have passed gnb_check.
 */
extern void gnb_train(const gnb_corpus *corpus, const gnb_params *params,
					  const gnb_hooks *hooks, gnb_result *result);

/* Release what gnb_train allocated in *result. */
extern void gnb_result_free(gnb_result *result, const gnb_hooks *hooks);

/*
 * log P(L, W) up to a constant that does not depend on L, with theta and pi
 * integrated out (docs/model.md, "The exact posterior"), for the full labelling
 * `labels` (every entry a class).  Counts of unlabelled documents are
 * weighted by params->unlabeled_weight, as in the samplers.
 */
extern double gnb_log_joint(const gnb_corpus *corpus, const gnb_params *params,
							const int32_t *labels);

/* Default hooks: calloc/free, no progress, no interrupts. */
extern const gnb_hooks gnb_default_hooks;

#endif							/* GNB_SAMPLER_H */
