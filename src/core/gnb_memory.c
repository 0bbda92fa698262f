/*
 * gnb_memory.c
 *	  The parameters checked (gnb_check) and the memory a training will
 *	  need, bounded before anything is allocated (gnb_memory_needed).
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void *
gnb_xalloc(const gnb_hooks *hooks, size_t n, size_t size)
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
	/* the blocked sampler with 0 < lambda < 1: the counts' two parts */
	if (keeps_split_counts(params))
		doubles += 2 * vk + 4 * K;
	/* per chain: the log joints' running sums, changed and locked counts */
	doubles += 8 * (uint64_t) params->chains;
	/*
	 * per document: lengths (the combiner's and the chain's); per class pair:
	 * the alignment's cost matrix
	 */
	doubles += 2 * D + K * K;
	/*
	 * K-sized vectors (C, Nk, S, priors, scores, sums, alignment scratch;
	 * the unlabelled documents' mass, 2K, and its exact sums, 6K)
	 */
	doubles += 40 * (K + 1);
	bytes = doubles * sizeof(double);
	/* int32 per document (labels, last labels, unlabelled index), per word */
	bytes += 4 * D * sizeof(int32_t) + 3 * V * sizeof(int32_t) + V;
	/* a byte per document: moved since burn-in */
	bytes += D;
	bytes += K * (sizeof(log_product) + 4 * sizeof(int32_t));
	/*
	 * paper and blocked, K = 2: the unlabelled documents' pairs (active word
	 * index and count; a copy unless they are packed in the lent words, at
	 * most two elements a pair), their offsets, the bits that say which rows
	 * of N or theta-hat are moved; while the shared state is set up, the
	 * active words' sort keys
	 */
	if ((params->sampler == GNB_SAMPLER_PAPER || params->sampler == GNB_SAMPLER_BLOCKED) && K == 2)
	{
		bytes += (uint64_t) (n_pairs > 0 ? n_pairs : 0) * 2 * sizeof(uint32_t) + sizeof(uint32_t);
		bytes += (D + 1) * (2 * sizeof(int64_t) + sizeof(int32_t) + 1);
		bytes += V * sizeof(active_key) + V * K / 8 + 1;
	}
	/*
	 * blocked: the labels drawn before they are applied, their predictive
	 * probabilities (lambda < 1), the blocks' sums, each block's first word
	 * and work, its words' sort keys (log theta is counted above; log pi,
	 * K + 1, among the K-sized vectors), the scratch
	 */
	/*
	 * and its documents as a node (gnb_node.c): each active entry's change
	 * in a sweep, the entries touched and their changes (at most V x K
	 * each), its view of the chain's K-sized vectors
	 */
	if (params->sampler == GNB_SAMPLER_BLOCKED)
		bytes += 3 * vk * sizeof(int64_t) + 2 * K * sizeof(int64_t) +
			6 * K * sizeof(double) + K * sizeof(log_product) + 512;
	if (params->sampler == GNB_SAMPLER_BLOCKED)
		bytes += D * sizeof(int32_t) +
			((params->unlabeled_weight != 1.0 ? D * K : 0) + K * (V / GNB_BLOCKED_WORDS + 1)) *
			sizeof(double) +
			(V / GNB_BLOCKED_WORDS + 2) * (sizeof(int32_t) + sizeof(int64_t)) +
			V * sizeof(active_key) +
			GNB_BLOCKED_WORK(K) * sizeof(double);
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
	if (params->sampler != GNB_SAMPLER_PAPER && params->sampler != GNB_SAMPLER_COLLAPSED &&
		params->sampler != GNB_SAMPLER_BLOCKED)
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
	if (params->sampler == GNB_SAMPLER_BLOCKED && corpus->n_classes > GNB_BLOCKED_BUF)
		return "the blocked sampler takes at most 2048 classes";
	/* a keyed draw's counter holds the chain in 16 bits (gnb_rng.h) */
	if (params->sampler == GNB_SAMPLER_BLOCKED && params->chains > 65536)
		return "the blocked sampler takes at most 65536 chains";
	if (!(params->gamma_pi > 0.0 && params->gamma_pi <= GNB_GAMMA_LIMIT))
		return "gamma_pi must be positive and at most " GNB_GAMMA_LIMIT_TEXT;
	if (!(params->gamma_theta > 0.0 && params->gamma_theta <= GNB_GAMMA_LIMIT))
		return "gamma_theta must be positive and at most " GNB_GAMMA_LIMIT_TEXT;
	if (!(params->unlabeled_weight >= 0.0 && params->unlabeled_weight <= 1.0))
		return "unlabeled_weight must be between 0 and 1";
	if (params->gamma_grid)
	{
		if (params->n_gamma_grid < 1 || params->n_gamma_grid > 64)
			return "a gamma grid needs 1 to 64 points";
		for (int32_t i = 0; i < params->n_gamma_grid; i++)
			if (!(params->gamma_grid[i] > 0.0 && params->gamma_grid[i] <= GNB_GAMMA_LIMIT))
				return "gamma grid points must be positive and at most " GNB_GAMMA_LIMIT_TEXT;
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
	/* a part of a corpus split over nodes (gnb_nodes.h): only unlabelled documents, all counted */
	if (corpus->all_unlabeled_count)
	{
		if (params->sampler != GNB_SAMPLER_BLOCKED)
			return "only the blocked sampler splits a corpus over nodes";
		if (corpus->all_n_unlabeled < corpus->n_docs)
			return "a part of a corpus has more documents than the whole";
		for (int32_t w = 0; w < corpus->n_words; w++)
			if (corpus->all_unlabeled_count[w] < 0)
				return "the whole corpus's word counts must not be negative";
		for (int32_t j = 0; j < corpus->n_docs; j++)
			if (corpus->label[j] != -1)
				return "a part of a corpus holds only unlabelled documents";
		for (int64_t p = 0; p < corpus->doc_start[corpus->n_docs]; p++)
			if (corpus->all_unlabeled_count[corpus->word[p]] < corpus->count[p])
				return "a part of a corpus has more of a word than the whole";
	}
	if (corpus->doc_length &&
		(corpus->all_unlabeled_count == NULL || corpus->doc_start[corpus->n_docs] != 0))
		return "document lengths are for documents held elsewhere, without their pairs";
	return NULL;
}
