/*
 * launch.c
 *	  Launch a training job's background worker and follow it from the caller.
 *
 * The caller and its worker share one dynamic shared memory segment: the job's
 * parameters go in, progress and the outcome (or the error, with its SQLSTATE)
 * come out.  The job's row in gibbs_nb.jobs is written by the worker alone, in
 * its own transactions, so that other sessions see it while the caller's
 * transaction is still open.
 */
#include "gibbs_nb.h"

#include "train/train.h"
#include "store/store.h"

#include <signal.h>

#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

/*
 * From libpq/libpq.h (PostgreSQL 14 and later), which cannot be included
 * here: it pulls in libpq-be.h and with it the GSSAPI headers, which a
 * server built without GSSAPI support does not need and may not have.
 */
extern bool pq_check_connection(void);

/* How often the caller looks at its worker when nothing wakes it. */
#define FOLLOW_POLL_MS 100
/*
 * The longest a caller waits, holding the launch lock, for its worker to
 * take its job's locks: the worker does nothing else before (it connects,
 * and runs no statement), so only a server too busy to start a process
 * takes this long.
 */
#define WORKER_ADMIT_WAIT_MS 30000

/* Copy of the shared state taken under the spinlock. */
static void
snapshot_job(GnbJobShared *job, GnbJobShared *copy)
{
	SpinLockAcquire(&job->mutex);
	memcpy(copy, job, sizeof(GnbJobShared));
	SpinLockRelease(&job->mutex);
}

/* Raise the error the worker reported, with its SQLSTATE and context. */
static void
raise_worker_error(const GnbJobShared *state)
{
	ereport(ERROR,
			(errcode(state->sqlerrcode),
			 errmsg_internal("%s", state->message),
			 state->detail[0] ? errdetail_internal("%s", state->detail) : 0,
			 state->hint[0] ? errhint("%s", state->hint) : 0,
			 state->context[0] ? errcontext("%s", state->context) : 0,
			 errcontext("gibbs_nb job " INT64_FORMAT, state->params.job_id)));
}

/* The progress NOTICE: psql's progress bar for a waiting call. */
static void
report_progress(const GnbJobShared *state)
{
	const gnb_params *sp = &state->params.sampler;
	int64		total = (int64) sp->chains * sp->sweeps;
	int64		done = state->sweeps_so_far;
	long		secs;
	int			usecs;
	double		elapsed;

	if (state->sampling_started == 0 || done == 0)
	{
		ereport(NOTICE,
				(errmsg("gibbs_nb job " INT64_FORMAT ": reading %s",
						state->params.job_id, state->params.source_display)));
		return;
	}
	TimestampDifference(state->sampling_started, GetCurrentTimestamp(), &secs, &usecs);
	elapsed = secs + usecs / 1e6;
	ereport(NOTICE,
			(errmsg("gibbs_nb job " INT64_FORMAT ": chain %d/%d, sweep %d/%d, log joint %.1f, about %.0f s left",
					state->params.job_id, state->chain + 1, sp->chains, state->sweep,
					sp->sweeps, state->log_joint,
					elapsed / done * (total - done))));
}

/*
 * Run on ERROR and on FATAL (PG_ENSURE_ERROR_CLEANUP) while the caller
 * follows its job: a job nobody waits for any more is one that nobody asked
 * to leave running, whether the query was cancelled, the session was
 * terminated or the client went away.
 */
static void
stop_worker_on_exit(int code, Datum arg)
{
	TerminateBackgroundWorker((BackgroundWorkerHandle *) DatumGetPointer(arg));
}

/*
 * Does the worker (pid) wait for a lock this backend holds?  Then it waits
 * for its own caller, who waits for it, and no deadlock detector sees the
 * cycle (the caller waits on its latch, not on a lock): the transaction
 * deployed, dropped or set the retention of the model, wrote its labels
 * table, or registered its owner's name (a first gibbs_nb_import), before it
 * asked for a training it waits for.  (gibbs_nb_wait asks the same.)
 */
static bool
worker_waits_for_caller(pid_t pid)
{
	ArrayType  *blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
																	Int32GetDatum((int32) pid)));
	int32	   *pids = (int32 *) ARR_DATA_PTR(blockers);
	int			n = ArrayGetNItems(ARR_NDIM(blockers), ARR_DIMS(blockers));

	for (int i = 0; i < n; i++)
		if (pids[i] == MyProcPid)
			return true;
	return false;
}

/*
 * Follow the worker until the job has ended (wait) or is registered (not
 * wait), and leave its state in *state.  Errors out if the worker vanishes;
 * ends the session if the waiting client has gone (the cleanup stops the
 * job), without waiting for client_connection_check_interval.
 */
