/*
 * counts_state.h
 *	  Inside the count aggregate (the files of src/counts): its state, its
 *	  serial forms, and what the files share.
 *
 * gibbs_nb_class_counts is the class x word count matrix as an aggregate
 * whose partial states travel (PostgreSQL's parallel workers, Citus's
 * workers), and gibbs_nb_class_counts_rows reads it back as rows.
 *
 * The transition state is a value of the type gibbs_nb.class_counts_state.
 * While the aggregate runs it is an expanded object (utils/expandeddatum.h):
 * the classes and the words seen (strings interned in the object's own
 * memory context; the words in an array by id, found through an
 * open-addressing table of (hash, id) slots), and one count per (class,
 * word) pair that occurred: each word holds its counts in the first two
 * classes it was seen in (with K = 2, all of them), further ones are cells
 * of a hash keyed by the pair.  Counting a token therefore costs one hash
 * of its bytes, a slot and its word; memory grows with the words and the
 * non-zero cells, never with classes x vocabulary, and the transition
 * changes it in place.
 *
 * Wherever the state must leave its process (a parallel worker's tuple to
 * the leader, a Citus shard's partial result to the coordinator)
 * PostgreSQL flattens it, and it is written in the sorted form below.  The
 * combine function keeps such values as they come (runs); the final
 * function merges them, with what its own process counted, in one pass, as
 * a merge sort merges: no hash table, no string hashed again.  The leader's
 * combine and final are the part of a parallel count that does not run in
 * parallel, and a worker's state crosses to the leader 64 kB at a time
 * through its tuple queue, each 64 kB a round trip between the processes:
 * both are why the form is sorted and compact.
 *
 * Serialised form (all integers in the server's byte order, written by
 * memcpy; a value from a machine of the other byte order fails the magic
 * check): uint32 magic, uint32 format, int32 n_classes, int32 n_words, int64
 * n_cells, then each class as int32 length + bytes, then the words and
 * cells, in one of two formats:
 *  1 (plain): each word as int32 length + bytes, then each cell as int32
 *	  class, int32 word, int64 count, in any order.  The final function
 *	  writes it for a state counted in one process alone: the words as they
 *	  are, without a sort.
 *  2 (sorted): each word's record, the words in strictly increasing order of
 *	  (token_hash, length, bytes): its uint32 hash, its length, its bytes,
 *	  its number of cells, and each cell's class and count, all numbers but
 *	  the hash as unsigned LEB128 varints.  A state that leaves its process
 *	  is written so (sorted by a radix sort on the hashes it holds already,
 *	  in the process that counted it); so is a merge.  At 1x SpamAssassin's
 *	  labelled half it takes 2.7 MB against the plain form's 4.3 MB.  (Words
 *	  in byte order, each written as the bytes it shares with the word before
 *	  and the rest, took a third less room and no hash, but sorting and
 *	  merging by bytes cost the leader more than the smaller values saved:
 *	  parallel counts were 10% slower.)
 * The type's binary form (send/receive) is these bytes, its text form
 * (input/output) their base64: Citus moves partial states through the text
 * form.  Both input functions validate all of it (layout, order, hashes,
 * encoding), and accept only format 2: a hostile role can type any text or
 * send any bytes.  gibbs_nb_class_counts_rows reads either format,
 * validating everything, because any bytea can be passed to it.
 */
#ifndef GNB_COUNTS_STATE_H
#define GNB_COUNTS_STATE_H

#include "gibbs_nb.h"

#include "counts/tokens.h"

#include "common/hashfn.h"
#include "utils/expandeddatum.h"

#define COUNTS_MAGIC 0x47424E43	/* "GNBC" */
#define COUNTS_FORMAT_PLAIN 1
#define COUNTS_FORMAT_SORTED 2
#define COUNTS_HEADER_SIZE (2 * sizeof(uint32) + 2 * sizeof(int32) + sizeof(int64))
#define CELL_SIZE (2 * sizeof(int32) + sizeof(int64))

/*
 * A state holds at most this many runs: before one more, the half of them
 * that are smallest are merged into one (see runs_merge; a Citus
 * coordinator combines one run per shard).
 */
#define MAX_RUNS 8

