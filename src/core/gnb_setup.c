/*
 * gnb_setup.c
 *	  What every chain of a training shares, made once: the corpus packed
 *	  into pairs, the active words, the start from the labels, the counts
 *	  of the clamped documents.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
	active_key *keys = gnb_xalloc(hooks, sh->n_active > 0 ? sh->n_active : 1, sizeof(active_key));

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
 * blocked: the active words in order of their total count over the
 * classes, which moving documents never changes, ties by word id: as in
 * sort_active, the theta step's draws of one method and number of
 * exponentials then come one after another.  With two classes (log theta
 * one log-odds an active word, in this order) the order is global and the
 * blocks are its runs of GNB_BLOCKED_WORDS words, so that the label
 * phase's frequent words lie together in log theta as paper's do (each
 * block of word ids sorted on its own scattered them over all the blocks:
 * 2.72-2.75 ms a sweep against 2.67-2.70 in bench_core, lambda = 0.3,
 * docs/performance.md); with more, log theta and N are rows by word id,
 * and each block of word ids is sorted within itself, so that the theta
 * step writes near where it reads.  The order is a function of the corpus alone, so every process
 * draws a block alike.  block_active is set here; active takes the order
 * and active_pos follows it.
 */
static void
sort_blocks(run_shared *sh, const double *labelled_count)
{
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const int32_t nb = gnb_word_blocks(sh);
	const double lambda = sh->params->unlabeled_weight;
	active_key *keys = gnb_xalloc(sh->hooks, sh->n_active > 0 ? sh->n_active : 1,
								  sizeof(active_key));

	/*
	 * a word's total: its labelled count and lambda times its unlabelled
	 * count, that summed as an integer first (lambda x count summed
	 * document by document would round by the documents' order); a part's
	 * from the whole corpus's (all_unlabeled_count), as every part lays the
	 * words out alike
	 */
	for (int32_t i = 0; i < sh->n_active; i++)
	{
		keys[i].total = c->all_unlabeled_count ?
			(double) c->all_unlabeled_count[sh->active[i]] : 0.0;
		keys[i].first = sh->active[i];
	}
	for (int32_t i = 0; i < sh->n_unlabeled && !c->all_unlabeled_count; i++)
	{
		int32_t		j = sh->unlabeled[i];

		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
			keys[sh->active_pos[c->word[p]]].total += c->count[p];
	}
	for (int32_t i = 0; i < sh->n_active; i++)
	{
		int32_t		w = sh->active[i];
		double		labelled = 0.0;

		if (labelled_count)
			for (int32_t k = 0; k < K; k++)
				labelled += labelled_count[(int64_t) w * K + k];
		keys[i].total = labelled + lambda * keys[i].total;
	}
	sh->block_active = gnb_xalloc(sh->hooks, (size_t) nb + 1, sizeof(int32_t));
	if (K == 2)
	{
		qsort(keys, sh->n_active, sizeof(active_key), cmp_active_key);
		for (int32_t b = 0; b <= nb; b++)
			sh->block_active[b] = b < nb ? b * GNB_BLOCKED_WORDS : sh->n_active;
	}
	else
	{
		/* active is by word id: each block's words follow the last's */
		for (int32_t i = 0, b = 0; b <= nb; b++)
		{
			while (i < sh->n_active && sh->active[i] < b * GNB_BLOCKED_WORDS)
				i++;
			sh->block_active[b] = i;
		}
		for (int32_t b = 0; b < nb; b++)
			qsort(keys + sh->block_active[b], sh->block_active[b + 1] - sh->block_active[b],
				  sizeof(active_key), cmp_active_key);
	}
	for (int32_t i = 0; i < sh->n_active; i++)
	{
		sh->active[i] = (int32_t) keys[i].first;
		sh->active_pos[sh->active[i]] = i;
	}
	/*
	 * Each block's work: with two classes and an integer starting
	 * gamma_theta, a word whose shapes are integers that share their
	 * exponentials (draw_gamma_pairs) takes less than one drawn by
	 * Marsaglia and Tsang (the frequent words, the last blocks with two
	 * classes, are mostly the latter); otherwise a word is a word.  An
	 * estimate: gamma_theta may be sampled and move; only the split's speed
	 * depends on it.
	 */
	sh->block_work = gnb_xalloc(sh->hooks, (size_t) nb + 1, sizeof(int64_t));
	for (int32_t b = 0; b < nb; b++)
	{
		int64_t		work = 0;

		for (int32_t i = sh->block_active[b]; i < sh->block_active[b + 1]; i++)
		{
			const double g = sh->params->gamma_theta;
			const double shapes = keys[i].total + K * g;

			if (K != 2 || g != (double) (int) g)
				work += 1;
			else if (shapes <= GNB_PAIR_EXP_MAX && shapes == (double) (int) shapes)
				work += GNB_BLOCKED_PAIR_WORK;
			else
				work += GNB_BLOCKED_MT_WORK;
		}
		sh->block_work[b + 1] = sh->block_work[b] + work;
	}
	sh->hooks->release(keys, sh->hooks->arg);
}

