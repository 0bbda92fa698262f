/*
 * fuzz_tokens.c
 *	  libFuzzer target: a document's tokens, as gnb_each_token (tokens.h)
 *	  reads them for training, prediction and gibbs_nb_class_counts.
 *
 * In the server a text[] or tsvector always comes from PostgreSQL's own
 * input or receive function, so the input is not used as the value's bytes:
 * it describes a document (text[] or tsvector; array dimensions and lower
 * bounds; each token's bytes, NULL or not, positions or not), from which we
 * build the value PostgreSQL would, with the real header macros.  Then:
 *
 * - gnb_each_token must call back once per non-NULL element, in order, each
 *	 with count 1 (text[]), or once per lexeme, in the tsvector's order, with
 *	 its number of positions or 1 (tsvector): same bytes, same counts;
 * - the tokens go into a vocab_hash as the corpus reader interns them, and
 *	 every token is found there again, the hash holding exactly the distinct
 *	 ones;
 * - the document is counted by the aggregate's transition function twice,
 *	 under two labels, and the final value parses and holds, for each label,
 *	 each distinct token with the sum of its counts;
 * - that state's sorted form (the send function's bytes, as it leaves a
 *	 process) is combined 11 times, more runs than a state holds, and the
 *	 final value is in the sorted form and holds 11 times those counts.
 *
 * Input layout (any bytes are a document; a missing byte reads as 0):
 *	 byte 0: bit 0 tsvector, else text[]; text[]: bits 1-3 the number of
 *			 dimensions (1 + n % MAXDIM); tsvector: bit 1 strip positions
 *	 text[]: then, per dimension, a lower bound (int8) and a factor (1-4)
 *	 then tokens: a control byte c: bit 0 NULL element (text[]) or has
 *			 positions (tsvector); length c >> 2, or with bit 1 set
 *			 (c >> 2) << 8 | next byte (long tokens); then the bytes; for a
 *			 lexeme with positions two bytes more: the number of positions
 *			 (1 + b % 256) and their step (1 + b).
 */
#include "gibbs_nb.h"
#include "counts/counts.h"
#include "counts/tokens.h"
#include "shim.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

