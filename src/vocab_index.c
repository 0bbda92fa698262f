/*
 * vocab_index.c
 *	  Token -> log theta-hat index, and document scoring in prefetched blocks.
 *
 * Scoring is bound by memory latency, not arithmetic: with a vocabulary of
 * 177,000 words the table does not fit in cache, and a plain hash lookup
 * waits on three misses per token (bucket, key, theta row).  Here a lookup
 * needs two (slot, record), and a block of tokens is hashed and prefetched
 * before any of them is compared, so the misses of a block overlap.
 */
#include "vocab_index.h"
#include "tokens.h"

#include <sys/mman.h>

#include "utils/array.h"
#include "utils/memutils.h"

/* Tokens hashed and prefetched together. */
#define SCORE_BLOCK 32

/* Up to this many classes are summed in a local array; more in palloc'd memory. */
#define GNB_SCORE_LOCAL_CLASSES 16

/*
 * A record: double log_theta[K]; uint64 first word of the token; uint32
 * length; the token's bytes; padding to 8.
 */
#define RECORD_FIRST(index) (sizeof(double) * (index)->n_classes)
#define RECORD_LEN(index) (RECORD_FIRST(index) + sizeof(uint64))
#define RECORD_BYTES(index) (RECORD_LEN(index) + sizeof(uint32))

static inline Size
record_size(int32 n_classes, int len)
{
	return MAXALIGN(sizeof(double) * n_classes + sizeof(uint64) + sizeof(uint32) + len);
}

static inline const char *
slot_record(const GnbVocabIndex *index, uint64 slot)
{
	return index->records + ((slot & 0xFFFFFFFF) - 1) * 8;
}

/* Does the record hold exactly this token (whose first word is `first`)? */
static inline bool
record_matches(const GnbVocabIndex *index, const char *rec, const char *str, int len,
			   uint64 first)
{
	uint64		rec_first;
	uint32		rec_len;

	memcpy(&rec_first, rec + RECORD_FIRST(index), sizeof(uint64));
	memcpy(&rec_len, rec + RECORD_LEN(index), sizeof(uint32));
	return rec_first == first && rec_len == (uint32) len &&
		(len <= 8 || memcmp(rec + RECORD_BYTES(index) + 8, str + 8, len - 8) == 0);
}

/*
 * Allocate a table of `size` bytes that lookups touch at random: asking
 * Linux for transparent huge pages over it (where it has them only on
 * request) before it is first written, so that a lookup costs a cache miss
 * but not also a TLB miss and a page walk.  Only a hint: nothing changes
 * where the kernel declines.
 */
