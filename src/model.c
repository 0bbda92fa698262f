/*
 * model.c
 *	  The extension's tables, who may touch which model, and gibbs_nb_drop.
 *
 * The tables in schema gibbs_nb are owned by the extension's owner and are
 * not writable by anyone else.  Code that writes them (or must see other
 * roles' rows, e.g. to refuse a model name that is taken) switches to that
 * owner for the duration, with search_path pinned to pg_catalog so that
 * nothing a user created can be called with those privileges.
 */
#include "gibbs_nb.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/* The owner of schema gibbs_nb: the role that created the extension. */
Oid
gnb_internal_owner(void)
{
	Oid			nspid = get_namespace_oid(GNB_SCHEMA, false);
	HeapTuple	tuple;
	Oid			owner;

	tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for schema %u", nspid);
	owner = ((Form_pg_namespace) GETSTRUCT(tuple))->nspowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Act as the extension's owner until gnb_restore_user, as a SECURITY DEFINER
 * function would: restricted operation, search_path = pg_catalog, pg_temp.
 * An error in between is safe: transaction abort restores both.
 */
void
gnb_become_internal(GnbPrivilegeState *state)
{
	GetUserIdAndSecContext(&state->save_user, &state->save_sec_context);
	state->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	SetUserIdAndSecContext(gnb_internal_owner(),
						   state->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

void
gnb_restore_user(GnbPrivilegeState *state)
{
	SetUserIdAndSecContext(state->save_user, state->save_sec_context);
	AtEOXact_GUC(true, state->save_nestlevel);
}

/*
 * Run one internal query with text parameters as the extension's owner and
 * return the first column of the first row as a Datum of the given type,
 * or *isnull.  SPI must be connected.
 */
static Datum
internal_query_value(const char *sql, int nargs, Oid *argtypes, Datum *values,
					 bool *isnull)
{
	GnbPrivilegeState priv;
	Datum		result = (Datum) 0;
	int			rc;

	gnb_become_internal(&priv);
	/* not read-only: it must see what this transaction just wrote */
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "internal query failed: %s", SPI_result_code_string(rc));
	*isnull = true;
	if (SPI_processed > 0)
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	gnb_restore_user(&priv);
	return result;
}

/* The owner of a model (any version), or InvalidOid if there is none. */
Oid
gnb_model_owner(const char *model_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(model_name)};
	bool		isnull;
	Datum		owner;

	SPI_connect();
	owner = internal_query_value("SELECT owner FROM gibbs_nb.models "
								 "WHERE model_name OPERATOR(pg_catalog.=) $1 LIMIT 1",
								 1, argtypes, values, &isnull);
	SPI_finish();
	return isnull ? InvalidOid : DatumGetObjectId(owner);
}

/*
 * Error unless `role` may use the model: it owns it or has the owner's
 * privileges.  A model the role may not see is reported as not existing,
 * the same as one that does not exist (unless missing_ok, for training a new
 * model, where a name taken by another role is a permission error).
 */
void
gnb_check_model_access(const char *model_name, Oid role, bool missing_ok)
{
	Oid			owner = gnb_model_owner(model_name);

	if (!OidIsValid(owner))
	{
		if (missing_ok)
			return;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model_name)));
	}
	if (!has_privs_of_role(role, owner))
	{
		if (missing_ok)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("model name \"%s\" is taken by another role", model_name),
					 errhint("Choose another model name.")));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model_name)));
	}
}

/*
 * Is relid the labels table that training created for this model?  Returns
 * relid if so, else InvalidOid.  SPI must be connected.
 */
Oid
gnb_registered_labels_table(const char *model_name, Oid relid)
{
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2] = {CStringGetTextDatum(model_name), ObjectIdGetDatum(relid)};
	bool		isnull;

	(void) internal_query_value("SELECT 1 FROM gibbs_nb.models "
								"WHERE model_name OPERATOR(pg_catalog.=) $1 "
								"AND labels_relid OPERATOR(pg_catalog.=) $2 LIMIT 1",
								2, argtypes, values, &isnull);
	return isnull ? InvalidOid : relid;
}

/*
 * Mark failed the jobs left 'queued' or 'running' by a worker that is gone
 * (an immediate shutdown, a crash): their worker never recorded an outcome.
 * The gibbs_nb_jobs view already shows them so; this puts the rows right.
 * SPI must be connected.
 */