extern PGDLLEXPORT Datum gibbs_nb_counts_state_add_text_array(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_add_tsvector(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_final(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_send(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_combine(PG_FUNCTION_ARGS);

/* The state flattened (sorted) and combined this many times: more than 8 runs */
#define TIMES 11

extern int	LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

/* One token of the document as described by the input. */
typedef struct Token
{
	const char *str;
	int			len;
	bool		isnull;			/* text[]: a NULL element */
	int			npos;			/* tsvector: 0 for none */
	uint16		step;			/* tsvector: between positions */
} Token;

typedef struct Doc
{
	bool		is_tsvector;
	bool		strip;
	int			ndim;
	int			dims[MAXDIM];
	int			lbs[MAXDIM];
	int			n;
	Token	   *tokens;
	Datum		value;
	/* what gnb_each_token must call back with, in order */
	int			n_expected;
	Token	   *expected;
	int64		expected_total;
	/* what it did */
	int			seen;
	int64		seen_total;
	vocab_hash *vocab;
	int32		n_words;
	int64	   *word_count;		/* word id -> sum of its counts */
	/* the aggregate */
	bytea	   *counts;
	GnbParsedCounts pc;
	bytea	   *merged;			/* the state's sorted form combined TIMES times */
	GnbParsedCounts merged_pc;
} Doc;

typedef struct Input
{
	const uint8 *p;
	size_t		n;
} Input;

static uint8
next_byte(Input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

/* Read the document the input describes (not yet built). */
static void
read_doc(Input *in, Doc *doc)
{
	uint8		flags = next_byte(in);

	doc->is_tsvector = flags & 1;
	doc->strip = (flags & 2) != 0;
	doc->ndim = 1 + ((flags >> 1) & 7) % MAXDIM;
	if (!doc->is_tsvector)
	{
		for (int d = 0; d < doc->ndim; d++)
		{
			doc->lbs[d] = (int8) next_byte(in);
			doc->dims[d] = 1 + next_byte(in) % 4;	/* a factor for now */
		}
	}
	/* every token takes at least one byte */
	doc->tokens = palloc(sizeof(Token) * (in->n + 1));
	doc->n = 0;
	while (in->n > 0)
	{
		Token	   *t = &doc->tokens[doc->n++];
		uint8		c = next_byte(in);
		int			len = c >> 2;

		if (c & 2)
			len = len << 8 | next_byte(in);
		len = Min((size_t) len, in->n);
		t->isnull = !doc->is_tsvector && (c & 1);
		t->len = t->isnull ? 0 : len;
		t->str = (const char *) in->p;
		in->p += t->len;
		in->n -= t->len;
		t->npos = 0;
		t->step = 0;
		if (doc->is_tsvector)
		{
			t->len = Min(t->len, MAXSTRLEN);
			if ((c & 1) && !doc->strip)
			{
				t->npos = 1 + next_byte(in) % MAXNUMPOS;
				t->step = 1 + next_byte(in);
			}
		}
	}
}

/*
 * The text[] as array_in or construct_md_array lays it out: elements with
 * 4-byte headers, int-aligned, zero padding, a NULL bitmap only if there is
 * a NULL, and no dimensions at all for an empty array.
 */
static void
build_text_array(Doc *doc)
{
	int			nitems = doc->n;
	bool		hasnull = false;
	int32		nbytes = 0;
	int32		dataoffset;
	ArrayType  *arr;
	char	   *p;
	bits8	   *bitmap;
	int			rest = nitems;

	/* dimensions whose product is the number of elements */
	for (int d = 0; d < doc->ndim - 1; d++)
	{
		if (rest % doc->dims[d] != 0)
			doc->dims[d] = 1;
		rest /= doc->dims[d];
	}
	doc->dims[doc->ndim - 1] = rest;
	if (nitems == 0)
		doc->ndim = 0;

	for (int i = 0; i < nitems; i++)
	{
		if (doc->tokens[i].isnull)
			hasnull = true;
		else
			nbytes = INTALIGN(nbytes + VARHDRSZ + doc->tokens[i].len);
	}
	if (hasnull)
	{
		dataoffset = ARR_OVERHEAD_WITHNULLS(doc->ndim, nitems);
		nbytes += dataoffset;
	}
	else
	{
		dataoffset = 0;
		nbytes += ARR_OVERHEAD_NONULLS(doc->ndim);
	}
	arr = palloc0(nbytes);
	SET_VARSIZE(arr, nbytes);
	arr->ndim = doc->ndim;
	arr->dataoffset = dataoffset;
	arr->elemtype = TEXTOID;
	memcpy(ARR_DIMS(arr), doc->dims, sizeof(int) * doc->ndim);
	memcpy(ARR_LBOUND(arr), doc->lbs, sizeof(int) * doc->ndim);
	if (nitems > 0 && ArrayGetNItems(arr->ndim, ARR_DIMS(arr)) != nitems)
		shim_fail("harness: dimensions do not multiply to the elements");

	p = ARR_DATA_PTR(arr);
	bitmap = ARR_NULLBITMAP(arr);
	for (int i = 0; i < nitems; i++)
	{
		Token	   *t = &doc->tokens[i];

		if (bitmap && !t->isnull)
			bitmap[i / 8] |= 1 << (i % 8);
		if (t->isnull)
			continue;
		SET_VARSIZE(p, VARHDRSZ + t->len);
		memcpy(VARDATA(p), t->str, t->len);
		p += INTALIGN(VARHDRSZ + t->len);
		doc->expected[doc->n_expected++] = *t;
	}
	doc->value = PointerGetDatum(arr);
}

/* Lexeme order, as tsCompareString (without prefix matching). */
static int
cmp_lexeme(const void *a, const void *b)
{
	const Token *x = a;
	const Token *y = b;
	int			cmp = memcmp(x->str, y->str, Min(x->len, y->len));

	if (cmp == 0 && x->len != y->len)
		cmp = x->len < y->len ? -1 : 1;
	return cmp;
}

/*
 * The tsvector as tsvector_in lays it out: lexemes sorted and distinct (a
 * repeat keeps its first positions here), each followed, if it has
 * positions, by a short-aligned count and its strictly increasing positions.
 */
static void
build_tsvector(Doc *doc)
{
	int			n = 0;
	int32		lenstr = 0;
	TSVector	tsv;
	char	   *str;

	qsort(doc->tokens, doc->n, sizeof(Token), cmp_lexeme);
	for (int i = 0; i < doc->n; i++)
	{
		Token		t = doc->tokens[i];
		int32		end;

		if (n > 0 && cmp_lexeme(&doc->expected[n - 1], &t) == 0)
			continue;
		/* positions up to MAXENTRYPOS - 1, as the input functions limit them */
		if (t.npos > 0)
			t.npos = Min(t.npos, (MAXENTRYPOS - 2) / t.step + 1);
		end = lenstr + t.len;
		if (t.npos > 0)
			end = SHORTALIGN(end) + sizeof(uint16) + sizeof(WordEntryPos) * t.npos;
		if (end > MAXSTRPOS)
			break;				/* tsvector_in: "string is too long for tsvector" */
		lenstr = end;
		doc->expected[n++] = t;
	}
	doc->n_expected = n;

	tsv = palloc0(CALCDATASIZE(n, lenstr));
	SET_VARSIZE(tsv, CALCDATASIZE(n, lenstr));
	tsv->size = n;
	str = STRPTR(tsv);
	lenstr = 0;
	for (int i = 0; i < n; i++)
	{
		Token	   *t = &doc->expected[i];
		WordEntry  *e = &ARRPTR(tsv)[i];

		e->pos = lenstr;
		e->len = t->len;
		e->haspos = t->npos > 0;
		memcpy(str + lenstr, t->str, t->len);
		lenstr += t->len;
		if (e->haspos)
		{
			WordEntryPos *pos = POSDATAPTR(tsv, e);

			lenstr = SHORTALIGN(lenstr);
			_POSVECPTR(tsv, e)->npos = t->npos;
			for (int k = 0; k < t->npos; k++)
			{
				WEP_SETPOS(pos[k], 1 + k * t->step);
				WEP_SETWEIGHT(pos[k], k & 3);
			}
			lenstr += sizeof(uint16) + sizeof(WordEntryPos) * t->npos;
		}
	}
	doc->value = PointerGetDatum(tsv);
}

/*
 * The gnb_token_fn: the token must be the next one expected; it is then
 * interned as the corpus reader interns it (a copy of the string, ids in
 * order of first appearance).
 */
static void
check_token(void *arg, const char *str, int len, int32 count)
{
	Doc		   *doc = arg;
	const Token *t;
	TokenKey	key = token_key(str, len);
	VocabEntry *e;
	bool		found;

	if (doc->seen >= doc->n_expected)
		shim_fail("gnb_each_token: more tokens than the document has (%d)", doc->n_expected);
	t = &doc->expected[doc->seen];
	if (len != t->len || memcmp(str, t->str, len) != 0)
		shim_fail("gnb_each_token: token %d is not the document's", doc->seen);
	if (count != (t->npos > 0 ? t->npos : 1))
		shim_fail("gnb_each_token: token %d counted %d times, not %d", doc->seen, count,
				  t->npos > 0 ? t->npos : 1);
	doc->seen++;
	doc->seen_total += count;

	e = vocab_insert(doc->vocab, key, &found);
	if (!found)
	{
		char	   *copy = palloc(len + 1);

		memcpy(copy, str, len);
		copy[len] = '\0';
		e->key.str = copy;
		e->id = doc->n_words++;
		doc->word_count[e->id] = 0;
	}
	doc->word_count[e->id] += count;
}

static void
each_token(void *arg)
{
	Doc		   *doc = arg;

	gnb_each_token(doc->value, doc->is_tsvector, check_token, doc);
}

/* The aggregate over two rows, the document under two labels. */
static void
aggregate(void *arg)
{
	Doc		   *doc = arg;
	PGFunction	add = doc->is_tsvector ? gibbs_nb_counts_state_add_tsvector
		: gibbs_nb_counts_state_add_text_array;
	const char *labels[2] = {"spam", "ham"};
	Datum		state = (Datum) 0;
	Datum		flat;
	Datum		merged = (Datum) 0;
	bool		isnull;
	LOCAL_FCINFO(fcinfo, 3);

	for (int row = 0; row < 2; row++)
	{
		InitFunctionCallInfoData(*fcinfo, NULL, 3, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = state;
		fcinfo->args[0].isnull = row == 0;
		fcinfo->args[1].value = PointerGetDatum(cstring_to_text_with_len(labels[row], strlen(labels[row])));
		fcinfo->args[1].isnull = false;
		fcinfo->args[2].value = doc->value;
		fcinfo->args[2].isnull = false;
		state = add(fcinfo);
	}
	doc->counts = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_final, 1, state, (Datum) 0,
											 NULL, &isnull));
	gnb_counts_parse(doc->counts, &doc->pc, true);

	/*
	 * The state as it leaves a process (its sorted form), combined TIMES
	 * times, as a leader or a coordinator combines the states it is sent:
	 * the runs are merged when there are too many, and at the end.
	 */
	flat = shim_call(gibbs_nb_counts_state_send, 1, state, (Datum) 0, NULL, &isnull);
	for (int i = 0; i < TIMES; i++)
		merged = shim_call(gibbs_nb_counts_state_combine, 2, merged, flat, NULL, &isnull);
	doc->merged = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_final, 1, merged, (Datum) 0,
											 NULL, &isnull));
	gnb_counts_parse(doc->merged, &doc->merged_pc, true);
}

/*
 * The aggregate's cells: each distinct token under each label, its sum,
 * times `times` (its sorted form combined that many times).
 */
static void
check_cells(Doc *doc, const GnbParsedCounts *pc, int64 times)
{
	GnbCountsIter it;
	int32		cls,
				word;
	int64		count;

	if (pc->n_classes != 2 || pc->n_words != doc->n_words || pc->n_cells != 2 * (int64) doc->n_words)
		shim_fail("aggregate: %d classes, %d tokens, " INT64_FORMAT " cells for %d distinct tokens",
				  pc->n_classes, pc->n_words, pc->n_cells, doc->n_words);
	gnb_counts_iter_init(&it, pc);
	while (gnb_counts_next(&it, &cls, &word, &count))
	{
		VocabEntry *e;

		e = vocab_lookup(doc->vocab, token_key(pc->word_str[word], pc->word_len[word]));
		if (e == NULL || count != times * doc->word_count[e->id])
			shim_fail("aggregate: token %d of class %d counted " INT64_FORMAT " times (x" INT64_FORMAT ")",
					  word, cls, count, times);
	}
}

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Input		in = {data, size};
	Doc			doc = {0};
	int			distinct;

	read_doc(&in, &doc);
	doc.expected = palloc(sizeof(Token) * (doc.n + 1));
	if (doc.is_tsvector)
		build_tsvector(&doc);
	else
		build_text_array(&doc);
	for (int i = 0; i < doc.n_expected; i++)
		doc.expected_total += doc.expected[i].npos > 0 ? doc.expected[i].npos : 1;

	/* every token once, in order, with its count: no error is possible */
	doc.vocab = vocab_create(CurrentMemoryContext, 64, NULL);
	doc.word_count = palloc(sizeof(int64) * (doc.n_expected + 1));
	if (!shim_try(each_token, &doc))
		shim_fail("gnb_each_token: error %s: %s", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	if (doc.seen != doc.n_expected || doc.seen_total != doc.expected_total)
		shim_fail("gnb_each_token: %d tokens counted " INT64_FORMAT " times, not %d and " INT64_FORMAT,
				  doc.seen, doc.seen_total, doc.n_expected, doc.expected_total);

	/* the hash holds each distinct token, and finds every one */
	qsort(doc.expected, doc.n_expected, sizeof(Token), cmp_lexeme);
	distinct = 0;
	for (int i = 0; i < doc.n_expected; i++)
	{
		Token	   *t = &doc.expected[i];
		VocabEntry *e = vocab_lookup(doc.vocab, token_key(t->str, t->len));

		if (e == NULL || e->key.len != t->len || memcmp(e->key.str, t->str, t->len) != 0)
			shim_fail("vocab_hash: token %d not found again", i);
		distinct += (i == 0 || cmp_lexeme(&doc.expected[i - 1], t) != 0);
	}
	if (distinct != doc.n_words || doc.vocab->members != (uint32) doc.n_words)
		shim_fail("vocab_hash: %u entries for %d distinct tokens", doc.vocab->members, distinct);

	if (!shim_try(aggregate, &doc))
		shim_fail("aggregate: error %s: %s", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	check_cells(&doc, &doc.pc, 1);
	if (!doc.merged_pc.sorted)
		shim_fail("aggregate: a merge not in the sorted form");
	check_cells(&doc, &doc.merged_pc, TIMES);

	shim_free_all();
	return 0;
}
