/*
 * vocab_index.c
 *	  Token -> log theta-hat index, and document scoring in prefetched blocks.
 *
 * Scoring is bound by memory latency and by branches, not arithmetic: with a
 * vocabulary of 177,000 words the table does not fit in the core's cache,
 * and token lengths are as unpredictable as the words.  So the index is one
 * open-addressing table whose entries hold everything a lookup of a word of
 * up to 8 bytes needs (its log theta-hat values, first 8 bytes and length:
 * 32 bytes with two classes, two to a cache line), a block of tokens is
 * hashed and its entries prefetched before any of them is compared, so that
 * the misses of a block overlap, and a text[]'s elements are read in place
 * with one masked load per token for its first 8 bytes.
 */
#include "vocab_index.h"
#include "tokens.h"

#include <sys/mman.h>

#include "port/pg_bitutils.h"
#include "utils/array.h"
#include "utils/memutils.h"

/* Tokens hashed and prefetched together; also the unit of summation. */
#define SCORE_BLOCK 32

/* Up to this many classes are summed in a local array; more in palloc'd memory. */
#define GNB_SCORE_LOCAL_CLASSES 16

/*
 * An entry: double log_theta[K]; uint64 the token's first 8 bytes (zero
 * padded, little-endian: first_word); uint32 its length, or EMPTY_LEN for a
 * free entry; uint32 where bytes 8.. of a longer token start in tails.
 */
#define ENTRY_FIRST(index) (sizeof(double) * (index)->n_classes)
#define ENTRY_LEN(index) (ENTRY_FIRST(index) + sizeof(uint64))
#define ENTRY_TAIL(index) (ENTRY_LEN(index) + sizeof(uint32))
#define ENTRY_SIZE(n_classes) (sizeof(double) * (n_classes) + sizeof(uint64) + 2 * sizeof(uint32))
/* a free entry's length (all bytes 0xFF): no token is 4 GB long */
#define EMPTY_LEN PG_UINT32_MAX

/* Words inserted together, their entries prefetched first. */
#define BUILD_BLOCK 32

static inline const char *
entry_at(const GnbVocabIndex *index, uint32 i)
{
	return index->entries + (Size) i * index->entry_size;
}

static inline uint64
entry_first(const GnbVocabIndex *index, const char *e)
{
	uint64		v;

	memcpy(&v, e + ENTRY_FIRST(index), sizeof(uint64));
	return v;
}

static inline uint32
entry_u32(const char *p)
{
	uint32		v;

	memcpy(&v, p, sizeof(uint32));
	return v;
}

/*
 * Are the n > 0 bytes at a (a tails copy, readable 8 bytes past its end)
 * those at b (a document's, readable up to b_end, or NULL if unknown)?
 * Compared a word at a time, the last one masked to what is left when 8
 * bytes from it are readable: no call to memcmp for a short tail.
 */
static inline bool
tail_equal(const char *a, const char *b, int n, const char *b_end)
{
	uint64		x,
				y;

	while (n > 8)
	{
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return false;
		a += 8;
		b += 8;
		n -= 8;
	}
#ifndef WORDS_BIGENDIAN
	if (b_end != NULL && b_end - b >= 8)
	{
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		/* n is 1..8: the low n bytes are the first n */
		return ((x ^ y) & (~UINT64CONST(0) >> (64 - 8 * n))) == 0;
	}
#endif
	return memcmp(a, b, n) == 0;
}

/*
 * The entry of a token (first: its first_word, hash: its token_hash) from
 * entry i on, or NULL if the model does not know it.  The document's bytes
 * are readable up to end (NULL: unknown).
 */
static inline const char *
find_entry(const GnbVocabIndex *index, const char *str, int len, uint64 first, uint32 i,
		   const char *end)
{
	for (;;)
	{
		const char *e = entry_at(index, i);
		uint32		elen = entry_u32(e + ENTRY_LEN(index));

		if (elen == (uint32) len && entry_first(index, e) == first &&
			(len <= 8 ||
			 tail_equal(index->tails + entry_u32(e + ENTRY_TAIL(index)), str + 8, len - 8, end)))
			return e;
		if (elen == EMPTY_LEN)
			return NULL;
		i = (i + 1) & index->mask;
	}
}

/*
 * The first word of a token whose bytes are readable up to end: one 8-byte
 * load, masked to the token's length, when 8 bytes from its start are
 * readable (no branch on the length, as unpredictable as the words are);
 * else first_word.
 */
