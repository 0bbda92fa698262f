/*
 * gnb_label_check.h
 *	  Is a trained model worse than its labels alone?  The clamped documents
 *	  scored, each left out, by the trained model and by multinomial Naive
 *	  Bayes trained on the clamped documents only (docs/model.md, "Checking
 *	  the model against its labels").
 *
 * Pure C, no PostgreSQL headers, like gnb_sampler.h, whose types it takes.
 */
#ifndef GNB_LABEL_CHECK_H
#define GNB_LABEL_CHECK_H

#include "gnb_sampler.h"

/*
 * The model is worse than its labels when the labels-only model's agreement
 * exceeds the trained model's by more than the margin: GNB_CHECK_Z standard
 * errors of that paired difference, and at least GNB_CHECK_MIN_GAP.
 */
#define GNB_CHECK_Z 2.0
#define GNB_CHECK_MIN_GAP 0.02

typedef struct gnb_label_check
{
	int32_t		n;				/* clamped documents scored */
	int32_t		model_right;	/* the trained model's class is the label */
	int32_t		labels_right;	/* the labels-only model's class is the label */
	int32_t		only_model;		/* the trained model right, the other wrong */
	int32_t		only_labels;	/* the labels-only model right, the trained wrong */
	double		model_agreement;	/* model_right / n; NaN if n = 0 */
	double		labels_agreement;	/* labels_right / n */
	double		margin;			/* what the gap must exceed */
	int			worse;			/* labels_agreement - model_agreement > margin */
	/*
	 * When worse: a class most of whose scored documents the trained model
	 * puts in one other class (drift_to), the first such; -1 if none.
	 */
	int32_t		drift_from;
	int32_t		drift_to;
} gnb_label_check;

/*
 * Score the documents of `checked` that have a label (checked->label[j] >=
 * 0; their counts must be among the corpus's clamped counts: documents of
 * the corpus itself, or counted in corpus->extra_word_counts), each as if
 * it were unlabelled and left out of the counts:
 *   - by the trained model: result's theta-hat, its expected counts (the
 *     clamped counts, and the unlabelled documents' at weight lambda by
 *     their label probabilities: result->unlabeled_mass) with the document's word counts taken
 *     out, result's gammas;
 *   - by the labels-only model: posterior-mean theta and pi from the
 *     clamped counts with the document's word counts taken out, params'
 *     gammas.
 * The class totals (documents, tokens) keep the document: see the code.
 * NULL checked: the corpus's own clamped documents.  Memory from hooks.
 * The figures also go into result (labels_agreement, labels_only_agreement,
 * drift_from, drift_to), and GNB_WARN_LABELS into its warnings when the
 * model is worse.
 */
extern void gnb_check_labels(const gnb_corpus *corpus, const gnb_params *params,
							 gnb_result *result, const gnb_corpus *checked,
							 const gnb_hooks *hooks, gnb_label_check *out);

/*
 * Was the model clearly better than the labels alone: its agreement above
 * the labels-only model's by more than the margin?  (The default
 * unlabeled_weight keeps the unlabelled documents only then.)
 */
extern int	gnb_check_labels_better(const gnb_label_check *check);

/*
 * Make result the model of the clamped documents alone, computed, not
 * sampled: multinomial Naive Bayes with the posterior means of theta and pi
 * at unlabeled_weight 0.
 * theta-hat_kw = (L_kw + g) / (L_k + V g) and pi-hat_k = (C_k + g_pi) / (C +
 * K g_pi) from the clamped counts, each unlabelled document's label
 * probabilities those of multinomial Naive Bayes with them (as
 * gibbs_nb_predict gives), last_labels their argmax; g and g_pi are params'
 * (result's posterior means when sampled), as gnb_check_labels takes them
 * for the labels-only model.  The chains' diagnostics (R-hat, ESS, chain
 * agreement) stay as measured, of the chains that ran, but their warnings
 * go: this model is not theirs; labels_agreement becomes
 * labels_only_agreement.  Documents held elsewhere (corpus->doc_length)
 * keep the chains' probabilities here: their holders score them
 * (gnb_labels_only_doc).
 */
extern void gnb_labels_only_model(const gnb_corpus *corpus, const gnb_params *params,
								  gnb_result *result, const gnb_hooks *hooks);

/*
 * Where the documents are held elsewhere (gnb_corpus.doc_length), the
 * labels-only model's probabilities of one of them, as
 * gnb_labels_only_model gives them: theta class-major (K x V) and pi as it
 * left them in the result, clamped the corpus's clamped counts (V x K
 * word-major, or NULL), the document's n_pairs words and counts; s is K
 * doubles of scratch.  Fills prob (K) and returns the most probable class
 * (ties to the earlier).
 */
extern int32_t gnb_labels_only_doc(const double *theta, const double *pi, const double *clamped,
								   int32_t K, int32_t V, const int32_t *word,
								   const int32_t *count, int64_t n_pairs, double *s,
								   double *prob);

/* An upper bound on what gnb_check_labels allocates, in bytes. */
extern uint64_t gnb_check_labels_memory(int32_t n_words, int32_t n_classes);

#endif							/* GNB_LABEL_CHECK_H */
