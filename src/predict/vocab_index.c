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
#include "predict/vocab_index.h"
#include "counts/tokens.h"

#include <math.h>

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
static pg_attribute_always_inline bool
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
	/* at most 8 bytes: a loop, not a call (which would cost a caller its registers) */
	for (int i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/*
 * The entry of a token (first: its first_word, hash: its token_hash) from
 * entry i on, or NULL if the model does not know it.  The document's bytes
 * are readable up to end (NULL: unknown).  K is the index's n_classes,
 * passed apart so that a caller inlined with a constant K computes no
 * offsets.
 */
static pg_attribute_always_inline const char *
find_entry_k(const GnbVocabIndex *index, const int32 K, const char *str, int len,
			 uint64 first, uint32 i, const char *end)
{
	const Size	size = ENTRY_SIZE(K);
	const Size	first_off = sizeof(double) * K;
	const Size	len_off = first_off + sizeof(uint64);
	const Size	tail_off = len_off + sizeof(uint32);

	for (;;)
	{
		const char *e = index->entries + (Size) i * size;
		uint32		elen = entry_u32(e + len_off);
		uint64		efirst;

		memcpy(&efirst, e + first_off, sizeof(uint64));
		if (elen == (uint32) len && efirst == first &&
			(len <= 8 ||
			 tail_equal(index->tails + entry_u32(e + tail_off), str + 8, len - 8, end)))
			return e;
		if (elen == EMPTY_LEN)
			return NULL;
		i = (i + 1) & index->mask;
	}
}

static inline const char *
find_entry(const GnbVocabIndex *index, const char *str, int len, uint64 first, uint32 i,
		   const char *end)
{
	return find_entry_k(index, index->n_classes, str, len, first, i, end);
}

/* The low len bytes of a word, by len up to 8 */
static const uint64 first_word_mask[9] = {
	0, UINT64CONST(0xff), UINT64CONST(0xffff), UINT64CONST(0xffffff),
	UINT64CONST(0xffffffff), UINT64CONST(0xffffffffff), UINT64CONST(0xffffffffffff),
	UINT64CONST(0xffffffffffffff), ~UINT64CONST(0)
};

/*
 * The first word of a token whose bytes are readable up to end: one 8-byte
 * load, masked to the token's length, when 8 bytes from its start are
 * readable (no branch on the length, as unpredictable as the words are);
 * else first_word.
 */
static pg_attribute_always_inline uint64
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
static pg_attribute_always_inline uint32
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
 * The next element of a text[] without NULLs, walked in place (as
 * array_iter_next does, without its per-element generality: the elements
 * are varlenas of 1-byte header, unaligned, or of 4-byte header, int-aligned
 * after zero padding): its bytes and length, *ptr moved past it.
 */
static inline const char *
next_text_element(const char **ptr, int *len)
{
	const char *p = *ptr;
	const char *str;

	if (VARATT_IS_1B(p))
	{
		*len = VARSIZE_1B(p) - VARHDRSZ_SHORT;
		str = p + VARHDRSZ_SHORT;
	}
	else
	{
		p = (const char *) INTALIGN(p);
		*len = VARSIZE_4B(p) - VARHDRSZ;
		str = p + VARHDRSZ;
	}
	*ptr = str + *len;
	return str;
}

/* Buckets of the placement order: half an octave of theta-hat each. */
#define ORDER_BUCKETS 128

/*
 * A word's bucket by its largest log theta-hat: 0 for theta-hat near 1, one
 * more per half octave below.  Theta-hat follows a word's training count
 * (docs/model.md), so this ranks words by how often they occur.
 */
static inline int
theta_bucket(const double *lt, int32 K)
{
	double		m = lt[0];
	double		b;

	for (int32 k = 1; k < K; k++)
		m = Max(m, lt[k]);
	b = -m * (2.0 / M_LN2);
	/* NaN fails both comparisons: last */
	if (!(b < ORDER_BUCKETS - 1))
		return ORDER_BUCKETS - 1;
	return b > 0 ? (int) b : 0;
}

/*
 * A word as the build sorts it: its home entry (later its rank, then its
 * place) in the high 32 bits, its number in the vocabulary in the low ones.
 */
#define KEY_HOME(key) ((uint32) ((key) >> 32))
#define KEY_WORD(key) ((int32) (uint32) (key))

/*
 * What an entry holds after its log theta-hat values: first word, length
 * and where the tail starts (ENTRY_FIRST, ENTRY_LEN, ENTRY_TAIL).
 */
typedef struct EntryKey
{
	uint64		first;
	uint32		len;
	uint32		tail;
} EntryKey;

StaticAssertDecl(sizeof(EntryKey) == ENTRY_SIZE(0), "EntryKey is an entry's last 16 bytes");

/* Words written ahead of the one being written, their data prefetched. */
#define PLACE_AHEAD 16

/*
 * Where the layout may start, for n words (keys sorted by home) in nslots
 * entries, more than n: an entry that no word whose home is before it is
 * placed at or after, counting round the table's end.  From there each word
 * is placed without wrapping around, whatever the order among words of
 * the same cluster.  Linear probing in home order places a word at
 * max(home, the entry after the previous word's).  A first walk from entry
 * 0 finds how many words run past the table's end, to entries 0, 1, ...;
 * that many truly do (more at the start would change nothing after the
 * first entry left free, and there is one).  A second walk, with those
 * entries taken, finds the first entry left free before the next home:
 * *first is set to the number of words whose home is before it.
 */
static uint32
layout_start(const uint64 *keys, int32 n, uint64 nslots, int32 *first)
{
	uint64		next = 0;
	uint64		carry;

	for (int32 i = 0; i < n; i++)
		next = Max((uint64) KEY_HOME(keys[i]), next) + 1;
	carry = next > nslots ? next - nslots : 0;
	next = carry;
	for (int32 i = 0; i < n; i++)
	{
		uint64		home = KEY_HOME(keys[i]);

		if (home >= next)
		{
			*first = i;
			return (uint32) next;
		}
		next = Max(home, next) + 1;
	}
	if (next >= nslots)
		elog(ERROR, "gibbs_nb: no free entry in the vocabulary index");
	*first = n;
	return (uint32) next;
}

/*
 * The first entry at or after rank r not yet taken (ranks counted from the
 * layout's start), in a union-find of next free entries: next[r] == r for
 * an entry free, else a later rank (path halving as it is walked).  next
 * has a sentinel at nslots, never taken.
 */
static inline uint32
next_free(uint32 *next, uint32 r)
{
	while (next[r] != r)
	{
		next[r] = next[next[r]];
		r = next[r];
	}
	return r;
}

/*
 * Build the index.
 *
 * The words most lookups are for take their home entries, so that they are
 * found at the first entry looked at, without a second probe (a branch
 * mispredicted, maybe another cache line): words are placed as if inserted
 * by bucket of theta-hat (theta_bucket), the most frequent first, each at
 * the first entry from its home left free by the words before.  Every word
 * sits at its home or after it, with no free entry between: a linear
 * probing table.
 *
 * It is built from sorted words, not by inserting one word after another in
 * the table: each insertion a write to an entry at random (a cache miss,
 * and on a table just allocated a page fault) and a probe for a free one
 * was most of the time a new process (a parallel worker) took to load a
 * model.  The vocabulary is read in order: each word's home, its entry's
 * key fields (EntryKey), its tail and bucket.  The words are sorted by home,
 * which gives an entry no cluster of the table spans (layout_start), and
 * then by bucket and home counted from that entry, so that no word's place
 * wraps round the table's end.  Places are then found in that order in a
 * union-find of free entries, and the words written there, their log
 * theta-hat and key fields prefetched ahead.  The vocabulary's words are
 * distinct (training makes them so, and an import checks it): no entry is
 * looked for among equal words.
 */
GnbVocabIndex *
gnb_vocab_index_build(ArrayType *tokens, const double *log_theta, int32 n_classes)
{
	GnbVocabIndex *index = palloc0(sizeof(GnbVocabIndex));
	int32		n = ArrayGetNItems(ARR_NDIM(tokens), ARR_DIMS(tokens));
	const char *data = ARR_DATA_PTR(tokens);
	const char *end = (const char *) tokens + VARSIZE(tokens);
	const int32 K = n_classes;
	uint64		nslots = 16;
	int			bits = 4;
	Size		n1;
	Size		nhist;
	Size		esize = ENTRY_SIZE(K);
	Size		tail_bytes = 0;
	void	   *chunk;
	void	   *scratch_chunk;
	EntryKey   *ek;
	uint64	   *keys;
	uint64	   *tmp;
	uint32	   *next;
	uint32	   *hist;
	uint8	   *bucket;
	char	   *tails;
	uint32		start;
	int32		first;

	Assert(!ARR_HASNULL(tokens));
	if (n > PG_INT32_MAX / 4 || ENTRY_SIZE(K) > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model's vocabulary is too large to index")));
	/* at most 70% full: short probe runs, mostly within a cache line */
	while (nslots * 7 < (uint64) n * 10)
	{
		nslots *= 2;
		bits++;
	}
	n1 = Max(n, 1);
	nhist = Max((Size) 1 << ((bits + 1) / 2), ORDER_BUCKETS);
	index->n_classes = K;
	index->n_words = n;
	index->entry_size = esize;
	index->mask = (uint32) (nslots - 1);

	/*
	 * The scratch, with room for the tails: a word's tail is shorter than
	 * its element, so they take less than the array's data.
	 */
	ek = (EntryKey *) gnb_alloc_huge(n1 * (sizeof(EntryKey) + 2 * sizeof(uint64) + 1) +
									 sizeof(uint32) * (nslots + 1 + nhist) +
									 (end - data) + 8, &scratch_chunk);
	keys = (uint64 *) (ek + n1);
	tmp = keys + n1;
	next = (uint32 *) (tmp + n1);
	hist = next + nslots + 1;
	bucket = (uint8 *) (hist + nhist);
	tails = (char *) (bucket + n1);

	/* each word's home, entry key fields, tail and bucket, the vocabulary in order */
	{
		const char *ptr = data;

		for (int32 w = 0; w < n; w++)
		{
			int			len;
			const char *str = next_text_element(&ptr, &len);
			uint64		fw = first_word_within(str, len, end);
			uint32		home = token_hash_within(str, len, fw, end) & index->mask;

			ek[w].first = fw;
			ek[w].len = (uint32) len;
			ek[w].tail = (uint32) tail_bytes;
			if (len > 8)
			{
				memcpy(tails + tail_bytes, str + 8, len - 8);
				tail_bytes += len - 8;
			}
			keys[w] = ((uint64) home << 32) | (uint32) w;
			bucket[w] = theta_bucket(log_theta + (int64) w * K, K);
		}
	}

	/* the table and, after it, the tails (8 bytes more: tail_equal reads whole words) */
	index->entries = gnb_alloc_huge(nslots * esize + tail_bytes + 8, &chunk);
	index->tails = index->entries + nslots * esize;
	memcpy(index->tails, tails, tail_bytes);
	memset(index->tails + tail_bytes, 0, 8);

	/* by home entry: two passes over the home's bits */
	gnb_sort_by_hash_bits(keys, tmp, n, bits, (bits + 1) / 2, hist);
	start = layout_start(keys, n, nslots, &first);

	/*
	 * By bucket and then by home counted from start (rank), in tmp: a
	 * stable counting sort of the keys read round from the first whose home
	 * is at or after start.
	 */
	memset(hist, 0, sizeof(uint32) * ORDER_BUCKETS);
	for (int32 w = 0; w < n; w++)
		hist[bucket[w]]++;
	for (uint32 b = 0, sum = 0; b < ORDER_BUCKETS; b++)
	{
		uint32		c = hist[b];

		hist[b] = sum;
		sum += c;
	}
	for (int32 j = 0; j < n; j++)
	{
		uint64		key = keys[first + j < n ? first + j : first + j - n];
		uint32		rank = (KEY_HOME(key) - start) & index->mask;

		tmp[hist[bucket[KEY_WORD(key)]]++] = ((uint64) rank << 32) | (uint32) key;
	}

	/* each word's place, in that order; kept in its key's upper half */
	for (uint64 r = 0; r <= nslots; r++)
		next[r] = (uint32) r;
	for (int32 i = 0; i < n; i++)
	{
		uint32		place = next_free(next, KEY_HOME(tmp[i]));

		if (place >= nslots)
			elog(ERROR, "gibbs_nb: the vocabulary index's layout ran past its end");
		next[place] = place + 1;
		tmp[i] = ((uint64) place << 32) | (uint32) tmp[i];
	}

	/* every entry free, then the words written where they go */
	memset(index->entries, 0xFF, nslots * esize);
	for (int32 i = 0; i < n; i++)
	{
		int32		w = KEY_WORD(tmp[i]);
		char	   *e = index->entries +
			(Size) ((KEY_HOME(tmp[i]) + start) & index->mask) * esize;

		if (i + PLACE_AHEAD < n)
		{
			int32		ahead = KEY_WORD(tmp[i + PLACE_AHEAD]);

			__builtin_prefetch(log_theta + (int64) ahead * K);
			__builtin_prefetch(ek + ahead);
		}
		memcpy(e, log_theta + (int64) w * K, sizeof(double) * K);
		memcpy(e + ENTRY_FIRST(index), &ek[w], sizeof(EntryKey));
	}
	pfree(scratch_chunk);
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
 * Score a text[] without NULLs: the pipeline above, written out for text[]
 * (every count 1: c x log theta-hat is log theta-hat, exactly) with K a
 * constant where the caller's is, the blocks the same SCORE_BLOCK tokens in
 * a row, so that the sums are added in the same order.  The tokens of two
 * blocks are kept in a ring of 2 x SCORE_BLOCK, field by field.  Arrays
 * built by functions (as the tokenizers' are) have elements of 4-byte
 * header: the branch for them comes first.
 */
typedef struct TextRing
{
	const char *str[2 * SCORE_BLOCK];
	uint64		first[2 * SCORE_BLOCK];
	uint32		len[2 * SCORE_BLOCK];
	uint32		pos[2 * SCORE_BLOCK];
} TextRing;

/* Look up the n tokens of the ring from b on, add their sums to scores[]. */
static pg_attribute_always_inline void
score_text_block_k(const GnbVocabIndex *index, const int32 K, const TextRing *ring, int b, int n,
				   const char *end, double *scores, double *acc)
{
	for (int32 k = 0; k < K; k++)
		acc[k] = 0.0;
	for (int t = b; t < b + n; t++)
	{
		const double *lt = (const double *) find_entry_k(index, K, ring->str[t], ring->len[t],
														 ring->first[t], ring->pos[t], end);

		if (lt != NULL)
			for (int32 k = 0; k < K; k++)
				acc[k] += lt[k];
	}
	for (int32 k = 0; k < K; k++)
		scores[k] += acc[k];
}

/*
 * The same for K = 2, written out: the two sums in registers (through the
 * acc pointer the compiler stored them at every token), the table's fields
 * read once, and no call on the way (tail_equal's last bytes compared in a
 * loop), which would have cost the sums their registers.
 *
 * A block is scored out of line, once per SCORE_BLOCK tokens: inlined in
 * the loop that walks the tokens, it left that loop too few registers, and
 * the compiler kept the walk's pointer on the stack (a store and a load on
 * the path from one token to the next).
 */
static pg_noinline void
score_text_block_2(const GnbVocabIndex *index, const TextRing *ring, int b, int n,
				   const char *end, double *scores)
{
	const char *entries = index->entries;
	const uint32 mask = index->mask;
	double		a0 = 0.0;
	double		a1 = 0.0;

	for (int t = b; t < b + n; t++)
	{
		uint32		i = ring->pos[t];
		uint32		len = ring->len[t];
		uint64		first = ring->first[t];

		for (;;)
		{
			const char *e = entries + (Size) i * ENTRY_SIZE(2);
			uint32		elen = entry_u32(e + ENTRY_SIZE(2) - 2 * sizeof(uint32));
			uint64		efirst;

			memcpy(&efirst, e + 2 * sizeof(double), sizeof(uint64));
			if (elen == len && efirst == first &&
				(len <= 8 ||
				 tail_equal(index->tails + entry_u32(e + ENTRY_SIZE(2) - sizeof(uint32)),
							ring->str[t] + 8, len - 8, end)))
			{
				double		lt[2];

				memcpy(lt, e, sizeof(lt));
				a0 += lt[0];
				a1 += lt[1];
				break;
			}
			if (elen == EMPTY_LEN)
				break;
			i = (i + 1) & mask;
		}
	}
	scores[0] += a0;
	scores[1] += a1;
}

static pg_noinline void
score_text_block_any(const GnbVocabIndex *index, const TextRing *ring, int b, int n,
					 const char *end, double *scores, double *acc)
{
	score_text_block_k(index, index->n_classes, ring, b, n, end, scores, acc);
}

static pg_attribute_always_inline void
score_text_block(const GnbVocabIndex *index, const int32 K, const TextRing *ring, int b, int n,
				 const char *end, double *scores, double *acc)
{
	if (K == 2)
		score_text_block_2(index, ring, b, n, end, scores);
	else
		score_text_block_any(index, ring, b, n, end, scores, acc);
}

/*
 * Put the token of the text[] element at ptr in the ring at t, its home
 * entry prefetched; returns where the next element starts.  4-byte headers
 * (int-aligned after zero padding), as arrays built by functions have them,
 * or 1-byte ones.
 */
static pg_attribute_always_inline const char *
queue_text_token(const GnbVocabIndex *index, const int32 K, const char *ptr, const char *end,
				 TextRing *ring, int t)
{
	const char *str;
	int			len;
	uint64		first;
	uint32		pos;

	if (likely(!VARATT_IS_1B(ptr)))
	{
		ptr = (const char *) INTALIGN(ptr);
		len = VARSIZE_4B(ptr) - VARHDRSZ;
		str = ptr + VARHDRSZ;
	}
	else
	{
		len = VARSIZE_1B(ptr) - VARHDRSZ_SHORT;
		str = ptr + VARHDRSZ_SHORT;
	}
#ifndef WORDS_BIGENDIAN
	if (likely(len <= 8 && end - str >= 8))
	{
		/* nine tokens in ten: one load, masked, not first_word_within's shift */
		memcpy(&first, str, 8);
		first &= first_word_mask[len];
		pos = token_hash(str, len, first) & index->mask;
	}
	else
#endif
	{
		first = first_word_within(str, len, end);
		pos = token_hash_within(str, len, first, end) & index->mask;
	}
	ring->str[t] = str;
	ring->len[t] = len;
	ring->first[t] = first;
	ring->pos[t] = pos;
	__builtin_prefetch(index->entries + (Size) pos * ENTRY_SIZE(K));
	return str + len;
}

static pg_attribute_always_inline void
score_text_array_k(const GnbVocabIndex *index, const int32 K, ArrayType *arr, double *scores,
				   double *acc)
{
	int			n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	int			full = n / SCORE_BLOCK;
	int			rest = n % SCORE_BLOCK;
	const char *ptr = ARR_DATA_PTR(arr);
	const char *end = (const char *) arr + VARSIZE(arr);
	TextRing	ring;
	int			base;

	/* each block queued, then the one before it scored */
	for (int b = 0; b < full; b++)
	{
		base = (b & 1) * SCORE_BLOCK;
		for (int t = base; t < base + SCORE_BLOCK; t++)
			ptr = queue_text_token(index, K, ptr, end, &ring, t);
		if (b > 0)
			score_text_block(index, K, &ring, base ^ SCORE_BLOCK, SCORE_BLOCK, end, scores, acc);
	}
	/* the tokens left queued, the last full block scored, then they */
	base = (full & 1) * SCORE_BLOCK;
	for (int t = base; t < base + rest; t++)
		ptr = queue_text_token(index, K, ptr, end, &ring, t);
	if (full > 0)
		score_text_block(index, K, &ring, base ^ SCORE_BLOCK, SCORE_BLOCK, end, scores, acc);
	score_text_block(index, K, &ring, base, rest, end, scores, acc);
}

/*
 * The text[] loop in functions of its own, K = 2 and any K: in one with
 * the other pipeline, the walk's pointer went to the stack as well.
 */
static pg_noinline void
score_text_array_2(const GnbVocabIndex *index, ArrayType *arr, double *scores)
{
	score_text_array_k(index, 2, arr, scores, NULL);
}

static pg_noinline void
score_text_array_any(const GnbVocabIndex *index, ArrayType *arr, double *scores, double *acc)
{
	score_text_array_k(index, index->n_classes, arr, scores, acc);
}

void
gnb_vocab_index_score(const GnbVocabIndex *index, Datum tokens, bool is_tsvector,
					  double *scores)
{
	ScorePipeline p;
	double		local_acc[GNB_SCORE_LOCAL_CLASSES];
	ArrayType  *arr = is_tsvector ? NULL : (ArrayType *) gnb_detoast_tokens(tokens);

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
		if (index->n_classes == 2)
			score_text_array_2(index, arr, scores);
		else
			score_text_array_any(index, arr, scores, p.acc);
		return;
	}
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
