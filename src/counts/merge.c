/*
 * merge.c
 *	  Sorted runs: the values a state was combined with, kept as they came
 *	  and merged in one pass, as a merge sort merges.
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
			counts_invalid_counts("bad length");
		r->str = NULL;
		return false;
	}
	r->left--;
	if (r->end - r->p < (ptrdiff_t) sizeof(uint32))
		counts_invalid_counts("truncated");
	memcpy(&r->hash, r->p, sizeof(uint32));
	r->p += sizeof(uint32);
	if (!get_varint_fast(&r->p, r->end, (uint64) MaxAllocSize, &len) ||
		len > (uint64) (r->end - r->p))
		counts_invalid_counts("bad string length");
	r->str = r->p;
	r->len = (int32) len;
	r->p += len;
	if (prev_str != NULL &&
		word_order(prev_hash, prev_str, prev_len, r->hash, r->str, r->len) >= 0)
		counts_invalid_counts("tokens out of order or repeated");
	if (!get_varint_fast(&r->p, r->end, (uint64) r->cells_left, &r->n_cells) ||
		(r->n_cells > 0 && r->n_classes == 0))
		counts_invalid_counts("bad cell count");
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
		counts_invalid_counts("bad cell");
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
 * budget.  One function of about 160 lines: the merge is the part of a
 * parallel count that does not run in parallel, and its loop over the
 * values' heads is the hot path; it stays whole, as a merge sort's does.
 */
bytea *
counts_merge_runs(CountsState *budget, double held, const CountsRun *const *src, int n_src)
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

	counts_stringset_init(&classes, CurrentMemoryContext, 8);
	for (int r = 0; r < n_src; r++)
	{
		int32	   *map = palloc(sizeof(int32) * (src[r]->n_classes + 1));

		for (int32 i = 0; i < src[r]->n_classes; i++)
			map[i] = counts_stringset_id(&classes, CurrentMemoryContext,
								  src[r]->class_str[i], src[r]->class_len[i]);
		reader_start(&rd[r], src[r], map);
		if (reader_next(&rd[r]))
			live++;
	}
	acc = palloc0(sizeof(int64) * (classes.n + 1));
	touched = palloc(sizeof(int32) * (classes.n + 1));
	result = palloc_extended(bound, MCXT_ALLOC_HUGE);
	p = counts_write_header(result, COUNTS_FORMAT_SORTED, 0, 0, 0);
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

	size = counts_check_value_size(p - (char *) result);
	SET_VARSIZE(result, size);
	(void) counts_write_header(result, COUNTS_FORMAT_SORTED, classes.n, n_out, n_out_cells);
	for (int r = 0; r < n_src; r++)
		pfree((void *) rd[r].class_map);
	pfree(acc);
	pfree(touched);
	counts_stringset_free(&classes);
	return result;
}

void
counts_run_free(CountsRun *run)
{
	pfree(run->value);
	pfree(run->class_str);
	pfree(run->class_len);
}

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
	merged = counts_merge_runs(st, 0, src, k);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < k; i++)
		counts_run_free(&st->runs[order[i]]);
	for (int i = k; i < st->n_runs; i++)
		kept[n_kept++] = st->runs[order[i]];
	memcpy(st->runs, kept, sizeof(CountsRun) * n_kept);
	st->n_runs = n_kept;
	counts_runs_add(st, merged);
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
void
counts_run_from_value(bytea *value, CountsRun *run)
{
	GnbParsedCounts pc;

	counts_parse_head(value, &pc);
	if (!pc.sorted)
		counts_invalid_counts("a state must be in the sorted form");
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
void
counts_runs_add(CountsState *st, bytea *value)
{
	MemoryContext old;

	if (st->n_runs == MAX_RUNS)
		runs_merge(st, MAX_RUNS / 2);
	old = MemoryContextSwitchTo(st->cxt);
	counts_run_from_value(value, &st->runs[st->n_runs]);
	MemoryContextSwitchTo(old);
	st->n_runs++;
}

/*
 * Take a copy of a flat state (a parallel worker's, a Citus shard's, one
 * typed by a user and validated by the type's input) as a run.
 */
void
counts_runs_add_copy(CountsState *st, const bytea *value)
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
	counts_runs_add(st, copy);
}

/*
 * Make everything the state holds at most one run, with nothing counted of
 * its own: what this process counted becomes a run, and the runs are
 * merged.  Its counts stay what they were.
 */
void
counts_collapse(CountsState *st)
{
	if (st->classes.n > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(st->cxt);
		bytea	   *value = counts_own_sorted_value(st, st);

		MemoryContextSwitchTo(old);
		counts_own_init(st);
		counts_runs_add(st, value);
	}
	runs_merge_all(st);
}
