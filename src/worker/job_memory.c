/*
 * job_memory.c
 *	  A training job's memory budget (gibbs_nb.max_job_memory, as the caller
 *	  had it), kept by the job's worker, its chain workers and the corpus
 *	  reader; and the source's own query, watched while the job reads.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

/*
 * Error out (53200) if a job that holds in_use bytes would go past its
 * budget by allocating `more`.  Doubles: the sizes asked for can be far
 * beyond what Size arithmetic should be trusted with.
 */
void
gnb_check_job_memory(const GnbJobParams *params, double in_use, double more, const char *what)
{
	gnb_check_job_memory_hint(params, in_use, more, what,
							  "Use fewer sweeps, chains or classes, or have a superuser raise gibbs_nb.max_job_memory (it can be set per role).");
}

/* The same, with the hint the caller knows to give. */
void
gnb_check_job_memory_hint(const GnbJobParams *params, double in_use, double more,
						  const char *what, const char *hint)
{
	if (in_use + more <= (double) params->max_job_memory)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("gibbs_nb job " INT64_FORMAT " would need %.0f MB, more than gibbs_nb.max_job_memory (%.0f MB)",
					params->job_id, (in_use + more) / (1024.0 * 1024.0),
					params->max_job_memory / (1024.0 * 1024.0)),
			 errdetail("%s: %.0f MB on top of %.0f MB in use.", what,
					   more / (1024.0 * 1024.0), in_use / (1024.0 * 1024.0)),
			 errhint("%s", hint)));
}

/* ---- the source's query, watched while the job reads ---- */

/* How often the reading's memory is looked at, in ms. */
#define SOURCE_WATCH_MS 20
/*
 * What the process may hold beyond the job's budget while it reads: the
 * executor's and SPI's own memory, the allocator's rounding and what it
 * keeps, none of which the budget's checks count.
 */
#define SOURCE_WATCH_SLACK ((int64) 64 * 1024 * 1024)

static TimeoutId source_watch_timeout = MAX_TIMEOUTS;
static volatile sig_atomic_t source_memory_exceeded = false;
/* looks past the limit since the first cancel */
static volatile sig_atomic_t source_over_ticks = 0;
/*
 * Past the limit this many looks after the first cancel (1 s), the source
 * has caught the cancel (PL/pgSQL can, by name) and goes on: the worker is
 * terminated, as an administrator would, which nothing can catch.
 */
#define SOURCE_WATCH_TERMINATE_TICKS 50
/* the process's private memory the watch allows, in pages; 0: not watching */
static volatile long source_watch_limit_pages = 0;

/*
 * The process's private resident memory in pages, from /proc/self/statm
 * (resident less shared), or -1 if it cannot be read.  Async-signal-safe:
 * open, read and close, and digits parsed by hand.
 */
static long
private_pages(void)
{
	char		buf[128];
	long		field[3] = {0, 0, 0};
	int			fd = open("/proc/self/statm", O_RDONLY);
	ssize_t		n;
	int			f = 0;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	for (ssize_t i = 0; i < n && f < 3; i++)
	{
		if (buf[i] >= '0' && buf[i] <= '9')
			field[f] = field[f] * 10 + (buf[i] - '0');
		else if (buf[i] == ' ')
			f++;
	}
	/* size, resident, shared */
	return field[1] - field[2];
}

/*
 * The watch's timeout, in the signal handler: past the limit, the query is
 * cancelled as a cancel request would (the reader then reports 53200).
 */
static void
source_watch_handler(void)
{
	long		limit = source_watch_limit_pages;
	long		pages;

	/* (again every time past it: a source may catch a cancel) */
	if (limit <= 0)
		return;
	pages = private_pages();
	if (pages > limit)
	{
		source_memory_exceeded = true;
		InterruptPending = true;
		if (++source_over_ticks > SOURCE_WATCH_TERMINATE_TICKS)
			ProcDiePending = true;
		else
			QueryCancelPending = true;
		SetLatch(MyLatch);
	}
}

/*
 * Watch the process's memory while the job reads its source: what the
 * source's own query builds (a view that makes one row of millions of tokens
 * with array_agg, say) is in no context of ours, and no check of ours runs
 * until a row is done; it took a worker to 1.2 GB under a 32 MB cap.  The
 * process's private memory may grow by the job's max_job_memory from now
 * (what the corpus itself takes is within it too), and SOURCE_WATCH_SLACK;
 * past that the query is cancelled, looked at every SOURCE_WATCH_MS, and
 * gnb_source_memory_check turns the cancel into 53200.  Where /proc/self/statm cannot be read nothing is
 * watched.
 */
void
gnb_watch_source_memory(const GnbJobParams *params)
{
	long		pages = private_pages();
	long		page_size = sysconf(_SC_PAGESIZE);

	if (pages < 0 || page_size <= 0)
		return;
	if (source_watch_timeout == MAX_TIMEOUTS)
		source_watch_timeout = RegisterTimeout(USER_TIMEOUT, source_watch_handler);
	source_memory_exceeded = false;
	source_over_ticks = 0;
	source_watch_limit_pages = pages +
		(long) ((params->max_job_memory + SOURCE_WATCH_SLACK) / page_size);
	enable_timeout_every(source_watch_timeout,
						 TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SOURCE_WATCH_MS),
						 SOURCE_WATCH_MS);
}

/* Stop watching (every path out of the reading, an error's included). */
void
gnb_unwatch_source_memory(void)
{
	source_watch_limit_pages = 0;
	if (source_watch_timeout != MAX_TIMEOUTS)
		disable_timeout(source_watch_timeout, false);
}

/*
 * After the reading, the watch off: if the watch cancelled the query, the
 * error is 53200, saying so.  In the reader's error path (in_error), in
 * place of the cancel, and of nothing else (a source's own error stays its
 * own); on its way out otherwise, for a source that caught the cancel and
 * went on, which must not train (nor leave the cancel pending for a later
 * step to take for the user's).
 */
void
gnb_source_memory_check(const GnbJobParams *params, bool in_error)
{
	if (!source_memory_exceeded)
		return;
	if (in_error)
	{
		/* (copied out of ErrorContext, where CopyErrorData may not run) */
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		ErrorData  *edata = CopyErrorData();
		int			sqlerrcode = edata->sqlerrcode;

		FreeErrorData(edata);
		MemoryContextSwitchTo(old);
		if (sqlerrcode != ERRCODE_QUERY_CANCELED)
			return;
	}
	source_memory_exceeded = false;
	QueryCancelPending = false;
	FlushErrorState();
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("gibbs_nb job " INT64_FORMAT ": reading %s took more than gibbs_nb.max_job_memory (%.0f MB) and %.0f MB",
					params->job_id, params->source_display,
					params->max_job_memory / (1024.0 * 1024.0),
					SOURCE_WATCH_SLACK / (1024.0 * 1024.0)),
			 errdetail("The source's own query built more than the job may hold before a row was done."),
			 errhint("Make the source's rows smaller, or have a superuser raise gibbs_nb.max_job_memory (it can be set per role).")));
}
