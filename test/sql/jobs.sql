-- Jobs: gibbs_nb_wait, gibbs_nb_cancel, gibbs_nb_retrain, gibbs_nb_trace_plot,
-- and jobs whose worker is gone.
CREATE EXTENSION gibbs_nb;
CREATE TABLE docs (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO docs
SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills}'::text[] ELSE '{meeting,notes}' END,
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 30) i;

-- wait => false returns at once; gibbs_nb_wait returns the job's row once it ended
SELECT job_id AS started_job, status, version IS NULL AS no_version_yet
FROM gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 50, chains => 2, seed => 3,
                    wait => false) \gset
SELECT :'status' AS status_at_start, :'no_version_yet' AS no_version_yet;
SELECT model_name, status, version, sweep, sweeps, message
FROM gibbs_nb_wait(:started_job);
SELECT status FROM gibbs_nb_wait(:started_job, '1 second');
SELECT try($$SELECT gibbs_nb_wait(424242)$$);
SELECT try($$SELECT gibbs_nb_wait(NULL)$$);

-- the settings of a role or database for new sessions apply to a worker as
-- to a session, but a job's transactions are read committed and read write
-- whatever they say: a role that made its default serializable, deferrable
-- and read only held its worker waiting for a safe snapshot (and every
-- role's next training waiting for it); read only, the job failed
SELECT current_database() AS db \gset
ALTER DATABASE :"db" SET default_transaction_read_only = on;
ALTER DATABASE :"db" SET default_transaction_isolation = 'serializable';
ALTER DATABASE :"db" SET default_transaction_deferrable = on;
SELECT status FROM gibbs_nb_train('ro', 'docs', 'tokens', 'label', sweeps => 5, seed => 1);
ALTER DATABASE :"db" RESET default_transaction_read_only;
ALTER DATABASE :"db" RESET default_transaction_isolation;
ALTER DATABASE :"db" RESET default_transaction_deferrable;
SELECT gibbs_nb_drop('ro');
-- and an error in the job is its outcome whatever exit_on_error says (on, it
-- made the worker exit, and the job showed as lost in a crash)
ALTER DATABASE :"db" SET exit_on_error = on;
CREATE TABLE no_docs (id int PRIMARY KEY, tokens text[], label text);
SELECT try($$SELECT gibbs_nb_train('nd', 'no_docs', 'tokens', 'label', sweeps => 5, n_classes => 2)$$);
ALTER DATABASE :"db" RESET exit_on_error;
SELECT status, sqlstate FROM gibbs_nb_jobs WHERE model_name = 'nd';
DROP TABLE no_docs;

-- cancelling a job that has ended does nothing
SELECT gibbs_nb_cancel(:started_job);
SELECT try($$SELECT gibbs_nb_cancel(424242)$$);

-- the trace, drawn: one line per chain
SELECT line ~ '^chain [12]  [▁▂▃▄▅▆▇█]+  min -?[0-9.]+  max -?[0-9.]+$' AS well_formed, count(*)
FROM regexp_split_to_table(gibbs_nb_trace_plot(:started_job, 20), E'\n') line GROUP BY 1;
SELECT length(split_part(gibbs_nb_trace_plot(:started_job, 20), '  ', 2)) AS width;
SELECT try($$SELECT gibbs_nb_trace_plot(424242)$$);

-- retraining: the latest version's parameters, seed included, the source read afresh
SELECT version, status FROM gibbs_nb_retrain('m');
SELECT a.sweeps = b.sweeps AND a.chains = b.chains AND a.seed = b.seed
       AND a.labels_table = b.labels_table AS same_parameters
FROM gibbs_nb.models a JOIN gibbs_nb.models b USING (model_name)
WHERE a.version = 1 AND b.version = 2;
SELECT count(*) FILTER (WHERE a.probability <> b.probability) AS differing_theta
FROM gibbs_nb.theta a JOIN gibbs_nb.theta b USING (model_name, class, token)
WHERE a.version = 1 AND b.version = 2;
INSERT INTO docs VALUES (31, '{cheap,offer}', 'spam');
SELECT version, status FROM gibbs_nb_retrain('m');
SELECT n_documents FROM gibbs_nb.models WHERE model_name = 'm' ORDER BY version;
SELECT try($$SELECT gibbs_nb_retrain('nope')$$);
-- retraining follows the source by OID: a renamed source is still the source
ALTER TABLE docs RENAME TO docs_moved;
SELECT version, status FROM gibbs_nb_retrain('m');
ALTER TABLE docs_moved RENAME TO docs;
-- and a dropped one is gone, whatever now has its name
CREATE TABLE docs_copy AS SELECT * FROM docs;
DROP TABLE docs;
ALTER TABLE docs_copy RENAME TO docs;
SELECT try($$SELECT gibbs_nb_retrain('m')$$);

-- a job whose worker is gone (a crash, an immediate shutdown) shows as failed,
-- and the next training puts its row right
INSERT INTO gibbs_nb.jobs (job_id, model_name, owner, status, sweeps, chains, source,
                           worker_pid, started_at)
VALUES (900, 'm', 'postgres', 'running', 10, 1, 'public.docs', pg_backend_pid(), now());
SELECT status, message FROM gibbs_nb_jobs WHERE job_id = 900;
-- also under a parallel plan (the check takes a new snapshot, which no
-- parallel operation may: it is parallel unsafe, and the plan is serial)
SELECT debug_parallel_guc() AS debug_parallel \gset
SET :"debug_parallel" = on;
SELECT status, sqlstate FROM gibbs_nb_jobs WHERE job_id = 900;
RESET :"debug_parallel";
SELECT gibbs_nb_trace_plot(900) IS NULL AS no_trace_yet;
SELECT status FROM gibbs_nb.jobs WHERE job_id = 900;
SELECT version FROM gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 10, seed => 1);
SELECT status, sqlstate, message FROM gibbs_nb.jobs WHERE job_id = 900;