static void *
alloc_table(Size size, bool zero)
{
	char	   *p = MemoryContextAllocExtended(CurrentMemoryContext, size, MCXT_ALLOC_HUGE);

#ifdef MADV_HUGEPAGE
	{
		uintptr_t	start = TYPEALIGN(2 * 1024 * 1024, (uintptr_t) p);
		uintptr_t	end = TYPEALIGN_DOWN(2 * 1024 * 1024, (uintptr_t) p + size);

		if (end > start)
			(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
	}
#endif
	if (zero)
		memset(p, 0, size);
	return p;
}

typedef struct BuildState
{
	GnbVocabIndex *index;
	const double *log_theta;
	Size		offset;
	int32		word;
} BuildState;

/* Add the next vocabulary word (a gnb_token_fn). */
static void
add_word(void *arg, const char *str, int len, int32 count)
{
	BuildState *b = arg;
	GnbVocabIndex *index = b->index;
	int32		K = index->n_classes;
	uint64		first = first_word(str, len);
	uint32		hash = token_hash(str, len, first);
	uint32		i = hash & index->mask;
	char	   *rec = index->records + b->offset;
	uint32		ulen = len;

	memcpy(rec, b->log_theta + (int64) b->word * K, sizeof(double) * K);
	memcpy(rec + RECORD_FIRST(index), &first, sizeof(uint64));
	memcpy(rec + RECORD_LEN(index), &ulen, sizeof(uint32));
	memcpy(rec + RECORD_BYTES(index), str, len);
	while (index->slots[i] != 0)
		i = (i + 1) & index->mask;
	if (b->offset / 8 + 1 > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model's vocabulary is too large to index")));
	index->slots[i] = ((uint64) hash << 32) | (b->offset / 8 + 1);
	b->offset += record_size(K, len);
	b->word++;
}

/* Sum the record sizes (a gnb_token_fn). */
static void
size_word(void *arg, const char *str, int len, int32 count)
{
	BuildState *b = arg;

	b->offset += record_size(b->index->n_classes, len);
	b->word++;
}

GnbVocabIndex *
gnb_vocab_index_build(ArrayType *tokens, const double *log_theta, int32 n_classes)
{
	GnbVocabIndex *index = palloc0(sizeof(GnbVocabIndex));
	BuildState	b = {index, log_theta, 0, 0};
	uint64		nslots = 16;

	index->n_classes = n_classes;
	gnb_each_token(PointerGetDatum(tokens), false, size_word, &b);
	index->n_words = b.word;
	/* at most half full: short probe runs */
	while (nslots < 2 * (uint64) index->n_words)
		nslots *= 2;
	index->mask = (uint32) (nslots - 1);
	index->slots = alloc_table(nslots * sizeof(uint64), true);
	index->records = alloc_table(b.offset + 8, false);
	b.offset = 0;
	b.word = 0;
	gnb_each_token(PointerGetDatum(tokens), false, add_word, &b);
	return index;
}

/*
 * Scoring is a three-stage pipeline over blocks of SCORE_BLOCK tokens: when
 * a block is full it is hashed and its slots prefetched, the block before it
 * probes those (now cached) slots and prefetches the records they point to,
 * and the block before that compares the records and adds up the scores.  A
 * load thus has a whole block's worth of work to arrive in.
 */
typedef struct TokenBlock
{
	int			n;
	const char *str[SCORE_BLOCK];
	int			len[SCORE_BLOCK];
	int32		count[SCORE_BLOCK];
	uint64		first[SCORE_BLOCK];
	uint32		hash[SCORE_BLOCK];
	uint32		pos[SCORE_BLOCK];	/* slot of the first hash match */
	const char *rec[SCORE_BLOCK];	/* its record, or NULL if none */
} TokenBlock;

typedef struct ScorePipeline
{
	const GnbVocabIndex *index;
	double	   *scores;
	double	   *acc;			/* K doubles of scratch for stage 3 */
	int			cur;			/* the block being filled */
	TokenBlock	blocks[3];
} ScorePipeline;

/* Stage 1: hash the tokens, prefetch their first slots. */
static void
stage_hash(const GnbVocabIndex *index, TokenBlock *b)
{
	for (int t = 0; t < b->n; t++)
	{
		b->first[t] = first_word(b->str[t], b->len[t]);
		b->hash[t] = token_hash(b->str[t], b->len[t], b->first[t]);
		b->pos[t] = b->hash[t] & index->mask;
		__builtin_prefetch(&index->slots[b->pos[t]]);
	}
}

/* From slot i on, the first slot whose hash matches; its record or NULL. */
static inline const char *
probe(const GnbVocabIndex *index, uint32 hash, uint32 *i)
{
	uint64		s;

	while ((s = index->slots[*i]) != 0)
	{
		if ((uint32) (s >> 32) == hash)
			return slot_record(index, s);
		*i = (*i + 1) & index->mask;
	}
	return NULL;
}

/* Stage 2: find each token's first candidate record, prefetch it. */
static void
stage_probe(const GnbVocabIndex *index, TokenBlock *b)
{
	for (int t = 0; t < b->n; t++)
	{
		b->rec[t] = probe(index, b->hash[t], &b->pos[t]);
		if (b->rec[t])
			__builtin_prefetch(b->rec[t]);
	}
}

/*
 * Stage 3: compare the records with the tokens, add the matches' scores.
 * Sums go to acc[] (K zeroed doubles of the caller's) first, not through
 * scores[] (a load-add-store chain on the same addresses for every token);
 * inlined with K = 2, the common case, they stay in registers.
 */
static inline void
stage_score_k(const GnbVocabIndex *index, TokenBlock *b, double *scores, const int32 K,
			  double *acc)
{
	for (int32 k = 0; k < K; k++)
		acc[k] = 0.0;
	for (int t = 0; t < b->n; t++)
	{
		const char *rec = b->rec[t];
		uint32		i = b->pos[t];

		while (rec != NULL)
		{
			if (record_matches(index, rec, b->str[t], b->len[t], b->first[t]))
			{
				const double *lt = (const double *) rec;
				double		c = b->count[t];

				for (int32 k = 0; k < K; k++)
					acc[k] += c * lt[k];
				break;
			}
			/* same 32-bit hash, another word: look further */
			i = (i + 1) & index->mask;
			rec = probe(index, b->hash[t], &i);
		}
	}
	for (int32 k = 0; k < K; k++)
		scores[k] += acc[k];
	b->n = 0;
}

static void
stage_score(const GnbVocabIndex *index, TokenBlock *b, double *scores, double *acc)
{
	if (index->n_classes == 2)
	{
		double		acc2[2];

		stage_score_k(index, b, scores, 2, acc2);
	}
	else
		stage_score_k(index, b, scores, index->n_classes, acc);
}

/* Move every block one stage on; the block after `cur` becomes free. */
static void
advance(ScorePipeline *p)
{
	TokenBlock *cur = &p->blocks[p->cur];
	TokenBlock *prev = &p->blocks[(p->cur + 2) % 3];
	TokenBlock *prev2 = &p->blocks[(p->cur + 1) % 3];

	stage_hash(p->index, cur);
	stage_probe(p->index, prev);
	stage_score(p->index, prev2, p->scores, p->acc);
	p->cur = (p->cur + 1) % 3;
}

/* Queue a token of the document (a gnb_token_fn). */
static void
queue_token(void *arg, const char *str, int len, int32 count)
{
	ScorePipeline *p = arg;
	TokenBlock *b = &p->blocks[p->cur];

	b->str[b->n] = str;
	b->len[b->n] = len;
	b->count[b->n] = count;
	if (++b->n == SCORE_BLOCK)
		advance(p);
}

void
gnb_vocab_index_score(const GnbVocabIndex *index, Datum tokens, bool is_tsvector,
					  double *scores)
{
	ScorePipeline p;
	double		local_acc[GNB_SCORE_LOCAL_CLASSES];

	p.index = index;
	p.scores = scores;
	p.acc = index->n_classes <= GNB_SCORE_LOCAL_CLASSES ? local_acc
		: palloc(sizeof(double) * index->n_classes);
	p.cur = 0;
	for (int i = 0; i < 3; i++)
		p.blocks[i].n = 0;
	gnb_each_token(tokens, is_tsvector, queue_token, &p);
	/* drain: three advances take the last block through every stage */
	for (int i = 0; i < 3; i++)
		advance(&p);
}

/*
 * The K log theta-hat values of one token, or NULL if the model does not
 * know it: the values scoring adds up, for callers that need them one token
 * at a time (gibbs_nb_explain).
 */
const double *
gnb_vocab_index_lookup(const GnbVocabIndex *index, const char *str, int len)
{
	uint64		first = first_word(str, len);
	uint32		hash = token_hash(str, len, first);
	uint32		i = hash & index->mask;
	const char *rec;

	while ((rec = probe(index, hash, &i)) != NULL)
	{
		if (record_matches(index, rec, str, len, first))
			return (const double *) rec;
		i = (i + 1) & index->mask;
	}
	return NULL;
}
