/*
 * job_memory.c
 *	  A training job's memory budget (gibbs_nb.max_job_memory, as the caller
 *	  had it), kept by the job's worker, its chain workers and the corpus
 *	  reader.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"

/*
 * Error out (53200) if a job that holds in_use bytes would go past its
 * budget by allocating `more`.  Doubles: the sizes asked for can be far
 * beyond what Size arithmetic should be trusted with.
 */
void
gnb_check_job_memory(const GnbJobParams *params, double in_use, double more, const char *what)
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
			 errhint("Use fewer sweeps, chains or classes, or have a superuser raise gibbs_nb.max_job_memory (it can be set per role).")));
}
