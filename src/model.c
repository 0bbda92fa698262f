/*
 * model.c
 *	  gibbs_nb_drop: drop a model, or one version of it.
 */
#include "gibbs_nb.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(gibbs_nb_drop);

/*
 * gibbs_nb_drop(model_name text, version int DEFAULT NULL) returns int
 *
 * Drops one version of a model (its models, theta, pi, packed and trace
 * rows, and its rows in the labels table), or with version NULL the whole
 * model, including the labels table training created for it; dropping the
 * last version drops the model.  The name is resolved as every model name
 * is (store.c): the caller's own model, or the one model of that name of a
 * role whose privileges it has.  Returns the number of versions dropped.
 */
Datum
gibbs_nb_drop(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	const char *owner;
	bool		all_versions = PG_ARGISNULL(1);
	int32		version = all_versions ? 0 : PG_GETARG_INT32(1);
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3];
	const char *filter;
	List	   *labels_tables = NIL;
	int			dropped;
	bool		isnull;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	values[0] = CStringGetTextDatum(owner);
	values[1] = CStringGetTextDatum(model_name);
	values[2] = Int32GetDatum(version);
	filter = all_versions ?
		"owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 AND $3 IS NOT NULL" :
		"owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 "
		"AND version OPERATOR(pg_catalog.=) $3";

	/* the labels tables of the versions being dropped */
	gnb_execute(psprintf("SELECT DISTINCT labels_relid::pg_catalog.oid FROM gibbs_nb.models WHERE %s",
						 filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
		labels_tables = lappend_oid(labels_tables,
									DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																   SPI_tuptable->tupdesc, 1,
																   &isnull)));
	gnb_execute(psprintf("DELETE FROM gibbs_nb.trace WHERE job_id OPERATOR(pg_catalog.=) ANY "
						 "(SELECT job_id FROM gibbs_nb.models WHERE %s)", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	gnb_execute(psprintf("DELETE FROM gibbs_nb.models WHERE %s", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	dropped = (int) SPI_processed;
	if (dropped == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" has no version %d", model_name, version)));
	gnb_execute(psprintf("DELETE FROM gibbs_nb.theta WHERE %s", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	gnb_execute(psprintf("DELETE FROM gibbs_nb.pi WHERE %s", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	gnb_execute(psprintf("DELETE FROM gibbs_nb.packed WHERE %s", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	/* dropping the last version drops the model: its labels table goes too */
	if (!all_versions)
	{
		gnb_execute("SELECT 1 FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
					"AND model_name OPERATOR(pg_catalog.=) $2",
					2, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
		all_versions = SPI_processed == 0;
	}

	/*
	 * The labels tables are the caller's own tables: drop or clean them with
	 * the caller's privileges, by OID, locked first and named from the
	 * catalogs under the lock.  One that was dropped since is left alone.
	 */
	foreach(lc, labels_tables)
	{
		Oid			relid = lfirst_oid(lc);
		char	   *qualified;

		LockRelationOid(relid, all_versions ? AccessExclusiveLock : RowExclusiveLock);
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			continue;
		qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   get_rel_name(relid));
		if (all_versions)
			gnb_execute(psprintf("DROP TABLE %s", qualified), 0, NULL, NULL, NULL,
						GNB_AS_CALLER, SPI_OK_UTILITY, 0);
		else
			gnb_execute(psprintf("DELETE FROM %s WHERE version OPERATOR(pg_catalog.=) $1",
								 qualified),
						1, &types[2], &values[2], NULL, GNB_AS_CALLER, SPI_OK_DELETE, 0);
	}
	SPI_finish();
	PG_RETURN_INT32(dropped);
}
