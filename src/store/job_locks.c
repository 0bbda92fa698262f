/*
 * job_locks.c
 *	  Whether a job's worker lives, and the job limits: the advisory locks
 *	  a job's worker holds (its job, its role, its chain slots), the guard that
 *	  keeps user code in a worker from releasing them, the launch lock, and
 *	  the reconciliation and pruning of gibbs_nb.jobs.
 */
#include "gibbs_nb.h"

#include "store/store.h"
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
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
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
#include "utils/timestamp.h"

/*
 * locktag_field4 of a job's liveness lock: user advisory locks use 1 and 2,
 * so no SQL call can take or fake this one.
 */
#define JOB_LOCK_CLASS 0x474E
/* ... and of the lock that makes checking the job limits and launching one step */
#define LAUNCH_LOCK_CLASS 0x474F
/* ... and of the lock every worker of a role holds, in every database */
#define ROLE_LOCK_CLASS 0x4751
/* ... and of a chain worker's slot, held for it by its job's worker */
#define CHAIN_LOCK_CLASS 0x4752
/* ... and of the lock every worker of a login holds, in every database */
#define LOGIN_LOCK_CLASS 0x4753
/* ... and of a chain worker's slot, by the job's login */
#define LOGIN_CHAIN_LOCK_CLASS 0x4754
/* ... and of the lock that makes registering a model's job one step */
#define MODEL_LOCK_CLASS 0x4755

static void
job_lock_tag(LOCKTAG *tag, int64 job_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) job_id >> 32),
						 (uint32) job_id, JOB_LOCK_CLASS);
}

/*
 * The lock each worker of a role holds (shared) while its job runs: in no
 * database, so that counting its holders counts the role's jobs in the
 * whole cluster (gibbs_nb.max_jobs_per_role).
 */
static void
role_lock_tag(LOCKTAG *tag, Oid role)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, role, 0, ROLE_LOCK_CLASS);
}

/*
 * ... and the login's (the session user, which SET ROLE does not change):
 * what gibbs_nb.max_jobs_per_login counts.
 */
static void
login_lock_tag(LOCKTAG *tag, Oid login)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, login, 0, LOGIN_LOCK_CLASS);
}

/*
 * pg_advisory_unlock_all() releases every session lock of the advisory lock
 * method the process holds, whatever the tag: in a job's worker, the job,
 * role and chain-slot locks above, which are what count the job as running.
 * User code runs there (the source's views and functions, its types' input
 * and output, the labels table's triggers): one call dropped them, and with
 * them every job limit, the one job per model, gibbs_nb_cancel and DROP
 * EXTENSION's guard, for as many jobs as its role could start.  A job's
 * worker refuses the call: every call the executor sets up, of a built-in
 * function too, passes the object access hook (OAT_FUNCTION_EXECUTE) before
 * it runs.  No other SQL releases those locks: DISCARD ALL cannot run in a
 * function, and pg_advisory_unlock takes only the tags SQL can name.
 */
static object_access_hook_type prev_object_access_hook = NULL;

static void
job_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (access == OAT_FUNCTION_EXECUTE && classId == ProcedureRelationId &&
		objectId == F_PG_ADVISORY_UNLOCK_ALL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_advisory_unlock_all() cannot be called in a gibbs_nb job"),
				 errdetail("The job's worker holds session locks that count the job as running.")));
	if (prev_object_access_hook != NULL)
		prev_object_access_hook(access, classId, objectId, subId, arg);
}

/* Installed by a job's worker before it takes its locks, for its lifetime. */
void
gnb_guard_job_locks(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = job_object_access;
}

/* Whether this process holds its job's lock (it is a worker that does). */
static bool job_lock_held = false;
/* ... and the role lock of the role its job runs as, and its login's */
static Oid	role_lock_role = InvalidOid;
static Oid	login_lock_login = InvalidOid;

/*
 * Called by a job's worker before it registers the job: session locks it
 * holds until the job's outcome is recorded (gnb_release_job_lock), or until
 * it exits, however it exits.  The job lock's being held is what "the job is
 * running" means, to everyone, whatever their privileges: to the jobs view,
 * to the job limits, to DROP EXTENSION; the role lock (role: the role the
 * job runs as) is what the per-role limit counts.
 */
