/*
 * rows.c
 *	  gibbs_nb_class_counts_rows: a count value read back as (class, token,
 *	  count) rows; and 0.1.0's retired entry points.
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

PG_FUNCTION_INFO_V1(gibbs_nb_class_counts_rows);

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
	GnbParsedCounts pc;
	GnbCountsIter it;
	int32		cls,
				word;
	int64		count;
	Datum	   *class_texts;

	InitMaterializedSRF(fcinfo, 0);
	gnb_counts_parse(PG_GETARG_BYTEA_PP(0), &pc, true);
	counts_check_encoding(pc.class_str, pc.class_len, pc.n_classes);
	counts_check_encoding(pc.word_str, pc.word_len, pc.n_words);
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