-- the bound on concurrent jobs is a superuser setting
SHOW gibbs_nb.max_jobs;
CREATE ROLE gnb_plain;
SET ROLE gnb_plain;
SELECT try($$SET gibbs_nb.max_jobs = 100$$);
-- and so is the memory of the prediction cache (as a user setting, any role
-- could let one backend's cache grow until it was killed for memory)
SELECT try($$SET gibbs_nb.model_cache_size = '2000GB'$$);
RESET ROLE;
DROP ROLE gnb_plain;

-- retention: a model keeps its newest 5 versions (the default), or as many
-- as gibbs_nb_set_retention says; the rest go at publish
SELECT count(*) FROM (SELECT gibbs_nb_retrain('m') FROM generate_series(1, 4)) r;
SELECT array_agg(version ORDER BY version) AS versions, min(keep_versions), max(keep_versions)
FROM gibbs_nb.models WHERE model_name = 'm';
SELECT gibbs_nb_set_retention('m', 2) AS dropped_now;
SELECT version FROM gibbs_nb_retrain('m');
SELECT array_agg(version ORDER BY version) AS versions FROM gibbs_nb.models WHERE model_name = 'm';
SELECT count(DISTINCT version) AS theta_versions FROM gibbs_nb.theta WHERE model_name = 'm';
SELECT count(DISTINCT version) AS packed_versions FROM gibbs_nb.packed WHERE model_name = 'm';
SELECT try($$SELECT gibbs_nb_set_retention('m', 0)$$);
SELECT try($$SELECT gibbs_nb_set_retention('nope', 3)$$);

-- a transaction that set the model's retention (so holds the model's
-- publish lock) and then waits for a training of it: the worker waits for
-- its caller, who waits for it, and nothing saw the cycle (it hung until
-- statement_timeout, here 60 s); now an error within about a second
BEGIN;
SET LOCAL statement_timeout = '60s';
SELECT gibbs_nb_set_retention('m', 3) AS dropped;
SELECT try($$SELECT version FROM gibbs_nb_retrain('m')$$) AS self_wait \gset
SELECT :'self_wait' AS try;
ROLLBACK;
-- the failed wait told its job to stop; a loaded server may still be
-- stopping it when the next training of the model starts: wait for it
SELECT status FROM gibbs_nb_wait(substring(:'self_wait' FROM 'job (\d+)')::bigint);
-- the same job started with wait => false, then waited for with
-- gibbs_nb_wait: it hung the same way; now the same error
BEGIN;
SET LOCAL statement_timeout = '60s';
SELECT gibbs_nb_set_retention('m', 3) AS dropped;
SELECT job_id AS self_job FROM gibbs_nb_retrain('m', wait => false) \gset
SELECT regexp_replace(try(format('SELECT status FROM gibbs_nb_wait(%s)', :self_job)), 'job \d+', 'job N') AS try;
SELECT gibbs_nb_cancel(:self_job) AS cancelled;
ROLLBACK;
SELECT status FROM gibbs_nb_wait(:self_job);

