/*
 * vocab_index.h
 *	  A read-only token -> log theta-hat index for scoring documents fast.
 *
 * Built once per cached model version (predict.c).  Open addressing over
 * 8-byte slots (32 bits of hash, 32 bits of record position); each word's
 * record holds its K log theta-hat values and its bytes together, so that a
 * lookup touches two cache lines, and documents are scored in blocks of
 * tokens whose slots and records are prefetched before they are read.
 * Lookups compare the whole token: a hash collision never mislabels.
 */
#ifndef GNB_VOCAB_INDEX_H
#define GNB_VOCAB_INDEX_H

#include "postgres.h"

#include "utils/array.h"

typedef struct GnbVocabIndex
{
	uint64	   *slots;			/* 0 empty, else hash << 32 | (record offset / 8 + 1) */
	uint32		mask;			/* number of slots - 1 */
	int32		n_classes;
	int32		n_words;
	char	   *records;		/* per word: see record_size in vocab_index.c */
} GnbVocabIndex;

/*
 * Build in the current memory context from the vocabulary (a text[] without
 * NULLs) and log theta-hat, V x K word-major.
 */
extern GnbVocabIndex *gnb_vocab_index_build(ArrayType *tokens, const double *log_theta,
											int32 n_classes);

/* Add sum_w W_w log theta-hat_kw over the document's known words to scores[]. */
extern void gnb_vocab_index_score(const GnbVocabIndex *index, Datum tokens, bool is_tsvector,
								  double *scores);

/* A token's K log theta-hat values, or NULL if the model does not know it. */
extern const double *gnb_vocab_index_lookup(const GnbVocabIndex *index, const char *str,
											int len);

#endif							/* GNB_VOCAB_INDEX_H */