static inline uint64
first_word_within(const char *str, int len, const char *end)
{
#ifndef WORDS_BIGENDIAN
	if (likely(end - str >= 8))
	{
		uint64		v;

		memcpy(&v, str, 8);
		return v & (len < 8 ? ~(~UINT64CONST(0) << (8 * len)) : ~UINT64CONST(0));
	}
#endif
	return first_word(str, len);
}

/*
 * token_hash of a token whose bytes are readable up to end (NULL: unknown),
 * its further words read as first_word_within does: the same value.
 */
static inline uint32
token_hash_within(const char *p, int len, uint64 first, const char *end)
{
	uint64		h;

	if (len <= 8 || end == NULL)
		return token_hash(p, len, first);
	h = mix64(first ^ UINT64CONST(0x8ebc6af09c88c6e3),
			  (uint64) len ^ UINT64CONST(0xe7037ed1a0b428db));
	for (int off = 8; off < len; off += 8)
		h = mix64(first_word_within(p + off, len - off, end) ^ UINT64CONST(0x589965cc75374cc3),
				  h ^ UINT64CONST(0x1d8e4e27c47d124f));
	return (uint32) (h ^ (h >> 32));
}

/*
 * Allocate a table of `size` bytes that lookups touch at random, aligned to
 * a cache line (so that no entry of 32 bytes spans two): asking Linux for
 * transparent huge pages over it (where it has them only on request) before
 * it is first written, so that a lookup costs a cache miss but not also a
 * TLB miss and a page walk.  Only a hint: nothing changes where the kernel
 * declines.
 */