static void
follow_job(GnbJobShared *job, BackgroundWorkerHandle *handle, bool wait,
		   GnbJobShared *state)
{
	TimestampTz last_notice = GetCurrentTimestamp();
	TimestampTz last_blockers = last_notice;
	TimestampTz launched = last_notice;

	for (;;)
	{
		pid_t		pid = 0;
		BgwHandleStatus status;
		bool		stopped;

		/* look at the worker's liveness first, then at what it reported */
		status = GetBackgroundWorkerPid(handle, &pid);
		stopped = status == BGWH_STOPPED;
		if (status != BGWH_STARTED)
			pid = 0;
		snapshot_job(job, state);
		/* its locks taken (or failed): the next launch may count it */
		if (state->phase != GNB_PHASE_STARTING)
			gnb_launch_lock_release();
		else if (TimestampDifferenceExceeds(launched, GetCurrentTimestamp(), WORKER_ADMIT_WAIT_MS))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("gibbs_nb worker of job " INT64_FORMAT " did not start within %d s",
							job->params.job_id, WORKER_ADMIT_WAIT_MS / 1000),
					 errdetail("Every role's next training waits while a job's worker starts."),
					 errhint("The server log may tell what held the worker.")));
		if (state->phase == GNB_PHASE_FAILED || state->phase == GNB_PHASE_SUCCEEDED ||
			(state->phase == GNB_PHASE_RUNNING && !wait))
			return;
		if (stopped)
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("gibbs_nb worker of job " INT64_FORMAT " exited before the job ended",
							job->params.job_id),
					 errhint("The server log has the worker's messages.")));
		/* (not before the worker is admitted: no client write under the launch lock) */
		if (wait && state->phase != GNB_PHASE_STARTING && gnb_progress_interval_ms > 0 &&
			TimestampDifferenceExceeds(last_notice, GetCurrentTimestamp(),
									   gnb_progress_interval_ms))
		{
			report_progress(state);
			last_notice = GetCurrentTimestamp();
		}
		/* once a second: a worker that waits for this transaction never ends */
		if (wait && !stopped && pid > 0 &&
			TimestampDifferenceExceeds(last_blockers, GetCurrentTimestamp(), 1000))
		{
			last_blockers = GetCurrentTimestamp();
			if (worker_waits_for_caller(pid))
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("gibbs_nb job " INT64_FORMAT " waits for a lock this transaction holds",
								job->params.job_id),
						 errdetail("This transaction changed model \"%s\" or its labels table, or registered its owner's name (a first gibbs_nb_import), before it asked for the training it waits for.",
								   job->params.model_name),
						 errhint("Commit first, or start the training with wait => false.")));
		}
		if (wait && MyProcPort != NULL && !pq_check_connection())
			ereport(FATAL,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("connection to client lost while waiting for gibbs_nb job " INT64_FORMAT,
							job->params.job_id)));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 FOLLOW_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Start a worker for the job and follow it; raise the job's error if it
 * failed.  If the caller stops following before the job has ended (its query
 * is cancelled, or it errors), the worker is told to stop too: a job nobody
 * waits for is one that nobody asked to leave running.
 */
void
gnb_run_job(GnbJobParams *params, bool wait, GnbJobOutcome *outcome)
{
	dsm_segment *seg = dsm_create(sizeof(GnbJobShared), 0);
	GnbJobShared *job = dsm_segment_address(seg);
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	BgwHandleStatus status;
	pid_t		pid;
	GnbJobShared state;

	memset(job, 0, sizeof(GnbJobShared));
	job->params = *params;
	job->caller_latch = MyLatch;
	SpinLockInit(&job->mutex);
	job->phase = GNB_PHASE_STARTING;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gibbs_nb");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gibbs_nb_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gibbs_nb job " INT64_FORMAT, params->job_id);
	snprintf(worker.bgw_type, BGW_MAXLEN, "gibbs_nb worker");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a gibbs_nb worker: no background worker slot is free"),
				 errhint("Wait for running jobs to end, or raise max_worker_processes "
						 "(currently %d) and restart the server.", max_worker_processes)));

	PG_ENSURE_ERROR_CLEANUP(stop_worker_on_exit, PointerGetDatum(handle));
	{
		status = WaitForBackgroundWorkerStartup(handle, &pid);
		if (status == BGWH_POSTMASTER_DIED)
			ereport(FATAL,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("postmaster exited while starting a gibbs_nb worker")));
		/* a worker that is already gone may have finished: follow_job tells */
		follow_job(job, handle, wait, &state);
	}
	PG_END_ENSURE_ERROR_CLEANUP(stop_worker_on_exit, PointerGetDatum(handle));
	dsm_detach(seg);

	if (state.phase == GNB_PHASE_FAILED)
		raise_worker_error(&state);
	outcome->phase = state.phase;
	outcome->version = state.version;
	outcome->sweeps_done = state.sweeps_done;
	outcome->seconds = state.seconds;
	outcome->log_likelihood = state.log_likelihood;
}

