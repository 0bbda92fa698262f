/*
 * class_counts.c
 *	  gibbs_nb_class_counts: the class x word count matrix as an aggregate
 *	  whose partial states travel (PostgreSQL's parallel workers, Citus's
 *	  workers), and gibbs_nb_class_counts_rows to read it back as rows.
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
 * changes it in place.  Wherever
 * the state must leave the process (a parallel worker's tuple to the leader,
 * a Citus shard's partial result to the coordinator) PostgreSQL flattens it
 * into the serialised form below; the combine function merges such a value
 * into its own state without building a hash of the other, and the final
 * function's value is the same bytes as a bytea, which
 * gibbs_nb_class_counts_rows parses, validating everything, because any
 * bytea can be passed to it.
 *
 * Serialised form (all integers in the server's byte order, written by
 * memcpy; a value from a machine of the other byte order fails the magic
 * check): uint32 magic, uint32 format, int32 n_classes, int32 n_words, int64
 * n_cells, then each class and each word as int32 length + bytes, then each
 * cell as int32 class, int32 word, int64 count.  The type's binary form
 * (send/receive) is these bytes, its text form (input/output) their base64:
 * Citus moves partial states through the text form.  Both input functions
 * validate all of it (layout, distinct strings, encoding): a hostile role
 * can type any text or send any bytes.
 */
#include "gibbs_nb.h"
#include "tokens.h"

#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/expandeddatum.h"
#include "utils/memutils.h"

#define COUNTS_MAGIC 0x47424E43	/* "GNBC" */
#define COUNTS_FORMAT 1

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

typedef struct CountsState
{
	ExpandedObjectHeader hdr;	/* first: the state is an expanded object */
	uint32		magic;			/* COUNTS_MAGIC: an expanded object really is one */
	MemoryContext cxt;			/* the object's own, a child of the aggregate's */
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
} CountsState;

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

static void
stringset_init(StringSet *set, MemoryContext cxt, int32 cap)
{
	set->hash = vocab_create(cxt, cap, NULL);
	set->n = 0;
	set->cap = cap;
	set->str = MemoryContextAlloc(cxt, sizeof(char *) * cap);
	set->len = MemoryContextAlloc(cxt, sizeof(int32) * cap);
	set->bytes = 0;
}

/* Id of a string, interning a copy if it is new. */
static int32
stringset_id(StringSet *set, MemoryContext cxt, const char *str, int len)
{
	TokenKey	key = token_key(str, len);
	bool		found;
	VocabEntry *e = vocab_insert(set->hash, key, &found);

	if (!found)
	{
		char	   *copy = MemoryContextAlloc(cxt, len + 1);

		memcpy(copy, str, len);
		copy[len] = '\0';
		e->key.str = copy;
		if (set->n == set->cap)
		{
			set->cap *= 2;
			set->str = repalloc_huge(set->str, sizeof(char *) * set->cap);
			set->len = repalloc_huge(set->len, sizeof(int32) * set->cap);
		}
		if (set->n == PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many distinct tokens or classes for gibbs_nb_class_counts")));
		e->id = set->n;
		set->str[set->n] = copy;
		set->len[set->n] = len;
		set->bytes += len;
		set->n++;
	}
	return e->id;
}

static Size counts_get_flat_size(ExpandedObjectHeader *eohptr);
static void counts_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size);

static const ExpandedObjectMethods counts_methods = {
	counts_get_flat_size,
	counts_flatten_into
};

/*
 * A new, empty state: an expanded object in a memory context of its own
 * under parent (the aggregate's context, where nodeAgg keeps a read-write
 * expanded state without copying it).
 */
static CountsState *
counts_create(MemoryContext parent)
{
	/*
	 * Blocks of at most 1 MB (not the default 8 MB): the memory budget is
	 * checked against what the context has allocated, which jumps by a
	 * block at a time.
	 */
	MemoryContext cxt = AllocSetContextCreate(parent, "gibbs_nb_class_counts",
											  ALLOCSET_DEFAULT_MINSIZE,
											  ALLOCSET_DEFAULT_INITSIZE,
											  1024 * 1024);
	CountsState *st = MemoryContextAllocZero(cxt, sizeof(CountsState));

	EOH_init_header(&st->hdr, &counts_methods, cxt);
	st->magic = COUNTS_MAGIC;
	st->cxt = cxt;
	stringset_init(&st->classes, cxt, 8);
	st->words_cap = 1024;
	st->words = MemoryContextAlloc(cxt, sizeof(CountsWord) * st->words_cap);
	st->slot_mask = 2 * st->words_cap - 1;
	st->slots = MemoryContextAllocZero(cxt, sizeof(WordSlot) * (st->slot_mask + 1));
	st->more = cells_create(cxt, 16, NULL);
	return st;
}

static inline uint64
cell_key(int32 class_id, int32 word_id)
{
	return ((uint64) class_id << 32) | (uint32) word_id;
}

/*
 * The memory budget of a state (gibbs_nb.class_counts_budget, which the
 * training worker sets to what is left of its job's gibbs_nb.max_job_memory
 * and its parallel workers inherit): error out (53200) if the state's
 * context, which holds all of it, would go past the budget by allocating
 * `more` bytes.  Called before each block of tokens or cells is added, with
 * what the block may allocate (the tables' doubling, the strings' copies),
 * so that no state grows past its budget by more than an allocator's
 * rounding.  0 bounds nothing: a user's own query is bounded as any
 * aggregate's, by nothing of ours.
 */