void
gnb_hold_job_lock(int64 job_id, Oid role, Oid login)
{
	LOCKTAG		tag;

	job_lock_tag(&tag, job_id);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	job_lock_held = true;
	role_lock_tag(&tag, role);
	(void) LockAcquire(&tag, ShareLock, true, false);
	role_lock_role = role;
	login_lock_tag(&tag, login);
	(void) LockAcquire(&tag, ShareLock, true, false);
	login_lock_login = login;
}

/*
 * The bounds on running jobs, counted from the lock table (no statement):
 * gibbs_nb.max_jobs in the cluster, gibbs_nb.max_jobs_per_role for the role
 * the job runs as, gibbs_nb.max_jobs_per_login for the login (session user)
 * it runs for, which SET ROLE does not change; each 0 for no bound.  An
 * error if one is reached.  Under the launch lock.
 */
void
gnb_check_job_limits(int max_jobs, int max_jobs_per_role, int max_jobs_per_login,
					 Oid role, Oid login)
{
	int			n;

	if (max_jobs > 0 && (n = gnb_count_live_jobs()) >= max_jobs)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg_plural("%d gibbs_nb job is running, the most gibbs_nb.max_jobs allows",
							   "%d gibbs_nb jobs are running, the most gibbs_nb.max_jobs allows",
							   n, n),
				 errhint("Wait for a job to end, or raise gibbs_nb.max_jobs.")));
	if (max_jobs_per_role > 0 && (n = gnb_count_role_jobs(role)) >= max_jobs_per_role)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg_plural("role \"%s\" runs %d gibbs_nb job, the most gibbs_nb.max_jobs_per_role allows",
							   "role \"%s\" runs %d gibbs_nb jobs, the most gibbs_nb.max_jobs_per_role allows",
							   n, GetUserNameFromId(role, false), n),
				 errhint("Wait for one of your jobs to end, or have a superuser raise gibbs_nb.max_jobs_per_role.")));
	if (max_jobs_per_login > 0 && (n = gnb_count_login_jobs(login)) >= max_jobs_per_login)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg_plural("login \"%s\" runs %d gibbs_nb job, the most gibbs_nb.max_jobs_per_login allows",
							   "login \"%s\" runs %d gibbs_nb jobs, the most gibbs_nb.max_jobs_per_login allows",
							   n, GetUserNameFromId(login, false), n),
				 errdetail("Jobs are counted by the role that logged in, whatever role it has set."),
				 errhint("Wait for one of your jobs to end, or have a superuser raise gibbs_nb.max_jobs_per_login.")));
}

/*
 * Registering a job of a model is one step per model: a lock on (database,
 * owner, model name), hashed, held by the registering worker until its
 * transaction ends, while it looks for a running job of the model and
 * writes its own row.  Only workers take it, each for milliseconds; two
 * models whose names hash alike register one after the other.  The wait is
 * bounded by lock_timeout (gibbs_nb.lock_timeout in a worker).
 */
void
gnb_lock_model_registration(const char *owner, const char *model_name)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, hash_bytes((const unsigned char *) owner, strlen(owner)),
						 hash_bytes((const unsigned char *) model_name, strlen(model_name)),
						 MODEL_LOCK_CLASS);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * Called by the worker once its job's outcome is recorded, before it tells
 * its caller: a call that returns has a job that no longer counts as running.
 */
