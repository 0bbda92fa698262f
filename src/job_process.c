/*
 * job_process.c
 *	  What the processes of a training job share: the job's worker and its
 *	  chain workers become the caller in the same way, and they and the
 *	  corpus reader keep within the job's memory budget.  Below worker.c,
 *	  chains.c and corpus.c, which call it.
 */
#include "gibbs_nb.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"

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

/*
 * Connect as the caller's authenticated user and take on its session user,
 * role and security context, as ParallelWorkerMain does; pin search_path.
 * The job's worker and its chain workers alike.
 */
void
gnb_become_caller(const GnbJobParams *p, const char *application_name)
{
	BackgroundWorkerInitializeConnectionByOid(p->database_id, p->authenticated_user_id, 0);
	if (p->session_user_id != p->authenticated_user_id)
		SetSessionAuthorization(p->session_user_id, p->session_user_is_superuser);
	SetCurrentRoleId(p->outer_user_id, p->outer_user_is_superuser);
	SetUserIdAndSecContext(p->current_user_id, p->sec_context);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The job's own transactions are short, read committed and read write,
	 * whatever the role's or database's settings for new sessions say (they
	 * apply to a worker as to a session): a role that made its default
	 * serializable, deferrable and read only kept its worker waiting for a
	 * safe snapshot before it registered the job, while its caller held the
	 * launch lock every role's next training waits for.
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_deferrable", "off", PGC_SUSET, PGC_S_OVERRIDE);
	/* an error is recorded as the job's outcome, not turned into an exit */
	SetConfigOption("exit_on_error", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("application_name", application_name, PGC_USERSET, PGC_S_SESSION);
}
