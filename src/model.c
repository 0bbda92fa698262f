/*
 * model.c
 *	  Dropping versions of a model: gibbs_nb_drop, retention
 *	  (gibbs_nb_set_retention and at publish).
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

/*
 * Delete the versions of model (owner, model_name) that `filter` selects from
 * every gibbs_nb table; filter may use $1 (owner), $2 (model_name) and $3
 * (arg, an int4).  Returns how many versions; with labels_tables, appends the
 * OIDs of their labels tables.  Runs as the extension's owner: the caller
 * must have checked that the current role may drop them.  SPI connected.
 */
int
gnb_delete_versions(const char *owner, const char *model_name, const char *filter,
					int32 arg, List **labels_tables)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(arg)};
	static const char *const estimates[] = {"theta", "pi", "packed"};
	bool		isnull;
	int			dropped;

	if (labels_tables)
	{
		gnb_execute(psprintf("SELECT DISTINCT labels_relid::pg_catalog.oid FROM gibbs_nb.models "
							 "WHERE %s", filter),
					3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
		for (uint64 i = 0; i < SPI_processed; i++)
			*labels_tables = lappend_oid(*labels_tables,
										 DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																		SPI_tuptable->tupdesc,
																		1, &isnull)));
	}
	gnb_execute(psprintf("DELETE FROM gibbs_nb.trace WHERE job_id OPERATOR(pg_catalog.=) ANY "
						 "(SELECT job_id FROM gibbs_nb.models WHERE %s)", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	gnb_execute(psprintf("DELETE FROM gibbs_nb.models WHERE %s", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	dropped = (int) SPI_processed;
	for (int i = 0; i < lengthof(estimates); i++)
		gnb_execute(psprintf("DELETE FROM gibbs_nb.%s WHERE %s", estimates[i], filter),
					3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	return dropped;
}

/* The versions beyond a model's newest keep_versions. */
#define OLDER_THAN_KEPT \
	"owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 " \
	"AND version OPERATOR(pg_catalog.<=) $3"

/*
 * Drop the versions of a model older than its newest keep_versions (at
 * publish, and when the setting changes).  Returns how many.  SPI connected.
 */
int
gnb_apply_retention(const char *owner, const char *model_name, int32 newest, int32 keep)
{
	if (newest - keep < 1)
		return 0;
	return gnb_delete_versions(owner, model_name, OLDER_THAN_KEPT, newest - keep, NULL);
}

PG_FUNCTION_INFO_V1(gibbs_nb_drop);
PG_FUNCTION_INFO_V1(gibbs_nb_set_retention);

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
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	List	   *labels_tables = NIL;
	int			dropped;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	dropped = gnb_delete_versions(owner, model_name, all_versions ?
								  "owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 AND $3 IS NOT NULL" :
								  "owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 "
								  "AND version OPERATOR(pg_catalog.=) $3",
								  version, &labels_tables);
	if (dropped == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" has no version %d", model_name, version)));
	/* dropping the last version drops the model: its labels table goes too */
	if (!all_versions)
	{
		values[0] = CStringGetTextDatum(owner);
		values[1] = CStringGetTextDatum(model_name);
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
		Oid			vtype[1] = {INT4OID};
		Datum		vvalue[1] = {Int32GetDatum(version)};
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
						1, vtype, vvalue, NULL, GNB_AS_CALLER, SPI_OK_DELETE, 0);
	}
	SPI_finish();
	PG_RETURN_INT32(dropped);
}

/*
 * gibbs_nb_set_retention(model_name text, keep_versions int) returns int
 *
 * Keep a model's newest keep_versions versions: older ones are dropped now
 * and whenever a new version is published.  Returns how many were dropped
 * now.  The name is resolved as for gibbs_nb_drop.
 */
Datum
gibbs_nb_set_retention(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	const char *owner;
	int32		keep;
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3];
	bool		isnull;
	int32		newest;
	int			dropped;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "model_name" : "keep_versions")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	keep = PG_GETARG_INT32(1);
	if (keep < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep_versions must be at least 1, not %d", keep)));

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	values[0] = CStringGetTextDatum(owner);
	values[1] = CStringGetTextDatum(model_name);
	values[2] = Int32GetDatum(keep);
	gnb_execute("UPDATE gibbs_nb.models SET keep_versions = $3 "
				"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
	gnb_execute("SELECT pg_catalog.max(version) FROM gibbs_nb.models "
				"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2",
				2, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	newest = DatumGetInt32(gnb_result_value(1, &isnull));
	dropped = gnb_apply_retention(owner, model_name, newest, keep);
	SPI_finish();
	PG_RETURN_INT32(dropped);
}