void
gnb_release_job_lock(int64 job_id)
{
	LOCKTAG		tag;

	gnb_release_chain_slots();
	if (OidIsValid(role_lock_role))
	{
		role_lock_tag(&tag, role_lock_role);
		LockRelease(&tag, ShareLock, true);
		role_lock_role = InvalidOid;
	}
	if (OidIsValid(login_lock_login))
	{
		login_lock_tag(&tag, login_lock_login);
		LockRelease(&tag, ShareLock, true);
		login_lock_login = InvalidOid;
	}
	if (!job_lock_held)
		return;
	job_lock_tag(&tag, job_id);
	LockRelease(&tag, ExclusiveLock, true);
	job_lock_held = false;
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

/*
 * gibbs_nb.job_worker_alive(job_id bigint) returns boolean
 *
 * Whether the job's worker is running; used by the gibbs_nb_jobs view and
 * when stale 'running' rows are put right.  Everyone may call it (the view
 * runs as whoever queries it), so it answers only for a job whose row the
 * caller may see: false for any other, running or not, so that probing job
 * ids tells a role nothing about other roles' jobs.
 */
Datum
gibbs_nb_job_worker_alive(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	bool		visible;

	SPI_connect();
	gnb_execute("SELECT 1 FROM gibbs_nb.jobs WHERE job_id OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	visible = SPI_processed > 0;
	SPI_finish();
	PG_RETURN_BOOL(visible && gnb_job_worker_alive(job_id));
}

PG_FUNCTION_INFO_V1(gibbs_nb_job_worker_lost);

/*
 * gibbs_nb.job_worker_lost(job_id bigint) returns boolean
 *
 * Whether the job's row says 'running' though no worker is left to finish
 * it (a restart, a crash): what the gibbs_nb_jobs view shows as failed, and
 * what gnb_reconcile_jobs puts right.  The lock is looked at first, and the
 * row read after it with the latest snapshot, not the statement's: a worker
 * commits its job's outcome before it lets go of the lock, so a row read
 * after the lock was found free shows the outcome of a job that ended.  Read
 * the other way round (the row from the statement's snapshot, the lock
 * now), a job that ends in between would be taken for lost.  As the caller,
 * so that a job the caller may not see is never lost to it.
 */
Datum
gibbs_nb_job_worker_lost(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	GnbPrivilegeState priv;
	SPIPlanPtr	plan;
	bool		lost;
	bool		isnull;
	Datum		status;
	int			rc;

	if (gnb_job_worker_alive(job_id))
		PG_RETURN_BOOL(false);
	SPI_connect();
	gnb_pin_search_path(&priv);
	plan = SPI_prepare("SELECT j.status OPERATOR(pg_catalog.=) 'running' FROM gibbs_nb.jobs j "
					   "WHERE j.job_id OPERATOR(pg_catalog.=) $1",
					   1, types);
	if (plan == NULL)
		elog(ERROR, "gibbs_nb: could not prepare the job's status query: %s",
			 SPI_result_code_string(SPI_result));
	/* the latest snapshot, whatever the transaction's isolation level */
	rc = SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "gibbs_nb: could not read the job's status (%s)", SPI_result_code_string(rc));
	gnb_restore_user(&priv);
	status = gnb_result_value(1, &isnull);	/* no row: null */
	lost = !isnull && DatumGetBool(status);
	SPI_finish();
	PG_RETURN_BOOL(lost);
}

/*
 * Mark failed the jobs left 'running' by a worker that is gone
 * (an immediate shutdown, a crash): their worker never recorded an outcome.
 * The gibbs_nb_jobs view already shows them so; this puts the rows right.
 *
 * Rows another transaction has locked are skipped, here and in
 * gnb_prune_jobs: both run while training starts, the caller holding the
 * cluster-wide launch lock, and a role's own transaction left open after
 * deleting its finished jobs' rows (or after a prune of its own) would
 * otherwise hold every role's training until it ended.  What is skipped is
 * put right by a later call.  SPI must be connected.
 */
void
gnb_reconcile_jobs(void)
{
	gnb_execute("UPDATE gibbs_nb.jobs j SET status = 'failed', "
				"finished_at = pg_catalog.now(), sqlstate = '57P01', "
				"message = 'the job''s worker exited without finishing it (server restart or crash)' "
				"WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
				"SELECT l.job_id FROM gibbs_nb.jobs l "
				"WHERE l.status OPERATOR(pg_catalog.=) 'running' "
				"AND gibbs_nb.job_worker_lost(l.job_id) FOR UPDATE SKIP LOCKED))",
				0, NULL, NULL, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
}

/*
 * The job that is training this model now, or 0: a job whose worker is gone
 * is not (gnb_reconcile_jobs may have skipped its row).  SPI connected.
 */
int64
gnb_running_job(const char *owner, const char *model_name)
{
	bool		isnull;
	Datum		job;

	gnb_model_statement("SELECT j.job_id FROM gibbs_nb.jobs j "
					"WHERE j.owner OPERATOR(pg_catalog.=) $1 "
					"AND j.model_name OPERATOR(pg_catalog.=) $2 "
					"AND j.status OPERATOR(pg_catalog.=) 'running' "
					"AND NOT gibbs_nb.job_worker_lost(j.job_id) "
					"ORDER BY j.job_id LIMIT 1",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	job = gnb_result_value(1, &isnull);
	return isnull ? 0 : DatumGetInt64(job);
}

/*
 * The launch lock: one cluster-wide lock that a caller holds from counting
 * the jobs until its worker has taken its job's locks (or failed to start),
 * and a job's worker while it counts and takes chain slots, so that two at
 * the same instant cannot both pass a bound that has room for one.  Nothing
 * is done under it that waits for a lock another role can hold or queue
 * for: no statement (the counts are read from the lock table), and a
 * worker takes its locks before it runs any.  A session lock, because the
 * caller's transaction may go on waiting for the job; released explicitly,
 * on errors too.
 */
static bool launch_lock_held = false;

static void
launch_lock_tag(LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, 0, 0, LAUNCH_LOCK_CLASS);
}

/* Held for moments by whoever holds it; still, waited for at most the bound. */
void
gnb_launch_lock_acquire(void)
{
	LOCKTAG		tag;
	GnbLockWait wait;

	launch_lock_tag(&tag);
	gnb_lock_wait_begin(&wait);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	gnb_lock_wait_end(&wait);
	launch_lock_held = true;
}

/*
 * The launch lock, waited for at most the bound, or false: for a running
 * job's worker, which does without what it would have taken under it
 * rather than fail.  Asked for again every 10 ms.
 */
static bool
launch_lock_try(void)
{
	LOCKTAG		tag;
	TimestampTz start = GetCurrentTimestamp();
	int			bound = gnb_lock_wait_bound_ms();

	launch_lock_tag(&tag);
	for (;;)
	{
		if (LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL)
		{
			launch_lock_held = true;
			return true;
		}
		if (bound > 0 && TimestampDifferenceExceeds(start, GetCurrentTimestamp(), bound))
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
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
 * How many processes of the cluster hold a lock of ours of this class in
 * this mode (a job's lock, a role's lock), counted from the lock table, so
 * that no other database's table is needed.  With `role` valid, only the
 * locks of that role (their tag's second field; the first is no database).
 */
static int
count_lock_holders(uint16 lock_class, Oid role, LOCKMODE mode)
{
	LockData   *data = GetLockStatusData();
	int			n = 0;

	for (int i = 0; i < data->nelements; i++)
	{
		const LockInstanceData *l = &data->locks[i];

		if (l->locktag.locktag_type == LOCKTAG_ADVISORY &&
			l->locktag.locktag_lockmethodid == USER_LOCKMETHOD &&
			l->locktag.locktag_field4 == lock_class &&
			(!OidIsValid(role) ||
			 (l->locktag.locktag_field1 == InvalidOid && l->locktag.locktag_field2 == role)) &&
			(l->holdMask & LOCKBIT_ON(mode)) != 0)
			n++;
	}
	return n;
}

/*
 * A chain worker's slot: held, shared, by the job's worker for each chain
 * worker it may start (the third field tells them apart), in no database;
 * the second field is the role the job runs as.
 */
static void
chain_lock_tag(LOCKTAG *tag, Oid role, int32 chain)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, role, (uint32) chain, CHAIN_LOCK_CLASS);
}

/* ... and the same slot by the job's login */
static void
login_chain_lock_tag(LOCKTAG *tag, Oid login, int32 chain)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, login, (uint32) chain, LOGIN_CHAIN_LOCK_CLASS);
}

/* The chain slots this worker holds (chain_lock_tag's 1 .. n) */
static int32 chain_slots_held = 0;

/*
 * How many chain workers, of the `wanted` a job of this worker asks for, it
 * may start: chain workers take job slots that are free.  The workers of
 * gibbs_nb in the cluster (jobs' and chains') stay within max_jobs, and
 * those of the job's role within max_jobs_per_role (the caller's
 * gibbs_nb.max_jobs and gibbs_nb.max_jobs_per_role, that admitted the job),
 * counting the ones granted; the chains beyond run in the job's own worker.
 * Jobs are admitted counting jobs only, so chains never keep a job from
 * starting.  Without this, one role's two jobs of five chains took every
 * background worker slot of the cluster, and other roles' training failed
 * (53400) and parallel query went without workers.  The slots are held as locks by this
 * worker (counted with the jobs' locks, under the launch lock, so that two
 * jobs cannot both take the last one) until gnb_release_chain_slots or its
 * exit.
 */
int32
gnb_reserve_chain_slots(int32 wanted, int max_jobs, int max_jobs_per_role, int max_jobs_per_login)
{
	volatile int32 granted = wanted;
	int			n;

	if (wanted <= 0 || !OidIsValid(role_lock_role))
		return 0;
	if (!launch_lock_try())
	{
		ereport(LOG,
				(errmsg("gibbs_nb: no chain or sweep worker for this job: the launch lock stayed busy for %d ms",
						gnb_lock_wait_bound_ms())));
		return 0;
	}
	PG_TRY();
	{
		if (max_jobs > 0)
		{
			n = count_lock_holders(JOB_LOCK_CLASS, InvalidOid, ExclusiveLock) +
				count_lock_holders(CHAIN_LOCK_CLASS, InvalidOid, ShareLock);
			granted = Min(granted, Max(max_jobs - n, 0));
		}
		if (max_jobs_per_role > 0)
		{
			n = count_lock_holders(ROLE_LOCK_CLASS, role_lock_role, ShareLock) +
				count_lock_holders(CHAIN_LOCK_CLASS, role_lock_role, ShareLock);
			granted = Min(granted, Max(max_jobs_per_role - n, 0));
		}
		if (max_jobs_per_login > 0)
		{
			n = count_lock_holders(LOGIN_LOCK_CLASS, login_lock_login, ShareLock) +
				count_lock_holders(LOGIN_CHAIN_LOCK_CLASS, login_lock_login, ShareLock);
			granted = Min(granted, Max(max_jobs_per_login - n, 0));
		}
		for (int32 c = chain_slots_held + 1; c <= chain_slots_held + granted; c++)
		{
			LOCKTAG		tag;

			chain_lock_tag(&tag, role_lock_role, c);
			(void) LockAcquire(&tag, ShareLock, true, false);
			login_chain_lock_tag(&tag, login_lock_login, c);
			(void) LockAcquire(&tag, ShareLock, true, false);
		}
		chain_slots_held += granted;
	}
	PG_FINALLY();
	{
		gnb_launch_lock_release();
	}
	PG_END_TRY();
	return granted;
}

/* Let go of the chain slots this worker holds (its chains have ended). */
void
gnb_release_chain_slots(void)
{
	for (int32 c = 1; c <= chain_slots_held; c++)
	{
		LOCKTAG		tag;

		chain_lock_tag(&tag, role_lock_role, c);
		LockRelease(&tag, ShareLock, true);
		login_chain_lock_tag(&tag, login_lock_login, c);
		LockRelease(&tag, ShareLock, true);
	}
	chain_slots_held = 0;
}

/* Jobs whose worker is alive, in every database of the cluster. */
int
gnb_count_live_jobs(void)
{
	return count_lock_holders(JOB_LOCK_CLASS, InvalidOid, ExclusiveLock);
}

/*
 * Jobs of this database whose row says running and whose worker is alive:
 * a job whose outcome is recorded does not count, even in the instant
 * before its worker lets go of its lock.  SPI connected.
 */
int64
gnb_count_running_jobs_here(void)
{
	bool		isnull;

	gnb_execute("SELECT pg_catalog.count(*) FROM gibbs_nb.jobs "
				"WHERE status OPERATOR(pg_catalog.=) 'running' "
				"AND gibbs_nb.job_worker_alive(job_id)",
				0, NULL, NULL, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return DatumGetInt64(gnb_result_value(1, &isnull));
}

/*
 * Jobs that run as `role` and whose worker is alive, in every database of
 * the cluster, so that a role cannot pass its bound by starting jobs in
 * other databases.
 */
int
gnb_count_role_jobs(Oid role)
{
	return count_lock_holders(ROLE_LOCK_CLASS, role, ShareLock);
}

/* Jobs whose worker runs for this login (session user), in every database. */
int
gnb_count_login_jobs(Oid login)
{
	return count_lock_holders(LOGIN_LOCK_CLASS, login, ShareLock);
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
	/*
	 * The jobs to prune, locked (those another transaction holds are
	 * skipped: see gnb_reconcile_jobs); the traces of those that no version
	 * needs (failed ones); their rows.
	 */
	gnb_execute("WITH expired AS (SELECT job_id FROM gibbs_nb.jobs "
				"WHERE status OPERATOR(pg_catalog.<>) 'running' "
				/* OPERATOR() gives every operator one precedence: parenthesise */
				"AND finished_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) "
				"pg_catalog.make_interval(secs => $1)) FOR UPDATE SKIP LOCKED), "
				"traces AS (DELETE FROM gibbs_nb.trace t USING expired e "
				"WHERE t.job_id OPERATOR(pg_catalog.=) e.job_id "
				"AND NOT EXISTS (SELECT 1 FROM gibbs_nb.models m "
				"WHERE m.job_id OPERATOR(pg_catalog.=) e.job_id)) "
				"DELETE FROM gibbs_nb.jobs j USING expired e "
				"WHERE j.job_id OPERATOR(pg_catalog.=) e.job_id",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
}
