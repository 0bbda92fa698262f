/*
 * vocab_index.h
 *	  A read-only token -> log theta-hat index for scoring documents fast.
 *
 * Built once per cached model version (predict.c).  Open addressing over
 * entries that hold a word's K log theta-hat values, its first 8 bytes and
 * its length, so that a lookup touches one cache line (and, for a word
 * longer than 8 bytes, its remaining bytes); documents are scored in blocks
 * of tokens whose entries are prefetched before they are read.  Lookups
 * compare the whole token: a hash collision never mislabels.
 */
#ifndef GNB_VOCAB_INDEX_H
#define GNB_VOCAB_INDEX_H

#include "postgres.h"

#include "utils/array.h"

typedef struct GnbVocabIndex
{
	char	   *entries;		/* mask + 1 entries of entry_size bytes: see vocab_index.c */
	char	   *tails;			/* the bytes after the first 8 of the longer words */
	uint32		mask;			/* number of entries - 1 */
	uint32		entry_size;
	int32		n_classes;
	int32		n_words;
} GnbVocabIndex;

/*
 * Build in the current memory context from the vocabulary (a text[] of
 * distinct words without NULLs) and log theta-hat, V x K word-major.
 */
extern GnbVocabIndex *gnb_vocab_index_build(ArrayType *tokens, const double *log_theta,
											int32 n_classes);

/* Add sum_w W_w log theta-hat_kw over the document's known words to scores[]. */
extern void gnb_vocab_index_score(const GnbVocabIndex *index, Datum tokens, bool is_tsvector,
								  double *scores);

/* A token's K log theta-hat values, or NULL if the model does not know it. */
extern const double *gnb_vocab_index_lookup(const GnbVocabIndex *index, const char *str,
											int len);

/*
 * detoast.c: size bytes in the current memory context, cache-line aligned
 * and from 2 MB up in transparent huge pages where the kernel gives them;
 * *chunk is what to pfree.
 */
extern void *gnb_alloc_huge(Size size, void **chunk);

/* detoast.c: a document's tokens detoasted (pglz by a decoder of our own). */
extern struct varlena *gnb_detoast_tokens(Datum datum);

/* detoast.c: up to 4 large values detoasted into one allocation (gnb_alloc_huge) */
#define GNB_DETOAST_TOGETHER_MAX 4
extern void *gnb_detoast_together(int n, const Datum *values, struct varlena **out);

#endif							/* GNB_VOCAB_INDEX_H */
