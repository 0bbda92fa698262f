/*
 * tokens.h
 *	  The tokens of a document and the token -> id vocabulary hash, shared by
 *	  training (corpus.c) and prediction (predict.c).
 *
 * A document's tokens are a text[] (a token may repeat; NULL elements are
 * ignored) or a tsvector (a lexeme counts once per position, once if
 * stripped).  gnb_each_token calls fn once per distinct occurrence run with
 * its count: for text[] every element with count 1, for tsvector every
 * lexeme with its number of positions.
 */
#ifndef GNB_TOKENS_H
#define GNB_TOKENS_H

#include "postgres.h"

#include "tsearch/ts_type.h"
#include "utils/array.h"
#include "utils/arrayaccess.h"

/* 64 x 64 -> 128-bit multiply, folded: the mixing step of wyhash. */
static inline uint64
mix64(uint64 a, uint64 b)
{
	PG_INT128_TYPE r = (PG_INT128_TYPE) a * b;

	return (uint64) r ^ (uint64) (r >> 64);
}

/*
 * The first min(len, 8) bytes of a token as a little-endian word, zero
 * padded: without a call to memcpy, which is most of the cost of a short
 * token otherwise.
 */
static inline uint64
first_word(const char *p, int len)
{
	const unsigned char *u = (const unsigned char *) p;
	uint64		v = 0;

	if (len >= 8)
	{
		memcpy(&v, p, 8);		/* constant size: a plain load */
		return v;
	}
	switch (len)
	{
		case 7:
			v |= (uint64) u[6] << 48;
			/* FALLTHROUGH */
		case 6:
			v |= (uint64) u[5] << 40;
			/* FALLTHROUGH */
		case 5:
			v |= (uint64) u[4] << 32;
			/* FALLTHROUGH */
		case 4:
			v |= (uint64) u[3] << 24;
			/* FALLTHROUGH */
		case 3:
			v |= (uint64) u[2] << 16;
			/* FALLTHROUGH */
		case 2:
			v |= (uint64) u[1] << 8;
			/* FALLTHROUGH */
		case 1:
			v |= (uint64) u[0];
	}
	return v;
}

/*
 * A fast hash of a token whose first word is `first`; quality matters only
 * for speed (lookups compare the whole token).
 */
static inline uint32
token_hash(const char *p, int len, uint64 first)
{
	uint64		h = mix64(first ^ UINT64CONST(0x8ebc6af09c88c6e3),
						  (uint64) len ^ UINT64CONST(0xe7037ed1a0b428db));

	for (int off = 8; off < len; off += 8)
		h = mix64(first_word(p + off, len - off) ^ UINT64CONST(0x589965cc75374cc3),
				  h ^ UINT64CONST(0x1d8e4e27c47d124f));
	return (uint32) (h ^ (h >> 32));
}

/*
 * A token as it appears in a document (not NUL-terminated, not owned), with
 * its first word: short tokens compare without touching their bytes.
 */
typedef struct TokenKey
{
	const char *str;
	int			len;
	uint64		first;
} TokenKey;

static inline TokenKey
token_key(const char *str, int len)
{
	TokenKey	key = {str, len, first_word(str, len)};

	return key;
}

static inline bool
token_key_equal(TokenKey a, TokenKey b)
{
	return a.first == b.first && a.len == b.len &&
		(a.len <= 8 || memcmp(a.str + 8, b.str + 8, a.len - 8) == 0);
}

typedef struct VocabEntry
{
	TokenKey	key;
	uint32		hash;
	int32		id;
	char		status;
} VocabEntry;

#define SH_PREFIX vocab
#define SH_ELEMENT_TYPE VocabEntry
#define SH_KEY_TYPE TokenKey
#define SH_KEY key
#define SH_HASH_KEY(tb, k) token_hash((k).str, (k).len, (k).first)
#define SH_EQUAL(tb, a, b) token_key_equal((a), (b))
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/*
 * Sort n keys, each a token's hash (or bits of it) in the high 32 bits and an
 * index in the low 32, stably by bits [32, 32 + bits): a least-significant-
 * digit radix sort, pass_bits a pass, through tmp and back into keys.  hist
 * has room for 2^pass_bits counts.  Linear in n whatever the hashes; equal
 * hashes stay in index order.  The prediction index sorts its words by home
 * entry so (two passes), the count aggregate a state's words by hash (four
 * passes of a byte, so that a small state's pass is cheap).
 */
static inline void
gnb_sort_by_hash_bits(uint64 *keys, uint64 *tmp, int32 n, int bits, int pass_bits,
					  uint32 *hist)
{
	uint32		nb = (uint32) 1 << pass_bits;
	uint64	   *from = keys;
	uint64	   *to = tmp;

	for (int shift = 32; shift < 32 + bits; shift += pass_bits)
	{
		uint32		sum = 0;
		uint64	   *swap;

		memset(hist, 0, sizeof(uint32) * nb);
		for (int32 i = 0; i < n; i++)
			hist[(from[i] >> shift) & (nb - 1)]++;
		for (uint32 b = 0; b < nb; b++)
		{
			uint32		c = hist[b];

			hist[b] = sum;
			sum += c;
		}
		for (int32 i = 0; i < n; i++)
			to[hist[(from[i] >> shift) & (nb - 1)]++] = from[i];
		swap = from;
		from = to;
		to = swap;
	}
	if (from != keys)
		memcpy(keys, from, sizeof(uint64) * n);
}

typedef void (*gnb_token_fn) (void *arg, const char *str, int len, int32 count);

/* Call fn for every token of a document (a detoasted or toasted Datum). */
static inline void
gnb_each_token(Datum tokens, bool is_tsvector, gnb_token_fn fn, void *arg)
{
	if (is_tsvector)
	{
		TSVector	tsv = DatumGetTSVector(tokens);
		WordEntry  *entries = ARRPTR(tsv);
		char	   *lexemes = STRPTR(tsv);

		for (int32 i = 0; i < tsv->size; i++)
		{
			int32		times = entries[i].haspos ? POSDATALEN(tsv, &entries[i]) : 1;

			fn(arg, lexemes + entries[i].pos, entries[i].len, times > 0 ? times : 1);
		}
	}
	else
	{
		ArrayType  *arr = DatumGetArrayTypeP(tokens);
		int			n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
		array_iter	iter;

		array_iter_setup(&iter, (AnyArrayType *) arr);
		for (int i = 0; i < n; i++)
		{
			bool		isnull;
			Datum		elem = array_iter_next(&iter, &isnull, i, -1, false, TYPALIGN_INT);

			if (!isnull)
				fn(arg, VARDATA_ANY(DatumGetPointer(elem)),
				   VARSIZE_ANY_EXHDR(DatumGetPointer(elem)), 1);
		}
	}
}

#endif							/* GNB_TOKENS_H */