static void
counts_check_budget(CountsState *st, double more)
{
	double		in_use;
	double		budget;

	if (likely(gnb_class_counts_budget_kb <= 0))
		return;
	budget = (double) gnb_class_counts_budget_kb * 1024.0;
	in_use = (double) MemoryContextMemAllocated(st->cxt, true);
	if (in_use + more <= budget)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("gibbs_nb_class_counts would need %.0f MB, more than the %.0f MB left of gibbs_nb.max_job_memory",
					(in_use + more) / (1024.0 * 1024.0), budget / (1024.0 * 1024.0)),
			 errdetail("Counting the labelled documents: %.0f MB on top of %.0f MB in use.",
					   more / (1024.0 * 1024.0), in_use / (1024.0 * 1024.0)),
			 errhint("Use fewer distinct tokens, or have a superuser raise gibbs_nb.max_job_memory (it can be set per role).")));
}

/* Bytes a simplehash table allocates when n more entries may be inserted. */
#define HASH_GROWTH(tb, n, elem) \
	((double) (tb)->members + (n) >= (double) (tb)->grow_threshold ? \
	 2.0 * (double) (tb)->size * (elem) : 0.0)

/*
 * Check the budget before a class of `bytes` bytes joins the classes: their
 * hash may double, their arrays may double, and the string is copied (with
 * a chunk header).
 */
static void
counts_budget_class(CountsState *st, double bytes)
{
	StringSet  *set = &st->classes;
	double		more;

	if (likely(gnb_class_counts_budget_kb <= 0))
		return;
	more = HASH_GROWTH(set->hash, 1, sizeof(VocabEntry)) + bytes + 16.0;
	if (set->n + 1 > set->cap)
		more += 2.0 * set->cap * (sizeof(char *) + sizeof(int32));
	counts_check_budget(st, more);
}

/* Check the budget before up to n new cells beyond the inline ones. */
static inline void
counts_budget_cells(CountsState *st, int64 n)
{
	if (likely(gnb_class_counts_budget_kb <= 0))
		return;
	counts_check_budget(st, HASH_GROWTH(st->more, (double) n, sizeof(CountCell)));
}

/*
 * Check the budget before up to n new words of `bytes` bytes in all join
 * the state, with as many new cells: the slots and the words' array may
 * double, the strings are copied (into a new chunk, or alone with a chunk
 * header) and the cells beyond the inline ones may double.
 */
static void
counts_budget_words(CountsState *st, int n, double bytes)
{
	double		more;

	if (likely(gnb_class_counts_budget_kb <= 0))
		return;
	more = bytes + 17.0 * n + ARENA_CHUNK +
		HASH_GROWTH(st->more, (double) n, sizeof(CountCell));
	if ((double) st->n_words + n > (double) (st->slot_mask + 1) / 2)
		more += 2.0 * (double) (st->slot_mask + 1) * sizeof(WordSlot);
	if ((double) st->n_words + n > (double) st->words_cap)
		more += 2.0 * (double) st->words_cap * sizeof(CountsWord);
	counts_check_budget(st, more);
}

/* A copy of a word's string, NUL-terminated, in the state's memory. */
static char *
arena_copy(CountsState *st, const char *str, int len)
{
	char	   *copy;

	if (len >= ARENA_ALONE)
		copy = MemoryContextAlloc(st->cxt, (Size) len + 1);
	else
	{
		if (st->arena_left < (Size) len + 1)
		{
			st->arena = MemoryContextAlloc(st->cxt, ARENA_CHUNK);
			st->arena_left = ARENA_CHUNK;
		}
		copy = st->arena;
		st->arena += len + 1;
		st->arena_left -= len + 1;
	}
	memcpy(copy, str, len);
	copy[len] = '\0';
	return copy;
}

