/*
 * aggregate.c
 *	  The aggregate's transition, combine and expanded-object functions:
 *	  gibbs_nb.counts_state_add_*, _combine, and the state's flat form.
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

static const ExpandedObjectMethods counts_methods = {
	counts_get_flat_size,
	counts_flatten_into
};

/*
 * A new, empty state: an expanded object in a memory context of its own
 * under parent (the aggregate's context, where nodeAgg keeps a read-write
 * expanded state without copying it).
 */
CountsState *
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
	counts_live_state_add(st);
	counts_own_init(st);
	return st;
}

/*
 * The state behind datum d as an expanded object of ours, or NULL if d is
 * something else (a flat value).
 */
CountsState *
counts_expanded(Datum d)
{
	CountsState *st;

	if (!VARATT_IS_EXTERNAL_EXPANDED(DatumGetPointer(d)))
		return NULL;
	st = (CountsState *) DatumGetEOHP(d);
	if (st->hdr.eoh_methods != &counts_methods)
		elog(ERROR, "gibbs_nb_class_counts: not a class counts state");
	counts_check_state(st);
	return st;
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
		counts_runs_add_copy(into, DatumGetByteaPP(d));
	else if (from == into)
	{
		counts_collapse(into);
		if (into->n_runs > 0)
			counts_runs_add_copy(into, into->runs[0].value);
	}
	else
	{
		for (int r = 0; r < from->n_runs; r++)
			counts_runs_add_copy(into, from->runs[r].value);
		if (from->classes.n > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(into->cxt);
			bytea	   *value = counts_own_sorted_value(from, into);

			MemoryContextSwitchTo(old);
			counts_runs_add(into, value);
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
	MemoryContext aggcxt = counts_aggregate_context(fcinfo, "gibbs_nb_class_counts_add");
	bool		writable = state_writable(fcinfo);
	CountsState *st = counts_for_call(fcinfo, 0, aggcxt, writable);

	/* gibbs_nb.labelled_counts: the job's budget, as the query passes it */
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		st->budget_kb = PG_GETARG_INT64(3);
	/* rows with a NULL label or NULL tokens do not count */
	if (!PG_ARGISNULL(1) && !PG_ARGISNULL(2))
	{
		text	   *label = PG_GETARG_TEXT_PP(1);
		TokenBlock	b;

		counts_own_plan_free(st);

		counts_budget_class(st, VARSIZE_ANY_EXHDR(label) + 1);
		b.st = st;
		b.cls = counts_stringset_id(&st->classes, st->own_cxt, VARDATA_ANY(label),
							 VARSIZE_ANY_EXHDR(label));
		b.n = 0;
		b.bytes = 0;
		if (is_tsvector)
			gnb_each_token(PG_GETARG_DATUM(2), true, counts_count_token, &b);
		else
			counts_count_text_array(&b, PG_GETARG_DATUM(2));
		if (b.n > 0)
			counts_count_block(&b);
	}
	PG_RETURN_DATUM(counts_result(st, writable));
}

PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_add_text_array);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_add_tsvector);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_combine);

/*
 * gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text,
 * text[] [, bigint]) returns gibbs_nb.class_counts_state
 *
 * Transition function of gibbs_nb_class_counts over text[] tokens, and of
 * gibbs_nb.labelled_counts, whose fourth argument is the state's budget in
 * kB (the training worker's; see CountsState.budget_kb).
 */
Datum
gibbs_nb_counts_state_add_text_array(PG_FUNCTION_ARGS)
{
	return class_counts_add(fcinfo, false);
}

/* gibbs_nb.gibbs_nb_class_counts_add(class_counts_state, text, tsvector [, bigint]): the tsvector one. */
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
	MemoryContext aggcxt = counts_aggregate_context(fcinfo, "gibbs_nb_class_counts_combine");
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
Size
counts_get_flat_size(ExpandedObjectHeader *eohptr)
{
	CountsState *st = (CountsState *) eohptr;

	counts_check_state(st);
	if (st->n_runs > 0)
	{
		counts_collapse(st);
		return VARSIZE(st->runs[0].value);
	}
	return counts_own_sorted_plan(st)->size;
}

/*
 * Write a state's serialised form, sorted (format 2), of the size
 * counts_get_flat_size gave: the state leaves its process so, as a run the
 * leader or the coordinator can merge.
 */
void
counts_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size)
{
	CountsState *st = (CountsState *) eohptr;

	if (allocated_size != counts_get_flat_size(eohptr))
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
	if (st->n_runs > 0)
		memcpy(result, st->runs[0].value, allocated_size);
	else
		counts_own_write_sorted(st, result, allocated_size);
}

/*
 * Write what this process counted in the plain form (format 1), of the size
 * counts_own_plain_size gave: the words as they are, each word's inline
 * cells in word order, then those beyond.  What the final function returns
 * for a state counted in one process, with no sort.
 */
void
counts_own_write_plain(CountsState *st, void *result, Size allocated_size)
{
	char	   *p;
	cells_iterator it;
	CountCell  *c;

	if (allocated_size != counts_own_plain_size(st))
		elog(ERROR, "gibbs_nb_class_counts: flat size changed");
	p = counts_own_write_head(st, result, allocated_size, COUNTS_FORMAT_PLAIN);
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
bytea *
counts_empty_value(uint32 format)
{
	bytea	   *flat = palloc(VARHDRSZ + COUNTS_HEADER_SIZE);

	SET_VARSIZE(flat, VARHDRSZ + COUNTS_HEADER_SIZE);
	(void) counts_write_header(flat, format, 0, 0, 0);
	return flat;
}

/*
 * A state value in its serialised form (sorted), in a varlena of its own (a
 * fresh copy: the caller may return it); NULL is the empty state's.
 */
bytea *
counts_flat_copy(FunctionCallInfo fcinfo, int argno)
{
	CountsState *st;
	bytea	   *flat;

	if (PG_ARGISNULL(argno))
		return counts_empty_value(COUNTS_FORMAT_SORTED);
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
