/*
 * parse.c
 *	  A gibbs_nb_class_counts value parsed and validated (every byte, as a
 *	  hostile role may pass any bytea), and its cells read in order.
 */
#include "gibbs_nb.h"

#include "counts/counts.h"
#include "counts/counts_state.h"
#include "counts/tokens.h"

#include "access/transam.h"
#include "catalog/dependency.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/expandeddatum.h"
#include "utils/memutils.h"


/* Start reading the cells of a parsed value, in their order. */
void
gnb_counts_iter_init(GnbCountsIter *it, const GnbParsedCounts *pc)
{
	it->pc = pc;
	it->i = 0;
	it->p = pc->cells;
	it->word = -1;
	it->left = 0;
}

/*
 * The next cell of a parsed value: its class, word and count; false when
 * there is none.  The parse checked all of it: nothing is checked again.
 */
bool
gnb_counts_next(GnbCountsIter *it, int32 *cls, int32 *word, int64 *count)
{
	const GnbParsedCounts *pc = it->pc;

	if (it->i >= pc->n_cells)
		return false;
	if (!pc->sorted)
	{
		int32		cell[2];

		memcpy(cell, pc->cells + it->i * CELL_SIZE, sizeof(cell));
		memcpy(count, pc->cells + it->i * CELL_SIZE + sizeof(cell), sizeof(int64));
		*cls = cell[0];
		*word = cell[1];
	}
	else
	{
		while (it->left == 0)
		{
			uint32		hash;
			const char *str;
			int32		len;

			it->left = read_record(&it->p, &hash, &str, &len);
			it->word++;
		}
		*cls = (int32) read_varint(&it->p);
		*count = (int64) read_varint(&it->p);
		*word = it->word;
		it->left--;
	}
	it->i++;
	return true;
}

void
counts_invalid_counts(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid gibbs_nb_class_counts value: %s", why)));
}

/* n strings of a plain value (int32 length + bytes); str, len may be NULL. */
static void
read_strings(const char **p, const char *end, int32 n, const char **str, int32 *len)
{
	for (int32 i = 0; i < n; i++)
	{
		int32		l;

		if (end - *p < (ptrdiff_t) sizeof(int32))
			counts_invalid_counts("truncated");
		memcpy(&l, *p, sizeof(int32));
		*p += sizeof(int32);
		if (l < 0 || end - *p < l)
			counts_invalid_counts("bad string length");
		if (str != NULL)
		{
			str[i] = *p;
			len[i] = l;
		}
		*p += l;
	}
}

/*
 * Walk the word records of a sorted value, from *pp to end: every varint
 * well formed and in range (a class below n_classes, a count of at least
 * 1), the words in strictly increasing order (so none twice), with
 * validate every word's hash its own, and n_cells cells in all.  The words'
 * bytes and lengths go to str and len, when they are not NULL.
 */