/* Rebuild the words' slots with mask + 1 of them. */
static void
words_resize_slots(CountsState *st, uint64 mask)
{
	WordSlot   *slots = MemoryContextAllocExtended(st->cxt, sizeof(WordSlot) * (mask + 1),
												   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	for (uint64 i = 0; i <= st->slot_mask; i++)
	{
		uint64		j;

		if (st->slots[i].idp1 == 0)
			continue;
		j = st->slots[i].hash & mask;
		while (slots[j].idp1 != 0)
			j = (j + 1) & mask;
		slots[j] = st->slots[i];
	}
	pfree(st->slots);
	st->slots = slots;
	st->slot_mask = mask;
}

/*
 * Make room for n more words at once (the first state merged into an empty
 * one): the slots and the array resized once, not doubled step by step.
 */
static void
words_reserve(CountsState *st, int32 n)
{
	uint64		want = Min((uint64) st->n_words + n, (uint64) PG_INT32_MAX);
	uint64		mask = st->slot_mask;
	double		more = 0;

	while (want > (mask + 1) / 2)
		mask = 2 * mask + 1;
	if (mask != st->slot_mask)
		more += (double) (mask + 1) * sizeof(WordSlot);
	if (want > (uint64) st->words_cap)
		more += (double) want * sizeof(CountsWord);
	counts_check_budget(st, more);
	if (mask != st->slot_mask)
		words_resize_slots(st, mask);
	if (want > (uint64) st->words_cap)
	{
		st->words_cap = (int32) want;
		st->words = repalloc_huge(st->words, sizeof(CountsWord) * (Size) st->words_cap);
	}
}

/* Add a new word, whose slot would be slot i, and return its id. */
static pg_noinline int32
word_insert(CountsState *st, TokenKey key, uint32 hash, uint64 i)
{
	CountsWord *w;
	int32		id;

	if (st->n_words == PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many distinct tokens or classes for gibbs_nb_class_counts")));
	if ((uint64) st->n_words + 1 > (st->slot_mask + 1) / 2)
	{
		words_resize_slots(st, 2 * st->slot_mask + 1);
		i = hash & st->slot_mask;
		while (st->slots[i].idp1 != 0)
			i = (i + 1) & st->slot_mask;
	}
	if (st->n_words == st->words_cap)
	{
		st->words_cap = (int32) Min((int64) st->words_cap * 2, (int64) PG_INT32_MAX);
		st->words = repalloc_huge(st->words, sizeof(CountsWord) * (Size) st->words_cap);
	}
	id = st->n_words++;
	w = &st->words[id];
	w->first = key.first;
	w->str = arena_copy(st, key.str, key.len);
	w->len = key.len;
	w->hash = hash;
	w->cls[0] = w->cls[1] = -1;
	w->n[0] = w->n[1] = 0;
	st->word_bytes += key.len;
	st->slots[i].hash = hash;
	st->slots[i].idp1 = (uint32) id + 1;
	return id;
}

/*
 * The id of a word whose key and hash are known, interning a copy if it is
 * new.  The caller has checked the budget for it.
 */
static inline int32
word_id(CountsState *st, TokenKey key, uint32 hash)
{
	uint64		i = hash & st->slot_mask;

	for (;;)
	{
		WordSlot	s = st->slots[i];

		if (s.idp1 == 0)
			return word_insert(st, key, hash, i);
		if (s.hash == hash)
		{
			const CountsWord *w = &st->words[s.idp1 - 1];

			if (w->first == key.first && w->len == key.len &&
				(key.len <= 8 || memcmp(w->str + 8, key.str + 8, key.len - 8) == 0))
				return (int32) (s.idp1 - 1);
		}
		i = (i + 1) & st->slot_mask;
	}
}

/*
 * Add n (> 0) to the count of (class, word): one of the word's inline cells
 * if it has that class or a free one, else a cell of the `more` hash (whose
 * growth the caller has checked against the budget).  A cell of real data
 * never comes near 2^63, but the sum is checked all the same (two partial
 * states' cells are added so): an overflow would wrap into a negative count
 * that the next parse rejects as corrupt, far from its cause.
 */
static inline void
word_add(CountsState *st, int32 word_id, int32 class_id, int64 n)
{
	CountsWord *w = &st->words[word_id];
	int64	   *c;

	if (w->cls[0] == class_id)
		c = &w->n[0];
	else if (w->cls[1] == class_id)
		c = &w->n[1];
	else if (w->cls[0] < 0)
	{
		w->cls[0] = class_id;
		st->n_inline++;
		c = &w->n[0];
	}
	else if (w->cls[1] < 0)
	{
		w->cls[1] = class_id;
		st->n_inline++;
		c = &w->n[1];
	}
	else
	{
		bool		found;
		CountCell  *cell = cells_insert(st->more, cell_key(class_id, word_id), &found);

		if (!found)
			cell->count = 0;
		c = &cell->count;
	}
	if (unlikely(pg_add_s64_overflow(*c, n, c)))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gibbs_nb_class_counts: a count is out of range")));
}

/*
 * Count the tokens of a block: their slots were prefetched as they were
 * hashed; prefetch the words the slots name (the token's own, unless a
 * collision or a new word), then look each up and count it.
 */
static void
count_block(TokenBlock *b)
{
	CountsState *st = b->st;

	CHECK_FOR_INTERRUPTS();
	counts_budget_words(st, b->n, b->bytes);
	for (int i = 0; i < b->n; i++)
	{
		uint32		idp1 = st->slots[b->hash[i] & st->slot_mask].idp1;

		if (idp1 != 0)
			__builtin_prefetch(&st->words[idp1 - 1]);
	}
	for (int i = 0; i < b->n; i++)
		word_add(st, word_id(st, b->key[i], b->hash[i]), b->cls, b->count[i]);
	b->n = 0;
	b->bytes = 0;
}

/* Queue one token of the current row, whose first word is known. */
static inline void
block_add(TokenBlock *b, const char *str, int len, uint64 first, int32 count)
{
	uint32		hash = token_hash(str, len, first);

	__builtin_prefetch(&b->st->slots[hash & b->st->slot_mask]);
	b->key[b->n].str = str;
	b->key[b->n].len = len;
	b->key[b->n].first = first;
	b->hash[b->n] = hash;
	b->count[b->n] = count;
	b->bytes += len;
	if (++b->n == LOOKUP_BLOCK)
		count_block(b);
}

/* Queue one token of the current row (a gnb_token_fn: a tsvector's). */
static void
count_token(void *arg, const char *str, int len, int32 count)
{
	block_add(arg, str, len, first_word(str, len), count);
}

/*
 * Queue every token of a text[] (the row's, detoasted): the elements walked
 * as array_iter_next walks them (each varlena element aligned to int), NULL
 * elements skipped.  A token's first word is one 8-byte load, masked to its
 * length, when 8 bytes from its start are still within the array.
 */
static void
count_text_array(TokenBlock *b, Datum tokens)
{
	ArrayType  *arr = DatumGetArrayTypeP(tokens);
	int			n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	const bits8 *nulls = ARR_NULLBITMAP(arr);
	const char *p = ARR_DATA_PTR(arr);
	const char *end = (const char *) arr + VARSIZE(arr);

	for (int i = 0; i < n; i++)
	{
		const char *str;
		int			len;
		uint64		first;

		if (nulls != NULL && !(nulls[i >> 3] & (1 << (i & 7))))
			continue;
		str = VARDATA_ANY(p);
		len = VARSIZE_ANY_EXHDR(p);
		p = (const char *) att_align_nominal(p + VARSIZE_ANY(p), TYPALIGN_INT);
#ifndef WORDS_BIGENDIAN
		if (len >= 8)
			memcpy(&first, str, 8);
		else if (end - str >= 8)
		{
			memcpy(&first, str, 8);
			first = len == 0 ? 0 : first & (~UINT64CONST(0) >> (64 - 8 * len));
		}
		else
#endif
			first = first_word(str, len);
		block_add(b, str, len, first, 1);
	}
}

static MemoryContext
aggregate_context(FunctionCallInfo fcinfo, const char *fname)
{
	MemoryContext cxt;

	if (!AggCheckCallContext(fcinfo, &cxt))
		elog(ERROR, "%s called in non-aggregate context", fname);
	return cxt;
}

static void
check_state(const CountsState *st)
{
	if (st->magic != COUNTS_MAGIC)
		elog(ERROR, "gibbs_nb_class_counts: not a class counts state");
}

/*
 * Map words [start, start + m) (keys and hashes known; m <= LOOKUP_BLOCK)
 * to into's ids, interning the new ones: hashed slots and then words
 * prefetched, then looked up.
 */
static void
merge_word_block(CountsState *into, const TokenKey *keys, const uint32 *hashes, int32 start,
				 int32 m, int32 *word_map)
{
	double		bytes = 0;

	for (int32 i = start; i < start + m; i++)
		bytes += keys[i].len;
	CHECK_FOR_INTERRUPTS();
	counts_budget_words(into, m, bytes);
	for (int32 i = start; i < start + m; i++)
		__builtin_prefetch(&into->slots[hashes[i] & into->slot_mask]);
	for (int32 i = start; i < start + m; i++)
	{
		uint32		idp1 = into->slots[hashes[i] & into->slot_mask].idp1;

		if (idp1 != 0)
			__builtin_prefetch(&into->words[idp1 - 1]);
	}
	for (int32 i = start; i < start + m; i++)
		word_map[i] = word_id(into, keys[i], hashes[i]);
}

static void counts_merge_parsed(CountsState *into, const GnbParsedCounts *pc);

/*
 * Add every cell of `from` into `into`, mapping its strings to into's ids
 * by the hashes from already holds: no string is hashed again.
 */
static void
counts_merge(CountsState *into, const CountsState *from)
{
	int32	   *class_map;
	int32	   *word_map;
	TokenKey   *keys;
	uint32	   *hashes;
	cells_iterator it;
	CountCell  *c;
	int64		n;

	check_state(into);
	check_state(from);
	if (into == from)
	{
		/* a state merged into itself: from its flat copy */
		Size		size = counts_get_flat_size(&into->hdr);
		bytea	   *flat = palloc_extended(size, MCXT_ALLOC_HUGE);
		GnbParsedCounts pc;

		counts_flatten_into(&into->hdr, flat, size);
		gnb_counts_parse(flat, &pc, false);
		counts_merge_parsed(into, &pc);
		pfree(flat);
		return;
	}
	class_map = palloc(sizeof(int32) * (from->classes.n + 1));
	for (int32 i = 0; i < from->classes.n; i++)
	{
		counts_budget_class(into, from->classes.len[i] + 1);
		class_map[i] = stringset_id(&into->classes, into->cxt, from->classes.str[i],
									from->classes.len[i]);
	}
	word_map = palloc_extended(sizeof(int32) * ((Size) from->n_words + 1), MCXT_ALLOC_HUGE);
	keys = palloc_extended(sizeof(TokenKey) * ((Size) from->n_words + 1), MCXT_ALLOC_HUGE);
	hashes = palloc_extended(sizeof(uint32) * ((Size) from->n_words + 1), MCXT_ALLOC_HUGE);
	for (int32 i = 0; i < from->n_words; i++)
	{
		keys[i].str = from->words[i].str;
		keys[i].len = from->words[i].len;
		keys[i].first = from->words[i].first;
		hashes[i] = from->words[i].hash;
	}
	/* a block of words, then their inline cells while the words are cached */
	for (int32 start = 0; start < from->n_words; start += LOOKUP_BLOCK)
	{
		int32		m = Min(LOOKUP_BLOCK, from->n_words - start);

		merge_word_block(into, keys, hashes, start, m, word_map);
		counts_budget_cells(into, 2 * m);
		for (int32 i = start; i < start + m; i++)
		{
			const CountsWord *w = &from->words[i];

			for (int j = 0; j < 2; j++)
			{
				if (w->cls[j] < 0)
					continue;
				if (w->cls[j] >= from->classes.n || w->n[j] <= 0)
					elog(ERROR, "gibbs_nb_class_counts: corrupt state in combine");
				word_add(into, word_map[i], class_map[w->cls[j]], w->n[j]);
			}
		}
	}
	pfree(keys);
	pfree(hashes);
	n = 0;
	cells_start_iterate(from->more, &it);
	while ((c = cells_iterate(from->more, &it)) != NULL)
	{
		uint32		cls = (uint32) (c->key >> 32);
		uint32		word = (uint32) c->key;

		if (n++ % LOOKUP_BLOCK == 0)
			counts_budget_cells(into, LOOKUP_BLOCK);
		if (cls >= (uint32) from->classes.n || word >= (uint32) from->n_words || c->count <= 0)
			elog(ERROR, "gibbs_nb_class_counts: corrupt state in combine");
		word_add(into, word_map[word], class_map[cls], c->count);
	}
	pfree(class_map);
	pfree(word_map);
}

/*
 * Add cells *ci, *ci + 1, ... of a parsed value into `into` as long as
 * their words are in [lo, hi) (mapped already); stop at the first that is
 * not.
 */
static void
merge_parsed_cells(CountsState *into, const GnbParsedCounts *pc, const int32 *class_map,
				   const int32 *word_map, int64 *ci, int32 lo, int32 hi)
{
	for (; *ci < pc->n_cells; (*ci)++)
	{
		int32		cls,
					word;
		int64		count;

		gnb_counts_cell(pc, *ci, &cls, &word, &count);
		if (word < lo || word >= hi)
			return;
		if (*ci % LOOKUP_BLOCK == 0)
		{
			CHECK_FOR_INTERRUPTS();
			counts_budget_cells(into, LOOKUP_BLOCK);
		}
		word_add(into, word_map[word], class_map[cls], count);
	}
}

/*
 * Add every cell of a parsed value into `into`.  A block of words is
 * looked up, then the cells that follow for those words (a flattened state
 * lists each word's inline cells in word order) while the words are in
 * cache; the cells left, in any order, after all the words.
 */
static void
counts_merge_parsed(CountsState *into, const GnbParsedCounts *pc)
{
	int32	   *class_map = palloc(sizeof(int32) * (pc->n_classes + 1));
	int32	   *word_map = palloc_extended(sizeof(int32) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
	TokenKey   *keys = palloc_extended(sizeof(TokenKey) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
	uint32	   *hashes = palloc_extended(sizeof(uint32) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
	int64		ci = 0;

	check_state(into);
	for (int32 i = 0; i < pc->n_classes; i++)
	{
		counts_budget_class(into, pc->class_len[i] + 1);
		class_map[i] = stringset_id(&into->classes, into->cxt, pc->class_str[i],
									pc->class_len[i]);
	}
	if (into->n_words == 0)
		words_reserve(into, pc->n_words);
	for (int32 i = 0; i < pc->n_words; i++)
	{
		keys[i] = token_key(pc->word_str[i], pc->word_len[i]);
		hashes[i] = token_hash(keys[i].str, keys[i].len, keys[i].first);
	}
	for (int32 start = 0; start < pc->n_words; start += LOOKUP_BLOCK)
	{
		int32		m = Min(LOOKUP_BLOCK, pc->n_words - start);

		merge_word_block(into, keys, hashes, start, m, word_map);
		merge_parsed_cells(into, pc, class_map, word_map, &ci, start, start + m);
	}
	merge_parsed_cells(into, pc, class_map, word_map, &ci, 0, pc->n_words);
	pfree(keys);
	pfree(hashes);
	pfree(class_map);
	pfree(word_map);
}

/*
 * The state behind datum d as an expanded object of ours, or NULL if d is
 * something else (a flat value).
 */
static CountsState *
counts_expanded(Datum d)
{
	CountsState *st;

	if (!VARATT_IS_EXTERNAL_EXPANDED(DatumGetPointer(d)))
		return NULL;
	st = (CountsState *) DatumGetEOHP(d);
	if (st->hdr.eoh_methods != &counts_methods)
		elog(ERROR, "gibbs_nb_class_counts: not a class counts state");
	check_state(st);
	return st;
}

/*
 * Add the counts of a state value (expanded, read-only or not, or flat) into
 * `into`.  A flat value of the type was made by its input functions, which
 * validated all of it, or by flattening a state: it is parsed again all the
 * same, for its layout only (a repeated string would merely be merged).
 */
static void
counts_merge_datum(CountsState *into, Datum d)
{
	CountsState *from = counts_expanded(d);

	if (from != NULL)
		counts_merge(into, from);
	else
	{
		GnbParsedCounts pc;

		gnb_counts_parse(DatumGetByteaPP(d), &pc, false);
		counts_merge_parsed(into, &pc);
	}
}

/*
 * The state argument argno as one this call may change: a read-write
 * expanded state of ours is changed in place (nodeAgg and Citus pass the
 * transition value so, and keep the one returned); NULL starts an empty one
 * in the aggregate's context; anything else (a flat value, say a user's own
 * aggregate's INITCOND, or a read-only pointer) is copied into a new one.
 */
static CountsState *
counts_writable(FunctionCallInfo fcinfo, int argno, MemoryContext aggcxt)
{
	CountsState *st;

	if (PG_ARGISNULL(argno))
		return counts_create(aggcxt);
	if (VARATT_IS_EXTERNAL_EXPANDED_RW(DatumGetPointer(PG_GETARG_DATUM(argno))) &&
		(st = counts_expanded(PG_GETARG_DATUM(argno))) != NULL)
		return st;
	st = counts_create(aggcxt);
	counts_merge_datum(st, PG_GETARG_DATUM(argno));
	return st;
}

static Datum
class_counts_add(FunctionCallInfo fcinfo, bool is_tsvector)
{
	MemoryContext aggcxt = aggregate_context(fcinfo, "gibbs_nb_class_counts_add");
	CountsState *st = counts_writable(fcinfo, 0, aggcxt);

	/* rows with a NULL label or NULL tokens do not count */
	if (!PG_ARGISNULL(1) && !PG_ARGISNULL(2))
	{
		text	   *label = PG_GETARG_TEXT_PP(1);
		TokenBlock	b;

		counts_budget_class(st, VARSIZE_ANY_EXHDR(label) + 1);
		b.st = st;
		b.cls = stringset_id(&st->classes, st->cxt, VARDATA_ANY(label),
							 VARSIZE_ANY_EXHDR(label));
		b.n = 0;
		b.bytes = 0;
		if (is_tsvector)
			gnb_each_token(PG_GETARG_DATUM(2), true, count_token, &b);
		else
			count_text_array(&b, PG_GETARG_DATUM(2));
		if (b.n > 0)
			count_block(&b);
	}
	PG_RETURN_DATUM(EOHPGetRWDatum(&st->hdr));
}

PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_add_text_array);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_add_tsvector);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_combine);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_final);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_in);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_out);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_recv);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_send);
PG_FUNCTION_INFO_V1(gibbs_nb_class_counts_rows);

