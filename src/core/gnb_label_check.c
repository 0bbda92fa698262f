/*
 * gnb_label_check.c
 *	  The trained model against its labels alone: see gnb_label_check.h and
 *	  docs/model.md, "Checking the model against its labels".
 *
 * With few labels, the unlabelled documents can pull a model away from the
 * classes the labels name: a chain that settled in a class-swapped mode, or
 * data whose strongest structure is not the labels' (the posterior itself
 * then prefers another partition).  Neither shows in the chain's own
 * diagnostics.  What shows it is the labels themselves: a model that puts
 * its own labelled documents, each left out, in other classes more often
 * than Naive Bayes on the labelled documents alone does has lost the labels.
 */
#include "gnb_label_check.h"

#include <math.h>
#include <string.h>

uint64_t
gnb_check_labels_memory(int32_t n_words, int32_t n_classes)
{
	uint64_t	K = (uint64_t) n_classes;

	/* the clamped counts (V x K) if some are documents, K x K confusion, K vectors */
	return ((uint64_t) n_words * K + 1) * sizeof(double) + K * K * sizeof(int64_t) +
		8 * (K + 1) * sizeof(double) + 64 * 8;
}

/*
 * The clamped counts, V x K word-major: corpus->extra_word_counts, or when
 * some documents of the corpus are clamped a sum made in *own (release it);
 * NULL if there are none.  docs and tokens (K, zeroed) get the clamped
 * documents and tokens per class.
 */
static const double *
clamped_counts(const gnb_corpus *corpus, const gnb_hooks *hooks, double **own,
			   double *docs, double *tokens)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const double *clamped;
	int			corpus_clamped = 0;

	*own = NULL;
	for (int32_t j = 0; j < corpus->n_docs; j++)
		if (corpus->label[j] >= 0)
			corpus_clamped = 1;
	if (corpus_clamped)
	{
		*own = hooks->alloc(((size_t) V * K + 1) * sizeof(double), hooks->arg);
		if (corpus->extra_word_counts)
			memcpy(*own, corpus->extra_word_counts, (size_t) V * K * sizeof(double));
		for (int32_t j = 0; j < corpus->n_docs; j++)
			if (corpus->label[j] >= 0)
				for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
					(*own)[(int64_t) corpus->word[p] * K + corpus->label[j]] += corpus->count[p];
	}
	clamped = *own ? *own : corpus->extra_word_counts;
	for (int32_t j = 0; j < corpus->n_docs; j++)
		if (corpus->label[j] >= 0)
			docs[corpus->label[j]] += 1.0;
	if (corpus->extra_doc_counts)
		for (int32_t k = 0; k < K; k++)
			docs[k] += corpus->extra_doc_counts[k];
	if (clamped)
		for (int64_t i = 0; i < (int64_t) V * K; i++)
			tokens[i % K] += clamped[i];
	return clamped;
}

/* The clamped vocabulary: words some clamped document has. */
static int32_t
clamped_vocabulary(const double *clamped, int32_t V, int32_t K)
{
	int32_t		n = 0;

	for (int32_t w = 0; clamped && w < V; w++)
		for (int32_t k = 0; k < K; k++)
			if (clamped[(int64_t) w * K + k] > 0.0)
			{
				n++;
				break;
			}
	return n;
}

/*
 * The check's verdict from its counts: both agreements, the margin (the
 * paired difference's standard error, at least GNB_CHECK_MIN_GAP), worse or
 * not, and when worse, the first class most of whose checked documents the
 * model puts in one other class (drift_from, drift_to).
 */
static void
conclude(gnb_label_check *out, const int64_t *confusion, int32_t K)
{
	if (out->n > 0)
	{
		double		n = out->n;
		double		b = out->only_labels;
		double		c = out->only_model;
		double		se = sqrt(fmax(b + c - (b - c) * (b - c) / n, 0.0)) / n;

		out->model_agreement = out->model_right / n;
		out->labels_agreement = out->labels_right / n;
		out->margin = fmax(GNB_CHECK_Z * se, GNB_CHECK_MIN_GAP);
		out->worse = out->labels_agreement - out->model_agreement > out->margin;
	}
	else
	{
		out->model_agreement = out->labels_agreement = NAN;
		out->margin = NAN;
	}
	if (out->worse)
		for (int32_t y = 0; y < K && out->drift_from < 0; y++)
		{
			int64_t		total = 0;

			for (int32_t k = 0; k < K; k++)
				total += confusion[(int64_t) y * K + k];
			for (int32_t k = 0; k < K; k++)
				if (k != y && 2 * confusion[(int64_t) y * K + k] > total)
				{
					out->drift_from = y;
					out->drift_to = k;
					break;
				}
		}
}

/* A word's clamped count over all classes. */
static double
clamped_total(const double *clamped, int32_t w, int32_t K)
{
	double		n = 0.0;

	for (int32_t k = 0; k < K; k++)
		n += clamped[(int64_t) w * K + k];
	return n;
}

