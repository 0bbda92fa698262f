/*
 * fuzz_counts.c
 *	  libFuzzer target: the bytes of a gibbs_nb_class_counts value, as any
 *	  bytea a user can pass to gibbs_nb_class_counts_rows.
 *
 * The input goes every way such a value goes in src/class_counts.c, which
 * is linked in unchanged (with shim.c for the backend):
 *
 * - gnb_counts_parse with the distinct check (gibbs_nb_class_counts_rows,
 *	 the corpus reader): it fails with 22P03 and nothing else, or every cell
 *	 of the parse is in range, which we check by walking them all and reading
 *	 the strings they name (AddressSanitizer sees any read out of the value);
 * - gibbs_nb_class_counts_rows: fails as the parse did, or with 22021 when
 *	 a class or token is not UTF-8 (or holds NUL), or returns exactly the
 *	 cells, in order, as valid text;
 * - the deserialise function (the parse without the distinct check), then
 *	 the combine function twice, so that both merges run: a parsed state
 *	 into an empty one, and a hashed state into a parsed one made hashed;
 *	 then the final function, whose value must parse with the distinct
 *	 check and hold the same strings and twice the counts.
 *
 * "The same strings and counts" is checked without a map: the sum over the
 * cells of count x hash(class, token) is linear, so it survives merging of
 * repeated cells and strings, and must come out exactly twice the input's.
 * Any other outcome aborts (shim_fail): libFuzzer reports it as a crash.
 */
#include "gibbs_nb.h"
#include "tokens.h"
#include "shim.h"

#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "nodes/execnodes.h"

extern PGDLLEXPORT Datum gibbs_nb_class_counts_deserialize(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_class_counts_combine(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_class_counts_serialize(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum gibbs_nb_class_counts_final(PG_FUNCTION_ARGS);
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
	Datum		partial[2];		/* deserialised */
	bytea	   *combined;		/* the final function's value */
	GnbParsedCounts out;
} CountsRun;

/* Call a V1 function with up to two arguments (a NULL pointer is SQL NULL). */
static Datum
call(PGFunction fn, int nargs, Datum a0, Datum a1, Node *resultinfo, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 2);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, nargs, InvalidOid, NULL, resultinfo);
	fcinfo->args[0].value = a0;
	fcinfo->args[0].isnull = a0 == (Datum) 0;
	fcinfo->args[1].value = a1;
	fcinfo->args[1].isnull = a1 == (Datum) 0;
	result = fn(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}

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
	*total = 0;
	*weighted = 0;
	for (int64 i = 0; i < pc->n_cells; i++)
	{
		int32		cls,
					word;
		int64		count;

		gnb_counts_cell(pc, i, &cls, &word, &count);
		if (cls < 0 || cls >= pc->n_classes || word < 0 || word >= pc->n_words || count <= 0)
			shim_fail("cell " INT64_FORMAT " out of range after a successful parse", i);
		*total += count;
		*weighted += (uint64) count * pair_hash(pc->class_str[cls], pc->class_len[cls],
												pc->word_str[word], pc->word_len[word]);
	}
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

	for (int64 i = 0; i < pc->n_cells; i++)
	{
		int32		cls,
					word;
		int64		count;

		gnb_counts_cell(pc, i, &cls, &word, &count);
		keys[i] = ((uint64) cls << 32) | (uint32) word;
	}
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

	if (nulls[0] || nulls[1] || nulls[2] || run->rows >= pc->n_cells)
		shim_fail("rows: a NULL, or more rows than cells");
	gnb_counts_cell(pc, run->rows, &cls, &word, &count);
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
	(void) call(gibbs_nb_class_counts_rows, 1, PointerGetDatum(run->value), (Datum) 0,
				(Node *) &rsinfo, &isnull);
	shim_row_hook = NULL;
}

static void
deserialize(void *arg)
{
	CountsRun  *run = arg;
	bool		isnull;

	for (int i = 0; i < 2; i++)
		run->partial[i] = call(gibbs_nb_class_counts_deserialize, 2, PointerGetDatum(run->value),
							   (Datum) 0, NULL, &isnull);
}

static void
combine(void *arg)
{
	CountsRun  *run = arg;
	bool		isnull;
	Datum		hashed;
	Datum		both;
	bytea	   *serialized;

	/* merged from its parsed form into an empty state */
	hashed = call(gibbs_nb_class_counts_combine, 2, (Datum) 0, run->partial[0], NULL, &isnull);
	/* a still parsed state made hashed, then a hashed one merged into it */
	both = call(gibbs_nb_class_counts_combine, 2, run->partial[1], hashed, NULL, &isnull);
	/* workers that saw no rows: NULL states, which change nothing */
	if (call(gibbs_nb_class_counts_combine, 2, both, (Datum) 0, NULL, &isnull) != both || isnull)
		shim_fail("combine: a NULL state changed the other");
	(void) call(gibbs_nb_class_counts_combine, 2, (Datum) 0, (Datum) 0, NULL, &isnull);
	if (!isnull)
		shim_fail("combine: two NULL states gave a state");
	run->combined = DatumGetByteaPP(call(gibbs_nb_class_counts_final, 1, both, (Datum) 0,
										 NULL, &isnull));
	/* what a worker sends the leader is the same bytes */
	serialized = DatumGetByteaPP(call(gibbs_nb_class_counts_serialize, 1, both, (Datum) 0,
									  NULL, &isnull));
	if (VARSIZE_ANY(serialized) != VARSIZE_ANY(run->combined) ||
		memcmp(serialized, run->combined, VARSIZE_ANY(serialized)) != 0)
		shim_fail("serialise: not the final function's value");
}

static void
parse_combined(void *arg)
{
	CountsRun  *run = arg;

	gnb_counts_parse(run->combined, &run->out, true);
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
 * The deserialise function checks less than the parse with the distinct
 * check, never more; what it accepts is combined twice and finalised, and
 * must come back with the same strings and twice the counts (or 22003 when
 * twice the counts cannot be held).
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

	if (!shim_try(deserialize, run))
	{
		if (parsed || shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION)
			shim_fail("deserialise: unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode),
					  shim_errmsg);
		return;
	}
	/* the cells as the deserialise function saw them */
	if (!shim_try(parse_loose, run))
		shim_fail("deserialise: accepted what a plain parse rejects");
	walk_cells(in, &in_total, &in_weighted);
	if (parsed && (in_total != run->total || in_weighted != run->weighted))
		shim_fail("parse: the distinct check changed the cells");

	if (!shim_try(combine, run))
	{
		if (shim_sqlerrcode != ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE || 2 * in_total <= PG_INT64_MAX)
			shim_fail("combine: unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode),
					  shim_errmsg);
		return;
	}
	if (!shim_try(parse_combined, run))
		shim_fail("final: a value its own parse rejects: %s", shim_errmsg);
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
	check_combine(&run, parsed);

	shim_free_all();
	return 0;
}
