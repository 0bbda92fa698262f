/*
 * privileges.c
 *	  Every privilege switch: the extension's owner (the tables' owner) for
 *	  writes and for reading other roles' rows, a model's owner for its labels
 *	  table, and the one SPI helper (gnb_execute) that runs a statement as
 *	  the caller or as the extension's owner with search_path pinned to
 *	  pg_catalog, so that nothing a user created is called with those
 *	  privileges.
 */
#include "gibbs_nb.h"

#include "security/security.h"

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
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/array.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
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
 * Bounded lock waits.  PostgreSQL takes a table's lock before it checks the
 * privileges of the statement that asks for it: any role can queue an
 * AccessExclusiveLock on gibbs_nb.jobs or gibbs_nb.owners (CREATE RULE)
 * behind a lock its own open transaction holds, and every later statement on
 * the table waits behind the queue for as long as that transaction stays
 * open.  Every lock gibbs_nb waits for is therefore waited for at most
 * gibbs_nb.lock_timeout (or the session's lock_timeout, where shorter), and
 * the wait then fails with 55P03.
 */

/* The bound in milliseconds, 0 for none: what lock_timeout is set to. */
int
gnb_lock_wait_bound_ms(void)
{
	if (gnb_lock_timeout_ms <= 0)
		return LockTimeout;
	if (LockTimeout > 0 && LockTimeout < gnb_lock_timeout_ms)
		return LockTimeout;
	return gnb_lock_timeout_ms;
}

/* Set lock_timeout to the bound in the current GUC nest level. */
static void
set_lock_wait_bound(void)
{
	int			bound = gnb_lock_wait_bound_ms();
	char		ms[16];

	if (bound == LockTimeout)
		return;
	snprintf(ms, sizeof(ms), "%d", bound);
	(void) set_config_option("lock_timeout", ms, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * What a lock wait that failed under the bound says of it: a line of
 * context, which adds to the error and replaces none of its own detail (a
 * NOWAIT's 55P03 passes here too).
 */
static void
lock_wait_context(void *arg)
{
	if (geterrcode() != ERRCODE_LOCK_NOT_AVAILABLE)
		return;
	errcontext("gibbs_nb waits at most %d ms (gibbs_nb.lock_timeout, or lock_timeout where "
			   "shorter) for a lock that another session holds or is queued for; "
			   "pg_blocking_pids() of the waiting process names the sessions in the way",
			   gnb_lock_wait_bound_ms());
}

/*
 * From here to gnb_lock_wait_end, a lock wait that fails under the bound
 * says why; the bound itself is set by whoever runs the statement
 * (gnb_become_role, gnb_pin_search_path).
 */
static void
lock_wait_context_push(GnbLockWait *wait)
{
	wait->nest_level = 0;
	wait->callback.callback = lock_wait_context;
	wait->callback.arg = NULL;
	wait->callback.previous = error_context_stack;
	error_context_stack = &wait->callback;
}

/*
 * From here to gnb_lock_wait_end, every lock wait is bounded, and one that
 * fails says why.  Strictly nested within the caller's function.
 */
void
gnb_lock_wait_begin(GnbLockWait *wait)
{
	lock_wait_context_push(wait);
	wait->nest_level = NewGUCNestLevel();
	set_lock_wait_bound();
}

void
gnb_lock_wait_end(GnbLockWait *wait)
{
	Assert(error_context_stack == &wait->callback);
	error_context_stack = wait->callback.previous;
	if (wait->nest_level > 0)
		AtEOXact_GUC(true, wait->nest_level);
}

/*
 * Lock a relation by OID, waiting at most the bound: at once when nobody
 * holds or waits for a conflicting lock, and without touching a setting then
 * (row security calls this per row).
 */
void
gnb_lock_relation_bounded(Oid relid, LOCKMODE mode)
{
	GnbLockWait wait;

	if (ConditionalLockRelationOid(relid, mode))
		return;
	gnb_lock_wait_begin(&wait);
	LockRelationOid(relid, mode);
	gnb_lock_wait_end(&wait);
}

/*
 * Act as the extension's owner until gnb_restore_user, as a SECURITY DEFINER
 * function would: restricted operation, search_path = pg_catalog, pg_temp.
 * An error in between is safe: transaction abort restores both.
 */
void
gnb_become_internal(GnbPrivilegeState *state)
{
	gnb_become_role(gnb_internal_owner(), state);
}

/*
 * As role, in a security-restricted operation, with search_path pinned to
 * pg_catalog, pg_temp, until gnb_restore_user: as PostgreSQL runs its
 * maintenance commands (REFRESH MATERIALIZED VIEW, CREATE INDEX) as a
 * table's owner.  Lock waits are bounded meanwhile (gnb_lock_wait_begin).
 */
void
gnb_become_role(Oid role, GnbPrivilegeState *state)
{
	GetUserIdAndSecContext(&state->save_user, &state->save_sec_context);
	state->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	set_lock_wait_bound();
	SetUserIdAndSecContext(role,
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
 * As the current user, with search_path pinned to pg_catalog, pg_temp until
 * gnb_restore_user: for the caller's statements that gnb_execute cannot run
 * (a cursor over the caller's table).
 */
void
gnb_pin_search_path(GnbPrivilegeState *state)
{
	GetUserIdAndSecContext(&state->save_user, &state->save_sec_context);
	state->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	set_lock_wait_bound();
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
	GnbLockWait wait;
	int			rc;

	/* the bound: set by gnb_become_internal, gnb_become_role or gnb_pin_search_path */
	lock_wait_context_push(&wait);
	if (as == GNB_AS_INTERNAL)
		gnb_become_internal(&priv);
	else
		gnb_pin_search_path(&priv);
	rc = nargs > 0 ? SPI_execute_with_args(sql, nargs, types, values, nulls, false, limit)
		: SPI_execute(sql, false, limit);
	if (rc != expected)
		elog(ERROR, "gibbs_nb: statement failed (%s): %s", SPI_result_code_string(rc), sql);
	gnb_restore_user(&priv);
	gnb_lock_wait_end(&wait);
}

/*
 * gnb_execute for a statement whose parameters are large values (nulls as
 * for gnb_execute): they are passed as parameters the planner may not fold into
 * constants.  SPI_execute_with_args marks them constant, and the planner
 * then copies each value into the plan, which doubled the memory of a
 * version's packed row as it was written.  Read at execution instead, the
 * values are used where they are.
 */
void
gnb_execute_unfolded(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
				 GnbRunAs as, int expected)
{
	GnbPrivilegeState priv;
	ParamListInfo params = makeParamList(nargs);
	SPIExecuteOptions options;
	GnbLockWait wait;
	int			rc;

	for (int i = 0; i < nargs; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = nulls != NULL && nulls[i] == 'n';
		params->params[i].pflags = 0;
		params->params[i].ptype = types[i];
	}
	memset(&options, 0, sizeof(options));
	options.params = params;
	options.read_only = false;
	/* the bound: set by gnb_become_internal, gnb_become_role or gnb_pin_search_path */
	lock_wait_context_push(&wait);
	if (as == GNB_AS_INTERNAL)
		gnb_become_internal(&priv);
	else
		gnb_pin_search_path(&priv);
	rc = SPI_execute_extended(sql, &options);
	if (rc != expected)
		elog(ERROR, "gibbs_nb: statement failed (%s): %s", SPI_result_code_string(rc), sql);
	gnb_restore_user(&priv);
	gnb_lock_wait_end(&wait);
	pfree(params);
}

/*
 * Keep a schema's name until the transaction ends: a row lock on its
 * pg_namespace row, which ALTER SCHEMA ... RENAME (and DROP SCHEMA) must wait
 * for.  A relation locked by OID and named from the catalogs for the
 * statements that follow is named by its schema too; without this the
 * schema's owner (with CREATE on the database) could rename the schema and
 * create another of that name holding a look-alike relation, which the next
 * statement by that name would reach, running the look-alike's triggers or
 * view as the caller.  A job's worker does not wait (nowait): the row may be
 * one its caller's open transaction altered (GRANT ... ON SCHEMA, then
 * gibbs_nb_train), and the caller is waiting for the worker; it fails with
 * 55P03 instead.  Connects to SPI itself (nested if connected).
 */
void
gnb_lock_namespace_name(Oid nspid, bool nowait)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(nspid)};
	/* the worker locks its source before it takes the read's snapshot */
	bool		push = !ActiveSnapshotSet();
	bool		locked;

	if (push)
		PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	gnb_execute(nowait ?
				"SELECT 1 FROM pg_catalog.pg_namespace WHERE oid OPERATOR(pg_catalog.=) $1 FOR SHARE SKIP LOCKED" :
				"SELECT 1 FROM pg_catalog.pg_namespace WHERE oid OPERATOR(pg_catalog.=) $1 FOR SHARE",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	locked = SPI_processed > 0;
	SPI_finish();
	if (push)
		PopActiveSnapshot();
	if (!locked)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("schema \"%s\" is being altered by another transaction",
						get_namespace_name(nspid)),
				 errdetail("A gibbs_nb job does not wait for a schema whose relations it names."),
				 errhint("Commit the transaction that altered the schema (ALTER SCHEMA, GRANT ... ON SCHEMA), then train again.")));
}

/*
 * Statements that write a relation locked by OID, by a name made from the
 * catalogs under that lock (a labels table).  The name is checked as the
 * statement is analysed: the relation it reaches must be the one locked.
 * Between the naming and the analysis, the schema's owner could rename the
 * schema and create another of that name holding a look-alike table, whose
 * triggers and rules would then run as the labels table's owner; checked
 * this way, nothing needs the schema's row lock (gnb_lock_namespace_name),
 * which a deploy or a drop would otherwise hold, keeping every GRANT on the
 * schema waiting, until its transaction ends.  SPI_execute's plans are
 * one-shot: analysed once, never again for the execution.
 */
static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;
/* armed for the next statement analysed: the relation it must write */
static Oid	statement_target = InvalidOid;
/* statements checked so far (nested calls count too; only "more" is read) */
static uint64 statement_targets_checked = 0;

static void
check_statement_target(ParseState *pstate, Query *query, JumbleState *jstate)
{
	Oid			target = statement_target;

	/*
	 * The first statement only, taken before anything else analyses one
	 * (a hook that prepares a statement of its own; the target's triggers)
	 */
	statement_target = InvalidOid;
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);
	if (!OidIsValid(target))
		return;
	if (query->resultRelation <= 0 ||
		rt_fetch(query->resultRelation, query->rtable)->relid != target)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the name of relation %u no longer leads to it", target),
				 errdetail("Its schema was renamed, and another made under the old name, while gibbs_nb wrote to it.")));
	statement_targets_checked++;
}

/* Called once per process (_PG_init). */
void
gnb_install_statement_target_check(void)
{
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = check_statement_target;
}

/*
 * gnb_execute as the current user of a statement that writes relid, named
 * (qualified) in sql from the catalogs under relid's lock.  SPI connected.
 */
void
gnb_execute_on_relation(Oid relid, const char *sql, int nargs, Oid *types, Datum *values,
						int expected)
{
	uint64		checked_before = statement_targets_checked;

	statement_target = relid;
	PG_TRY();
	{
		gnb_execute(sql, nargs, types, values, NULL, GNB_AS_CALLER, expected, 0);
	}
	PG_FINALLY();
	{
		statement_target = InvalidOid;
	}
	PG_END_TRY();
	if (statement_targets_checked == checked_before)
		elog(ERROR, "gibbs_nb: statement on relation %u was not checked: %s", relid, sql);
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

/*
 * Run a statement whose $1 and $2 are a model's owner and name.  SPI
 * connected.
 */
void
gnb_model_statement(const char *sql, const char *owner, const char *model_name, GnbRunAs as,
				int expected, long limit)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name)};

	gnb_execute(sql, 2, types, values, NULL, as, expected, limit);
}

/* The current user's name: what a model's owner column holds. */
char *
gnb_current_role_name(void)
{
	return GetUserNameFromId(GetUserId(), false);
}
