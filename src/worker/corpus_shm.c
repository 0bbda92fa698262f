/*
 * corpus_shm.c
 *	  A job's corpus in a segment its workers map (chains.c, sweeps.c): the
 *	  compressed sparse rows, the labels, the clamped documents' counts, a
 *	  warm start's labels and the blocked sampler's document keys, as named
 *	  entries of the segment's shm_toc (keys GNB_CORPUS_KEY_*), estimated,
 *	  copied in and looked up the same way by both.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"

#include "storage/shm_toc.h"

/* Allocate and name an entry of the segment. */
void *
gnb_toc_put(shm_toc *toc, uint64 key, Size bytes)
{
	void	   *p = shm_toc_allocate(toc, bytes);

	shm_toc_insert(toc, key, p);
	return p;
}

/* Its entries' sizes and keys, for the segment's estimator. */
void
gnb_corpus_shm_estimate(shm_toc_estimator *e, const gnb_corpus *corpus, bool with_init)
{
	int32		D = corpus->n_docs;
	int64		nnz = corpus->doc_start[D];

	shm_toc_estimate_chunk(e, mul_size(D + 1, sizeof(int64)));
	shm_toc_estimate_chunk(e, mul_size(Max(nnz, 1), sizeof(int32)));
	shm_toc_estimate_chunk(e, mul_size(Max(nnz, 1), sizeof(int32)));
	shm_toc_estimate_chunk(e, mul_size(D + 1, sizeof(int32)));
	shm_toc_estimate_keys(e, 4);
	if (corpus->extra_word_counts)
	{
		shm_toc_estimate_chunk(e, mul_size(mul_size(corpus->n_words, corpus->n_classes),
										   sizeof(double)));
		shm_toc_estimate_chunk(e, mul_size(corpus->n_classes, sizeof(double)));
		shm_toc_estimate_keys(e, 2);
	}
	if (with_init && corpus->init_label)
	{
		shm_toc_estimate_chunk(e, mul_size(D + 1, sizeof(int32)));
		shm_toc_estimate_keys(e, 1);
	}
	if (corpus->doc_key)
	{
		shm_toc_estimate_chunk(e, mul_size(D + 1, sizeof(uint64)));
		shm_toc_estimate_keys(e, 1);
	}
}

/* Copy it in (a warm start's labels only with with_init). */
void
gnb_corpus_shm_put(shm_toc *toc, const gnb_corpus *corpus, bool with_init)
{
	int32		D = corpus->n_docs;
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	int64		nnz = corpus->doc_start[D];

	memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_DOC_START, sizeof(int64) * (D + 1)),
		   corpus->doc_start, sizeof(int64) * (D + 1));
	memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_WORD, sizeof(int32) * Max(nnz, 1)), corpus->word,
		   sizeof(int32) * nnz);
	memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_COUNT, sizeof(int32) * Max(nnz, 1)), corpus->count,
		   sizeof(int32) * nnz);
	memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_LABEL, sizeof(int32) * (D + 1)), corpus->label,
		   sizeof(int32) * D);
	if (corpus->extra_word_counts)
	{
		memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_EXTRA_WORDS, sizeof(double) * V * K),
			   corpus->extra_word_counts, sizeof(double) * V * K);
		memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_EXTRA_DOCS, sizeof(double) * K),
			   corpus->extra_doc_counts, sizeof(double) * K);
	}
	if (with_init && corpus->init_label)
		memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_INIT_LABEL, sizeof(int32) * (D + 1)),
			   corpus->init_label, sizeof(int32) * D);
	if (corpus->doc_key)
		memcpy(gnb_toc_put(toc, GNB_CORPUS_KEY_DOC_KEY, sizeof(uint64) * (D + 1)),
			   corpus->doc_key, sizeof(uint64) * D);
}

/*
 * The corpus as a worker reads it: the segment's entries, for a corpus of
 * this shape (has_extra: it has clamped counts; has_init: a warm start's
 * labels were put in; has_key: the documents' keys).
 */
void
gnb_corpus_shm_get(shm_toc *toc, int32 n_docs, int32 n_words, int32 n_classes, bool has_extra,
				   bool has_init, bool has_key, gnb_corpus *corpus)
{
	memset(corpus, 0, sizeof(*corpus));
	corpus->n_docs = n_docs;
	corpus->n_words = n_words;
	corpus->n_classes = n_classes;
	corpus->doc_start = shm_toc_lookup(toc, GNB_CORPUS_KEY_DOC_START, false);
	corpus->word = shm_toc_lookup(toc, GNB_CORPUS_KEY_WORD, false);
	corpus->count = shm_toc_lookup(toc, GNB_CORPUS_KEY_COUNT, false);
	corpus->label = shm_toc_lookup(toc, GNB_CORPUS_KEY_LABEL, false);
	if (has_extra)
	{
		corpus->extra_word_counts = shm_toc_lookup(toc, GNB_CORPUS_KEY_EXTRA_WORDS, false);
		corpus->extra_doc_counts = shm_toc_lookup(toc, GNB_CORPUS_KEY_EXTRA_DOCS, false);
	}
	if (has_init)
		corpus->init_label = shm_toc_lookup(toc, GNB_CORPUS_KEY_INIT_LABEL, false);
	if (has_key)
		corpus->doc_key = shm_toc_lookup(toc, GNB_CORPUS_KEY_DOC_KEY, false);
}
