/*
 * worker_queue.c
 *	  What a job's worker does with the workers it starts (chain workers,
 *	  sweep workers): reserve their job slots, start them, read what they
 *	  said through their error queues, and terminate them.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "store/store.h"

#include "access/xact.h"
#include "libpq/pqformat.h"
#include "libpq/pqmq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

/* How long a failing job's worker waits for its workers to exit. */
#define WORKERS_STOP_WAIT_MS 10000

/*
 * Read what a worker said through its error queue *mqh.  Its error is raised
 * here as it was raised there (its SQLSTATE, message, detail, hint and
 * context, and worker_line after its context), from the error context
 * context_stack, as parallel.c raises a parallel worker's ('E' is the
 * protocol's ErrorResponse).  Its notices and warnings ('N') are in its own
 * log already and go no further: the job's worker has no client to tell.
 * Each message is read in message_cxt, reset after it.  A queue its worker
 * has left is let go of (*mqh becomes NULL).
 */
void
gnb_read_worker_messages(shm_mq_handle **mqh, MemoryContext message_cxt,
						 ErrorContextCallback *context_stack, const char *worker_line)
{
	while (*mqh != NULL)
	{
		shm_mq_result res;
		Size		nbytes;
		void	   *data;
		StringInfoData msg;
		MemoryContext old;

		res = shm_mq_receive(*mqh, &nbytes, &data, true);
		if (res == SHM_MQ_WOULD_BLOCK)
			return;
		if (res != SHM_MQ_SUCCESS)
		{
			shm_mq_detach(*mqh);
			*mqh = NULL;
			return;
		}
		old = MemoryContextSwitchTo(message_cxt);
		initStringInfo(&msg);
		appendBinaryStringInfo(&msg, data, nbytes);
		if (pq_getmsgbyte(&msg) == 'E')
		{
			ErrorData	edata;

			pq_parse_errornotice(&msg, &edata);
			/* a worker's FATAL ends the job, not the job's worker */
			edata.elevel = ERROR;
			edata.context = edata.context ? psprintf("%s\n%s", edata.context, worker_line)
				: pstrdup(worker_line);
			error_context_stack = context_stack;
			ThrowErrorData(&edata);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(message_cxt);
	}
}

/*
 * Terminate the n workers of handle[] (NULL entries: none), unless told only
 * to wait; with wait, wait (boundedly) for them to exit, saying in the log if
 * they did not.
 */
void
gnb_terminate_workers(BackgroundWorkerHandle **handle, int n, bool terminate, bool wait,
					  int64 job_id, const char *what)
{
	TimestampTz start = GetCurrentTimestamp();

	for (int i = 0; terminate && i < n; i++)
		if (handle[i] != NULL)
			TerminateBackgroundWorker(handle[i]);
	while (wait)
	{
		bool		all_gone = true;

		for (int i = 0; i < n; i++)
		{
			pid_t		pid;

			if (handle[i] != NULL && GetBackgroundWorkerPid(handle[i], &pid) != BGWH_STOPPED)
				all_gone = false;
		}
		if (all_gone)
			break;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), WORKERS_STOP_WAIT_MS))
		{
			elog(WARNING, "gibbs_nb job " INT64_FORMAT ": %s still running %d s after they were told to stop",
				 job_id, what, WORKERS_STOP_WAIT_MS / 1000);
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Job slots for up to `wanted` workers of this job (gnb_reserve_chain_slots),
 * in a transaction of its own: an error while it waits for the launch lock
 * (a cancel) is then cleaned up by the abort, wait queue and all.  The
 * slots are session locks: they outlive it.  Returns how many were granted.
 */
int32
gnb_reserve_worker_slots(const GnbJobParams *p, int32 wanted)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		own_xact = !IsTransactionState();
	int32		granted;

	if (own_xact)
		StartTransactionCommand();
	granted = gnb_reserve_chain_slots(wanted, p->max_jobs, p->max_jobs_per_role,
									  p->max_jobs_per_login);
	if (own_xact)
		CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return granted;
}

/*
 * Start a worker of this job: function (in this library) with the
 * segment's handle as its argument and `number` in bgw_extra, its process
 * named "gibbs_nb job N <name>", connected as the caller by itself, never
 * restarted, telling this process of its start and exit.  False if no
 * background worker slot was free.
 */
bool
gnb_start_worker(const GnbJobParams *p, const char *function, const char *type, const char *name,
				 int32 number, dsm_segment *seg, BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gibbs_nb");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "gibbs_nb job " INT64_FORMAT " %s", p->job_id, name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s", type);
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	memcpy(worker.bgw_extra, &number, sizeof(int32));
	worker.bgw_notify_pid = MyProcPid;
	if (RegisterDynamicBackgroundWorker(&worker, handle))
		return true;
	*handle = NULL;
	return false;
}

/*
 * In a worker a job's worker started: its job's segment (main_arg, its
 * handle) mapped and its table of contents found, or an error that names
 * the worker (`type`).
 */
shm_toc *
gnb_attach_job_segment(Datum main_arg, uint64 magic, const char *type, dsm_segment **seg)
{
	shm_toc    *toc;

	*seg = dsm_attach(DatumGetUInt32(main_arg));
	if (*seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s could not map its job's shared memory", type)));
	toc = shm_toc_attach(magic, dsm_segment_address(*seg));
	if (toc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s found nothing of its job in the shared memory it mapped", type)));
	return toc;
}

/*
 * In a worker a job's worker started, in PG_CATCH: the error reported (to
 * the log and, whole, through the worker's error queue: before its slot
 * says it failed) and cleared; returns its SQLSTATE for the slot.
 */
int
gnb_report_worker_error(void)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	EmitErrorReport();
	FlushErrorState();
	return edata->sqlerrcode;
}