void
gnb_reconcile_jobs(void)
{
	GnbPrivilegeState priv;

	gnb_become_internal(&priv);
	if (SPI_execute("UPDATE gibbs_nb.jobs j SET status = 'failed', "
					"finished_at = pg_catalog.now(), sqlstate = '57P01', "
					"message = 'the job''s worker exited without finishing it (server restart or crash)' "
					"WHERE j.status OPERATOR(pg_catalog.=) ANY ('{queued,running}') "
					"AND NOT (j.worker_pid IS NOT NULL AND EXISTS ("
					"  SELECT 1 FROM pg_catalog.pg_stat_get_activity(j.worker_pid) a "
					"  WHERE a.backend_type OPERATOR(pg_catalog.=) 'gibbs_nb worker' "
					"  AND a.backend_start OPERATOR(pg_catalog.<=) j.started_at))",
					false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not reconcile gibbs_nb.jobs");
	gnb_restore_user(&priv);
}

/*
 * The job that is training this model now, or 0; and in *n_running how many
 * jobs of any model run.  Call after gnb_reconcile_jobs.  SPI connected.
 */
int64
gnb_running_job(const char *model_name, int64 *n_running)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(model_name)};
	bool		isnull;
	Datum		job;
	GnbPrivilegeState priv;

	job = internal_query_value("SELECT j.job_id FROM gibbs_nb.jobs j "
							   "WHERE j.model_name OPERATOR(pg_catalog.=) $1 "
							   "AND j.status OPERATOR(pg_catalog.=) ANY ('{queued,running}') "
							   "ORDER BY j.job_id LIMIT 1",
							   1, argtypes, values, &isnull);
	gnb_become_internal(&priv);
	if (SPI_execute("SELECT pg_catalog.count(*) FROM gibbs_nb.jobs "
					"WHERE status OPERATOR(pg_catalog.=) ANY ('{queued,running}')",
					false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not count the running gibbs_nb jobs");
	*n_running = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											 &(bool){false}));
	gnb_restore_user(&priv);
	return isnull ? 0 : DatumGetInt64(job);
}

PG_FUNCTION_INFO_V1(gibbs_nb_drop);

/*
 * gibbs_nb_drop(model_name text, version int DEFAULT NULL) returns int
 *
 * Drops one version of a model (its models, theta, pi and trace rows, and
 * its rows in the labels table), or with version NULL the whole model,
 * including the labels table training created for it; dropping the last
 * version drops the model.  Returns the number of versions dropped.  Only
 * the owner (or a role with its privileges) may drop.
 */
Datum
gibbs_nb_drop(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	bool		all_versions = PG_ARGISNULL(1);
	int32		version = all_versions ? 0 : PG_GETARG_INT32(1);
	GnbPrivilegeState priv;
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];
	const char *filter;
	List	   *labels_tables = NIL;
	int			dropped;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	gnb_check_model_access(model_name, GetUserId(), false);

	values[0] = CStringGetTextDatum(model_name);
	values[1] = Int32GetDatum(version);
	filter = all_versions ?
		"model_name OPERATOR(pg_catalog.=) $1 AND $2 IS NOT NULL" :
		"model_name OPERATOR(pg_catalog.=) $1 AND version OPERATOR(pg_catalog.=) $2";

	SPI_connect();
	gnb_become_internal(&priv);
	/* the labels tables of the versions being dropped */
	if (SPI_execute_with_args(psprintf("SELECT DISTINCT labels_relid FROM gibbs_nb.models WHERE %s",
									   filter),
							  2, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read gibbs_nb.models");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		relid = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		labels_tables = lappend_oid(labels_tables, DatumGetObjectId(relid));
	}
	if (SPI_execute_with_args(psprintf("DELETE FROM gibbs_nb.trace WHERE job_id OPERATOR(pg_catalog.=) ANY "
									   "(SELECT job_id FROM gibbs_nb.models WHERE %s)", filter),
							  2, argtypes, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from gibbs_nb.trace");
	if (SPI_execute_with_args(psprintf("DELETE FROM gibbs_nb.models WHERE %s", filter),
							  2, argtypes, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from gibbs_nb.models");
	dropped = (int) SPI_processed;
	if (dropped == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" has no version %d", model_name, version)));
	if (SPI_execute_with_args(psprintf("DELETE FROM gibbs_nb.theta WHERE %s", filter),
							  2, argtypes, values, NULL, false, 0) != SPI_OK_DELETE ||
		SPI_execute_with_args(psprintf("DELETE FROM gibbs_nb.pi WHERE %s", filter),
							  2, argtypes, values, NULL, false, 0) != SPI_OK_DELETE ||
		SPI_execute_with_args(psprintf("DELETE FROM gibbs_nb.packed WHERE %s", filter),
							  2, argtypes, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete the model's estimates");
	/* dropping the last version drops the model: its labels table goes too */
	if (!all_versions &&
		SPI_execute_with_args("SELECT 1 FROM gibbs_nb.models WHERE model_name OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, false, 1) == SPI_OK_SELECT &&
		SPI_processed == 0)
		all_versions = true;
	gnb_restore_user(&priv);

	/*
	 * The labels tables are the caller's own tables: drop or clean them with
	 * the caller's privileges.  One that was dropped or replaced by the user
	 * since is left alone.
	 */
	foreach(lc, labels_tables)
	{
		Oid			relid = lfirst_oid(lc);
		char	   *relname = get_rel_name(relid);
		char	   *qualified;

		if (relname == NULL)
			continue;
		qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   relname);
		if (all_versions)
		{
			if (SPI_execute(psprintf("DROP TABLE %s", qualified), false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not drop %s", qualified);
		}
		else if (SPI_execute_with_args(psprintf("DELETE FROM %s WHERE version OPERATOR(pg_catalog.=) $1",
												qualified),
									   1, &argtypes[1], &values[1], NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete from %s", qualified);
	}
	SPI_finish();
	PG_RETURN_INT32(dropped);
}
