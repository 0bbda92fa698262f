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
#include "gibbs_nb.h"

#include "counts/counts.h"
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

/* Free a set made by stringset_init, its strings and all. */
static void
stringset_free(StringSet *set)
{
	for (int32 i = 0; i < set->n; i++)
		pfree(set->str[i]);
	pfree(set->str);
	pfree(set->len);
	vocab_destroy(set->hash);
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

static void own_init(CountsState *st);
static void live_state_add(CountsState *st);
pg_noreturn static void invalid_counts(const char *why);
static void parse_head(bytea *value, GnbParsedCounts *pc);
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
	live_state_add(st);
	own_init(st);
	return st;
}

/*
 * Start what this process counts afresh (a new state, or one whose counts
 * have just become a run), in a new own_cxt: no classes, no words.
 */
static void
own_init(CountsState *st)
{
	MemoryContext cxt;

	if (st->own_cxt != NULL)
		MemoryContextDelete(st->own_cxt);
	/* 1 MB blocks at most, as the state's (see counts_create) */
	cxt = AllocSetContextCreate(st->cxt, "gibbs_nb_class_counts words",
								ALLOCSET_DEFAULT_MINSIZE,
								ALLOCSET_DEFAULT_INITSIZE,
								1024 * 1024);
	st->own_cxt = cxt;
	stringset_init(&st->classes, cxt, 8);
	st->words_cap = 1024;
	st->words = MemoryContextAlloc(cxt, sizeof(CountsWord) * st->words_cap);
	st->n_words = 0;
	st->slot_mask = 2 * st->words_cap - 1;
	st->slots = MemoryContextAllocZero(cxt, sizeof(WordSlot) * (st->slot_mask + 1));
	st->word_bytes = 0;
	st->arena = NULL;
	st->arena_left = 0;
	st->n_inline = 0;
	st->more = cells_create(cxt, 16, NULL);
	st->plan = NULL;
}

static inline uint64
cell_key(int32 class_id, int32 word_id)
{
	return ((uint64) class_id << 32) | (uint32) word_id;
}

/*
 * The states alive in this process, so that the budget below bounds them
 * all together: a leader that runs the partial aggregate itself (no worker
 * could be launched) holds its partial state beside the one it combines
 * into.  A state leaves the list when its memory context goes (a reset
 * callback), however the aggregate ends.
 */
typedef struct LiveState
{
	CountsState *st;
	struct LiveState *next;
	struct LiveState **prevp;
	MemoryContextCallback cb;
} LiveState;

static LiveState *live_states = NULL;

static void
live_state_gone(void *arg)
{
	LiveState  *ls = arg;

	*ls->prevp = ls->next;
	if (ls->next != NULL)
		ls->next->prevp = ls->prevp;
}

static void
live_state_add(CountsState *st)
{
	LiveState  *ls = MemoryContextAlloc(st->cxt, sizeof(LiveState));

	ls->st = st;
	ls->next = live_states;
	ls->prevp = &live_states;
	if (live_states != NULL)
		live_states->prevp = &ls->next;
	live_states = ls;
	ls->cb.func = live_state_gone;
	ls->cb.arg = ls;
	MemoryContextRegisterResetCallback(st->cxt, &ls->cb);
}

/*
 * The memory budget of this process's states (gibbs_nb.class_counts_budget,
 * which the training worker sets to what is left of its job's
 * gibbs_nb.max_job_memory and its parallel workers inherit): error out
 * (53200) if the states' contexts, which hold all of them, would go past
 * the budget by allocating `more` bytes for st.  Called before each block of
 * tokens or cells is added, with what the block may allocate (the tables'
 * doubling, the strings' copies), before a state copies or merges runs,
 * and before a final value is made, so that no process's states grow past
 * their budget by more than an allocator's rounding.  0 bounds nothing: a
 * user's own query is bounded as any aggregate's, by nothing of ours.
 */