-- finished jobs' rows are pruned after gibbs_nb.job_retention (7 days)
SHOW gibbs_nb.job_retention;
UPDATE gibbs_nb.jobs SET finished_at = now() - interval '8 days' WHERE job_id = 900;
SELECT version FROM gibbs_nb_retrain('m');
SELECT count(*) AS pruned_job_left FROM gibbs_nb.jobs WHERE job_id = 900;
-- and a model's owner may delete its finished jobs' rows, not running ones,
-- not another role's
CREATE ROLE gnb_jobowner;
CREATE ROLE gnb_other;
GRANT SELECT ON docs TO gnb_jobowner;
GRANT CREATE ON SCHEMA public TO gnb_jobowner;
SET ROLE gnb_jobowner;
SELECT status FROM gibbs_nb_train('own', 'docs', 'tokens', 'label', sweeps => 10, seed => 1);
SELECT job_id AS own_running FROM gibbs_nb_train('own2', 'docs', 'tokens', 'label', sweeps => 5000000,
                                                 seed => 1, wait => false) \gset
RESET ROLE;
SELECT count(*) AS rows_before FROM gibbs_nb.jobs \gset
SET ROLE gnb_other;
SELECT try('DELETE FROM gibbs_nb.jobs');
SELECT try(format('SELECT gibbs_nb_delete_job(%s)', :own_running)) LIKE '42704:%' AS not_visible_to_another_role;
RESET ROLE;
SELECT count(*) = :rows_before AS nothing_deleted_by_another_role FROM gibbs_nb.jobs;
SET ROLE gnb_jobowner;
SELECT model_name, status, gibbs_nb_delete_job(job_id) AS deleted FROM gibbs_nb_jobs ORDER BY job_id;
SELECT model_name, status FROM gibbs_nb_jobs;
SELECT gibbs_nb_cancel(:own_running);
SELECT status FROM gibbs_nb_wait(:own_running);
SELECT gibbs_nb_drop('own');
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM gnb_jobowner;
DROP OWNED BY gnb_jobowner;
DROP ROLE gnb_jobowner, gnb_other;

-- DROP EXTENSION is refused while a job runs (0.1.0 killed the worker and
-- left its labels table behind); other extensions' drops are not affected
SELECT job_id AS long_job FROM gibbs_nb_train('long', 'docs', 'tokens', 'label',
                                              sweeps => 5000000, seed => 1, wait => false) \gset
