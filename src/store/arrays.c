/*
 * arrays.c
 *	  Arrays to pass many rows' values as one statement parameter, built in
 *	  place.
 */
#include "gibbs_nb.h"

#include "store/store.h"

#include <math.h>
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "commands/sequence.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "access/detoast.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* ---------- a model version's rows ---------- */

/*
 * Arrays to pass many rows' values as one statement parameter.  They are
 * built in place, byte for byte what construct_array makes, without its
 * array of Datums (and for text, one palloc'd value per element) beside the
 * result: a version's vocabulary and log theta-hat are the largest values a
 * job publishes, and these copies were most of its memory then.
 */

/*
 * A zeroed one-dimensional array of n elements (n > 0, at most
 * MaxArraySize) of type elmtype, with data_size bytes for them and no null
 * bitmap; the caller fills ARR_DATA_PTR.  The whole must fit an allocation.
 */
static ArrayType *
new_1d_array(Oid elmtype, int n, Size data_size)
{
	Size		size = ARR_OVERHEAD_NONULLS(1) + data_size;
	ArrayType  *a;

	if (!AllocSizeIsValid(size))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxAllocSize)));
	a = (ArrayType *) palloc0(size);
	SET_VARSIZE(a, size);
	a->ndim = 1;
	a->dataoffset = 0;
	a->elemtype = elmtype;
	ARR_DIMS(a)[0] = n;
	ARR_LBOUND(a)[0] = 1;
	return a;
}

/*
 * A one-dimensional array of n elements of a fixed-length type, zeroed,
 * and in *data where its elements go (contiguous: a length that is a
 * multiple of its alignment).  n = 0 gives the empty array, as
 * construct_array does.
 */
ArrayType *
gnb_fixed_array(Oid elmtype, int elmlen, int64 n, void **data)
{
	ArrayType  *a;

	if (n <= 0)
	{
		*data = NULL;
		return construct_empty_array(elmtype);
	}
	if (n > (int64) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxArraySize)));
	a = new_1d_array(elmtype, (int) n, (Size) n * elmlen);
	*data = ARR_DATA_PTR(a);
	return a;
}

ArrayType *
gnb_float8_array(const double *values, int n)
{
	void	   *data;
	ArrayType  *a = gnb_fixed_array(FLOAT8OID, sizeof(float8), n, &data);

	if (n > 0)
		memcpy(data, values, sizeof(float8) * n);
	return a;
}

ArrayType *
gnb_text_array(char **values, int n)
{
	return gnb_text_array_strided((const char *const *) values, sizeof(char *), NULL, n);
}

/*
 * The text[] of n strings whose pointers are stride bytes apart from
 * strs[0] on (in an array of structs, say), written straight into the
 * array: of the lengths in lens, or NUL-terminated if lens is NULL.
 */
ArrayType *
gnb_text_array_strided(const char *const *strs, size_t stride, const int32 *lens, int n)
{
#define STR_AT(i) (*(const char *const *) ((const char *) strs + (size_t) (i) * stride))
#define LEN_AT(i) (lens ? (size_t) lens[i] : strlen(STR_AT(i)))
	Size		size = 0;
	ArrayType  *a;
	char	   *p;

	if (n <= 0)
		return construct_empty_array(TEXTOID);
	if (n > (int) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxArraySize)));
	/* each element a 4-byte header and its bytes, int-aligned */
	for (int i = 0; i < n; i++)
	{
		size += INTALIGN(VARHDRSZ + LEN_AT(i));
		if (!AllocSizeIsValid(size))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxAllocSize)));
	}
	a = new_1d_array(TEXTOID, n, size);
	p = ARR_DATA_PTR(a);
	for (int i = 0; i < n; i++)
	{
		size_t		len = LEN_AT(i);

		SET_VARSIZE(p, VARHDRSZ + len);
		memcpy(p + VARHDRSZ, STR_AT(i), len);
		p += INTALIGN(VARHDRSZ + len);
	}
	return a;
#undef STR_AT
#undef LEN_AT
}

ArrayType *
gnb_int4_array(const int32 *values, int n)
{
	void	   *data;
	ArrayType  *a = gnb_fixed_array(INT4OID, sizeof(int32), n, &data);

	if (n > 0)
		memcpy(data, values, sizeof(int32) * n);
	return a;
}

/*
 * How many of the n documents whose ids start at ids go in one batch of
 * label rows (GNB_LABELS_BATCH, GNB_LABELS_BATCH_BYTES): at least one.
 */
int32
gnb_labels_batch_size(const Datum *ids, int64 n, int32 n_classes, int16 typlen, bool typbyval)
{
	Size		bytes = 0;
	int32		count = 0;

	while (count < n && count < GNB_LABELS_BATCH)
	{
		/* a varlena id as the array will hold it: expanded if compressed or toasted */
		Size		size = (typlen == -1 ? toast_raw_datum_size(ids[count]) :
							datumGetSize(ids[count], typbyval, typlen)) +
			sizeof(double) * n_classes;

		if (count > 0 && bytes + size > GNB_LABELS_BATCH_BYTES)
			break;
		bytes += size;
		count++;
	}
	return count;
}