/*
 * gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text,
 * text[]) returns gibbs_nb.class_counts_state
 *
 * Transition function of gibbs_nb_class_counts over text[] tokens.
 */
Datum
gibbs_nb_counts_state_add_text_array(PG_FUNCTION_ARGS)
{
	return class_counts_add(fcinfo, false);
}

/* gibbs_nb.gibbs_nb_class_counts_add(class_counts_state, text, tsvector): the tsvector one. */
Datum
gibbs_nb_counts_state_add_tsvector(PG_FUNCTION_ARGS)
{
	return class_counts_add(fcinfo, true);
}

/*
 * gibbs_nb.gibbs_nb_class_counts_combine(class_counts_state,
 * class_counts_state) returns class_counts_state
 *
 * Combine function: merges the second state into the first.  Not strict:
 * either may be NULL (a worker or shard that saw no rows).  The second is
 * flat when it comes from another process (a parallel worker's tuple, a
 * Citus shard's text), an expanded read-only pointer when it is the leader's
 * own partial state: it is read, never changed.
 */
Datum
gibbs_nb_counts_state_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt = aggregate_context(fcinfo, "gibbs_nb_class_counts_combine");
	CountsState *a;

	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		a = counts_writable(fcinfo, 0, aggcxt);
		PG_RETURN_DATUM(EOHPGetRWDatum(&a->hdr));
	}
	a = counts_writable(fcinfo, 0, aggcxt);
	counts_merge_datum(a, PG_GETARG_DATUM(1));
	PG_RETURN_DATUM(EOHPGetRWDatum(&a->hdr));
}

