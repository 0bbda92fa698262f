/*
 * theta_view.c
 *	  gibbs_nb.theta as rows of the packed model: the set-returning function
 *	  behind the view.
 *
 * theta-hat is stored once per version, in gibbs_nb.packed (the vocabulary
 * as tokens text[], log theta-hat as log_theta float8[], word-major V x K,
 * the classes as classes text[]), which is what prediction loads.  The view
 * gibbs_nb.theta expands a packed row into its V x K (class, token,
 * probability) rows with gibbs_nb.theta_rows, probability = exp(log theta),
 * so that publishing writes no row per word and class.
 *
 * The function is callable by any role with any arrays: it checks their
 * shape (one dimension, no NULLs, len(log_theta) = len(tokens) x
 * len(classes)) before anything is sized by them, and returns exactly
 * what it was given, expanded; it reads no table.
 */
#include "gibbs_nb.h"

#include "predict/predict.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/arrayaccess.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(gibbs_nb_theta_rows);

/* Rows between interrupt checks (per row, not per word: K may be large). */
#define THETA_ROWS_CHECK_EVERY 4096

/*
 * The number of elements of a one-dimensional array without NULLs (an
 * empty array, which has no dimension, has 0); an error otherwise.
 */
static int
checked_length(ArrayType *a, const char *what)
{
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what),
				 errdetail("It has %d dimensions.", ARR_NDIM(a))));
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULLs", what)));
	return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
}

/*
 * gibbs_nb.theta_rows(classes text[], tokens text[], log_theta float8[])
 *   RETURNS TABLE (class text, token text, probability float8)
 *
 * One row per token and class, word-major (a token's K rows together, in
 * the order of classes), probability = exp(log_theta[i * K + k + 1]) for
 * token i + 1 and class k + 1: the layout of gibbs_nb.packed.  Materialised
 * into a tuplestore (work_mem, then a temporary file).  STRICT: NULL
 * arrays give no rows.  Errors: an array of more than one dimension
 * (2202E), a NULL element (22004), len(log_theta) other than len(tokens) x
 * len(classes) (2202E).
 */
Datum
gibbs_nb_theta_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *classes_a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *tokens_a = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *log_theta_a = PG_GETARG_ARRAYTYPE_P(2);
	int			K = checked_length(classes_a, "classes");
	int			V = checked_length(tokens_a, "tokens");
	int			n = checked_length(log_theta_a, "log_theta");
	const float8 *log_theta;
	Datum	   *classes;
	int			nk;
	array_iter	tokens;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int64		rows = 0;

	/* each length is at most MaxArraySize: the product cannot overflow */
	if ((int64) n != (int64) V * K)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("log_theta must have one element per token and class"),
				 errdetail("log_theta has %d elements; %d tokens x %d classes is " INT64_FORMAT ".",
						   n, V, K, (int64) V * K)));

	InitMaterializedSRF(fcinfo, 0);
	if (n == 0)
		return (Datum) 0;

	deconstruct_array(classes_a, TEXTOID, -1, false, TYPALIGN_INT, &classes, NULL, &nk);
	Assert(nk == K);
	log_theta = (const float8 *) ARR_DATA_PTR(log_theta_a);
	array_iter_setup(&tokens, (AnyArrayType *) tokens_a);
	for (int w = 0; w < V; w++)
	{
		bool		isnull;

		values[1] = array_iter_next(&tokens, &isnull, w, -1, false, TYPALIGN_INT);
		for (int k = 0; k < K; k++)
		{
			values[0] = classes[k];
			values[2] = Float8GetDatum(exp(log_theta[(int64) w * K + k]));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			if (++rows % THETA_ROWS_CHECK_EVERY == 0)
				CHECK_FOR_INTERRUPTS();
		}
	}
	return (Datum) 0;
}
