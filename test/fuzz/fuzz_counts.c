/*
 * fuzz_counts.c
 *	  libFuzzer target: the bytes of a gibbs_nb_class_counts value, as any
 *	  bytea a user can pass to gibbs_nb_class_counts_rows, and as any value a
 *	  user can hand the input functions of the aggregate's state type,
 *	  gibbs_nb.class_counts_state.
 *
 * The input goes every way such a value goes in the files of src/counts, which
 * is linked in unchanged (with shim.c for the backend):
 *
 * - gnb_counts_parse with the distinct check (gibbs_nb_class_counts_rows,
 *	 the corpus reader, the type's input functions): it fails with 22P03
 *	 and nothing else, or every cell of the parse is in range, which we
 *	 check by walking them all and reading the strings they name
 *	 (AddressSanitizer sees any read out of the value);
 * - gibbs_nb_class_counts_rows: fails as the parse did, or with 22021 when
 *	 a class or token is not UTF-8 (or holds NUL), or returns exactly the
 *	 cells, in order, as valid text;
 * - the state type's binary input (the bytes) and text input (their
 *	 base64): each fails as the rows function does, or gives back exactly
 *	 the bytes; the text input of the bytes themselves as text fails with
 *	 22P02, 22P03 or 22021, or gives a value the parse accepts;
 * - the combine function on the bytes as a flat state (what it gets from a
 *	 parallel worker or a Citus shard; a plain parse without the distinct
 *	 check): into an empty state, into an expanded one in place, and an
 *	 expanded (read-only) one into a copy of the flat one; then the final,
 *	 send and output functions, whose values must parse with the distinct
 *	 check, hold the same strings and twice the counts, and agree.
 *
 * "The same strings and counts" is checked without a map: the sum over the
 * cells of count x hash(class, token) is linear, so it survives merging of
 * repeated cells and strings, and must come out exactly twice the input's.
 * Any other outcome aborts (shim_fail): libFuzzer reports it as a crash.
 */
#include "gibbs_nb.h"
#include "counts/counts.h"
#include "counts/tokens.h"
#include "shim.h"

#include "common/base64.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/execnodes.h"
#include "utils/expandeddatum.h"

