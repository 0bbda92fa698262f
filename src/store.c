/*
 * store.c
 *	  The extension's tables: who may see which model, how a model name is
 *	  resolved, whether a job's worker lives, and the privilege switch.
 *
 * The tables in schema gibbs_nb are owned by the extension's owner and are
 * not writable by anyone else.  Code that writes them (or must see other
 * roles' rows) switches to that owner for the duration, with search_path
 * pinned to pg_catalog so that nothing a user created can be called with
 * those privileges.  Code that reads them as the caller relies on their row
 * security (see gibbs_nb--0.1.0--0.2.0.sql).
 *
 * Models live in per-role namespaces: a model is (owner, model_name), the
 * owner stored by name so that a restore into another cluster, or another
 * Citus node, means the same role.  A name resolves (gnb_choose_owner) to the
 * current role's own model of that name, or else to the one model of that
 * name owned by a role whose privileges the current role has.  Superusers,
 * who have every role's privileges, resolve only their own models: a name
 * must never silently pick up whatever model some other role made.
 */
#include "gibbs_nb.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/*
 * locktag_field4 of a job's liveness lock: user advisory locks use 1 and 2,
 * so no SQL call can take or fake this one.
 */
#define JOB_LOCK_CLASS 0x474E
/* ... and of the lock that makes checking the job limits and launching one step */
#define LAUNCH_LOCK_CLASS 0x474F

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
 * Run one statement through SPI (which must be connected) and check its
 * result code.  GNB_AS_INTERNAL runs it as the extension's owner; GNB_AS_CALLER
 * as the current user, with row security, and search_path pinned all the
 * same: every name in the extension's SQL is qualified, and what is not
 * (a user's column or table, quoted) must not be looked up elsewhere.
 * Never read-only: it must see what this transaction wrote.
 */
void
gnb_execute(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
			GnbRunAs as, int expected, long limit)
{
	GnbPrivilegeState priv;
	int			rc;

	if (as == GNB_AS_INTERNAL)
		gnb_become_internal(&priv);
	else
	{
		GetUserIdAndSecContext(&priv.save_user, &priv.save_sec_context);
		priv.save_nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", "pg_catalog, pg_temp",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	}
	rc = nargs > 0 ? SPI_execute_with_args(sql, nargs, types, values, nulls, false, limit)
		: SPI_execute(sql, false, limit);
	if (rc != expected)
		elog(ERROR, "gibbs_nb: statement failed (%s): %s", SPI_result_code_string(rc), sql);
	gnb_restore_user(&priv);
}

/* The first column of the first row of the last gnb_execute, or *isnull. */
Datum
gnb_result_value(int col, bool *isnull)
{
	*isnull = true;
	if (SPI_processed == 0)
		return (Datum) 0;
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, isnull);
}

/* The current user's name: what a model's owner column holds. */
char *
gnb_current_role_name(void)
{
	return GetUserNameFromId(GetUserId(), false);
}

/*
 * Of the owners that have a model of this name and whose rows the current
 * role can see, the one the name means (see the file header), or NULL if
 * none.  A name two of them could mean is an error (42725), never a guess.
 */
const char *
gnb_choose_owner(const char *model_name, char **owners, int n)
{
	const char *me = gnb_current_role_name();
	const char *chosen = NULL;
	int			n_chosen = 0;
	StringInfoData others;

	for (int i = 0; i < n; i++)
		if (strcmp(owners[i], me) == 0)
			return owners[i];
	if (superuser())
		return NULL;
	initStringInfo(&others);
	for (int i = 0; i < n; i++)
	{
		Oid			role = get_role_oid(owners[i], true);

		if (OidIsValid(role) && has_privs_of_role(GetUserId(), role))
		{
			appendStringInfo(&others, "%s%s", n_chosen ? ", " : "", quote_identifier(owners[i]));
			chosen = owners[i];
			n_chosen++;
		}
	}
	if (n_chosen > 1)
		ereport(ERROR,
				(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
				 errmsg("model name \"%s\" is ambiguous", model_name),
				 errdetail("Roles %s each have a model of that name, and you have the privileges of each.",
						   others.data),
				 errhint("SET ROLE to the owner whose model you mean, or train a model of your own under that name.")));
	return chosen;
}

/*
 * The owner of the model `model_name` names for the current role (see
 * gnb_choose_owner), or with missing_ok NULL if there is none; otherwise a
 * model it does not name is "does not exist", whether or not another role
 * has one.  Reads as the caller, so row security has the last word.
 * SPI must be connected.
 */
const char *
gnb_resolve_model_owner(const char *model_name, bool missing_ok)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(model_name)};
	char	  **owners;
	const char *owner;

	gnb_execute("SELECT DISTINCT owner FROM gibbs_nb.models "
				"WHERE model_name OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 0);
	owners = palloc(sizeof(char *) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
		owners[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
	owner = gnb_choose_owner(model_name, owners, (int) SPI_processed);
	if (owner == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model_name)));
	return owner;
}

