/*
 * jobs.c
 *	  A job's row in gibbs_nb.jobs: written by its worker as it starts,
 *	  progresses and ends; read and deleted for gibbs_nb_wait and
 *	  gibbs_nb_delete_job.
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

/* ---------- a job's row, written by its worker ---------- */

/*
 * Run one statement on a job's row as the extension's owner, in a
 * transaction of its own unless one is open (the worker samples with none).
 */
static void
job_row_statement(const char *sql, int nargs, Oid *types, Datum *values, int expected)
{
	bool		own_xact = !IsTransactionState();
	MemoryContext caller_cxt = CurrentMemoryContext;

	if (own_xact)
	{
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
	SPI_connect();
	gnb_execute(sql, nargs, types, values, NULL, GNB_AS_INTERNAL, expected, 0);
	SPI_finish();
	if (own_xact)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		MemoryContextSwitchTo(caller_cxt);
	}
}

/* The job's row, status running, as its worker (pid) starts it. */
void
gnb_store_job_started(const GnbJobParams *p, int pid)
{
	Oid			types[8] = {INT8OID, TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[8];

	values[0] = Int64GetDatum(p->job_id);
	values[1] = CStringGetTextDatum(p->model_name);
	values[2] = CStringGetTextDatum(p->model_owner);
	values[3] = Int32GetDatum(p->sampler.sweeps);
	values[4] = Int32GetDatum(p->sampler.chains);
	values[5] = CStringGetTextDatum(p->source_display);
	values[6] = Int32GetDatum(pid);
	/* the role the worker acts as: what the job's reads are checked against */
	values[7] = CStringGetTextDatum(gnb_current_role_name());
	job_row_statement("INSERT INTO gibbs_nb.jobs (job_id, model_name, owner, status, sweeps, chains, "
					  "source, worker_pid, worker_user, started_at) "
					  "VALUES ($1, $2, $3, 'running', $4, $5, $6, $7, $8::pg_catalog.name, pg_catalog.now())",
					  8, types, values, SPI_OK_INSERT);
}

/*
 * The labels table a job created before it read (gnb_reserve_labels_table),
 * or InvalidOid once it is no longer the job's to drop: in the transaction
 * that created or dropped it, so that a worker lost after either finds the
 * row saying so.
 */
void
gnb_store_job_labels_reserved(int64 job_id, Oid relid)
{
	Oid			types[2] = {INT8OID, OIDOID};
	Datum		values[2] = {Int64GetDatum(job_id), ObjectIdGetDatum(relid)};
	char		nulls[2] = {' ', OidIsValid(relid) ? ' ' : 'n'};

	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	gnb_execute("UPDATE gibbs_nb.jobs SET labels_reserved = $2 "
				"WHERE job_id OPERATOR(pg_catalog.=) $1",
				2, types, values, nulls, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
	SPI_finish();
	PopActiveSnapshot();
}

/*
 * The labels tables reserved by jobs that ended without publishing and
 * still hold one that exists (their worker was lost, or could not drop it):
 * up to `max` of them, this model's first, then the oldest.  Their rows are
 * not locked: the caller that is waiting for this job may hold their locks
 * (its launch put the lost jobs' rows right).  Returns how many; *jobs,
 * *owners, *models and *relids get them, in the caller's memory context.
 * SPI connected.
 */
int
gnb_store_lost_reservations(const char *owner, const char *model_name, int max, int64 **jobs,
							char ***owners, char ***models, Oid **relids)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(max)};
	int			n;

	/* first the rows of ended jobs whose table is gone (those nobody holds) */
	gnb_execute("UPDATE gibbs_nb.jobs SET labels_reserved = NULL "
				"WHERE job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
				"SELECT l.job_id FROM gibbs_nb.jobs l WHERE l.labels_reserved IS NOT NULL "
				"AND l.status OPERATOR(pg_catalog.<>) 'running' "
				"AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c "
				"WHERE c.oid OPERATOR(pg_catalog.=) l.labels_reserved) "
				"FOR UPDATE SKIP LOCKED))",
				0, NULL, NULL, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
	gnb_execute("SELECT j.job_id, j.owner, j.model_name, j.labels_reserved FROM gibbs_nb.jobs j "
				"WHERE j.labels_reserved IS NOT NULL "
				"AND EXISTS (SELECT FROM pg_catalog.pg_class c "
				"WHERE c.oid OPERATOR(pg_catalog.=) j.labels_reserved) "
				"AND (j.status OPERATOR(pg_catalog.<>) 'running' "
				"OR gibbs_nb.job_worker_lost(j.job_id)) "
				"ORDER BY j.owner OPERATOR(pg_catalog.=) $1 "
				"AND j.model_name OPERATOR(pg_catalog.=) $2 DESC, j.job_id LIMIT $3",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	n = (int) SPI_processed;
	*jobs = MemoryContextAlloc(cxt, sizeof(int64) * Max(n, 1));
	*owners = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	*models = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	*relids = MemoryContextAlloc(cxt, sizeof(Oid) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		(*jobs)[i] = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
		(*owners)[i] = MemoryContextStrdup(cxt, SPI_getvalue(row, desc, 2));
		(*models)[i] = MemoryContextStrdup(cxt, SPI_getvalue(row, desc, 3));
		(*relids)[i] = DatumGetObjectId(SPI_getbinval(row, desc, 4, &isnull));
	}
	return n;
}

/*
 * A reservation settled by a later job's worker (gnb_release_lost_labels_tables):
 * its row cleared, unless another transaction holds it (the caller waiting
 * for this job, say): a later job clears it then.  SPI connected.
 */
void
gnb_store_lost_reservation_settled(int64 job_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	gnb_execute("UPDATE gibbs_nb.jobs SET labels_reserved = NULL "
				"WHERE job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
				"SELECT l.job_id FROM gibbs_nb.jobs l WHERE l.job_id OPERATOR(pg_catalog.=) $1 "
				"FOR UPDATE SKIP LOCKED))",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
}

/*
 * Whether relid is the labels table a lost job of this model left
 * (gnb_release_lost_labels_tables drops it before the model's next job
 * reserves its own).  SPI connected.
 */
bool
gnb_store_left_by_lost_job(const char *owner, const char *model_name, Oid relid)
{
	Oid			types[3] = {TEXTOID, TEXTOID, OIDOID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	ObjectIdGetDatum(relid)};

	gnb_execute("SELECT 1 FROM gibbs_nb.jobs j WHERE j.owner OPERATOR(pg_catalog.=) $1 "
				"AND j.model_name OPERATOR(pg_catalog.=) $2 "
				"AND j.labels_reserved OPERATOR(pg_catalog.=) $3 "
				"AND (j.status OPERATOR(pg_catalog.<>) 'running' "
				"OR gibbs_nb.job_worker_lost(j.job_id)) LIMIT 1",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed > 0;
}

/*
 * Where a running job is (chain, 0-based here; the row counts chains from 1,
 * as gibbs_nb.trace and pg_stat_activity do) and its log joint.
 */
void
gnb_store_job_progress(int64 job_id, int32 chain, int32 sweep, double log_joint)
{
	Oid			types[4] = {INT8OID, INT4OID, INT4OID, FLOAT8OID};
	Datum		values[4] = {Int64GetDatum(job_id), Int32GetDatum(chain + 1), Int32GetDatum(sweep),
	Float8GetDatum(log_joint)};

	job_row_statement("UPDATE gibbs_nb.jobs SET chain = $2, sweep = $3, log_likelihood = $4 "
					  "WHERE job_id OPERATOR(pg_catalog.=) $1", 4, types, values, SPI_OK_UPDATE);
}

/* A job that published `version`: in the publishing transaction. */
void
gnb_store_job_succeeded(const GnbJobParams *p, int32 version, double log_likelihood,
						double read_seconds, double sample_seconds, double publish_seconds)
{
	Oid			types[8] = {INT8OID, INT4OID, FLOAT8OID, INT4OID, INT4OID,
	FLOAT8OID, FLOAT8OID, FLOAT8OID};
	Datum		values[8];

	values[0] = Int64GetDatum(p->job_id);
	values[1] = Int32GetDatum(version);
	values[2] = Float8GetDatum(log_likelihood);
	values[3] = Int32GetDatum(p->sampler.sweeps);
	values[4] = Int32GetDatum(p->sampler.chains);	/* the last, from 1 */
	values[5] = Float8GetDatum(read_seconds);
	values[6] = Float8GetDatum(sample_seconds);
	values[7] = Float8GetDatum(publish_seconds);
	/* its labels table is the version's now (labels_reserved: no job's to drop) */
	job_row_statement("UPDATE gibbs_nb.jobs SET status = 'succeeded', version = $2, "
					  "labels_reserved = NULL, log_likelihood = $3, sweep = $4, chain = $5, read_seconds = $6, "
					  "sample_seconds = $7, publish_seconds = $8, "
					  "finished_at = pg_catalog.clock_timestamp() WHERE job_id OPERATOR(pg_catalog.=) $1",
					  8, types, values, SPI_OK_UPDATE);
}

/*
 * A job that failed or was cancelled: an upsert, since the row does not
 * exist if registering it failed; it touches only this worker's own row,
 * and only while it says 'running' (an error after the job's success was
 * committed leaves the row as it is: the version was published).
 */
void
gnb_store_job_ended(const GnbJobParams *p, const char *status, const char *message,
					const char *sqlstate, int pid)
{
	Oid			types[10] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	INT4OID, INT4OID, TEXTOID, INT4OID};
	Datum		values[10];

	values[0] = Int64GetDatum(p->job_id);
	values[1] = CStringGetTextDatum(status);
	values[2] = CStringGetTextDatum(message);
	values[3] = CStringGetTextDatum(sqlstate);
	values[4] = CStringGetTextDatum(p->model_name);
	values[5] = CStringGetTextDatum(p->model_owner);
	values[6] = Int32GetDatum(p->sampler.sweeps);
	values[7] = Int32GetDatum(p->sampler.chains);
	values[8] = CStringGetTextDatum(p->source_display);
	values[9] = Int32GetDatum(pid);
	job_row_statement("INSERT INTO gibbs_nb.jobs (job_id, status, message, sqlstate, "
					  "model_name, owner, sweeps, chains, source, worker_pid, finished_at) "
					  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, pg_catalog.clock_timestamp()) "
					  "ON CONFLICT (job_id) DO UPDATE SET status = excluded.status, "
					  "message = excluded.message, sqlstate = excluded.sqlstate, "
					  "finished_at = excluded.finished_at "
					  "WHERE gibbs_nb.jobs.worker_pid OPERATOR(pg_catalog.=) excluded.worker_pid "
					  "AND gibbs_nb.jobs.owner OPERATOR(pg_catalog.=) excluded.owner "
					  "AND gibbs_nb.jobs.model_name OPERATOR(pg_catalog.=) excluded.model_name "
					  "AND gibbs_nb.jobs.status OPERATOR(pg_catalog.=) 'running'",
					  10, types, values, SPI_OK_INSERT);
}

/*
 * A job as the caller may see it (row security): false if it may not;
 * else whether it runs and its worker's pid (0 if none).  SPI connected.
 */
bool
gnb_store_job_lookup(int64 job_id, bool *running, int *pid)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	bool		isnull;
	Datum		d;

	gnb_execute("SELECT status OPERATOR(pg_catalog.=) 'running', worker_pid "
				"FROM gibbs_nb.jobs WHERE job_id OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		return false;
	*running = DatumGetBool(gnb_result_value(1, &isnull));
	d = gnb_result_value(2, &isnull);
	*pid = isnull ? 0 : DatumGetInt32(d);
	return true;
}

/*
 * Delete the row of a job that has ended, and its trace unless a version
 * keeps it (the trace of a version's job goes with the version).  The caller
 * has checked that it may see the job.  True if the row was deleted.  SPI
 * connected.
 */
bool
gnb_store_delete_job(int64 job_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	gnb_execute("DELETE FROM gibbs_nb.jobs WHERE job_id OPERATOR(pg_catalog.=) $1 "
				"AND status OPERATOR(pg_catalog.<>) 'running'",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	if (SPI_processed == 0)
		return false;
	gnb_execute("DELETE FROM gibbs_nb.trace WHERE job_id OPERATOR(pg_catalog.=) $1 "
				"AND NOT EXISTS (SELECT 1 FROM gibbs_nb.models m "
				"WHERE m.job_id OPERATOR(pg_catalog.=) $1)",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	return true;
}

/* A new job's id. */
int64
gnb_store_next_job_id(void)
{
	return nextval_internal(get_relname_relid("job_id_seq", get_namespace_oid(GNB_SCHEMA, false)),
							false);
}

/*
 * Rows of a job's trace, as its worker samples: n of them, (chain, sweep,
 * log joint, share of labels changed) each.  In a transaction of its own
 * unless one is open, so that the trace is there while the job runs (and
 * stays when it fails).
 */
void
gnb_store_trace_rows(const GnbJobParams *params, int n, const int32 *chain, const int32 *sweep,
					 const double *log_joint, const double *changed,
					 const double *gamma_theta, const double *gamma_pi)
{
	Oid			types[10] = {INT8OID, INT4ARRAYOID, INT4ARRAYOID, FLOAT8ARRAYOID,
		FLOAT8ARRAYOID, TEXTOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID, BOOLOID, BOOLOID};
	Datum		values[10];

	if (n == 0)
		return;
	values[0] = Int64GetDatum(params->job_id);
	values[1] = PointerGetDatum(gnb_int4_array(chain, n));
	values[2] = PointerGetDatum(gnb_int4_array(sweep, n));
	values[3] = PointerGetDatum(gnb_float8_array(log_joint, n));
	values[4] = PointerGetDatum(gnb_float8_array(changed, n));
	values[5] = CStringGetTextDatum(params->model_owner);
	values[6] = PointerGetDatum(gnb_float8_array(gamma_theta, n));
	values[7] = PointerGetDatum(gnb_float8_array(gamma_pi, n));
	values[8] = BoolGetDatum(params->sampler.sample_gamma_theta != 0);
	values[9] = BoolGetDatum(params->sampler.sample_gamma_pi != 0);
	/* the gammas only where they were sampled */
	job_row_statement("INSERT INTO gibbs_nb.trace (job_id, chain, sweep, log_likelihood, changed, owner, "
					  "gamma_theta, gamma_pi) "
					  "SELECT $1, u.c, u.s, u.l, u.x, $6, CASE WHEN $9 THEN u.gt END, "
					  "CASE WHEN $10 THEN u.gp END "
					  "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), "
					  "pg_catalog.unnest($5), pg_catalog.unnest($7), pg_catalog.unnest($8)) "
					  "AS u(c, s, l, x, gt, gp)",
					  10, types, values, SPI_OK_INSERT);
}

/* A model's training refused: another job trains it now. */
void
gnb_refuse_running_model(const char *model_name, int64 running)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("model \"%s\" is being trained by job " INT64_FORMAT, model_name, running),
			 errhint("Wait for that job to end (gibbs_nb_wait), or cancel it (gibbs_nb_cancel).")));
}