/*
 * Tokens are looked up a block at a time: hash them all (prefetching their
 * slots), prefetch the words the slots name, then count.  The vocabulary
 * does not fit in cache, and this lets the misses of a block overlap.
 */
#define LOOKUP_BLOCK 32

/*
 * The words' strings are copied into chunks of ARENA_CHUNK bytes, not
 * allocated one by one; a string longer than ARENA_ALONE gets an allocation
 * of its own.
 */
#define ARENA_CHUNK (64 * 1024)
#define ARENA_ALONE (ARENA_CHUNK / 8)

/*
 * A word of the state, by id: its string, and its counts in the first two
 * classes it was seen in (with K = 2, all of them), so that counting a token
 * touches its word and nothing else.  Its counts in further classes are
 * cells of the `more` hash.
 */
typedef struct CountsWord
{
	uint64		first;			/* the first 8 bytes, as token_key gives them */
	char	   *str;			/* its own copy, NUL-terminated */
	int32		len;
	uint32		hash;			/* token_hash */
	int32		cls[2];			/* classes of the two inline cells, -1: none */
	int64		n[2];			/* their counts */
} CountsWord;

/*
 * A slot of the words' open-addressing table (linear probing, at most half
 * full): the word's hash and id + 1, 0 if empty.  Eight bytes: the table is
 * a quarter of a hash of the words themselves.
 */
typedef struct WordSlot
{
	uint32		hash;
	uint32		idp1;
} WordSlot;

/* A cell beyond a word's two inline ones: (class << 32 | word) -> count. */
typedef struct CountCell
{
	uint64		key;
	int64		count;
	char		status;
} CountCell;

#define SH_PREFIX cells
#define SH_ELEMENT_TYPE CountCell
#define SH_KEY_TYPE uint64
#define SH_KEY key
#define SH_CELL_HASH(k) murmurhash32((uint32) (k) ^ murmurhash32((uint32) ((k) >> 32)))
#define SH_HASH_KEY(tb, k) SH_CELL_HASH(k)
#define SH_EQUAL(tb, a, b) ((a) == (b))
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* A list of interned strings with ids: the classes. */
typedef struct StringSet
{
	vocab_hash *hash;
	int32		n;
	int32		cap;
	char	  **str;
	int32	   *len;
	Size		bytes;			/* of all strings, for the flat size */
} StringSet;

/*
 * A sorted (format 2) value the state holds to merge later: a copy of a
 * flat state the combine function was given, or what a merge made.
 */
typedef struct CountsRun
{
	bytea	   *value;			/* in the state's context */
	int32		n_classes;
	const char **class_str;		/* pointing into value */
	int32	   *class_len;
	int32		n_words;
	int64		n_cells;
	const char *words;			/* the first word's record */
	Size		size;			/* of the value's data */
} CountsRun;

typedef struct SortedPlan SortedPlan;

/*
 * The state: what was counted in this process (the classes, words and cells
 * below, all in own_cxt, so that they can be let go of at once when they
 * are turned into a run), and the sorted runs merged into it.  The counts it
 * stands for are the sum of both.
 */
typedef struct CountsState
{
	ExpandedObjectHeader hdr;	/* first: the state is an expanded object */
	uint32		magic;			/* COUNTS_MAGIC: an expanded object really is one */
	MemoryContext cxt;			/* the object's own, a child of the aggregate's */
	MemoryContext own_cxt;		/* a child of cxt: what was counted here */
	CountsRun	runs[MAX_RUNS];
	int			n_runs;
	StringSet	classes;
	/* the words, by id, and the table that finds them */
	CountsWord *words;
	int32		n_words;
	int32		words_cap;
	WordSlot   *slots;
	uint64		slot_mask;		/* number of slots - 1 (a power of two - 1) */
	Size		word_bytes;		/* of all words' strings, for the flat size */
	char	   *arena;			/* free space for the words' strings */
	Size		arena_left;
	int64		n_inline;		/* inline cells in use */
	cells_hash *more;			/* the cells beyond each word's first two */
	SortedPlan *plan;			/* how to write them sorted, once made */
	/*
	 * The budget its calls pass (gibbs_nb.labelled_counts's third argument,
	 * kB; 0: none): a constant of the query's plan, which parallel workers
	 * get with it and nothing the source runs can change (a RESET ALL resets
	 * gibbs_nb.class_counts_budget, not this).
	 */
	int64		budget_kb;
} CountsState;

