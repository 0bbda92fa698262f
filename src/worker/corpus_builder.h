/*
 * corpus_builder.h
 *	  The corpus under construction while a job reads its source
 *	  (corpus.c, corpus_builder.c): the word table, the growing arrays, and
 *	  what the reading's row handlers call.
 */
#ifndef GNB_WORKER_CORPUS_BUILDER_H
#define GNB_WORKER_CORPUS_BUILDER_H

#include "gibbs_nb.h"

#include "counts/tokens.h"

/*
 * A slot of the reading's word table: open addressing, linear probing.  A
 * token's first 8 bytes decide most comparisons without touching its text,
 * and the slot also says where the current document's pair of the word is,
 * so that a token already seen costs one probe of one cache line.
 */
typedef struct WordSlot
{
	uint64		first;			/* first 8 bytes, zero padded (token_key) */
	char	   *str;			/* the token, NUL-terminated; NULL: empty */
	int32		len;
	int32		id;				/* word id, in order of first sight */
	int32		last_doc;		/* last document it was seen in, or -1 */
	int32		pos;			/* its pair in that document */
} WordSlot;

/* The ids of documents nodes hold, checked this many at a time (CorpusBuilder). */
#define GNB_HELD_BATCH 1024

/* The word table's fill at most (a power of 2 over 4 = 75%) */
#define WORD_TABLE_FILL(cap) ((cap) / 4 * 3)

/* Tokens' text is copied into blocks of this size (or of the token's). */
#define TOKEN_BLOCK_SIZE ((Size) 256 * 1024)