static void
counts_check_budget(CountsState *st, double more)
{
	double		in_use = 0;
	double		budget;

	if (likely(gnb_class_counts_budget_kb <= 0))
		return;
	budget = (double) gnb_class_counts_budget_kb * 1024.0;
	for (LiveState *ls = live_states; ls != NULL; ls = ls->next)
		in_use += (double) MemoryContextMemAllocated(ls->st->cxt, true);
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
		copy = MemoryContextAlloc(st->own_cxt, (Size) len + 1);
	else
	{
		if (st->arena_left < (Size) len + 1)
		{
			st->arena = MemoryContextAlloc(st->own_cxt, ARENA_CHUNK);
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
	WordSlot   *slots = MemoryContextAllocExtended(st->own_cxt, sizeof(WordSlot) * (mask + 1),
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

/* ---- sorted runs: states that left their process, merged in one pass ---- */

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
static bool
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

/* Write the header of a serialised value; returns where its classes go. */
static char *
write_header(void *result, uint32 format, int32 n_classes, int32 n_words, int64 n_cells)
{
	char	   *p = VARDATA(result);
	uint32		header[2] = {COUNTS_MAGIC, format};

	memcpy(p, header, sizeof(header));
	p += sizeof(header);
	memcpy(p, &n_classes, sizeof(int32));
	p += sizeof(int32);
	memcpy(p, &n_words, sizeof(int32));
	p += sizeof(int32);
	memcpy(p, &n_cells, sizeof(int64));
	return p + sizeof(int64);
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

/*
 * The size of the plain serialised form of what this process counted (its
 * classes, words and cells; the runs aside), from the running totals.  One
 * too large for a value is an error here, before anything is allocated.
 */
static Size
check_value_size(Size size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gibbs_nb_class_counts: the counts take %zu bytes, more than one value can hold",
						size)));
	return size;
}

static Size
own_plain_size(const CountsState *st)
{
	return check_value_size(VARHDRSZ + COUNTS_HEADER_SIZE
							+ sizeof(int32) * ((Size) st->classes.n + st->n_words)
							+ st->classes.bytes + st->word_bytes
							+ CELL_SIZE * ((Size) st->n_inline + st->more->members));
}

/* Two sort keys of the same hash in word order (qsort_arg's comparator). */
static int
cmp_word_keys(const void *a, const void *b, void *arg)
{
	const CountsState *st = arg;
	const CountsWord *x = &st->words[(uint32) *(const uint64 *) a];
	const CountsWord *y = &st->words[(uint32) *(const uint64 *) b];

	return word_order(x->hash, x->str, x->len, y->hash, y->str, y->len);
}

/*
 * How what this process counted is written sorted (see own_sorted_plan):
 * the words' order, the cells beyond the inline ones grouped by word id
 * (word w's end at more_end[w], its start at more_end[w - 1]), and the
 * exact size.
 */
typedef struct MoreCell
{
	int32		cls;
	int64		count;
} MoreCell;

typedef struct SortedPlan
{
	uint64	   *keys;			/* (hash << 32 | word id), in word order */
	int64	   *more_end;		/* NULL without cells beyond the inline ones */
	MoreCell   *more;
	Size		size;
	/* what it was made for: a state that has changed since is an error */
	int32		n_classes;
	int32		n_words;
	int64		n_cells;
} SortedPlan;

/* Let go of the state's plan, if it has one (what it counted changed). */
static void
own_plan_free(CountsState *st)
{
	SortedPlan *plan = st->plan;

	if (plan == NULL)
		return;
	pfree(plan->keys);
	if (plan->more != NULL)
	{
		pfree(plan->more);
		pfree(plan->more_end);
	}
	pfree(plan);
	st->plan = NULL;
}

/*
 * The plan for writing what this process counted in the sorted form, made
 * once and kept (in own_cxt) until the counts change: the words sorted by
 * their hashes (words of equal hash, a collision, by length and bytes), the
 * cells beyond the inline ones grouped by word by a counting sort, and the
 * size of the value, which the varints make known only after a pass.
 */
static SortedPlan *
own_sorted_plan(CountsState *st)
{
	int32		n = st->n_words;
	int64		n_more = (int64) st->more->members;
	SortedPlan *plan;
	uint64	   *tmp;
	uint32		hist[256];
	double		size;

	if (st->plan != NULL)
		return st->plan;
	counts_check_budget(st, 2.0 * sizeof(uint64) * n +
						(n_more > 0 ? sizeof(int64) * (double) n + sizeof(MoreCell) * (double) n_more : 0));
	plan = MemoryContextAllocZero(st->own_cxt, sizeof(SortedPlan));
	plan->keys = MemoryContextAllocExtended(st->own_cxt, sizeof(uint64) * ((Size) n + 1),
											MCXT_ALLOC_HUGE);
	tmp = MemoryContextAllocExtended(st->own_cxt, sizeof(uint64) * ((Size) n + 1),
									 MCXT_ALLOC_HUGE);
	for (int32 i = 0; i < n; i++)
		plan->keys[i] = ((uint64) st->words[i].hash << 32) | (uint32) i;
	gnb_sort_by_hash_bits(plan->keys, tmp, n, 32, 8, hist);
	pfree(tmp);
	for (int32 i = 0; i < n;)
	{
		int32		j = i + 1;

		while (j < n && (plan->keys[j] >> 32) == (plan->keys[i] >> 32))
			j++;
		if (j - i > 1)
			qsort_arg(plan->keys + i, j - i, sizeof(uint64), cmp_word_keys, st);
		i = j;
	}
	CHECK_FOR_INTERRUPTS();

	size = VARHDRSZ + COUNTS_HEADER_SIZE + sizeof(int32) * (double) st->classes.n +
		st->classes.bytes;
	if (n_more > 0)
	{
		cells_iterator it;
		CountCell  *c;

		plan->more_end = MemoryContextAllocExtended(st->own_cxt, sizeof(int64) * ((Size) n + 1),
													MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		plan->more = MemoryContextAllocExtended(st->own_cxt, sizeof(MoreCell) * (Size) n_more,
												MCXT_ALLOC_HUGE);
		cells_start_iterate(st->more, &it);
		while ((c = cells_iterate(st->more, &it)) != NULL)
			plan->more_end[(uint32) c->key + 1]++;
		for (int32 w = 0; w < n; w++)
			plan->more_end[w + 1] += plan->more_end[w];
		cells_start_iterate(st->more, &it);
		while ((c = cells_iterate(st->more, &it)) != NULL)
		{
			int64		at = plan->more_end[(uint32) c->key]++;

			plan->more[at].cls = (int32) (c->key >> 32);
			plan->more[at].count = c->count;
			size += varint_size((uint64) plan->more[at].cls) + varint_size((uint64) c->count);
		}
	}
	for (int32 i = 0; i < n; i++)
	{
		const CountsWord *w = &st->words[i];
		int64		n_cells = (w->cls[0] >= 0) + (w->cls[1] >= 0);

		if (plan->more_end != NULL)
			n_cells += plan->more_end[i] - (i == 0 ? 0 : plan->more_end[i - 1]);
		size += sizeof(uint32) + varint_size((uint64) w->len) + w->len + varint_size((uint64) n_cells);
		for (int k = 0; k < 2; k++)
			if (w->cls[k] >= 0)
				size += varint_size((uint64) w->cls[k]) + varint_size((uint64) w->n[k]);
	}
	plan->size = check_value_size(size > (double) MaxAllocSize ? MaxAllocSize + 1 : (Size) size);
	plan->n_classes = st->classes.n;
	plan->n_words = n;
	plan->n_cells = st->n_inline + n_more;
	st->plan = plan;
	return plan;
}

/*
 * The varlena header, the value's header and the classes of what this
 * process counted; returns where its words go.
 */
static char *
own_write_head(const CountsState *st, void *result, Size size, uint32 format)
{
	char	   *p;

	SET_VARSIZE(result, size);
	p = write_header(result, format, st->classes.n, st->n_words,
					 st->n_inline + (int64) st->more->members);
	for (int32 i = 0; i < st->classes.n; i++)
		p = write_string(p, st->classes.str[i], st->classes.len[i]);
	return p;
}

/*
 * Write what this process counted in the sorted form (format 2), of the
 * size its plan gave: each word's record in the plan's order, its inline
 * cells and then those beyond.
 */
static void
own_write_sorted(CountsState *st, void *result, Size allocated_size)
{
	SortedPlan *plan = own_sorted_plan(st);
	char	   *p;

	if (allocated_size != plan->size || plan->n_classes != st->classes.n ||
		plan->n_words != st->n_words || plan->n_cells != st->n_inline + (int64) st->more->members)
		elog(ERROR, "gibbs_nb_class_counts: the state changed since its sorted size was taken");
	p = own_write_head(st, result, allocated_size, COUNTS_FORMAT_SORTED);
	for (int32 j = 0; j < st->n_words; j++)
	{
		uint32		id = (uint32) plan->keys[j];
		const CountsWord *w = &st->words[id];
		int64		more_start = 0;
		int64		more_end = 0;

		if (plan->more_end != NULL)
		{
			more_start = id == 0 ? 0 : plan->more_end[id - 1];
			more_end = plan->more_end[id];
		}
		p = write_record(p, w->hash, w->str, w->len,
						 (w->cls[0] >= 0) + (w->cls[1] >= 0) + (more_end - more_start));
		for (int k = 0; k < 2; k++)
			if (w->cls[k] >= 0)
			{
				p = put_varint(p, (uint64) w->cls[k]);
				p = put_varint(p, (uint64) w->n[k]);
			}
		for (int64 at = more_start; at < more_end; at++)
		{
			p = put_varint(p, (uint64) plan->more[at].cls);
			p = put_varint(p, (uint64) plan->more[at].count);
		}
	}
	if (p != (char *) result + allocated_size)
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
}

/*
 * What this process counted as a sorted value, in CurrentMemoryContext;
 * the value's memory checked against budget's budget (the plan's against
 * st's).
 */
static bytea *
own_sorted_value(CountsState *st, CountsState *budget)
{
	Size		size = own_sorted_plan(st)->size;
	bytea	   *value;

	counts_check_budget(budget, (double) size);
	value = palloc(size);
	own_write_sorted(st, value, size);
	own_plan_free(st);
	return value;
}

/*
 * A reader of a sorted run, at one of its words: its record's header read,
 * its cells next.  It checks what it reads (bounds, order, ranges, the
 * totals of the run's header) as it goes: a run is merged without being
 * walked first.
 */
typedef struct RunReader
{
	const char *p;				/* the current word's cells, or the next record */
	const char *end;
	int32		left;			/* words not read yet */
	int64		cells_left;		/* cells not read yet (of the whole run) */
	int32		n_classes;
	int32		len;			/* the current word */
	const char *str;
	uint32		hash;
	uint64		n_cells;
	const int32 *class_map;
} RunReader;

static void
reader_start(RunReader *r, const CountsRun *run, const int32 *class_map)
{
	r->p = run->words;
	r->end = VARDATA(run->value) + run->size;
	r->left = run->n_words;
	r->cells_left = run->n_cells;
	r->n_classes = run->n_classes;
	r->str = NULL;
	r->len = 0;
	r->hash = 0;
	r->n_cells = 0;
	r->class_map = class_map;
}

/* Move to the next word; false (and str NULL) when there is none. */
static inline bool
reader_next(RunReader *r)
{
	uint32		prev_hash = r->hash;
	const char *prev_str = r->str;
	int32		prev_len = r->len;
	uint64		len;

	if (r->left == 0)
	{
		if (r->p != r->end || r->cells_left != 0)
			invalid_counts("bad length");
		r->str = NULL;
		return false;
	}
	r->left--;
	if (r->end - r->p < (ptrdiff_t) sizeof(uint32))
		invalid_counts("truncated");
	memcpy(&r->hash, r->p, sizeof(uint32));
	r->p += sizeof(uint32);
	if (!get_varint_fast(&r->p, r->end, (uint64) MaxAllocSize, &len) ||
		len > (uint64) (r->end - r->p))
		invalid_counts("bad string length");
	r->str = r->p;
	r->len = (int32) len;
	r->p += len;
	if (prev_str != NULL &&
		word_order(prev_hash, prev_str, prev_len, r->hash, r->str, r->len) >= 0)
		invalid_counts("tokens out of order or repeated");
	if (!get_varint_fast(&r->p, r->end, (uint64) r->cells_left, &r->n_cells) ||
		(r->n_cells > 0 && r->n_classes == 0))
		invalid_counts("bad cell count");
	r->cells_left -= (int64) r->n_cells;
	return true;
}

/* The next cell of the current word: its class (mapped) and count. */
static inline void
reader_cell(RunReader *r, int32 *cls, int64 *count)
{
	uint64		c;
	uint64		n;

	if (!get_varint_fast(&r->p, r->end, (uint64) (r->n_classes - 1), &c) ||
		!get_varint_fast(&r->p, r->end, (uint64) PG_INT64_MAX, &n) || n == 0)
		invalid_counts("bad cell");
	*cls = r->class_map[c];
	*count = (int64) n;
}

/*
 * Merge sorted values into one (in CurrentMemoryContext): the classes in
 * order of first appearance, the words in order, and a word's cells from
 * all of them added up by class.  At every step the least word at the head
 * of the values is the next word out, and every value whose head is that
 * word moves on: n values of W words in all take W steps of n comparisons,
 * nearly all of them between two hashes, and every byte is read and
 * written once, in order.  The memory it takes is checked against budget's
 * budget.
 */
static bytea *
merge_runs(CountsState *budget, double held, const CountsRun *const *src, int n_src)
{
	Size		bound = VARHDRSZ + COUNTS_HEADER_SIZE;
	bool		clamped = false;
	double		class_bytes = 0;
	StringSet	classes;
	RunReader	rd[MAX_RUNS + 1];
	int			live = 0;
	int64	   *acc;
	int32	   *touched;
	bytea	   *result;
	char	   *p;
	int32		n_out = 0;
	int64		n_out_cells = 0;
	Size		size;

	Assert(n_src <= MAX_RUNS + 1);

	/*
	 * The merged value is at most the sum of the values: a sum of counts
	 * takes no more bytes than its terms, a word's record is written once
	 * for several, but a class may get an id of more bytes (at most 4 more).
	 */
	for (int r = 0; r < n_src; r++)
	{
		bound += src[r]->size + 4 * (Size) src[r]->n_cells;
		for (int32 i = 0; i < src[r]->n_classes; i++)
			class_bytes += 64.0 + src[r]->class_len[i];
	}

	/*
	 * A value holds at most MaxAllocSize bytes: a merge that would not fit
	 * in that is an error (54000) when it gets there, not a larger buffer.
	 */
	if (bound > MaxAllocSize)
	{
		bound = MaxAllocSize;
		clamped = true;
	}
	/*
	 * The value; per class, its copy in the classes' set, its entry there,
	 * its place in the maps and the accumulators; and what the caller holds
	 * beside the state (held) meanwhile.
	 */
	counts_check_budget(budget, (double) bound + class_bytes + held);

	stringset_init(&classes, CurrentMemoryContext, 8);
	for (int r = 0; r < n_src; r++)
	{
		int32	   *map = palloc(sizeof(int32) * (src[r]->n_classes + 1));

		for (int32 i = 0; i < src[r]->n_classes; i++)
			map[i] = stringset_id(&classes, CurrentMemoryContext,
								  src[r]->class_str[i], src[r]->class_len[i]);
		reader_start(&rd[r], src[r], map);
		if (reader_next(&rd[r]))
			live++;
	}
	acc = palloc0(sizeof(int64) * (classes.n + 1));
	touched = palloc(sizeof(int32) * (classes.n + 1));
	result = palloc_extended(bound, MCXT_ALLOC_HUGE);
	p = write_header(result, COUNTS_FORMAT_SORTED, 0, 0, 0);
	for (int32 i = 0; i < classes.n; i++)
		p = write_string(p, classes.str[i], classes.len[i]);

	while (live > 0)
	{
		int			eq[MAX_RUNS + 1];
		int			n_eq = 0;
		int			best = -1;
		int			n_touched = 0;

		for (int r = 0; r < n_src; r++)
		{
			int			c;

			if (rd[r].str == NULL)
				continue;
			c = best < 0 ? -1 : word_order(rd[r].hash, rd[r].str, rd[r].len,
										   rd[best].hash, rd[best].str, rd[best].len);
			if (c < 0)
			{
				best = r;
				n_eq = 0;
			}
			if (c <= 0)
				eq[n_eq++] = r;
		}
		if (n_out == PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many distinct tokens or classes for gibbs_nb_class_counts")));

		/* the word's cells in every value whose head it is, by class */
		for (int e = 0; e < n_eq; e++)
		{
			RunReader  *r = &rd[eq[e]];

			for (uint64 k = 0; k < r->n_cells; k++)
			{
				int32		oc;
				int64		count;

				reader_cell(r, &oc, &count);
				if (acc[oc] == 0)
					touched[n_touched++] = oc;
				if (unlikely(pg_add_s64_overflow(acc[oc], count, &acc[oc])))
					ereport(ERROR,
							(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
							 errmsg("gibbs_nb_class_counts: a count is out of range")));
			}
		}
		/*
		 * The bound above holds; a record that would not fit is a bug.  At
		 * most 4 + 5 + len + 10 + 15 bytes a cell; within that of the end,
		 * its exact size.
		 */
		if ((Size) (p - (char *) result) + 19 + (Size) rd[best].len + 15 * (Size) n_touched > bound)
		{
			Size		need = sizeof(uint32) + varint_size((uint64) rd[best].len) +
				rd[best].len + varint_size((uint64) n_touched);

			for (int t = 0; t < n_touched; t++)
				need += varint_size((uint64) touched[t]) + varint_size((uint64) acc[touched[t]]);
			if ((Size) (p - (char *) result) + need > bound)
			{
				if (clamped)
					ereport(ERROR,
							(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							 errmsg("gibbs_nb_class_counts: the counts take more bytes than one value can hold")));
				elog(ERROR, "gibbs_nb_class_counts: merged counts outgrew their bound");
			}
		}
		p = write_record(p, rd[best].hash, rd[best].str, rd[best].len, (uint64) n_touched);
		for (int t = 0; t < n_touched; t++)
		{
			p = put_varint(p, (uint64) touched[t]);
			p = put_varint(p, (uint64) acc[touched[t]]);
			acc[touched[t]] = 0;
		}
		n_out_cells += n_touched;
		n_out++;
		for (int e = 0; e < n_eq; e++)
			if (!reader_next(&rd[eq[e]]))
				live--;
		if ((n_out & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	size = check_value_size(p - (char *) result);
	SET_VARSIZE(result, size);
	(void) write_header(result, COUNTS_FORMAT_SORTED, classes.n, n_out, n_out_cells);
	for (int r = 0; r < n_src; r++)
		pfree((void *) rd[r].class_map);
	pfree(acc);
	pfree(touched);
	stringset_free(&classes);
	return result;
}

static void
run_free(CountsRun *run)
{
	pfree(run->value);
	pfree(run->class_str);
	pfree(run->class_len);
}

static void runs_add(CountsState *st, bytea *value);

/*
 * Merge k of the state's runs, the smallest, into one.  With k the half of
 * MAX_RUNS when a state is full (a Citus coordinator combining one run per
 * shard), runs of like sizes are merged together, as in a log-structured
 * merge: each byte is merged about log(shards) times, not once for every
 * few shards, as it would be if a large run were merged again with each
 * few small ones.
 */
static void
runs_merge(CountsState *st, int k)
{
	int			order[MAX_RUNS];
	const CountsRun *src[MAX_RUNS] = {0};
	CountsRun	kept[MAX_RUNS];
	int			n_kept = 0;
	MemoryContext old;
	bytea	   *merged;

	if (k <= 1)
		return;
	Assert(k <= st->n_runs);
	/* the runs by size, smallest first (insertion sort of at most 8) */
	for (int r = 0; r < st->n_runs; r++)
	{
		int			j = r;

		while (j > 0 && st->runs[order[j - 1]].size > st->runs[r].size)
		{
			order[j] = order[j - 1];
			j--;
		}
		order[j] = r;
	}
	for (int i = 0; i < k; i++)
		src[i] = &st->runs[order[i]];
	old = MemoryContextSwitchTo(st->cxt);
	merged = merge_runs(st, 0, src, k);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < k; i++)
		run_free(&st->runs[order[i]]);
	for (int i = k; i < st->n_runs; i++)
		kept[n_kept++] = st->runs[order[i]];
	memcpy(st->runs, kept, sizeof(CountsRun) * n_kept);
	st->n_runs = n_kept;
	runs_add(st, merged);
}

/* Merge the state's runs into one. */
static void
runs_merge_all(CountsState *st)
{
	runs_merge(st, st->n_runs);
}

/*
 * A sorted value as a run (its classes parsed in CurrentMemoryContext).
 * Its layout and order are checked, as the merge relies on them (it reads
 * the records without checks); a value that is not sorted is not a state.
 */
static void
run_from_value(bytea *value, CountsRun *run)
{
	GnbParsedCounts pc;

	parse_head(value, &pc);
	if (!pc.sorted)
		invalid_counts("a state must be in the sorted form");
	run->value = value;
	run->n_classes = pc.n_classes;
	run->class_str = pc.class_str;
	run->class_len = pc.class_len;
	run->n_words = pc.n_words;
	run->n_cells = pc.n_cells;
	run->words = pc.cells;
	run->size = pc.size;
}

/*
 * Take a sorted value, allocated in the state's context, as one of its
 * runs (the state owns it from now on).
 */
static void
runs_add(CountsState *st, bytea *value)
{
	MemoryContext old;

	if (st->n_runs == MAX_RUNS)
		runs_merge(st, MAX_RUNS / 2);
	old = MemoryContextSwitchTo(st->cxt);
	run_from_value(value, &st->runs[st->n_runs]);
	MemoryContextSwitchTo(old);
	st->n_runs++;
}

/*
 * Take a copy of a flat state (a parallel worker's, a Citus shard's, one
 * typed by a user and validated by the type's input) as a run.
 */
static void
runs_add_copy(CountsState *st, const bytea *value)
{
	Size		len = VARSIZE_ANY_EXHDR(value);
	int32		n_classes = 0;
	bytea	   *copy;

	/* the copy, and its parse's arrays of the classes */
	if (len >= COUNTS_HEADER_SIZE)
		memcpy(&n_classes, VARDATA_ANY(value) + 2 * sizeof(uint32), sizeof(int32));
	counts_check_budget(st, (double) len + VARHDRSZ +
						(sizeof(char *) + sizeof(int32)) * (double) Max(n_classes, 0));
	copy = MemoryContextAllocExtended(st->cxt, VARHDRSZ + len, MCXT_ALLOC_HUGE);
	SET_VARSIZE(copy, VARHDRSZ + len);
	memcpy(VARDATA(copy), VARDATA_ANY(value), len);
	runs_add(st, copy);
}

/*
 * Make everything the state holds at most one run, with nothing counted of
 * its own: what this process counted becomes a run, and the runs are
 * merged.  Its counts stay what they were.
 */
static void
counts_collapse(CountsState *st)
{
	if (st->classes.n > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(st->cxt);
		bytea	   *value = own_sorted_value(st, st);

		MemoryContextSwitchTo(old);
		own_init(st);
		runs_add(st, value);
	}
	runs_merge_all(st);
}

/*
 * Add the counts of a state value (expanded, read-only or not, or flat) to
 * `into`, as runs: a flat value is copied; an expanded one gives a copy of
 * each of its runs and of what it counted, sorted.  `into` itself (a state
 * combined with itself) is first made one run, then given a copy of it.
 */
static void
counts_add_datum(CountsState *into, Datum d)
{
	CountsState *from = counts_expanded(d);

	if (from == NULL)
		runs_add_copy(into, DatumGetByteaPP(d));
	else if (from == into)
	{
		counts_collapse(into);
		if (into->n_runs > 0)
			runs_add_copy(into, into->runs[0].value);
	}
	else
	{
		for (int r = 0; r < from->n_runs; r++)
			runs_add_copy(into, from->runs[r].value);
		if (from->classes.n > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(into->cxt);
			bytea	   *value = own_sorted_value(from, into);

			MemoryContextSwitchTo(old);
			runs_add(into, value);
		}
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
	counts_add_datum(st, PG_GETARG_DATUM(argno));
	return st;
}

/*
 * Whether this call may hand its state back to the aggregate node as a
 * read-write expanded object, changed in place from call to call.  Not in a
 * window aggregate node that also runs an aggregate that is neither built
 * in nor the extension's own: that may be a role's own moving aggregate
 * over our state, our transition its MSFUNC and its MINVFUNC a PL/pgSQL
 * function, which takes a read-write argument over (into its own memory)
 * and hands it back into short-lived memory, where nodeWindowAgg, finding
 * the pointer it passed, keeps it: the next call read freed memory and the
 * backend crashed.  Such a node gets a flat value each row instead (slow,
 * but the node copies it).  Decided from the aggregates the node runs, by
 * OID and extension membership, which no other role can change (nor can a
 * role dropping its aggregate during the query make it look harmless: a
 * dropped aggregate is no member either).  Once per query.
 */
static bool
state_writable(FunctionCallInfo fcinfo)
{
	int8	   *answer;

	if (AggCheckCallContext(fcinfo, NULL) != AGG_CONTEXT_WINDOW)
		return true;
	answer = (int8 *) fcinfo->flinfo->fn_extra;
	if (answer == NULL)
	{
		Oid			ours = getExtensionOfObject(ProcedureRelationId, fcinfo->flinfo->fn_oid);
		bool		foreign = !OidIsValid(ours) || !IsA(fcinfo->context, WindowAggState);
		ListCell   *lc;

		if (!foreign)
			foreach(lc, ((WindowAggState *) fcinfo->context)->funcs)
			{
				WindowFunc *wfunc = ((WindowFuncExprState *) lfirst(lc))->wfunc;

				if (wfunc->winagg && wfunc->winfnoid >= FirstNormalObjectId &&
					getExtensionOfObject(ProcedureRelationId, wfunc->winfnoid) != ours)
					foreign = true;
			}
		answer = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(int8));
		*answer = foreign ? 0 : 1;
		fcinfo->flinfo->fn_extra = answer;
	}
	return *answer == 1;
}

/*
 * The state as this call's result: read-write, or (see state_writable) its
 * flat form, the state let go of.
 */
static Datum
counts_result(CountsState *st, bool writable)
{
	Size		size;
	bytea	   *flat;

	if (writable)
		return EOHPGetRWDatum(&st->hdr);
	size = counts_get_flat_size(&st->hdr);
	flat = palloc(size);
	counts_flatten_into(&st->hdr, flat, size);
	DeleteExpandedObject(EOHPGetRWDatum(&st->hdr));
	return PointerGetDatum(flat);
}

/*
 * The state argument argno as this call changes it: in place if the state
 * may be handed back writable (counts_writable), else a copy of it in this
 * call's memory, returned flat by counts_result.
 */
static CountsState *
counts_for_call(FunctionCallInfo fcinfo, int argno, MemoryContext aggcxt, bool writable)
{
	CountsState *st;

	if (writable)
		return counts_writable(fcinfo, argno, aggcxt);
	st = counts_create(CurrentMemoryContext);
	if (!PG_ARGISNULL(argno))
		counts_add_datum(st, PG_GETARG_DATUM(argno));
	return st;
}

static Datum
class_counts_add(FunctionCallInfo fcinfo, bool is_tsvector)
{
	MemoryContext aggcxt = aggregate_context(fcinfo, "gibbs_nb_class_counts_add");
	bool		writable = state_writable(fcinfo);
	CountsState *st = counts_for_call(fcinfo, 0, aggcxt, writable);

	/* rows with a NULL label or NULL tokens do not count */
	if (!PG_ARGISNULL(1) && !PG_ARGISNULL(2))
	{
		text	   *label = PG_GETARG_TEXT_PP(1);
		TokenBlock	b;

		own_plan_free(st);

		counts_budget_class(st, VARSIZE_ANY_EXHDR(label) + 1);
		b.st = st;
		b.cls = stringset_id(&st->classes, st->own_cxt, VARDATA_ANY(label),
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
	PG_RETURN_DATUM(counts_result(st, writable));
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
	bool		writable = state_writable(fcinfo);
	CountsState *a;

	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		a = counts_for_call(fcinfo, 0, aggcxt, writable);
		PG_RETURN_DATUM(counts_result(a, writable));
	}
	a = counts_for_call(fcinfo, 0, aggcxt, writable);
	counts_add_datum(a, PG_GETARG_DATUM(1));
	PG_RETURN_DATUM(counts_result(a, writable));
}


/*
 * The size of a state's serialised form (sorted), with its varlena header.
 * A state that holds runs is first made one run (see counts_collapse): its
 * form is then that run's bytes.  A read-only state changes so only in how
 * it holds its counts, never in what they are.
 */
static Size
counts_get_flat_size(ExpandedObjectHeader *eohptr)
{
	CountsState *st = (CountsState *) eohptr;

	check_state(st);
	if (st->n_runs > 0)
	{
		counts_collapse(st);
		return VARSIZE(st->runs[0].value);
	}
	return own_sorted_plan(st)->size;
}

/*
 * Write a state's serialised form, sorted (format 2), of the size
 * counts_get_flat_size gave: the state leaves its process so, as a run the
 * leader or the coordinator can merge.
 */
static void
counts_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size)
{
	CountsState *st = (CountsState *) eohptr;

	if (allocated_size != counts_get_flat_size(eohptr))
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
	if (st->n_runs > 0)
		memcpy(result, st->runs[0].value, allocated_size);
	else
		own_write_sorted(st, result, allocated_size);
}

/*
 * Write what this process counted in the plain form (format 1), of the size
 * own_plain_size gave: the words as they are, each word's inline
 * cells in word order, then those beyond.  What the final function returns
 * for a state counted in one process, with no sort.
 */
static void
own_write_plain(CountsState *st, void *result, Size allocated_size)
{
	char	   *p;
	cells_iterator it;
	CountCell  *c;

	if (allocated_size != own_plain_size(st))
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
	p = own_write_head(st, result, allocated_size, COUNTS_FORMAT_PLAIN);
	for (int32 i = 0; i < st->n_words; i++)
		p = write_string(p, st->words[i].str, st->words[i].len);
	for (int32 i = 0; i < st->n_words; i++)
		for (int j = 0; j < 2; j++)
			if (st->words[i].cls[j] >= 0)
				p = write_cell(p, st->words[i].cls[j], i, st->words[i].n[j]);
	cells_start_iterate(st->more, &it);
	while ((c = cells_iterate(st->more, &it)) != NULL)
		p = write_cell(p, (int32) (c->key >> 32), (int32) (uint32) c->key, c->count);
	if (p != (char *) result + allocated_size)
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
}

/* A value with no classes, words or cells, in the given format. */
static bytea *
empty_value(uint32 format)
{
	bytea	   *flat = palloc(VARHDRSZ + COUNTS_HEADER_SIZE);

	SET_VARSIZE(flat, VARHDRSZ + COUNTS_HEADER_SIZE);
	(void) write_header(flat, format, 0, 0, 0);
	return flat;
}

/*
 * A state value in its serialised form (sorted), in a varlena of its own (a
 * fresh copy: the caller may return it); NULL is the empty state's.
 */
static bytea *
counts_flat_copy(FunctionCallInfo fcinfo, int argno)
{
	CountsState *st;
	bytea	   *flat;

	if (PG_ARGISNULL(argno))
		return empty_value(COUNTS_FORMAT_SORTED);
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

static void
invalid_counts(const char *why)
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
			invalid_counts("truncated");
		memcpy(&l, *p, sizeof(int32));
		*p += sizeof(int32);
		if (l < 0 || end - *p < l)
			invalid_counts("bad string length");
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
			invalid_counts("truncated");
		memcpy(&hash, p, sizeof(uint32));
		p += sizeof(uint32);
		if (!get_varint(&p, end, (uint64) MaxAllocSize, &l) || l > (uint64) (end - p))
			invalid_counts("bad string length");
		if (i > 0 && word_order(last_hash, last_str, last_len, hash, p, (int32) l) >= 0)
			invalid_counts("tokens out of order or repeated");
		if (validate && token_hash(p, (int) l, first_word(p, (int) l)) != hash)
			invalid_counts("a token's hash is wrong");
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
			invalid_counts("bad cell count");
		for (uint64 k = 0; k < n; k++)
		{
			uint64		cls;
			uint64		count;

			if (pc->n_classes == 0 ||
				!get_varint(&p, end, (uint64) pc->n_classes - 1, &cls) ||
				!get_varint(&p, end, (uint64) PG_INT64_MAX, &count) || count == 0)
				invalid_counts("bad cell");
			if (seen_at != NULL)
			{
				if (seen_at[cls] == i)
					invalid_counts("a token has two cells of one class");
				seen_at[cls] = i;
			}
		}
		cells += (int64) n;
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}
	if (p != end || cells != pc->n_cells)
		invalid_counts("bad length");
	if (seen_at != NULL)
		pfree(seen_at);
}

/* No string twice among n, or invalid_counts(why). */
static void
check_distinct_strings(const char **str, const int32 *len, int32 n, const char *why)
{
	vocab_hash *seen = vocab_create(CurrentMemoryContext, n + 1, NULL);
	bool		found;

	for (int32 i = 0; i < n; i++)
	{
		(void) vocab_insert(seen, token_key(str[i], len[i]), &found);
		if (found)
			invalid_counts(why);
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
static void
parse_head(bytea *value, GnbParsedCounts *pc)
{
	const char *p = VARDATA_ANY(value);
	const char *end = p + VARSIZE_ANY_EXHDR(value);
	uint32		header[2];

	if (end - p < (ptrdiff_t) COUNTS_HEADER_SIZE)
		invalid_counts("too short");
	pc->size = end - p;
	memcpy(header, p, sizeof(header));
	p += sizeof(header);
	if (header[0] != COUNTS_MAGIC ||
		(header[1] != COUNTS_FORMAT_PLAIN && header[1] != COUNTS_FORMAT_SORTED))
		invalid_counts("not produced by gibbs_nb_class_counts");
	pc->sorted = header[1] == COUNTS_FORMAT_SORTED;
	memcpy(&pc->n_classes, p, sizeof(int32));
	memcpy(&pc->n_words, p + sizeof(int32), sizeof(int32));
	memcpy(&pc->n_cells, p + 2 * sizeof(int32), sizeof(int64));
	p += 2 * sizeof(int32) + sizeof(int64);
	/* a string takes at least 4 bytes, a cell 16 (2 in a sorted value) */
	if (pc->n_classes < 0 || pc->n_words < 0 || pc->n_cells < 0 ||
		(int64) pc->n_classes + pc->n_words > (end - p) / (int64) sizeof(int32) ||
		pc->n_cells > (end - p) / (pc->sorted ? 2 : (int64) CELL_SIZE))
		invalid_counts("bad sizes");
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
			invalid_counts("bad length");
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
	parse_head(value, pc);
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
				invalid_counts("bad cell");
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

	/* the format first: a plain value is refused before it is read */
	parse_head(value, &pc);
	if (!pc.sorted)
		invalid_counts("a state must be in the sorted form");
	pfree(pc.class_str);
	pfree(pc.class_len);
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
	n = pg_b64_decode(str, (int) len, (gnb_b64_byte *) VARDATA(value), max);
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
	n = pg_b64_encode((const gnb_b64_byte *) VARDATA(flat), len, out, max);
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
 * row was counted.  A state counted in this process alone is written as it
 * is (the plain form); one that holds runs (a parallel plan's leader, a
 * Citus coordinator) is merged with what it counted into the sorted form,
 * the merge written straight into the value.  The state is left as it was:
 * a window aggregate calls this again and counts on.
 */
Datum
gibbs_nb_counts_state_final(PG_FUNCTION_ARGS)
{
	CountsState *st;
	const CountsRun *src[MAX_RUNS + 1];
	CountsRun	own;
	bytea	   *value;
	int			n_src = 0;

	(void) aggregate_context(fcinfo, "gibbs_nb_class_counts_final");
	if (PG_ARGISNULL(0))
		PG_RETURN_BYTEA_P(empty_value(COUNTS_FORMAT_PLAIN));
	st = counts_expanded(PG_GETARG_DATUM(0));
	if (st == NULL)
		PG_RETURN_BYTEA_P(PG_GETARG_BYTEA_P_COPY(0));
	if (st->n_runs == 0)
	{
		Size		size = own_plain_size(st);

		/* the value is made beside the state: within the budget with it */
		counts_check_budget(st, (double) size);
		value = palloc(size);
		own_write_plain(st, value, size);
		PG_RETURN_BYTEA_P(value);
	}
	for (int r = 0; r < st->n_runs; r++)
		src[n_src++] = &st->runs[r];
	if (st->classes.n > 0)
	{
		run_from_value(own_sorted_value(st, st), &own);
		src[n_src++] = &own;
	}
	/* the own value, outside the state's memory, is held while the merge runs */
	value = merge_runs(st, n_src > st->n_runs ? (double) VARSIZE(own.value) : 0, src, n_src);
	if (n_src > st->n_runs)
		run_free(&own);
	PG_RETURN_BYTEA_P(value);
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
	GnbCountsIter it;
	int32		cls,
				word;
	int64		count;
	Datum	   *class_texts;

	InitMaterializedSRF(fcinfo, 0);
	gnb_counts_parse(PG_GETARG_BYTEA_PP(0), &pc, true);
	check_encoding(pc.class_str, pc.class_len, pc.n_classes);
	check_encoding(pc.word_str, pc.word_len, pc.n_words);
	class_texts = palloc(sizeof(Datum) * (pc.n_classes + 1));
	for (int32 i = 0; i < pc.n_classes; i++)
		class_texts[i] = PointerGetDatum(cstring_to_text_with_len(pc.class_str[i], pc.class_len[i]));
	gnb_counts_iter_init(&it, &pc);
	while (gnb_counts_next(&it, &cls, &word, &count))
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};
		text	   *token;

		token = cstring_to_text_with_len(pc.word_str[word], pc.word_len[word]);
		values[0] = class_texts[cls];
		values[1] = PointerGetDatum(token);
		values[2] = Int64GetDatum(count);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		pfree(token);
	}
	return (Datum) 0;
}