/*
 * The bytes this process's states may take while st grows: the smaller of
 * gibbs_nb.class_counts_budget and st's own budget, either one when the
 * other is 0; 0 bounds nothing.
 */
static inline double
counts_budget_bytes(const CountsState *st)
{
	int64		a = gnb_class_counts_budget_kb;
	int64		b = st->budget_kb;

	if (a <= 0 || (b > 0 && b < a))
		a = b;
	return a > 0 ? (double) a * 1024.0 : 0.0;
}

/* Up to LOOKUP_BLOCK tokens of a row, hashed, waiting to be counted. */
typedef struct TokenBlock
{
	CountsState *st;
	int32		cls;			/* the row's class */
	int			n;
	double		bytes;			/* of the tokens' strings, for the budget */
	TokenKey	key[LOOKUP_BLOCK];
	uint32		hash[LOOKUP_BLOCK];
	int32		count[LOOKUP_BLOCK];
} TokenBlock;

/*
 * How what this process counted is written sorted (see counts_own_sorted_plan):
 * the words' order, the cells beyond the inline ones grouped by word id
 * (word w's end at more_end[w], its start at more_end[w - 1]), and the
 * exact size.
 */
typedef struct MoreCell
{
	int32		cls;
	int64		count;
} MoreCell;

struct SortedPlan
{
	uint64	   *keys;			/* (hash << 32 | word id), in word order */
	int64	   *more_end;		/* NULL without cells beyond the inline ones */
	MoreCell   *more;
	Size		size;
	/* what it was made for: a state that has changed since is an error */
	int32		n_classes;
	int32		n_words;
	int64		n_cells;
};

/* aggregate.c */
extern CountsState *counts_create(MemoryContext parent);
extern CountsState *counts_expanded(Datum d);
extern Size counts_get_flat_size(ExpandedObjectHeader *eohptr);
extern void counts_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size);
extern void counts_own_write_plain(CountsState *st, void *result, Size allocated_size);
extern bytea *counts_empty_value(uint32 format);
extern bytea *counts_flat_copy(FunctionCallInfo fcinfo, int argno);

/* merge.c */
extern bytea *counts_merge_runs(CountsState *budget, double held, const CountsRun *const *src, int n_src);
extern void counts_run_free(CountsRun *run);
extern void counts_run_from_value(bytea *value, CountsRun *run);
extern void counts_runs_add(CountsState *st, bytea *value);
extern void counts_runs_add_copy(CountsState *st, const bytea *value);
extern void counts_collapse(CountsState *st);

/* parse.c */
pg_noreturn extern void counts_invalid_counts(const char *why);
extern void counts_parse_head(bytea *value, GnbParsedCounts *pc);
extern void counts_check_encoding(const char *const *str, const int32 *len, int32 n);
extern void counts_validate(bytea *value);

/* serial.c */
extern char *counts_write_header(void *result, uint32 format, int32 n_classes, int32 n_words, int64 n_cells);
extern Size counts_check_value_size(Size size);
extern Size counts_own_plain_size(const CountsState *st);
extern void counts_own_plan_free(CountsState *st);
extern SortedPlan *counts_own_sorted_plan(CountsState *st);
extern char *counts_own_write_head(const CountsState *st, void *result, Size size, uint32 format);
extern void counts_own_write_sorted(CountsState *st, void *result, Size allocated_size);
extern bytea *counts_own_sorted_value(CountsState *st, CountsState *budget);

/* state.c */
extern void counts_live_state_add(CountsState *st);
extern void counts_stringset_init(StringSet *set, MemoryContext cxt, int32 cap);
extern void counts_stringset_free(StringSet *set);
extern int32 counts_stringset_id(StringSet *set, MemoryContext cxt, const char *str, int len);
extern void counts_own_init(CountsState *st);
extern void counts_check_budget(CountsState *st, double more);
extern void counts_budget_class(CountsState *st, double bytes);
extern void counts_count_block(TokenBlock *b);
extern void counts_count_token(void *arg, const char *str, int len, int32 count);
extern void counts_count_text_array(TokenBlock *b, Datum tokens);
extern MemoryContext counts_aggregate_context(FunctionCallInfo fcinfo, const char *fname);
extern void counts_check_state(const CountsState *st);