/*
 * paper and blocked, K = 2: the unlabelled documents' pairs packed
 * (run_shared.dense), in place in the lent word array when it is there, no
 * count needs an escape and the sampler is paper, else into an array of
 * their own (the blocked sampler's helpers read the same corpus, maybe the
 * same memory, while the chain's process sets up).  index: each word's
 * index in active.
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
	sh->dense_in_place = sh->params->sampler == GNB_SAMPLER_PAPER &&
		corpus->lent_word != NULL && corpus->lent_word == corpus->word &&
		sh->n_dense == n_pairs;
	sh->dense_start = gnb_xalloc(hooks, (size_t) sh->n_unlabeled + 1, sizeof(int64_t));
	sh->dense_ones = gnb_xalloc(hooks, (size_t) sh->n_unlabeled + 1, sizeof(int32_t));
	sh->dense_escape = gnb_xalloc(hooks, (size_t) sh->n_unlabeled + 1, 1);
	if (sh->dense_in_place)
	{
		/*
		 * Each document's pairs where its words were: its words of count 1
		 * first, each written at or before where it is read; the others
		 * wait in `rest` meanwhile.
		 */
		uint32_t   *rest = gnb_xalloc(hooks, (size_t) sh->max_doc_pairs + 1, sizeof(uint32_t));
		uint32_t   *dense = (uint32_t *) corpus->lent_word;

		sh->dense = dense;
		sh->dense_end = gnb_xalloc(hooks, (size_t) sh->n_unlabeled + 1, sizeof(int64_t));
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
	sh->dense = gnb_xalloc(hooks, (size_t) sh->n_dense + 1, sizeof(uint32_t));
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
void
gnb_restore_words(const run_shared *sh)
{
	const gnb_corpus *corpus = sh->corpus;
	const gnb_hooks *hooks = sh->hooks;
	uint32_t   *ones = gnb_xalloc(hooks, (size_t) sh->max_doc_pairs + 1, sizeof(uint32_t));
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
	double	   *docs = gnb_xalloc(hooks, K, sizeof(double));
	double	   *log_total = gnb_xalloc(hooks, K, sizeof(double));

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
	sh->start_prob = gnb_xalloc(hooks, (size_t) sh->n_unlabeled * K + 1, sizeof(double));
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
 * for a chain to run (for_chain) the paper sampler's dense pairs too, and
 * for a chain or a helper of the blocked sampler its blocks' order and,
 * with K = 2, its dense pairs.
 */
void
gnb_setup_shared(run_shared *sh, const gnb_corpus *corpus, const gnb_params *params,
			 const gnb_hooks *hooks, int for_chain)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	const int	packed = K == 2 &&
		((for_chain == GNB_SETUP_CHAIN && params->sampler == GNB_SAMPLER_PAPER) ||
		 (for_chain != GNB_SETUP_COMBINE && params->sampler == GNB_SAMPLER_BLOCKED));
	char	   *is_active = gnb_xalloc(hooks, V > 0 ? V : 1, 1);
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
	sh->unlabeled = gnb_xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));
	sh->doc_length = gnb_xalloc(hooks, D > 0 ? D : 1, sizeof(double));
	sh->inactive_count = gnb_xalloc(hooks, K, sizeof(double));
	sh->class_clamped = gnb_xalloc(hooks, K, 1);
	for (int32_t j = 0; j < D; j++)
		if (corpus->label[j] >= 0)
			clamped_docs = 1;
	/*
	 * The clamped counts, V x K: the extra counts themselves when no
	 * document of the corpus is clamped (as in the server, which gives
	 * them only so), else a sum of both; NULL if there are none.
	 */
	if (clamped_docs)
		clamped_count = gnb_xalloc(hooks, (size_t) V * K + 1, sizeof(double));
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
	/* a part of the corpus: the whole's unlabelled documents decide the active words */
	sh->n_unlabeled_all = sh->n_unlabeled;
	if (corpus->all_unlabeled_count)
	{
		sh->n_unlabeled_all = corpus->all_n_unlabeled;
		for (int32_t w = 0; w < V; w++)
			is_active[w] = corpus->all_unlabeled_count[w] > 0;
	}
	sh->all_classes_clamped = 1;
	for (int32_t k = 0; k < K; k++)
		if (!sh->class_clamped[k])
			sh->all_classes_clamped = 0;
	/* before the words are packed; a class with no label: a uniform start */
	if (for_chain == GNB_SETUP_CHAIN && params->init == GNB_INIT_LABELS && sh->n_unlabeled > 0 &&
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

		sh->active = gnb_xalloc(hooks, sh->n_active > 0 ? sh->n_active : 1, sizeof(int32_t));
		/* the index in active of each word, -1 for an inactive one */
		sh->active_pos = gnb_xalloc(hooks, V > 0 ? V : 1, sizeof(int32_t));
		for (int32_t w = 0; w < V; w++)
		{
			sh->active_pos[w] = is_active[w] ? n : -1;
			if (is_active[w])
				sh->active[n++] = w;
		}
		if (params->sampler == GNB_SAMPLER_BLOCKED)
			sort_blocks(sh, labelled_count);
		if (packed)
		{
			if (params->sampler == GNB_SAMPLER_PAPER)
			{
				sort_active(sh, labelled_count);
				for (int32_t i = 0; i < sh->n_active; i++)
					sh->active_pos[sh->active[i]] = i;
			}
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

void
gnb_release_shared(run_shared *sh)
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
	if (sh->block_active)
	{
		hooks->release(sh->block_active, hooks->arg);
		hooks->release(sh->block_work, hooks->arg);
	}
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
int
gnb_lend_counts(const gnb_corpus *corpus, const gnb_params *params)
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