extern PGDLLEXPORT Datum gibbs_nb_counts_state_in(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_out(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_recv(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_send(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_combine(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_counts_state_final(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_class_counts_rows(PG_FUNCTION_ARGS);

extern int	LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

/* What one input gave at each step. */
typedef struct CountsRun
{
	bytea	   *value;
	GnbParsedCounts pc;			/* with the distinct check */
	GnbParsedCounts loose;		/* without, as the deserialise function */
	int128		total;			/* of the counts */
	uint64		weighted;		/* sum of count x hash(class, token) */
	int64		rows;			/* returned by the rows function */
	GnbCountsIter rows_it;		/* the cell each row must be */
	char	   *text;			/* a text form handed to the input function */
	bytea	   *input;			/* what an input function returned */
	Datum		both;			/* the value merged into itself, in place */
	Datum		copied;			/* the same, merged into a copy */
	bytea	   *combined;		/* the final function's value of `both` */
	bytea	   *combined_copy;	/* and of `copied` */
	GnbParsedCounts out;
	bool		strict_out;		/* parse `combined` with the distinct check */
} CountsRun;

/* The weight of a (class, token) pair in CountsRun.weighted. */
static uint64
pair_hash(const char *cls, int cls_len, const char *word, int word_len)
{
	uint64		h = ((uint64) token_hash(cls, cls_len, first_word(cls, cls_len)) << 32) |
		token_hash(word, word_len, first_word(word, word_len));

	return mix64(h, UINT64CONST(0x9e3779b97f4a7c15)) | 1;
}

/*
 * Walk every cell of a parse: what the parse promises (cells in range,
 * counts positive), and the strings they name read in full.
 */
static void
walk_cells(const GnbParsedCounts *pc, int128 *total, uint64 *weighted)
{
	GnbCountsIter it;
	int32		cls,
				word;
	int64		count;
	int64		i = 0;

	*total = 0;
	*weighted = 0;
	gnb_counts_iter_init(&it, pc);
	for (; gnb_counts_next(&it, &cls, &word, &count); i++)
	{
		if (cls < 0 || cls >= pc->n_classes || word < 0 || word >= pc->n_words || count <= 0)
			shim_fail("cell " INT64_FORMAT " out of range after a successful parse", i);
		*total += count;
		*weighted += (uint64) count * pair_hash(pc->class_str[cls], pc->class_len[cls],
												pc->word_str[word], pc->word_len[word]);
	}
	if (i != pc->n_cells)
		shim_fail("parse: " INT64_FORMAT " cells read of " INT64_FORMAT, i, pc->n_cells);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return (x > y) - (x < y);
}

/* The number of distinct (class, token) id pairs among the cells. */
static int64
distinct_cells(const GnbParsedCounts *pc)
{
	uint64	   *keys = palloc_extended(sizeof(uint64) * (pc->n_cells + 1), MCXT_ALLOC_HUGE);
	int64		n = 0;
	GnbCountsIter it;
	int32		cls,
				word;
	int64		count;

	gnb_counts_iter_init(&it, pc);
	for (int64 i = 0; gnb_counts_next(&it, &cls, &word, &count); i++)
		keys[i] = ((uint64) cls << 32) | (uint32) word;
	qsort(keys, pc->n_cells, sizeof(uint64), cmp_u64);
	for (int64 i = 0; i < pc->n_cells; i++)
		n += (i == 0 || keys[i] != keys[i - 1]);
	return n;
}

static bool
all_utf8(const char **str, const int32 *len, int32 n)
{
	for (int32 i = 0; i < n; i++)
		if (pg_encoding_verifymbstr(PG_UTF8, str[i], len[i]) != len[i])
			return false;
	return true;
}

typedef struct ParseArg
{
	bytea	   *value;
	GnbParsedCounts *pc;
	bool		strict;
} ParseArg;

static void
parse_arg(void *arg)
{
	ParseArg   *pa = arg;

	gnb_counts_parse(pa->value, pa->pc, pa->strict);
}

/* Whether a value parses (into *pc), with the distinct check or without. */
static bool
parse_ok(bytea *value, GnbParsedCounts *pc, bool strict)
{
	ParseArg	pa = {value, pc, strict};

	return shim_try(parse_arg, &pa);
}

static void
parse_value(void *arg)
{
	CountsRun  *run = arg;

	gnb_counts_parse(run->value, &run->pc, true);
}

static void
parse_loose(void *arg)
{
	CountsRun  *run = arg;

	gnb_counts_parse(run->value, &run->loose, false);
}

/* A row of gibbs_nb_class_counts_rows: cell number run->rows of the parse. */
static void
check_row(const Datum *values, const bool *nulls, void *arg)
{
	CountsRun  *run = arg;
	const GnbParsedCounts *pc = &run->pc;
	text	   *cls_text = DatumGetTextPP(values[0]);
	text	   *word_text = DatumGetTextPP(values[1]);
	int32		cls,
				word;
	int64		count;

	if (nulls[0] || nulls[1] || nulls[2] || !gnb_counts_next(&run->rows_it, &cls, &word, &count))
		shim_fail("rows: a NULL, or more rows than cells");
	if (VARSIZE_ANY_EXHDR(cls_text) != pc->class_len[cls] ||
		memcmp(VARDATA_ANY(cls_text), pc->class_str[cls], pc->class_len[cls]) != 0 ||
		VARSIZE_ANY_EXHDR(word_text) != pc->word_len[word] ||
		memcmp(VARDATA_ANY(word_text), pc->word_str[word], pc->word_len[word]) != 0 ||
		DatumGetInt64(values[2]) != count)
		shim_fail("rows: row " INT64_FORMAT " is not its cell", run->rows);
	if (pg_encoding_verifymbstr(PG_UTF8, VARDATA_ANY(cls_text), VARSIZE_ANY_EXHDR(cls_text)) !=
		VARSIZE_ANY_EXHDR(cls_text) ||
		pg_encoding_verifymbstr(PG_UTF8, VARDATA_ANY(word_text), VARSIZE_ANY_EXHDR(word_text)) !=
		VARSIZE_ANY_EXHDR(word_text))
		shim_fail("rows: row " INT64_FORMAT " is not valid UTF-8", run->rows);
	run->rows++;
}

static void
list_rows(void *arg)
{
	CountsRun  *run = arg;
	ReturnSetInfo rsinfo = {.type = T_ReturnSetInfo};
	bool		isnull;

	shim_row_hook = check_row;
	shim_row_arg = run;
	gnb_counts_iter_init(&run->rows_it, &run->pc);
	(void) shim_call(gibbs_nb_class_counts_rows, 1, PointerGetDatum(run->value), (Datum) 0,
				(Node *) &rsinfo, &isnull);
	shim_row_hook = NULL;
}

static void
receive(void *arg)
{
	CountsRun  *run = arg;
	StringInfoData buf;
	bool		isnull;

	buf.data = VARDATA(run->value);
	buf.len = VARSIZE(run->value) - VARHDRSZ;
	buf.maxlen = buf.len;
	buf.cursor = 0;
	run->input = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_recv, 1, PointerGetDatum(&buf),
									  (Datum) 0, NULL, &isnull));
	if (buf.cursor != buf.len)
		shim_fail("recv: did not read the whole message");
}

static void
text_input(void *arg)
{
	CountsRun  *run = arg;
	bool		isnull;

	run->input = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_in, 1, CStringGetDatum(run->text),
									  (Datum) 0, NULL, &isnull));
}

static bool
same_bytes(const bytea *a, const bytea *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * An input function (recv or the text input of the base64) must accept
 * exactly what the rows function accepts in the sorted format (a state is
 * never in the plain one), fail as it does, and give back the very bytes.
 */
static void
check_input(CountsRun *run, void (*fn) (void *), bool parsed, const char *parse_error,
			const char *what)
{
	bool		valid = parsed && run->pc.sorted &&
		all_utf8(run->pc.class_str, run->pc.class_len, run->pc.n_classes) &&
		all_utf8(run->pc.word_str, run->pc.word_len, run->pc.n_words);

	if (shim_try(fn, run))
	{
		if (!valid)
			shim_fail("%s: accepted a value the rows function rejects, or a plain one", what);
		if (!same_bytes(run->input, run->value))
			shim_fail("%s: not the bytes it was given", what);
	}
	else if (!parsed)
	{
		/* a value whose head says plain is refused as such before it is read */
		uint32		format = 0;

		if (VARSIZE(run->value) - VARHDRSZ >= 2 * sizeof(uint32))
			memcpy(&format, VARDATA(run->value) + sizeof(uint32), sizeof(uint32));
		if (shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION ||
			(strcmp(shim_errmsg, parse_error) != 0 &&
			 !(format == 1 && strstr(shim_errmsg, "sorted form") != NULL)))
			shim_fail("%s: a different error than the parse's: %s: %s", what,
					  shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	}
	else if (!run->pc.sorted)
	{
		if (shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION ||
			strstr(shim_errmsg, "sorted form") == NULL)
			shim_fail("%s: a plain value refused with %s: %s", what,
					  shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	}
	else if (shim_sqlerrcode != ERRCODE_CHARACTER_NOT_IN_REPERTOIRE || valid)
		shim_fail("%s: unexpected error %s: %s", what, shim_sqlstate(shim_sqlerrcode), shim_errmsg);
}

/* The input functions, on the bytes and on text made of them. */
static void
check_inputs(CountsRun *run, bool parsed, const char *parse_error, const uint8 *data, size_t size)
{
	int			len = VARSIZE(run->value) - VARHDRSZ;
	int			max = pg_b64_enc_len(len);
	int			n;
	GnbParsedCounts pc;

	check_input(run, receive, parsed, parse_error, "recv");

	run->text = palloc(max + 1);
	n = pg_b64_encode((const gnb_b64_byte *) VARDATA(run->value), len, run->text, max);
	if (n < 0)
		shim_fail("base64 encoding failed");
	run->text[n] = '\0';
	check_input(run, text_input, parsed, parse_error, "input (base64)");

	/* the bytes themselves as text, up to a NUL: mostly not base64 */
	run->text = palloc(size + 1);
	memcpy(run->text, data, size);
	run->text[size] = '\0';
	if (shim_try(text_input, run))
	{
		if (!parse_ok(run->input, &pc, true))
			shim_fail("input (text): accepted a value the parse rejects");
	}
	else if (shim_sqlerrcode != ERRCODE_INVALID_TEXT_REPRESENTATION &&
			 shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION &&
			 shim_sqlerrcode != ERRCODE_CHARACTER_NOT_IN_REPERTOIRE)
		shim_fail("input (text): unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode),
				  shim_errmsg);
}

static void
combine(void *arg)
{
	CountsRun  *run = arg;
	bool		isnull;
	Datum		flat = PointerGetDatum(run->value);
	Datum		hashed;

	/* the flat value merged into an empty state */
	hashed = shim_call(gibbs_nb_counts_state_combine, 2, (Datum) 0, flat, NULL, &isnull);
	if (isnull || !VARATT_IS_EXTERNAL_EXPANDED_RW(DatumGetPointer(hashed)))
		shim_fail("combine: not a read-write expanded state");
	/* that state (read-only, as the leader's own partial state) into a copy of the flat one */
	run->copied = shim_call(gibbs_nb_counts_state_combine, 2, flat,
					   EOHPGetRODatum(DatumGetEOHP(hashed)), NULL, &isnull);
	/* the flat value into the expanded state: in place */
	run->both = shim_call(gibbs_nb_counts_state_combine, 2, hashed, flat, NULL, &isnull);
	if (DatumGetPointer(run->both) != DatumGetPointer(hashed))
		shim_fail("combine: a read-write state was not changed in place");
	/* workers that saw no rows: NULL states, which change nothing */
	if (shim_call(gibbs_nb_counts_state_combine, 2, run->both, (Datum) 0, NULL, &isnull) != run->both ||
		isnull)
		shim_fail("combine: a NULL state changed the other");
	(void) shim_call(gibbs_nb_counts_state_combine, 2, (Datum) 0, (Datum) 0, NULL, &isnull);
	if (!isnull)
		shim_fail("combine: two NULL states gave a state");
}

static void
finalize(void *arg)
{
	CountsRun  *run = arg;
	bool		isnull;
	bytea	   *sent;

	run->combined = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_final, 1,
										 EOHPGetRODatum(DatumGetEOHP(run->both)), (Datum) 0,
										 NULL, &isnull));
	run->combined_copy = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_final, 1, run->copied,
											  (Datum) 0, NULL, &isnull));
	/* the binary form is the same bytes */
	sent = DatumGetByteaPP(shim_call(gibbs_nb_counts_state_send, 1, run->both, (Datum) 0, NULL,
								&isnull));
	if (!same_bytes(sent, run->combined))
		shim_fail("send: not the final function's value");
	run->text = DatumGetCString(shim_call(gibbs_nb_counts_state_out, 1, run->both, (Datum) 0, NULL,
									 &isnull));
}

static void
parse_combined(void *arg)
{
	CountsRun  *run = arg;

	gnb_counts_parse(run->combined, &run->out, run->strict_out);
}

/*
 * gibbs_nb_class_counts_rows must fail as the parse did, or with 22021 when a
 * string is not valid text, or return exactly the cells.
 */
static void
check_rows(CountsRun *run, bool parsed, const char *parse_error)
{
	const GnbParsedCounts *pc = &run->pc;

	if (shim_try(list_rows, run))
	{
		if (!parsed || run->rows != pc->n_cells ||
			!all_utf8(pc->class_str, pc->class_len, pc->n_classes) ||
			!all_utf8(pc->word_str, pc->word_len, pc->n_words))
			shim_fail("rows: succeeded where it must not, or not one row per cell");
	}
	else if (!parsed)
	{
		if (shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION ||
			strcmp(shim_errmsg, parse_error) != 0)
			shim_fail("rows: a different error than the parse's: %s: %s",
					  shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	}
	else if (shim_sqlerrcode != ERRCODE_CHARACTER_NOT_IN_REPERTOIRE ||
			 (all_utf8(pc->class_str, pc->class_len, pc->n_classes) &&
			  all_utf8(pc->word_str, pc->word_len, pc->n_words)))
		shim_fail("rows: unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
}

/*
 * The combine and final functions take a flat state in the sorted format
 * and nothing else, checked as the plain parse checks it (its values come
 * from the input functions or from flattening, never from a user
 * directly), never more; what they accept is merged with itself both ways
 * and finalised, and must come back with the same strings and twice the
 * counts (or 22003 when twice the counts cannot be held).  The combine
 * function checks a value's head; its records are checked as the final
 * function merges them: an error may come from either.
 */
static void
check_combine(CountsRun *run, bool parsed)
{
	const GnbParsedCounts *in = &run->loose;
	const GnbParsedCounts *out = &run->out;
	int128		in_total;
	uint64		in_weighted;
	int128		out_total;
	uint64		out_weighted;
	GnbParsedCounts copy_pc;
	int128		copy_total;
	uint64		copy_weighted;
	bool		loose_ok = shim_try(parse_loose, run) && run->loose.sorted;

	if (!shim_try(combine, run) || !shim_try(finalize, run))
	{
		if (!loose_ok)
		{
			/* the merge may meet a count too large before the bad part */
			if ((parsed && run->pc.sorted) ||
				(shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION &&
				 shim_sqlerrcode != ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE))
				shim_fail("combine: unexpected error on a value the plain parse rejects: %s: %s",
						  shim_sqlstate(shim_sqlerrcode), shim_errmsg);
			return;
		}
		walk_cells(in, &in_total, &in_weighted);
		if (shim_sqlerrcode != ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE || 2 * in_total <= PG_INT64_MAX)
			shim_fail("combine: unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode),
					  shim_errmsg);
		return;
	}
	if (!loose_ok)
		shim_fail("combine: accepted what a plain parse rejects, or a plain value");
	/* the cells as the combine function saw them */
	walk_cells(in, &in_total, &in_weighted);
	if (parsed && (in_total != run->total || in_weighted != run->weighted))
		shim_fail("parse: the distinct check changed the cells");

	/* with the distinct check when the input passed it: its hashes are its words' */
	run->strict_out = parsed;
	if (!shim_try(parse_combined, run))
		shim_fail("final: a value its own parse rejects: %s", shim_errmsg);
	if (!out->sorted)
		shim_fail("final: a merge not in the sorted form");
	walk_cells(out, &out_total, &out_weighted);
	if (out_total != 2 * in_total || out_weighted != 2 * in_weighted)
		shim_fail("combine: the counts or strings changed");
	if (out->n_classes > in->n_classes || out->n_words > in->n_words ||
		out->n_cells > distinct_cells(in))
		shim_fail("combine: more classes, tokens or cells than its inputs");
	/* a value with no repeated string comes back with exactly its strings and cells */
	if (parsed && (out->n_classes != in->n_classes || out->n_words != in->n_words ||
				   out->n_cells != distinct_cells(in)))
		shim_fail("combine: strings or cells lost");
	/* merged into a copy of the flat value: the same counts */
	if (!parse_ok(run->combined_copy, &copy_pc, parsed))
		shim_fail("final: the copy's value does not parse");
	walk_cells(&copy_pc, &copy_total, &copy_weighted);
	if (copy_total != out_total || copy_weighted != out_weighted)
		shim_fail("combine: a read-only state merged into a copy gave other counts");
	/* the text form reads back as the same bytes, when the input was valid text */
	if (parsed && all_utf8(out->class_str, out->class_len, out->n_classes) &&
		all_utf8(out->word_str, out->word_len, out->n_words))
	{
		if (!shim_try(text_input, run))
			shim_fail("output: its text does not read back: %s: %s",
					  shim_sqlstate(shim_sqlerrcode), shim_errmsg);
		if (!same_bytes(run->input, run->combined))
			shim_fail("output: its text reads back as other bytes");
	}
}

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	CountsRun	run = {0};
	bool		parsed;
	char		parse_error[SHIM_ERRMSG_LEN];

	run.value = palloc(VARHDRSZ + size);
	SET_VARSIZE(run.value, VARHDRSZ + size);
	if (size)
		memcpy(VARDATA(run.value), data, size);

	/* the parse: 22P03, or a value whose every cell we can walk */
	parsed = shim_try(parse_value, &run);
	if (!parsed && shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION)
		shim_fail("parse: unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	strlcpy(parse_error, shim_errmsg, sizeof(parse_error));
	if (parsed)
		walk_cells(&run.pc, &run.total, &run.weighted);

	check_rows(&run, parsed, parse_error);
	check_inputs(&run, parsed, parse_error, data, size);
	check_combine(&run, parsed);

	shim_free_all();
	return 0;
}