/* the serial form's pieces, inline where values are read and written */

/*
 * The order of the words of a sorted value: by hash, then length, then
 * bytes.  Any total order would do; the hash first makes it the order a
 * radix sort on the hashes gives, and leaves a memcmp to words whose hashes
 * are equal.
 */
static inline int
word_order(uint32 ha, const char *a, int32 la, uint32 hb, const char *b, int32 lb)
{
	if (ha != hb)
		return ha < hb ? -1 : 1;
	if (la != lb)
		return la < lb ? -1 : 1;
	return memcmp(a, b, la);
}

/*
 * Unsigned LEB128: 7 bits a byte, low first, the high bit set on every byte
 * but the last.  A class id or a count of real data takes one or two bytes,
 * against the four and eight of the plain format's cells.
 */
static inline int
varint_size(uint64 v)
{
	int			n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static inline char *
put_varint(char *p, uint64 v)
{
	if (likely(v < 0x80))
	{
		*p = (char) v;
		return p + 1;
	}
	while (v >= 0x80)
	{
		*p++ = (char) (v | 0x80);
		v >>= 7;
	}
	*p++ = (char) v;
	return p;
}

/* Read a varint of a value already checked (see get_varint). */
static inline uint64
read_varint(const char **pp)
{
	const unsigned char *p = (const unsigned char *) *pp;
	uint64		v = *p & 0x7F;
	int			shift = 7;

	while (*p++ & 0x80)
	{
		v |= (uint64) (*p & 0x7F) << shift;
		shift += 7;
	}
	*pp = (const char *) p;
	return v;
}

/*
 * Read a varint from a value not yet checked: false if it runs past end,
 * is longer than a uint64 can be, or is above max.
 */
static inline bool
get_varint(const char **pp, const char *end, uint64 max, uint64 *v)
{
	const unsigned char *p = (const unsigned char *) *pp;
	uint64		r = 0;

	for (int shift = 0;; shift += 7)
	{
		uint64		b;

		if ((const char *) p >= end || shift > 63)
			return false;
		b = *p++;
		if (shift == 63 && (b & 0x7F) > 1)
			return false;
		r |= (b & 0x7F) << shift;
		if (!(b & 0x80))
			break;
	}
	if (r > max)
		return false;
	*pp = (const char *) p;
	*v = r;
	return true;
}

/* get_varint, with the one-byte case inline. */
static inline bool
get_varint_fast(const char **pp, const char *end, uint64 max, uint64 *v)
{
	const char *p = *pp;

	if (likely(p < end && !(*p & 0x80)))
	{
		uint64		r = (unsigned char) *p;

		if (r > max)
			return false;
		*pp = p + 1;
		*v = r;
		return true;
	}
	return get_varint(pp, end, max, v);
}

/*
 * The header of a word record of a checked sorted value: its hash, bytes
 * and number of cells; *pp is left at its first cell.
 */
static inline uint64
read_record(const char **pp, uint32 *hash, const char **str, int32 *len)
{
	const char *p = *pp;

	memcpy(hash, p, sizeof(uint32));
	p += sizeof(uint32);
	*len = (int32) read_varint(&p);
	*str = p;
	p += *len;
	*pp = p;
	return read_varint(pp);
}

static inline char *
write_string(char *p, const char *str, int32 len)
{
	memcpy(p, &len, sizeof(int32));
	memcpy(p + sizeof(int32), str, len);
	return p + sizeof(int32) + len;
}

/* The header of a word record: hash, length, bytes, number of cells. */
static inline char *
write_record(char *p, uint32 hash, const char *str, int32 len, uint64 n_cells)
{
	memcpy(p, &hash, sizeof(uint32));
	p = put_varint(p + sizeof(uint32), (uint64) len);
	memcpy(p, str, len);
	return put_varint(p + len, n_cells);
}

static inline char *
write_cell(char *p, int32 cls, int32 word, int64 count)
{
	int32		cell[2] = {cls, word};

	memcpy(p, cell, sizeof(cell));
	memcpy(p + sizeof(cell), &count, sizeof(int64));
	return p + CELL_SIZE;
}

#endif							/* GNB_COUNTS_STATE_H */
