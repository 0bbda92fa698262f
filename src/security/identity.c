/*
 * identity.c
 *	  A training job's worker, and each of its chain workers, becomes the
 *	  caller: the same user, role and security context as the backend that
 *	  called gibbs_nb_train, as a parallel worker does.
 */
#include "gibbs_nb.h"

#include "security/security.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"

/*
 * Connect as the caller's authenticated user and take on its session user,
 * role and security context, as ParallelWorkerMain does; pin search_path.
 * The job's worker and its chain workers alike.
 */
void
gnb_become_caller(const GnbJobParams *p, const char *application_name)
{
	char		ms[16];

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
	 * safe snapshot before it registered the job.
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_deferrable", "off", PGC_SUSET, PGC_S_OVERRIDE);
	/* an error is recorded as the job's outcome, not turned into an exit */
	SetConfigOption("exit_on_error", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("application_name", application_name, PGC_USERSET, PGC_S_SESSION);

	/*
	 * Every lock wait bounded as its caller's are (gibbs_nb.lock_timeout):
	 * the source's, the labels table's, the job rows' (another role can
	 * queue a lock on gibbs_nb.jobs that every insert waits behind).
	 */
	snprintf(ms, sizeof(ms), "%d", p->lock_timeout_ms);
	SetConfigOption("gibbs_nb.lock_timeout", ms, PGC_SUSET, PGC_S_SESSION);
	if (p->lock_timeout_ms > 0)
		SetConfigOption("lock_timeout", ms, PGC_SUSET, PGC_S_SESSION);
}