/*
 * Is relid the labels table that training created for this model?
 * SPI must be connected.
 */
bool
gnb_labels_table_registered(const char *owner, const char *model_name, Oid relid)
{
	Oid			types[3] = {TEXTOID, TEXTOID, OIDOID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	ObjectIdGetDatum(relid)};

	gnb_execute("SELECT 1 FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
				"AND model_name OPERATOR(pg_catalog.=) $2 "
				"AND labels_relid::pg_catalog.oid OPERATOR(pg_catalog.=) $3 LIMIT 1",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed > 0;
}

static void
job_lock_tag(LOCKTAG *tag, int64 job_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) job_id >> 32),
						 (uint32) job_id, JOB_LOCK_CLASS);
}

/*
 * Called by a job's worker before it registers the job: a session lock it
 * holds until it exits, however it exits.  Its being held is what "the
 * job's worker is alive" means, to everyone, whatever their privileges.
 */
void
gnb_hold_job_lock(int64 job_id)
{
	LOCKTAG		tag;

	job_lock_tag(&tag, job_id);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
}

/* Does a live worker hold this job's lock? */
bool
gnb_job_worker_alive(int64 job_id)
{
	LOCKTAG		tag;
	LockAcquireResult res;

	job_lock_tag(&tag, job_id);
	res = LockAcquire(&tag, ShareLock, false, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ShareLock, false);
	return false;
}

PG_FUNCTION_INFO_V1(gibbs_nb_job_worker_alive);
PG_FUNCTION_INFO_V1(gibbs_nb_has_privileges_of);

/*
 * gibbs_nb.job_worker_alive(job_id bigint) returns boolean
 *
 * Whether the job's worker is running; used by the gibbs_nb_jobs view and
 * when stale 'running' rows are put right.
 */
Datum
gibbs_nb_job_worker_alive(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(gnb_job_worker_alive(PG_GETARG_INT64(0)));
}

/*
 * gibbs_nb.has_privileges_of(owner text) returns boolean
 *
 * Whether the current user has the privileges of the role of that name:
 * the row security policy of every gibbs_nb table.  A name that is no role
 * (dropped, or not restored) is nobody's: false, not an error, so that one
 * such row never breaks a query.
 */
Datum
gibbs_nb_has_privileges_of(PG_FUNCTION_ARGS)
{
	char	   *owner = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			role = get_role_oid(owner, true);

	PG_RETURN_BOOL(OidIsValid(role) && has_privs_of_role(GetUserId(), role));
}

/*
 * Mark failed the jobs left 'running' by a worker that is gone
 * (an immediate shutdown, a crash): their worker never recorded an outcome.
 * The gibbs_nb_jobs view already shows them so; this puts the rows right.
 * SPI must be connected.
 */
