/*
 * state.c
 *	  The count aggregate's state while it counts: the classes, the words
 *	  and their cells in the process's own memory, the budget they keep
 *	  within, and counting a row's tokens.
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

void
counts_stringset_init(StringSet *set, MemoryContext cxt, int32 cap)
{
	set->hash = vocab_create(cxt, cap, NULL);
	set->n = 0;
	set->cap = cap;
	set->str = MemoryContextAlloc(cxt, sizeof(char *) * cap);
	set->len = MemoryContextAlloc(cxt, sizeof(int32) * cap);
	set->bytes = 0;
}

/* Free a set made by counts_stringset_init, its strings and all. */
void
counts_stringset_free(StringSet *set)
{
	for (int32 i = 0; i < set->n; i++)
		pfree(set->str[i]);
	pfree(set->str);
	pfree(set->len);
	vocab_destroy(set->hash);
}

/* Id of a string, interning a copy if it is new. */
int32
counts_stringset_id(StringSet *set, MemoryContext cxt, const char *str, int len)
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


/*
 * Start what this process counts afresh (a new state, or one whose counts
 * have just become a run), in a new own_cxt: no classes, no words.
 */
void
counts_own_init(CountsState *st)
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
	counts_stringset_init(&st->classes, cxt, 8);
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

void
counts_live_state_add(CountsState *st)
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
void
counts_check_budget(CountsState *st, double more)
{
	double		in_use = 0;
	double		budget;

	budget = counts_budget_bytes(st);
	if (likely(budget <= 0))
		return;
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
void
counts_budget_class(CountsState *st, double bytes)
{
	StringSet  *set = &st->classes;
	double		more;

	if (likely(counts_budget_bytes(st) <= 0))
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

	if (likely(counts_budget_bytes(st) <= 0))
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
void
counts_count_block(TokenBlock *b)
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
		counts_count_block(b);
}

/* Queue one token of the current row (a gnb_token_fn: a tsvector's). */
void
counts_count_token(void *arg, const char *str, int len, int32 count)
{
	block_add(arg, str, len, first_word(str, len), count);
}

/*
 * Queue every token of a text[] (the row's, detoasted): the elements walked
 * as array_iter_next walks them (each varlena element aligned to int), NULL
 * elements skipped.  A token's first word is one 8-byte load, masked to its
 * length, when 8 bytes from its start are still within the array.
 */
void
counts_count_text_array(TokenBlock *b, Datum tokens)
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

MemoryContext
counts_aggregate_context(FunctionCallInfo fcinfo, const char *fname)
{
	MemoryContext cxt;

	if (!AggCheckCallContext(fcinfo, &cxt))
		elog(ERROR, "%s called in non-aggregate context", fname);
	return cxt;
}

void
counts_check_state(const CountsState *st)
{
	if (st->magic != COUNTS_MAGIC)
		elog(ERROR, "gibbs_nb_class_counts: not a class counts state");
}

/* ---- sorted runs: states that left their process, merged in one pass ---- */