PG_FUNCTION_INFO_V1(gibbs_nb_cancel);

/*
 * gibbs_nb_cancel(job_id bigint) returns boolean
 *
 * Tells a running job's worker to stop; the worker records the job as
 * cancelled and publishes nothing.  Any role that may see the job (row
 * security on gibbs_nb.jobs: its model's owner, and roles with the owner's
 * privileges) may cancel it, also when the worker's session belongs to
 * another login role (a job started after SET ROLE, or from a SECURITY
 * DEFINER function).  False if the job had already ended.
 */
Datum
gibbs_nb_cancel(PG_FUNCTION_ARGS)
{
	int64		job_id;
	bool		running;
	int			pid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("job_id must not be NULL")));
	job_id = PG_GETARG_INT64(0);

	SPI_connect();
	if (!gnb_store_job_lookup(job_id, &running, &pid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("gibbs_nb job " INT64_FORMAT " does not exist", job_id)));
	SPI_finish();
	if (!running || pid == 0)
		PG_RETURN_BOOL(false);

	/*
	 * While the job's lock is held its worker lives, and worker_pid is that
	 * worker's: it wrote the pid itself, after taking the lock.  Between this
	 * check and the signal the worker may exit; pg_terminate_backend has the
	 * same window.
	 */
	if (!gnb_job_worker_alive(job_id) || BackendPidGetProc(pid) == NULL)
		PG_RETURN_BOOL(false);
#ifdef HAVE_SETSID
	if (kill(-pid, SIGTERM) != 0)
#else
	if (kill(pid, SIGTERM) != 0)
#endif
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(gibbs_nb_delete_job);

/*
 * gibbs_nb_delete_job(job_id bigint) returns boolean
 *
 * Deletes the row of a job that has ended (and its trace, unless a version
 * keeps it), for any role that may see the job.  False if the job is still
 * running.  This is how roles delete job rows: none has DELETE on
 * gibbs_nb.jobs, since that privilege would also let it LOCK the table and
 * stop every other role's jobs.
 */
Datum
gibbs_nb_delete_job(PG_FUNCTION_ARGS)
{
	int64		job_id;
	bool		running;
	int			pid;
	bool		deleted;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("job_id must not be NULL")));
	job_id = PG_GETARG_INT64(0);

	SPI_connect();
	/* a job whose worker is gone has ended, whatever its row still says */
	gnb_reconcile_jobs();
	if (!gnb_store_job_lookup(job_id, &running, &pid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("gibbs_nb job " INT64_FORMAT " does not exist", job_id)));
	deleted = !running && gnb_store_delete_job(job_id);
	SPI_finish();
	PG_RETURN_BOOL(deleted);
}

PG_FUNCTION_INFO_V1(gibbs_nb_guard_drop_extension);

/*
 * gibbs_nb.guard_drop_extension() returns event_trigger
 *
 * On ddl_command_start of DROP EXTENSION: refuse to drop gibbs_nb while jobs
 * of this database run.  Dropping it under them would kill their workers
 * mid-publish and leave labels tables that no model owns; cancel them first.
 */
Datum
gibbs_nb_guard_drop_extension(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	DropStmt   *stmt;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("gibbs_nb.guard_drop_extension must be called as an event trigger")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!IsA(trigdata->parsetree, DropStmt))
		PG_RETURN_VOID();
	stmt = (DropStmt *) trigdata->parsetree;
	if (stmt->removeType != OBJECT_EXTENSION)
		PG_RETURN_VOID();
	foreach(lc, stmt->objects)
	{
		int64		n;

		if (!IsA(lfirst(lc), String) || strcmp(strVal(lfirst(lc)), "gibbs_nb") != 0)
			continue;
		SPI_connect();
		n = gnb_count_running_jobs_here();
		SPI_finish();
		if (n > 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot drop extension gibbs_nb while %lld of its jobs run",
							(long long) n),
					 errhint("Cancel them (gibbs_nb_cancel) or wait for them to end.")));
	}
	PG_RETURN_VOID();
}