void
gnb_check_labels(const gnb_corpus *corpus, const gnb_params *params,
				 gnb_result *result, const gnb_corpus *checked,
				 const gnb_hooks *hooks, gnb_label_check *out)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const double lambda = params->unlabeled_weight;
	/* the labels-only model's gammas: gnb_labels_only_model's */
	const double g = params->sample_gamma_theta ? result->gamma_theta : params->gamma_theta;
	const double gp = params->sample_gamma_pi ? result->gamma_pi : params->gamma_pi;
	const double mg = result->gamma_theta;
	const double mgp = result->gamma_pi;
	double	   *own;			/* the clamped counts, when some are documents */
	const double *clamped;
	double	   *docs,			/* K: clamped documents */
			   *tokens,			/* K: clamped tokens */
			   *model_docs,		/* K: the model's expected documents */
			   *model_tokens,	/* K: and tokens */
			   *s_model,
			   *s_labels;
	int64_t    *confusion;
	int32_t		clamped_words;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	if (checked == NULL)
		checked = corpus;
	memset(out, 0, sizeof(*out));
	out->drift_from = out->drift_to = -1;
	docs = hooks->alloc(6 * (size_t) K * sizeof(double), hooks->arg);
	tokens = docs + K;
	model_docs = tokens + K;
	model_tokens = model_docs + K;
	s_model = model_tokens + K;
	s_labels = s_model + K;
	confusion = hooks->alloc((size_t) K * K * sizeof(int64_t), hooks->arg);

	clamped = clamped_counts(corpus, hooks, &own, docs, tokens);
	clamped_words = clamped_vocabulary(clamped, V, K);

	/*
	 * the model's expected totals: the unlabelled documents' as the combiner
	 * (or their holders) summed them
	 */
	for (int32_t k = 0; k < K; k++)
	{
		model_docs[k] = docs[k] + lambda * result->unlabeled_mass[k];
		model_tokens[k] = tokens[k] + lambda * result->unlabeled_mass[K + k];
	}

	for (int32_t j = 0; j < checked->n_docs; j++)
	{
		const int32_t y = checked->label[j];
		double		length = 0.0;
		int32_t		by_model,
					by_labels;

		/*
		 * The labels-only model is the one gibbs_nb_train would make of the
		 * other clamped documents: its vocabulary is their words, and a word
		 * only this document has is unknown to it (ignored, as
		 * gibbs_nb_predict ignores unknown words).
		 */
		int32_t		vocabulary = clamped_words;
		double		known_length = 0.0;

		if (y < 0 || y >= K || clamped == NULL)
			continue;
		if (hooks->check_interrupts && j % 1024 == 0)
			hooks->check_interrupts(hooks->arg);

		for (int64_t p = checked->doc_start[j]; p < checked->doc_start[j + 1]; p++)
		{
			length += checked->count[p];
			if (clamped_total(clamped, checked->word[p], K) > checked->count[p])
				known_length += checked->count[p];
			else
				vocabulary--;
		}
		for (int32_t k = 0; k < K; k++)
		{
			/*
			 * Only the word counts lose the left-out document's: taking it
			 * out of its class's document or token total too would, for a
			 * document whose words say little, name the other class (the
			 * prior) or its own (theta of rare words), and a handful of
			 * labelled documents would look worse or better than they are
			 * beside a model with hundreds.
			 */
			s_labels[k] = log(docs[k] + gp) -
				(known_length > 0.0 ? known_length * log(tokens[k] + vocabulary * g) : 0.0);
			s_model[k] = log(model_docs[k] + mgp) - length * log(model_tokens[k] + V * mg);
		}
		for (int64_t p = checked->doc_start[j]; p < checked->doc_start[j + 1]; p++)
		{
			const int32_t w = checked->word[p];
			const double n = checked->count[p];
			const int	known = clamped_total(clamped, w, K) > n;

			for (int32_t k = 0; k < K; k++)
			{
				double		out_n = k == y ? n : 0.0;
				/* the model's expected count of w in k plus g: theta-hat's numerator */
				double		m = result->theta[(int64_t) k * V + w] * (model_tokens[k] + V * mg);

				if (known)
					s_labels[k] += n * log(fmax(clamped[(int64_t) w * K + k] - out_n, 0.0) + g);
				s_model[k] += n * log(fmax(m - out_n, mg));
			}
		}
		by_model = gnb_argmax(s_model, K);
		by_labels = gnb_argmax(s_labels, K);
		out->n++;
		out->model_right += by_model == y;
		out->labels_right += by_labels == y;
		out->only_model += by_model == y && by_labels != y;
		out->only_labels += by_labels == y && by_model != y;
		confusion[(int64_t) y * K + by_model]++;
	}

	conclude(out, confusion, K);
	result->labels_agreement = out->model_agreement;
	result->labels_only_agreement = out->labels_agreement;
	result->drift_from = out->drift_from;
	result->drift_to = out->drift_to;
	if (out->worse)
		result->warnings |= GNB_WARN_LABELS;
	if (own)
		hooks->release(own, hooks->arg);
	hooks->release(confusion, hooks->arg);
	hooks->release(docs, hooks->arg);
}