static void
read_records(const char *p, const char *end, const GnbParsedCounts *pc, bool validate,
			 const char **str, int32 *len)
{
	int64		cells = 0;
	uint32		last_hash = 0;
	const char *last_str = NULL;
	int32		last_len = 0;
	int32	   *seen_at = NULL;

	/*
	 * seen_at[c]: the last word with a cell of class c.  With validate, no
	 * word has two cells of one class (a merge would merely add them up).
	 */
	if (validate)
	{
		seen_at = palloc_extended(sizeof(int32) * ((Size) pc->n_classes + 1), MCXT_ALLOC_HUGE);
		for (int32 c = 0; c < pc->n_classes; c++)
			seen_at[c] = -1;
	}
	for (int32 i = 0; i < pc->n_words; i++)
	{
		uint32		hash;
		uint64		l;
		uint64		n;

		if (end - p < (ptrdiff_t) sizeof(uint32))
			counts_invalid_counts("truncated");
		memcpy(&hash, p, sizeof(uint32));
		p += sizeof(uint32);
		if (!get_varint(&p, end, (uint64) MaxAllocSize, &l) || l > (uint64) (end - p))
			counts_invalid_counts("bad string length");
		if (i > 0 && word_order(last_hash, last_str, last_len, hash, p, (int32) l) >= 0)
			counts_invalid_counts("tokens out of order or repeated");
		if (validate && token_hash(p, (int) l, first_word(p, (int) l)) != hash)
			counts_invalid_counts("a token's hash is wrong");
		if (str != NULL)
		{
			str[i] = p;
			len[i] = (int32) l;
		}
		last_hash = hash;
		last_str = p;
		last_len = (int32) l;
		p += l;
		/* a cell takes at least two bytes */
		if (!get_varint(&p, end, (uint64) (end - p) / 2, &n))
			counts_invalid_counts("bad cell count");
		for (uint64 k = 0; k < n; k++)
		{
			uint64		cls;
			uint64		count;

			if (pc->n_classes == 0 ||
				!get_varint(&p, end, (uint64) pc->n_classes - 1, &cls) ||
				!get_varint(&p, end, (uint64) PG_INT64_MAX, &count) || count == 0)
				counts_invalid_counts("bad cell");
			if (seen_at != NULL)
			{
				if (seen_at[cls] == i)
					counts_invalid_counts("a token has two cells of one class");
				seen_at[cls] = i;
			}
		}
		cells += (int64) n;
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}
	if (p != end || cells != pc->n_cells)
		counts_invalid_counts("bad length");
	if (seen_at != NULL)
		pfree(seen_at);
}

/* No string twice among n, or counts_invalid_counts(why). */
static void
check_distinct_strings(const char **str, const int32 *len, int32 n, const char *why)
{
	vocab_hash *seen = vocab_create(CurrentMemoryContext, n + 1, NULL);
	bool		found;

	for (int32 i = 0; i < n; i++)
	{
		(void) vocab_insert(seen, token_key(str[i], len[i]), &found);
		if (found)
			counts_invalid_counts(why);
	}
	vocab_destroy(seen);
}

/*
 * The head of a value, of either format: its header, sizes bounded by its
 * length, and its classes (their bytes and lengths in arrays); pc->cells
 * is where a sorted value's word records start, or a plain value's cells
 * (its words walked over, not kept).  A sorted value's records are not
 * read: see read_records, and the merge's reader.
 */
void
counts_parse_head(bytea *value, GnbParsedCounts *pc)
{
	const char *p = VARDATA_ANY(value);
	const char *end = p + VARSIZE_ANY_EXHDR(value);
	uint32		header[2];

	if (end - p < (ptrdiff_t) COUNTS_HEADER_SIZE)
		counts_invalid_counts("too short");
	pc->size = end - p;
	memcpy(header, p, sizeof(header));
	p += sizeof(header);
	if (header[0] != COUNTS_MAGIC ||
		(header[1] != COUNTS_FORMAT_PLAIN && header[1] != COUNTS_FORMAT_SORTED))
		counts_invalid_counts("not produced by gibbs_nb_class_counts");
	pc->sorted = header[1] == COUNTS_FORMAT_SORTED;
	memcpy(&pc->n_classes, p, sizeof(int32));
	memcpy(&pc->n_words, p + sizeof(int32), sizeof(int32));
	memcpy(&pc->n_cells, p + 2 * sizeof(int32), sizeof(int64));
	p += 2 * sizeof(int32) + sizeof(int64);
	/* a string takes at least 4 bytes, a cell 16 (2 in a sorted value) */
	if (pc->n_classes < 0 || pc->n_words < 0 || pc->n_cells < 0 ||
		(int64) pc->n_classes + pc->n_words > (end - p) / (int64) sizeof(int32) ||
		pc->n_cells > (end - p) / (pc->sorted ? 2 : (int64) CELL_SIZE))
		counts_invalid_counts("bad sizes");
	pc->class_str = palloc_extended(sizeof(char *) * ((Size) pc->n_classes + 1), MCXT_ALLOC_HUGE);
	pc->class_len = palloc_extended(sizeof(int32) * ((Size) pc->n_classes + 1), MCXT_ALLOC_HUGE);
	read_strings(&p, end, pc->n_classes, pc->class_str, pc->class_len);
	pc->word_str = NULL;
	pc->word_len = NULL;
	pc->words = p;
	if (!pc->sorted)
	{
		read_strings(&p, end, pc->n_words, NULL, NULL);
		if (end - p != pc->n_cells * (int64) CELL_SIZE)
			counts_invalid_counts("bad length");
	}
	pc->cells = p;
}