#define COUNTS_HEADER_SIZE (2 * sizeof(uint32) + 2 * sizeof(int32) + sizeof(int64))
#define CELL_SIZE (2 * sizeof(int32) + sizeof(int64))

/*
 * The size of a state's serialised form, with its varlena header: from the
 * running totals, without a pass over the state.  A state too large for one
 * value is an error here, before anything is allocated for it.
 */
static Size
counts_get_flat_size(ExpandedObjectHeader *eohptr)
{
	CountsState *st = (CountsState *) eohptr;
	Size		size;

	check_state(st);
	size = VARHDRSZ + COUNTS_HEADER_SIZE
		+ sizeof(int32) * ((Size) st->classes.n + st->n_words)
		+ st->classes.bytes + st->word_bytes
		+ CELL_SIZE * ((Size) st->n_inline + st->more->members);
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gibbs_nb_class_counts: the counts take %zu bytes, more than one value can hold",
						size)));
	return size;
}

/*
 * Write a state's serialised form, of the size counts_get_flat_size gave:
 * the cells word by word (each word's inline cells), then those beyond.
 */
static void
counts_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size)
{
	CountsState *st = (CountsState *) eohptr;
	char	   *p = VARDATA(result);
	uint32		header[2] = {COUNTS_MAGIC, COUNTS_FORMAT};
	int64		n_cells = st->n_inline + (int64) st->more->members;
	cells_iterator it;
	CountCell  *c;

	if (allocated_size != counts_get_flat_size(eohptr))
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
	SET_VARSIZE(result, allocated_size);
	memcpy(p, header, sizeof(header));
	p += sizeof(header);
	memcpy(p, &st->classes.n, sizeof(int32));
	p += sizeof(int32);
	memcpy(p, &st->n_words, sizeof(int32));
	p += sizeof(int32);
	memcpy(p, &n_cells, sizeof(int64));
	p += sizeof(int64);
	for (int32 i = 0; i < st->classes.n; i++)
	{
		memcpy(p, &st->classes.len[i], sizeof(int32));
		p += sizeof(int32);
		memcpy(p, st->classes.str[i], st->classes.len[i]);
		p += st->classes.len[i];
	}
	for (int32 i = 0; i < st->n_words; i++)
	{
		memcpy(p, &st->words[i].len, sizeof(int32));
		p += sizeof(int32);
		memcpy(p, st->words[i].str, st->words[i].len);
		p += st->words[i].len;
	}
	for (int32 i = 0; i < st->n_words; i++)
	{
		for (int j = 0; j < 2; j++)
		{
			int32		cell[2] = {st->words[i].cls[j], i};

			if (cell[0] < 0)
				continue;
			memcpy(p, cell, sizeof(cell));
			memcpy(p + sizeof(cell), &st->words[i].n[j], sizeof(int64));
			p += CELL_SIZE;
		}
	}
	cells_start_iterate(st->more, &it);
	while ((c = cells_iterate(st->more, &it)) != NULL)
	{
		int32		cell[2] = {(int32) (c->key >> 32), (int32) (uint32) c->key};

		memcpy(p, cell, sizeof(cell));
		memcpy(p + sizeof(cell), &c->count, sizeof(int64));
		p += CELL_SIZE;
	}
	if (p != (char *) result + allocated_size)
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
}

