/*
 * worker_queue.c
 *	  What a job's worker does with the workers it starts (chain workers,
 *	  sweep workers): read what they said through their error queues, and
 *	  terminate them.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"

#include "libpq/pqformat.h"
#include "libpq/pqmq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
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
 * Terminate the n workers of handle[] (NULL entries: none); with wait, wait
 * (boundedly) for them to exit, saying in the log if they did not.
 */
void
gnb_terminate_workers(BackgroundWorkerHandle **handle, int n, bool wait, int64 job_id,
					  const char *what)
{
	TimestampTz start = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
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