/*
 * Parse and check a gibbs_nb_class_counts value, of either format, in
 * place: sizes and cells in range, counts positive; in the sorted format
 * the words in strictly increasing order (so no word twice).  With
 * validate, everything a value from elsewhere must be checked for besides:
 * no class twice, no word twice in the plain format, and in the sorted one
 * every word's hash its own.  Without, what a value this code wrote needs
 * checked before it is merged or read (a repeated class or plain word would
 * merely be merged).  With word_arrays, the words' bytes and lengths are
 * gathered into arrays (always for a plain value: its cells come after).
 */
static void
parse_value(bytea *value, GnbParsedCounts *pc, bool validate, bool word_arrays)
{
	counts_parse_head(value, pc);
	if (word_arrays || !pc->sorted)
	{
		pc->word_str = palloc_extended(sizeof(char *) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
		pc->word_len = palloc_extended(sizeof(int32) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
	}
	if (pc->sorted)
		read_records(pc->cells, VARDATA_ANY(value) + pc->size, pc, validate,
					 pc->word_str, pc->word_len);
	else
	{
		const char *p = pc->words;

		read_strings(&p, VARDATA_ANY(value) + pc->size, pc->n_words, pc->word_str, pc->word_len);
		for (int64 i = 0; i < pc->n_cells; i++)
		{
			int32		cell[2];
			int64		count;

			memcpy(cell, pc->cells + i * CELL_SIZE, sizeof(cell));
			memcpy(&count, pc->cells + i * CELL_SIZE + sizeof(cell), sizeof(int64));
			if (cell[0] < 0 || cell[0] >= pc->n_classes || cell[1] < 0 ||
				cell[1] >= pc->n_words || count <= 0)
				counts_invalid_counts("bad cell");
		}
	}

	if (!validate)
		return;
	if (!pc->sorted)
		check_distinct_strings(pc->word_str, pc->word_len, pc->n_words, "a token occurs twice");
	check_distinct_strings(pc->class_str, pc->class_len, pc->n_classes, "a class occurs twice");
}

/*
 * Parse a gibbs_nb_class_counts value, of either format, as readers of its
 * cells need it: the classes' and words' bytes and lengths in arrays, the
 * cells read in order by gnb_counts_next.  check_distinct: validate all of
 * it, as for a value from elsewhere (see parse_value).
 */
void
gnb_counts_parse(bytea *value, GnbParsedCounts *pc, bool check_distinct)
{
	parse_value(value, pc, check_distinct, true);
}

/*
 * Check that strings of a value are text in the database's encoding: the
 * parse checks only the layout, and a hand-made value can hold any bytes
 * (invalid sequences, NUL) that must not come out as text.  The error is
 * the one text input gives for such bytes (22021).
 */
void
counts_check_encoding(const char *const *str, const int32 *len, int32 n)
{
	for (int32 i = 0; i < n; i++)
		(void) pg_verifymbstr(str[i], len[i], false);
}


/*
 * Check all of a value a user hands the type's input functions: its layout,
 * no class or token twice, and every string valid text in the database's
 * encoding (22021), as gibbs_nb_class_counts_rows would check it.
 */
void
counts_validate(bytea *value)
{
	GnbParsedCounts pc;

	/* the format first: a plain value is refused before it is read */
	counts_parse_head(value, &pc);
	if (!pc.sorted)
		counts_invalid_counts("a state must be in the sorted form");
	pfree(pc.class_str);
	pfree(pc.class_len);
	gnb_counts_parse(value, &pc, true);
	counts_check_encoding(pc.class_str, pc.class_len, pc.n_classes);
	counts_check_encoding(pc.word_str, pc.word_len, pc.n_words);
	pfree(pc.class_str);
	pfree(pc.class_len);
	pfree(pc.word_str);
	pfree(pc.word_len);
}