void
gnb_reconcile_jobs(void)
{
	gnb_execute("UPDATE gibbs_nb.jobs j SET status = 'failed', "
				"finished_at = pg_catalog.now(), sqlstate = '57P01', "
				"message = 'the job''s worker exited without finishing it (server restart or crash)' "
				"WHERE j.status OPERATOR(pg_catalog.=) 'running' "
				"AND NOT gibbs_nb.job_worker_alive(j.job_id)",
				0, NULL, NULL, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
}

/*
 * The job that is training this model now, or 0.  Call after
 * gnb_reconcile_jobs.  SPI connected.
 */
int64
gnb_running_job(const char *owner, const char *model_name)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name)};
	bool		isnull;
	Datum		job;

	gnb_execute("SELECT j.job_id FROM gibbs_nb.jobs j "
				"WHERE j.owner OPERATOR(pg_catalog.=) $1 "
				"AND j.model_name OPERATOR(pg_catalog.=) $2 "
				"AND j.status OPERATOR(pg_catalog.=) 'running' "
				"ORDER BY j.job_id LIMIT 1",
				2, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	job = gnb_result_value(1, &isnull);
	return isnull ? 0 : DatumGetInt64(job);
}

/*
 * The launch lock: one cluster-wide lock that a caller holds from checking
 * the job limits until its worker has registered its job (or failed to
 * start), so that two calls at the same instant cannot both pass a bound
 * that has room for one.  A session lock, because the caller's transaction
 * may go on waiting for the job; released explicitly, on errors too.
 */
static bool launch_lock_held = false;

static void
launch_lock_tag(LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, 0, 0, LAUNCH_LOCK_CLASS);
}

void
gnb_launch_lock_acquire(void)
{
	LOCKTAG		tag;

	launch_lock_tag(&tag);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	launch_lock_held = true;
}

void
gnb_launch_lock_release(void)
{
	LOCKTAG		tag;

	if (!launch_lock_held)
		return;
	launch_lock_tag(&tag);
	LockRelease(&tag, ExclusiveLock, true);
	launch_lock_held = false;
}

/*
 * Jobs whose worker is alive, in database dbid or (InvalidOid) in every
 * database of the cluster: the holders of job locks.  Counted from the lock
 * table, so that it needs no table and no other database.
 */
int
gnb_count_live_jobs(Oid dbid)
{
	LockData   *data = GetLockStatusData();
	int			n = 0;

	for (int i = 0; i < data->nelements; i++)
	{
		const LockInstanceData *l = &data->locks[i];

		if (l->locktag.locktag_type == LOCKTAG_ADVISORY &&
			l->locktag.locktag_lockmethodid == USER_LOCKMETHOD &&
			l->locktag.locktag_field4 == JOB_LOCK_CLASS &&
			(!OidIsValid(dbid) || l->locktag.locktag_field1 == dbid) &&
			(l->holdMask & LOCKBIT_ON(ExclusiveLock)) != 0)
			n++;
	}
	return n;
}

/*
 * Jobs of this database that run as `role` and whose worker is alive.
 * SPI connected.
 */
int64
gnb_count_role_jobs(const char *role)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(role)};
	bool		isnull;

	gnb_execute("SELECT pg_catalog.count(*) FROM gibbs_nb.jobs "
				"WHERE worker_user OPERATOR(pg_catalog.=) $1::pg_catalog.name "
				"AND status OPERATOR(pg_catalog.=) 'running' "
				"AND gibbs_nb.job_worker_alive(job_id)",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return DatumGetInt64(gnb_result_value(1, &isnull));
}

/*
 * Delete the rows of jobs that ended more than gibbs_nb.job_retention ago
 * (their traces went with their versions, or never existed).  SPI connected.
 */
void
gnb_prune_jobs(void)
{
	Oid			types[1] = {FLOAT8OID};
	Datum		values[1] = {Float8GetDatum((double) gnb_job_retention_s)};

	if (gnb_job_retention_s <= 0)
		return;
	gnb_execute("DELETE FROM gibbs_nb.jobs "
				"WHERE status OPERATOR(pg_catalog.<>) 'running' "
				/* OPERATOR() gives every operator one precedence: parenthesise */
				"AND finished_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) "
				"pg_catalog.make_interval(secs => $1))",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
}