/*
 * A state value in its serialised form, in a varlena of its own (a fresh
 * copy: the caller may return it); NULL is the empty state's.
 */
static bytea *
counts_flat_copy(FunctionCallInfo fcinfo, int argno)
{
	CountsState *st;
	bytea	   *flat;

	if (PG_ARGISNULL(argno))
	{
		uint32		header[2] = {COUNTS_MAGIC, COUNTS_FORMAT};

		flat = palloc0(VARHDRSZ + COUNTS_HEADER_SIZE);
		SET_VARSIZE(flat, VARHDRSZ + COUNTS_HEADER_SIZE);
		memcpy(VARDATA(flat), header, sizeof(header));
		return flat;
	}
	st = counts_expanded(PG_GETARG_DATUM(argno));
	if (st != NULL)
	{
		Size		size = counts_get_flat_size(&st->hdr);

		flat = palloc(size);
		counts_flatten_into(&st->hdr, flat, size);
		return flat;
	}
	return PG_GETARG_BYTEA_P_COPY(argno);
}


typedef GnbParsedCounts ParsedCounts;

/* Cell i of a parsed value. */
void
gnb_counts_cell(const GnbParsedCounts *pc, int64 i, int32 *cls, int32 *word, int64 *count)
{
	int32		cell[2];

	memcpy(cell, pc->cells + i * CELL_SIZE, sizeof(cell));
	memcpy(count, pc->cells + i * CELL_SIZE + sizeof(cell), sizeof(int64));
	*cls = cell[0];
	*word = cell[1];
}

static void
invalid_counts(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid gibbs_nb_class_counts value: %s", why)));
}

