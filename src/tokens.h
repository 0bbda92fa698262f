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

#include "common/hashfn.h"
#include "tsearch/ts_type.h"
#include "utils/array.h"
#include "utils/arrayaccess.h"

/* A token as it appears in a document: not NUL-terminated, not owned. */
typedef struct TokenKey
{
	const char *str;
	int			len;
} TokenKey;

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
#define SH_HASH_KEY(tb, k) hash_bytes((const unsigned char *) (k).str, (k).len)
#define SH_EQUAL(tb, a, b) ((a).len == (b).len && memcmp((a).str, (b).str, (a).len) == 0)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

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