static void *
alloc_table(Size size)
{
	char	   *p = MemoryContextAllocExtended(CurrentMemoryContext, size + PG_CACHE_LINE_SIZE,
											   MCXT_ALLOC_HUGE);

	p = (char *) TYPEALIGN(PG_CACHE_LINE_SIZE, p);
#ifdef MADV_HUGEPAGE
	{
		uintptr_t	start = TYPEALIGN(2 * 1024 * 1024, (uintptr_t) p);
		uintptr_t	end = TYPEALIGN_DOWN(2 * 1024 * 1024, (uintptr_t) p + size);

		if (end > start)
			(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
	}
#endif
	return p;
}

/* A vocabulary word, as the build collects them (in vocabulary order). */
typedef struct BuildWord
{
	const char *str;
	uint64		first;
	uint32		hash;
	int			len;
} BuildWord;

typedef struct BuildWords
{
	BuildWord  *words;
	int32		n;
	int32		cap;
	Size		tail_bytes;
} BuildWords;

/* Collect the next vocabulary word (a gnb_token_fn). */
static void
collect_word(void *arg, const char *str, int len, int32 count)
{
	BuildWords *w = arg;
	BuildWord  *bw;

	if (w->n == w->cap)
	{
		w->cap *= 2;
		w->words = repalloc_huge(w->words, sizeof(BuildWord) * w->cap);
	}
	bw = &w->words[w->n++];
	bw->str = str;
	bw->len = len;
	bw->first = first_word(str, len);
	bw->hash = token_hash(str, len, bw->first);
	if (len > 8)
		w->tail_bytes += len - 8;
}

/*
 * The order to insert n words in, most frequent first by word_counts (NULL:
 * vocabulary order, returned as NULL): a word inserted early takes its home
 * entry, so that the words most lookups are for are found at the first
 * entry looked at, without a second probe (a branch mispredicted, maybe
 * another cache line).  Roughly: by the counts' binary magnitudes, ties in
 * vocabulary order, in linear time.
 */
static inline int
count_bucket(int64 count)
{
	return 63 - pg_leftmost_one_pos64((uint64) Max(count, 1));
}

static int32 *
insertion_order(int32 n, const int64 *word_counts)
{
	int32		starts[65] = {0};
	int32	   *order;

	if (word_counts == NULL)
		return NULL;
	for (int32 w = 0; w < n; w++)
		starts[count_bucket(word_counts[w]) + 1]++;
	for (int b = 1; b <= 64; b++)
		starts[b] += starts[b - 1];
	order = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
	for (int32 w = 0; w < n; w++)
		order[starts[count_bucket(word_counts[w])]++] = w;
	return order;
}

GnbVocabIndex *
gnb_vocab_index_build(ArrayType *tokens, const double *log_theta, int32 n_classes,
					  const int64 *word_counts)
{
	GnbVocabIndex *index = palloc0(sizeof(GnbVocabIndex));
	BuildWords	w;
	int32	   *order;
	uint64		nslots = 16;
	Size		tail_off = 0;

	w.cap = Max(ArrayGetNItems(ARR_NDIM(tokens), ARR_DIMS(tokens)), 1);
	w.n = 0;
	w.tail_bytes = 0;
	w.words = palloc_extended(sizeof(BuildWord) * w.cap, MCXT_ALLOC_HUGE);
	gnb_each_token(PointerGetDatum(tokens), false, collect_word, &w);
	if (w.n > PG_INT32_MAX / 4 || w.tail_bytes > PG_UINT32_MAX - 8 ||
		ENTRY_SIZE(n_classes) > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model's vocabulary is too large to index")));

	index->n_classes = n_classes;
	index->n_words = w.n;
	index->entry_size = ENTRY_SIZE(n_classes);
	/* at most 70% full: short probe runs, mostly within a cache line */
	while (nslots * 7 < (uint64) w.n * 10)
		nslots *= 2;
	index->mask = (uint32) (nslots - 1);
	index->entries = alloc_table(nslots * index->entry_size);
	memset(index->entries, 0xFF, nslots * index->entry_size);
	/* 8 bytes more: tail_equal reads whole words */
	index->tails = palloc_extended(w.tail_bytes + 8, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	order = insertion_order(w.n, word_counts);

	/*
	 * The words are taken in an order of their own, so at random in memory:
	 * a block at a time, each block's words prefetched two blocks ahead and
	 * their home entries and values one block ahead.  The vocabulary's words
	 * are distinct (training makes them so, and an import checks it): no
	 * entry is looked for among equal words.
	 */
#define WORD_AT(j) (order ? order[(j)] : (j))
	for (int32 start = 0; start < w.n; start += BUILD_BLOCK)
	{
		int32		end = Min(start + BUILD_BLOCK, w.n);

		for (int32 j = start + 2 * BUILD_BLOCK; j < Min(end + 2 * BUILD_BLOCK, w.n); j++)
			__builtin_prefetch(&w.words[WORD_AT(j)]);
		for (int32 j = start + BUILD_BLOCK; j < Min(end + BUILD_BLOCK, w.n); j++)
		{
			int32		word = WORD_AT(j);

			__builtin_prefetch(entry_at(index, w.words[word].hash & index->mask), 1);
			__builtin_prefetch(log_theta + (int64) word * n_classes);
		}
		for (int32 j = start; j < end; j++)
		{
			int32		word = WORD_AT(j);
			const BuildWord *bw = &w.words[word];
			uint32		ulen = bw->len;
			uint32		utail = (uint32) tail_off;
			uint32		i = bw->hash & index->mask;
			char	   *e;

			while (entry_u32(entry_at(index, i) + ENTRY_LEN(index)) != EMPTY_LEN)
				i = (i + 1) & index->mask;
			e = index->entries + (Size) i * index->entry_size;
			memcpy(e, log_theta + (int64) word * n_classes, sizeof(double) * n_classes);
			memcpy(e + ENTRY_FIRST(index), &bw->first, sizeof(uint64));
			memcpy(e + ENTRY_LEN(index), &ulen, sizeof(uint32));
			memcpy(e + ENTRY_TAIL(index), &utail, sizeof(uint32));
			if (bw->len > 8)
			{
				memcpy(index->tails + tail_off, bw->str + 8, bw->len - 8);
				tail_off += bw->len - 8;
			}
		}
	}
#undef WORD_AT
	if (order)
		pfree(order);
	pfree(w.words);
	return index;
}

/*
 * Scoring is a pipeline over blocks of SCORE_BLOCK tokens: a token is
 * hashed and its home entry prefetched as it is queued, and when a block is
 * full the block before it, whose entries have had a block's worth of work
 * to arrive in, is looked up and added to the scores.  Sums go to acc[] per
 * block and then to scores[]: the order of the additions is fixed by the
 * blocks.
 */
typedef struct TokenBlock
{
	int			n;
	const char *str[SCORE_BLOCK];
	int			len[SCORE_BLOCK];
	int32		count[SCORE_BLOCK];
	uint64		first[SCORE_BLOCK];
	uint32		pos[SCORE_BLOCK];	/* home entry */
} TokenBlock;

typedef struct ScorePipeline
{
	const GnbVocabIndex *index;
	const char *end;			/* the document's bytes are readable up to here, or NULL */
	double	   *scores;
	double	   *acc;			/* K doubles of scratch for scoring */
	int			cur;			/* the block being filled */
	TokenBlock	blocks[2];
} ScorePipeline;

/*
 * Look a block's tokens up, add the known ones' log theta-hat.  Sums go
 * to acc[] (K zeroed doubles of the caller's) first, not through scores[] (a
 * load-add-store chain on the same addresses for every token); inlined with
 * K = 2, the common case, they stay in registers.
 */
static inline void
stage_score_k(const GnbVocabIndex *index, TokenBlock *b, double *scores, const int32 K,
			  double *acc, const char *end)
{
	for (int32 k = 0; k < K; k++)
		acc[k] = 0.0;
	for (int t = 0; t < b->n; t++)
	{
		const char *e = find_entry(index, b->str[t], b->len[t], b->first[t], b->pos[t], end);

		if (e != NULL)
		{
			const double *lt = (const double *) e;
			double		c = b->count[t];

			for (int32 k = 0; k < K; k++)
				acc[k] += c * lt[k];
		}
	}
	for (int32 k = 0; k < K; k++)
		scores[k] += acc[k];
	b->n = 0;
}

static void
stage_score(const GnbVocabIndex *index, TokenBlock *b, double *scores, double *acc,
			const char *end)
{
	if (index->n_classes == 2)
	{
		double		acc2[2];

		stage_score_k(index, b, scores, 2, acc2, end);
	}
	else
		stage_score_k(index, b, scores, index->n_classes, acc, end);
}

/* Score the block before the current one; that one becomes the one filled. */
static void
advance(ScorePipeline *p)
{
	TokenBlock *prev = &p->blocks[1 - p->cur];

	stage_score(p->index, prev, p->scores, p->acc, p->end);
	p->cur = 1 - p->cur;
}

/* Queue a token of the document whose first word is known. */
static inline void
queue_token_first(ScorePipeline *p, const char *str, int len, int32 count, uint64 first)
{
	TokenBlock *b = &p->blocks[p->cur];

	uint32		pos = token_hash_within(str, len, first, p->end) & p->index->mask;

	__builtin_prefetch(entry_at(p->index, pos));
	b->str[b->n] = str;
	b->len[b->n] = len;
	b->count[b->n] = count;
	b->first[b->n] = first;
	b->pos[b->n] = pos;
	if (++b->n == SCORE_BLOCK)
		advance(p);
}

/* Queue a token of the document (a gnb_token_fn). */
static void
queue_token(void *arg, const char *str, int len, int32 count)
{
	queue_token_first(arg, str, len, count, first_word(str, len));
}

/*
 * Queue the tokens of a text[] without NULLs, walking its elements in place
 * (as array_iter_next does, without its per-element generality: the
 * elements are varlenas of 1-byte header, unaligned, or of 4-byte header,
 * int-aligned after zero padding).
 */
static void
queue_text_array(ScorePipeline *p, ArrayType *arr)
{
	int			n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	const char *ptr = ARR_DATA_PTR(arr);

	for (int i = 0; i < n; i++)
	{
		const char *str;
		int			len;

		if (VARATT_IS_1B(ptr))
		{
			len = VARSIZE_1B(ptr) - VARHDRSZ_SHORT;
			str = ptr + VARHDRSZ_SHORT;
		}
		else
		{
			ptr = (const char *) INTALIGN(ptr);
			len = VARSIZE_4B(ptr) - VARHDRSZ;
			str = ptr + VARHDRSZ;
		}
		ptr = str + len;
		queue_token_first(p, str, len, 1, first_word_within(str, len, p->end));
	}
}

void
gnb_vocab_index_score(const GnbVocabIndex *index, Datum tokens, bool is_tsvector,
					  double *scores)
{
	ScorePipeline p;
	double		local_acc[GNB_SCORE_LOCAL_CLASSES];
	ArrayType  *arr = is_tsvector ? NULL : DatumGetArrayTypeP(tokens);

	p.index = index;
	p.end = NULL;
	p.scores = scores;
	p.acc = index->n_classes <= GNB_SCORE_LOCAL_CLASSES ? local_acc
		: palloc(sizeof(double) * index->n_classes);
	p.cur = 0;
	for (int i = 0; i < 2; i++)
		p.blocks[i].n = 0;
	if (arr != NULL && !ARR_HASNULL(arr))
	{
		p.end = (const char *) arr + VARSIZE(arr);
		queue_text_array(&p, arr);
	}
	else
		gnb_each_token(arr != NULL ? PointerGetDatum(arr) : tokens, is_tsvector, queue_token, &p);
	/* drain: the full block before the current one, then the current one */
	for (int i = 0; i < 2; i++)
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

	return (const double *) find_entry(index, str, len, first,
									   token_hash(str, len, first) & index->mask, NULL);
}