static void
read_strings(const char **p, const char *end, int32 n, const char **str, int32 *len)
{
	for (int32 i = 0; i < n; i++)
	{
		if (end - *p < (ptrdiff_t) sizeof(int32))
			invalid_counts("truncated");
		memcpy(&len[i], *p, sizeof(int32));
		*p += sizeof(int32);
		if (len[i] < 0 || end - *p < len[i])
			invalid_counts("bad string length");
		str[i] = *p;
		*p += len[i];
	}
}

/*
 * Parse and validate a gibbs_nb_class_counts value in place: sizes and cells
 * in range, counts positive, and with check_distinct no string twice.  The
 * deserialise function skips that last check: it only ever sees what the
 * serialise function wrote (SQL cannot pass it an internal), and a repeated
 * string would merely be merged.
 */
void
gnb_counts_parse(bytea *value, GnbParsedCounts *pc, bool check_distinct)
{
	const char *p = VARDATA_ANY(value);
	const char *end = p + VARSIZE_ANY_EXHDR(value);
	uint32		header[2];
	vocab_hash *seen;
	bool		found;

	if (end - p < (ptrdiff_t) (sizeof(header) + 2 * sizeof(int32) + sizeof(int64)))
		invalid_counts("too short");
	memcpy(header, p, sizeof(header));
	p += sizeof(header);
	if (header[0] != COUNTS_MAGIC || header[1] != COUNTS_FORMAT)
		invalid_counts("not produced by gibbs_nb_class_counts");
	memcpy(&pc->n_classes, p, sizeof(int32));
	memcpy(&pc->n_words, p + sizeof(int32), sizeof(int32));
	memcpy(&pc->n_cells, p + 2 * sizeof(int32), sizeof(int64));
	p += 2 * sizeof(int32) + sizeof(int64);
	/* every string takes at least 4 bytes, every cell 16: bound the counts */
	if (pc->n_classes < 0 || pc->n_words < 0 || pc->n_cells < 0 ||
		(int64) pc->n_classes + pc->n_words > (end - p) / (int64) sizeof(int32) ||
		pc->n_cells > (end - p) / (int64) CELL_SIZE)
		invalid_counts("bad sizes");
	pc->class_str = palloc(sizeof(char *) * (pc->n_classes + 1));
	pc->class_len = palloc(sizeof(int32) * (pc->n_classes + 1));
	pc->word_str = palloc_extended(sizeof(char *) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
	pc->word_len = palloc_extended(sizeof(int32) * ((Size) pc->n_words + 1), MCXT_ALLOC_HUGE);
	read_strings(&p, end, pc->n_classes, pc->class_str, pc->class_len);
	read_strings(&p, end, pc->n_words, pc->word_str, pc->word_len);
	if (end - p != pc->n_cells * (int64) CELL_SIZE)
		invalid_counts("bad length");
	pc->cells = p;

	if (!check_distinct)
		goto check_cells;
	seen = vocab_create(CurrentMemoryContext, pc->n_words + 1, NULL);
	for (int32 i = 0; i < pc->n_words; i++)
	{
		TokenKey	key = token_key(pc->word_str[i], pc->word_len[i]);

		(void) vocab_insert(seen, key, &found);
		if (found)
			invalid_counts("a token occurs twice");
	}
	vocab_destroy(seen);
	seen = vocab_create(CurrentMemoryContext, pc->n_classes + 1, NULL);
	for (int32 i = 0; i < pc->n_classes; i++)
	{
		TokenKey	key = token_key(pc->class_str[i], pc->class_len[i]);

		(void) vocab_insert(seen, key, &found);
		if (found)
			invalid_counts("a class occurs twice");
	}
	vocab_destroy(seen);
check_cells:
	for (int64 i = 0; i < pc->n_cells; i++)
	{
		int32		cls,
					word;
		int64		count;

		gnb_counts_cell(pc, i, &cls, &word, &count);
		if (cls < 0 || cls >= pc->n_classes || word < 0 || word >= pc->n_words || count <= 0)
			invalid_counts("bad cell");
	}
}

/*
 * Check that strings of a value are text in the database's encoding: the
 * parse checks only the layout, and a hand-made value can hold any bytes
 * (invalid sequences, NUL) that must not come out as text.  The error is
 * the one text input gives for such bytes (22021).
 */
static void
check_encoding(const char *const *str, const int32 *len, int32 n)
{
	for (int32 i = 0; i < n; i++)
		(void) pg_verifymbstr(str[i], len[i], false);
}


/*
 * Check all of a value a user hands the type's input functions: its layout,
 * no class or token twice, and every string valid text in the database's
 * encoding (22021), as gibbs_nb_class_counts_rows would check it.
 */
static void
counts_validate(bytea *value)
{
	GnbParsedCounts pc;

	gnb_counts_parse(value, &pc, true);
	check_encoding(pc.class_str, pc.class_len, pc.n_classes);
	check_encoding(pc.word_str, pc.word_len, pc.n_words);
	pfree(pc.class_str);
	pfree(pc.class_len);
	pfree(pc.word_str);
	pfree(pc.word_len);
}

/*
 * gibbs_nb.class_counts_state_in(cstring) returns class_counts_state
 *
 * Text input: base64 of the serialised form, validated.
 */
Datum
gibbs_nb_counts_state_in(PG_FUNCTION_ARGS)
{
	const char *str = PG_GETARG_CSTRING(0);
	size_t		len = strlen(str);
	int			max;
	int			n;
	bytea	   *value;

	/* base64 of the largest value there can be (MaxAllocSize) is shorter */
	if (len > MaxAllocSize / 3 * 4 + 4)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gibbs_nb.class_counts_state input is too long")));
	max = pg_b64_dec_len((int) len);
	value = palloc_extended(VARHDRSZ + (Size) max, MCXT_ALLOC_HUGE);
	n = pg_b64_decode(str, (int) len, VARDATA(value), max);
	if (n < 0 || (Size) n > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type gibbs_nb.class_counts_state: not base64")));
	SET_VARSIZE(value, VARHDRSZ + n);
	counts_validate(value);
	PG_RETURN_BYTEA_P(value);
}

/*
 * gibbs_nb.class_counts_state_out(class_counts_state) returns cstring
 *
 * Text output: base64 of the serialised form (what Citus ships from a shard
 * to the coordinator).
 */
Datum
gibbs_nb_counts_state_out(PG_FUNCTION_ARGS)
{
	bytea	   *flat = counts_flat_copy(fcinfo, 0);
	int			len = VARSIZE(flat) - VARHDRSZ;
	int			max = pg_b64_enc_len(len);
	char	   *out;
	int			n;

	if ((Size) max >= MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gibbs_nb_class_counts: the counts are too large for their text form")));
	out = palloc(max + 1);
	n = pg_b64_encode(VARDATA(flat), len, out, max);
	if (n < 0)
		elog(ERROR, "gibbs_nb_class_counts: base64 encoding failed");
	out[n] = '\0';
	pfree(flat);
	PG_RETURN_CSTRING(out);
}

/*
 * gibbs_nb.class_counts_state_recv(internal) returns class_counts_state
 *
 * Binary input: the serialised form, the rest of the message, validated.
 */
Datum
gibbs_nb_counts_state_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int			len = buf->len - buf->cursor;
	bytea	   *value;

	if (len < 0)
		elog(ERROR, "gibbs_nb.class_counts_state_recv: bad message cursor");
	value = palloc(VARHDRSZ + len);
	SET_VARSIZE(value, VARHDRSZ + len);
	memcpy(VARDATA(value), buf->data + buf->cursor, len);
	buf->cursor = buf->len;
	counts_validate(value);
	PG_RETURN_BYTEA_P(value);
}

/*
 * gibbs_nb.class_counts_state_send(class_counts_state) returns bytea
 *
 * Binary output: the serialised form.
 */
Datum
gibbs_nb_counts_state_send(PG_FUNCTION_ARGS)
{
	PG_RETURN_BYTEA_P(counts_flat_copy(fcinfo, 0));
}

/*
 * gibbs_nb.gibbs_nb_class_counts_final(class_counts_state) returns bytea
 *
 * Final function: the serialised counts; an empty value, not NULL, when no
 * row was counted.
 */
Datum
gibbs_nb_counts_state_final(PG_FUNCTION_ARGS)
{
	CountsState *st;

	(void) aggregate_context(fcinfo, "gibbs_nb_class_counts_final");
	/* the value is made beside the state: within the budget with it */
	if (!PG_ARGISNULL(0) && (st = counts_expanded(PG_GETARG_DATUM(0))) != NULL)
		counts_check_budget(st, (double) counts_get_flat_size(&st->hdr));
	PG_RETURN_BYTEA_P(counts_flat_copy(fcinfo, 0));
}

/*
 * The entry points of 0.1.0's aggregate, whose state was `internal`: its SQL
 * definitions still name them (CREATE EXTENSION runs the 0.1.0 script before
 * the upgrade to 0.2.0, which drops them), so the library keeps the symbols.
 * Called only by a database still on 0.1.0 with this library: an error that
 * says what to do.
 */
#define GNB_RETIRED_ENTRY(name) \
PG_FUNCTION_INFO_V1(name); \
Datum \
name(PG_FUNCTION_ARGS) \
{ \
	ereport(ERROR, \
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED), \
			 errmsg("gibbs_nb_class_counts of gibbs_nb 0.1.0 does not run with this library"), \
			 errhint("Run ALTER EXTENSION gibbs_nb UPDATE."))); \
	PG_RETURN_NULL(); \
}

