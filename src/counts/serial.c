/*
 * serial.c
 *	  The sorted serial form: the order of the words, varints, records,
 *	  and writing what a process counted as one sorted value.
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

/* Write the header of a serialised value; returns where its classes go. */
char *
counts_write_header(void *result, uint32 format, int32 n_classes, int32 n_words, int64 n_cells)
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

/*
 * The size of the plain serialised form of what this process counted (its
 * classes, words and cells; the runs aside), from the running totals.  One
 * too large for a value is an error here, before anything is allocated.
 */
Size
counts_check_value_size(Size size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gibbs_nb_class_counts: the counts take %zu bytes, more than one value can hold",
						size)));
	return size;
}

Size
counts_own_plain_size(const CountsState *st)
{
	return counts_check_value_size(VARHDRSZ + COUNTS_HEADER_SIZE
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

/* Let go of the state's plan, if it has one (what it counted changed). */
void
counts_own_plan_free(CountsState *st)
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
SortedPlan *
counts_own_sorted_plan(CountsState *st)
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
	plan->size = counts_check_value_size(size > (double) MaxAllocSize ? MaxAllocSize + 1 : (Size) size);
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
char *
counts_own_write_head(const CountsState *st, void *result, Size size, uint32 format)
{
	char	   *p;

	SET_VARSIZE(result, size);
	p = counts_write_header(result, format, st->classes.n, st->n_words,
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
void
counts_own_write_sorted(CountsState *st, void *result, Size allocated_size)
{
	SortedPlan *plan = counts_own_sorted_plan(st);
	char	   *p;

	if (allocated_size != plan->size || plan->n_classes != st->classes.n ||
		plan->n_words != st->n_words || plan->n_cells != st->n_inline + (int64) st->more->members)
		elog(ERROR, "gibbs_nb_class_counts: the state changed since its sorted size was taken");
	p = counts_own_write_head(st, result, allocated_size, COUNTS_FORMAT_SORTED);
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
bytea *
counts_own_sorted_value(CountsState *st, CountsState *budget)
{
	Size		size = counts_own_sorted_plan(st)->size;
	bytea	   *value;

	counts_check_budget(budget, (double) size);
	value = palloc(size);
	counts_own_write_sorted(st, value, size);
	counts_own_plan_free(st);
	return value;
}