int
gnb_check_labels_better(const gnb_label_check *check)
{
	return check->n > 0 &&
		check->model_agreement - check->labels_agreement > check->margin;
}

/*
 * One unlabelled document under a labels-only model (gnb_label_check.h):
 * log pi-hat_k + sum_w n_w log theta-hat_kw over the clamped words (the
 * others' terms are the same in every class), normalised: the version
 * labels its own unlabelled documents as gibbs_nb_predict labels new ones.
 */
int32_t
gnb_labels_only_doc(const double *theta, const double *pi, const double *clamped,
					int32_t K, int32_t V, const int32_t *word, const int32_t *count,
					int64_t n_pairs, double *s, double *prob)
{
	double		max = -INFINITY;
	double		total = 0.0;

	for (int32_t k = 0; k < K; k++)
		s[k] = log(pi[k]);
	for (int64_t p = 0; p < n_pairs; p++)
		if (clamped && clamped_total(clamped, word[p], K) > 0.0)
			for (int32_t k = 0; k < K; k++)
				s[k] += count[p] * log(theta[(int64_t) k * V + word[p]]);
	for (int32_t k = 0; k < K; k++)
		if (s[k] > max)
			max = s[k];
	for (int32_t k = 0; k < K; k++)
		total += (s[k] = exp(s[k] - max));
	for (int32_t k = 0; k < K; k++)
		prob[k] = s[k] / total;
	return gnb_argmax(s, K);
}

void
gnb_labels_only_model(const gnb_corpus *corpus, const gnb_params *params,
					  gnb_result *result, const gnb_hooks *hooks)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const double g = params->sample_gamma_theta ? result->gamma_theta : params->gamma_theta;
	const double gp = params->sample_gamma_pi ? result->gamma_pi : params->gamma_pi;
	double	   *own;
	const double *clamped;
	double	   *docs,
			   *tokens,
			   *s;
	double		all_docs = 0.0;
	double		most_tokens = 0.0;
	double		other;
	int32_t		clamped_words;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	docs = hooks->alloc(3 * (size_t) K * sizeof(double), hooks->arg);
	tokens = docs + K;
	s = tokens + K;
	clamped = clamped_counts(corpus, hooks, &own, docs, tokens);
	clamped_words = clamped_vocabulary(clamped, V, K);
	for (int32_t k = 0; k < K; k++)
	{
		all_docs += docs[k];
		if (tokens[k] > most_tokens)
			most_tokens = tokens[k];
	}
	/*
	 * The model gibbs_nb_train makes of the clamped documents alone has
	 * their words for its vocabulary.  Here the vocabulary is the corpus's:
	 * each other word gets, in every class, the probability it would have
	 * in the class with the most clamped tokens, g / (L_max + V g), the
	 * same in every class, so that it says nothing of the class; the
	 * clamped words share the rest as that model's theta-hat.
	 */
	other = clamped_words < V ? g / (most_tokens + V * g) : 0.0;
	for (int32_t k = 0; k < K; k++)
	{
		double		rest = 1.0 - (V - clamped_words) * other;

		result->pi[k] = (docs[k] + gp) / (all_docs + K * gp);
		for (int32_t w = 0; w < V; w++)
		{
			double		n = clamped ? clamped[(int64_t) w * K + k] : 0.0;

			result->theta[(int64_t) k * V + w] =
				clamped && clamped_total(clamped, w, K) > 0.0 ?
				rest * (n + g) / (tokens[k] + clamped_words * g) : other;
		}
	}
	/* documents held elsewhere (doc_length): whoever holds them scores them */
	for (int32_t j = 0; j < (corpus->doc_length ? 0 : corpus->n_docs); j++)
	{
		if (corpus->label[j] >= 0)
			continue;
		if (hooks->check_interrupts && j % 1024 == 0)
			hooks->check_interrupts(hooks->arg);
		result->last_labels[j] =
			gnb_labels_only_doc(result->theta, result->pi, clamped, K, V,
								corpus->word + corpus->doc_start[j],
								corpus->count + corpus->doc_start[j],
								corpus->doc_start[j + 1] - corpus->doc_start[j], s,
								result->label_prob + (int64_t) j * K);
	}
	/*
	 * The chains' diagnostics stay, as measured (they describe the chains
	 * whose trace is kept), but their warnings go: this model is not
	 * theirs.  Its agreement with its labels is the labels-only model's.
	 */
	result->warnings &= ~(GNB_WARN_R_HAT | GNB_WARN_ESS | GNB_WARN_STUCK | GNB_WARN_CHAINS |
						  GNB_WARN_LABELS);
	result->labels_agreement = result->labels_only_agreement;
	result->drift_from = result->drift_to = -1;
	if (own)
		hooks->release(own, hooks->arg);
	hooks->release(docs, hooks->arg);
}