/* Growable arrays of the corpus under construction. */
typedef struct CorpusBuilder
{
	MemoryContext cxt;			/* the corpus */
	MemoryContext scratch;		/* what reading needs only while it reads */
	/* the tokens' text, in scratch: gone once corpus->tokens holds it */
	MemoryContext text_cxt;
	/* the vocabulary: word table and tokens' text in scratch (corpus->tokens at the end) */
	WordSlot   *slots;
	uint32		slots_mask;		/* capacity - 1 */
	int32		n_words;
	char	   *text_next;		/* free space of the current text block (text_cxt) */
	Size		text_left;
	double		text_bytes;		/* of all tokens */
	vocab_hash *labels;
	int32		n_label_values;
	char	  **label_values;	/* first-seen label id -> text */
	int32		labels_cap;
	/* documents */
	int32		n_docs;
	int32		docs_cap;
	int64	   *doc_start;
	int32	   *label;
	Datum	   *ids;
	MemoryContext ids_cxt;		/* the ids' copies (cxt, unless the reader frees them) */
	/*
	 * (word, count) pairs.  Counts are 16-bit while they fit (a word
	 * repeated 65,536 times in one document is rare): reading's peak holds
	 * the pairs beside the word table, and they are widened to the
	 * sampler's int32 at the end, once the table is gone, or at once when
	 * one does not fit (count_wide).
	 */
	int64		n_pairs;
	int64		pairs_cap;
	int32	   *word;
	uint16	   *count16;
	int32	   *count;
	bool		count_wide;
	int64		n_tokens;
	int32		n_skipped;
	/*
	 * The document corpus_add_token adds to: an unlabelled document's index, or
	 * -2 - i for the i-th checked one (a word slot's last_doc starts at -1).
	 */
	int32		token_doc;
	/*
	 * Labelled documents read with their tokens for the label check (see
	 * GnbCorpus): their pairs follow the unlabelled documents', from
	 * checked_start[0] on; the label id of each.
	 */
	int32		n_checked;
	int32		checked_cap;
	/* their ids when chosen first (read_checked_documents), in scratch */
	Datum	   *checked_ids;
	int32		n_checked_ids;
	int64	   *checked_start;
	int32	   *checked_value;
	/*
	 * labelled documents: ids and first-seen label ids; when nodes hold the
	 * unlabelled documents (unlabeled_ids_only), neither: how many of each
	 * label id (labeled_value_docs, GNB_MAX_CLASSES of them), each id
	 * checked as a held one is (held_id), their rows written from the source
	 * when the version is published (gnb_nodes_write_labels)
	 */
	int32		n_labeled;
	int32		labeled_cap;
	Datum	   *labeled_ids;
	int32	   *labeled_value;
	int64	   *labeled_value_docs;
	/*
	 * their counts, once read: n_count_words x n_label_values, by first-seen
	 * word id (the counts' words are the vocabulary's first) and label id,
	 * in scratch memory; labeled_tokens their sum.  32-bit while every one
	 * fits (labeled_counts32): they are held while the documents are read,
	 * reading's peak; widened to doubles in place if one does not.
	 */
	uint32	   *labeled_counts32;
	double	   *labeled_counts;
	int32		n_count_words;
	int32		n_count_values;
	int64		labeled_tokens;
	/*
	 * The unlabelled documents' counts when nodes hold them (by first-seen
	 * word id, n_unlabeled_count_words of them, in scratch), and their sum
	 */
	int64	   *unlabeled_counts;
	int32		n_unlabeled_count_words;
	int64		unlabeled_tokens;
	/*
	 * The ids query counts the unlabelled rows as documents nodes hold
	 * (n_held), keeps none of them: each id checked as it comes (id_fit)
	 * and, GNB_HELD_BATCH at a time under the pinned text formats, its
	 * text's dump bytes (the longest) and its previous label in a warm
	 * start (warm: the previous version's list) taken with its key (n_warm
	 * of them, the previous version's classes), copies of them in held_cxt;
	 * and their keys when no node could find two that collide (check_keys).
	 * The labelled documents' ids go through the batch too (their dump
	 * bytes), marked by held_batch_labeled: no warm start, no key.
	 */
	bool		unlabeled_ids_only;
	int32		n_held;
	uint64		source_ids_sum;	/* theirs and the labelled ones' (gnb_id_sum_term) */
	struct GnbIdFit *id_fit;
	struct GnbWarmList *warm;
	FmgrInfo	id_output;
	MemoryContext held_cxt;
	Datum	   *held_batch;
	bool	   *held_batch_labeled;
	int32		n_batch;
	uint64		held_id_dump_bytes;
	int64		n_warm;
	int64		warm_cap;
	uint64	   *warm_keys;
	int32	   *warm_classes;
	/* with check_keys, every key (n_keys), checked distinct at the end */
	bool		check_keys;
	int64		n_keys;
	int64		keys_cap;
	uint64	   *keys;
	/* a node's part: the documents whose key is part modulo parts (gnb_read_part) */
	int32		part;
	int32		parts;
	/* held-out documents: ids, tokens (copies) and labels */
	int32		n_holdout;
	int32		n_holdout_skipped;	/* held out, but without tokens */
	int32		holdout_cap;
	Datum	   *holdout_ids;
	Datum	   *holdout_tokens;
	char	  **holdout_labels;
	int16		id_typlen;
	bool		id_typbyval;
} CorpusBuilder;

/* corpus_builder.c */
extern void *corpus_grow(MemoryContext cxt, void *ptr, Size elem, int64 new_n);
extern int32 corpus_intern_label(CorpusBuilder *b, const char *str, int len);
extern void corpus_resize_word_table(CorpusBuilder *b, uint64 new_cap);
extern WordSlot *corpus_word_slot(CorpusBuilder *b, const char *str, int len, bool *found);
extern void corpus_widen_labeled_counts(CorpusBuilder *b);
extern void corpus_add_token(void *arg, const char *str, int len, int32 times);
extern int corpus_cmp_cstring_ptr(const void *a, const void *b);
extern void corpus_grow_docs(CorpusBuilder *b);

extern void corpus_builder_init(CorpusBuilder *b, const GnbJobParams *params,
								MemoryContext cxt);
extern int32 *corpus_renumber_words(CorpusBuilder *b, const GnbJobParams *params,
									GnbCorpus *corpus);

#endif							/* GNB_WORKER_CORPUS_BUILDER_H */
