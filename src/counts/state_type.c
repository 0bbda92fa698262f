/*
 * state_type.c
 *	  The type gibbs_nb.class_counts_state: text and binary input and output
 *	  (validated: a hostile role can type any text or send any bytes), and
 *	  the final function that gives the count value.
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

PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_in);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_out);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_recv);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_send);
PG_FUNCTION_INFO_V1(gibbs_nb_counts_state_final);

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

	(void) counts_aggregate_context(fcinfo, "gibbs_nb_class_counts_final");
	if (PG_ARGISNULL(0))
		PG_RETURN_BYTEA_P(counts_empty_value(COUNTS_FORMAT_PLAIN));
	st = counts_expanded(PG_GETARG_DATUM(0));
	if (st == NULL)
		PG_RETURN_BYTEA_P(PG_GETARG_BYTEA_P_COPY(0));
	if (st->n_runs == 0)
	{
		Size		size = counts_own_plain_size(st);

		/* the value is made beside the state: within the budget with it */
		counts_check_budget(st, (double) size);
		value = palloc(size);
		counts_own_write_plain(st, value, size);
		PG_RETURN_BYTEA_P(value);
	}
	for (int r = 0; r < st->n_runs; r++)
		src[n_src++] = &st->runs[r];
	if (st->classes.n > 0)
	{
		counts_run_from_value(counts_own_sorted_value(st, st), &own);
		src[n_src++] = &own;
	}
	/* the own value, outside the state's memory, is held while the merge runs */
	value = counts_merge_runs(st, n_src > st->n_runs ? (double) VARSIZE(own.value) : 0, src, n_src);
	if (n_src > st->n_runs)
		counts_run_free(&own);
	PG_RETURN_BYTEA_P(value);
}