GNB_RETIRED_ENTRY(gibbs_nb_class_counts_add_text_array)
GNB_RETIRED_ENTRY(gibbs_nb_class_counts_add_tsvector)
GNB_RETIRED_ENTRY(gibbs_nb_class_counts_combine)
GNB_RETIRED_ENTRY(gibbs_nb_class_counts_serialize)
GNB_RETIRED_ENTRY(gibbs_nb_class_counts_deserialize)
GNB_RETIRED_ENTRY(gibbs_nb_class_counts_final)

/*
 * gibbs_nb_class_counts_rows(counts bytea) returns table (class text,
 * token text, count bigint)
 *
 * The non-zero cells of a gibbs_nb_class_counts value, one row each.  Every
 * class and token is checked, used by a cell or not, before any row is
 * returned.
 */
Datum
gibbs_nb_class_counts_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ParsedCounts pc;
	Datum	   *class_texts;

	InitMaterializedSRF(fcinfo, 0);
	gnb_counts_parse(PG_GETARG_BYTEA_PP(0), &pc, true);
	check_encoding(pc.class_str, pc.class_len, pc.n_classes);
	check_encoding(pc.word_str, pc.word_len, pc.n_words);
	class_texts = palloc(sizeof(Datum) * (pc.n_classes + 1));
	for (int32 i = 0; i < pc.n_classes; i++)
		class_texts[i] = PointerGetDatum(cstring_to_text_with_len(pc.class_str[i], pc.class_len[i]));
	for (int64 i = 0; i < pc.n_cells; i++)
	{
		int32		cls,
					word;
		int64		count;
		Datum		values[3];
		bool		nulls[3] = {false, false, false};
		text	   *token;

		gnb_counts_cell(&pc, i, &cls, &word, &count);
		token = cstring_to_text_with_len(pc.word_str[word], pc.word_len[word]);
		values[0] = class_texts[cls];
		values[1] = PointerGetDatum(token);
		values[2] = Int64GetDatum(count);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		pfree(token);
	}
	return (Datum) 0;
}