-- (bounded polling until the job has sampled and reported)
DO $$
BEGIN
  FOR i IN 1 .. 300 LOOP
    EXIT WHEN (SELECT sweep > 0 FROM gibbs_nb_jobs WHERE model_name = 'long');
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT try($$DROP EXTENSION gibbs_nb$$);
SELECT try($$DROP EXTENSION IF EXISTS no_such_extension$$);
-- a job that ends while a query runs is never shown as failed in passing:
-- the view looks at the worker's lock first, then reads the row again (a
-- worker commits its outcome before it lets the lock go).  It read the row
-- from the query's snapshot and the lock after it, so that a job ending in
-- between showed as failed (57P01).  A repeatable read transaction holds
-- that snapshot for as long as it takes the job to end.
-- (read uncommitted is read committed: there it waits, here until its timeout)
BEGIN ISOLATION LEVEL READ UNCOMMITTED;
SELECT status FROM gibbs_nb_wait(:long_job, '0.2 s');
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT status FROM gibbs_nb_jobs WHERE job_id = :long_job;
SELECT gibbs_nb_cancel(:long_job);
-- (bounded polling until the worker has let its lock go)
DO $$
BEGIN
  FOR i IN 1 .. 300 LOOP
    EXIT WHEN NOT gibbs_nb.job_worker_alive((SELECT job_id FROM gibbs_nb_jobs WHERE model_name = 'long'));
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT gibbs_nb.job_worker_alive(:long_job) AS worker_alive;
SELECT status, sqlstate FROM gibbs_nb_jobs WHERE job_id = :long_job;
-- gibbs_nb_wait would wait for ever here: an error instead
SELECT try(format('SELECT gibbs_nb_wait(%s)', :long_job));
COMMIT;
SELECT status FROM gibbs_nb_wait(:long_job);
-- a second cancel while the worker records the first does not lose the
-- outcome: a trigger holds the worker in its write of 'cancelled' until the
-- test says go; meanwhile the job is cancelled again.  (The second SIGTERM
-- cancelled the write, and the job, its row left 'running', showed as lost
-- in a crash, 57P01.)
CREATE TABLE go_on (x int);
GRANT SELECT ON go_on TO PUBLIC;
CREATE FUNCTION hold_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 600 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM public.go_on);
    PERFORM pg_catalog.pg_sleep(0.1);
  END LOOP;
  RETURN NEW;
END $$;
CREATE TRIGGER hold_outcome BEFORE INSERT OR UPDATE ON gibbs_nb.jobs FOR EACH ROW
  WHEN (NEW.status = 'cancelled' AND NEW.model_name = 'twice') EXECUTE FUNCTION hold_outcome();
SELECT job_id AS twice_job FROM gibbs_nb_train('twice', 'docs', 'tokens', 'label',
                                               sweeps => 5000000, seed => 1, wait => false) \gset
SELECT gibbs_nb_cancel(:twice_job) AS first_cancel;
-- (bounded polling until the worker sleeps in the trigger)
DO $$
BEGIN
  FOR i IN 1 .. 300 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity
                      WHERE backend_type = 'gibbs_nb worker' AND wait_event = 'PgSleep');
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT gibbs_nb_cancel(:twice_job) AS second_cancel;
INSERT INTO go_on VALUES (1);
SELECT status, sqlstate FROM gibbs_nb_wait(:twice_job);
DROP TRIGGER hold_outcome ON gibbs_nb.jobs;
DROP FUNCTION hold_outcome();
DROP TABLE go_on;
-- the trace is written as a job samples: a cancelled job keeps what it wrote
-- (0.1.0 wrote it only at publish, and held it all in memory until then)
SELECT count(*) > 0 AS cancelled_job_has_trace FROM gibbs_nb.trace WHERE job_id = :long_job;
-- a long run keeps every k-th sweep: at most 10,000 rows per chain
SELECT job_id AS thin_job FROM gibbs_nb_train('thin', 'docs', 'tokens', 'label', sweeps => 30000,
                                              chains => 2, seed => 1) \gset
SELECT chain, count(*), min(sweep), max(sweep) FROM gibbs_nb.trace WHERE job_id = :thin_job
GROUP BY chain ORDER BY chain;
SELECT gibbs_nb_drop('thin');

SELECT gibbs_nb_drop('m');
DROP TABLE docs;
DROP EXTENSION gibbs_nb;
