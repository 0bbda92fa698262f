/* gibbs_nb--0.1.0--0.2.0.sql: models in per-role namespaces, owners by name */

\echo Use "ALTER EXTENSION gibbs_nb UPDATE TO '0.2.0'" to load this file. \quit

-- There is no gibbs_nb--0.2.0.sql: CREATE EXTENSION runs the 0.1.0 script and
-- then this one, so a new database and an upgraded one are the same.

--
-- Who may see what: one function decides, for every table and view.
--
-- A role sees the rows of a model whose owner is itself or a role whose
-- privileges it has.  Owners are stored by name (a restore or another node
-- gives the same role another OID); a name that is no role (dropped, or not
-- restored) is nobody's.
CREATE FUNCTION gibbs_nb.has_privileges_of(owner text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_has_privileges_of'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- Is the job's worker running?  True while the worker holds the job's lock,
-- which it takes before it registers the job and keeps until it exits (a
-- crash or restart releases it).  It does not depend on who asks.
CREATE FUNCTION gibbs_nb.job_worker_alive(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_job_worker_alive'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

DROP FUNCTION gibbs_nb_wait(bigint, interval);
DROP FUNCTION gibbs_nb_cancel(bigint);
DROP FUNCTION gibbs_nb_retrain(text, boolean);
DROP VIEW gibbs_nb_jobs;
DROP POLICY owner_sees ON gibbs_nb.models;
DROP POLICY owner_sees ON gibbs_nb.theta;
DROP POLICY owner_sees ON gibbs_nb.pi;
DROP POLICY owner_sees ON gibbs_nb.trace;
DROP POLICY owner_sees ON gibbs_nb.packed;

--
-- Owners by name; a model is (owner, model_name): two roles may each have a
-- model "spam", and neither learns of the other's.
--
ALTER TABLE gibbs_nb.models
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    ALTER COLUMN labels_relid TYPE pg_catalog.regclass,
    ADD COLUMN trained_by text,
    ADD COLUMN source_relid pg_catalog.regclass,
    ADD COLUMN version_id bigint;
ALTER TABLE gibbs_nb.theta ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner);
ALTER TABLE gibbs_nb.pi ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner);
ALTER TABLE gibbs_nb.trace ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner);
ALTER TABLE gibbs_nb.packed
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    ADD COLUMN version_id bigint;
ALTER TABLE gibbs_nb.jobs ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner);
-- Jobs start at once or fail: nothing ever wrote 'queued'.
UPDATE gibbs_nb.jobs SET status = 'failed' WHERE status OPERATOR(pg_catalog.=) 'queued';
ALTER TABLE gibbs_nb.jobs DROP CONSTRAINT jobs_status_check,
    ADD CONSTRAINT jobs_status_check
        CHECK (status OPERATOR(pg_catalog.=) ANY ('{running,succeeded,failed,cancelled}'::pg_catalog.text[]));

-- A version's identity, never reused (not after a drop, not across models):
-- what the per-backend prediction cache is keyed on.
CREATE SEQUENCE gibbs_nb.version_id_seq;
REVOKE ALL ON SEQUENCE gibbs_nb.version_id_seq FROM PUBLIC;
UPDATE gibbs_nb.models SET version_id = pg_catalog.nextval('gibbs_nb.version_id_seq'::pg_catalog.regclass),
                           trained_by = owner,
                           -- 0.1.0 kept only the name: the best that can be done once
                           source_relid = pg_catalog.to_regclass(source);
UPDATE gibbs_nb.packed p SET version_id = m.version_id
  FROM gibbs_nb.models m
 WHERE m.model_name OPERATOR(pg_catalog.=) p.model_name
   AND m.version OPERATOR(pg_catalog.=) p.version;
ALTER TABLE gibbs_nb.models ALTER COLUMN version_id SET NOT NULL,
                            ALTER COLUMN trained_by SET NOT NULL,
                            ADD UNIQUE (version_id);
ALTER TABLE gibbs_nb.packed ALTER COLUMN version_id SET NOT NULL,
                            ADD UNIQUE (version_id);

ALTER TABLE gibbs_nb.models DROP CONSTRAINT models_pkey,
                            ADD PRIMARY KEY (model_name, owner, version);
-- Tokens and classes may be as long as text allows (a base64 blob in a mail
-- is an ordinary token): a btree entry is limited to about 2,700 bytes, so
-- they are in no btree.  theta and pi are found by version, and theta by
-- token through a hash index, which has no such limit.  Each version's rows
-- are unique by construction (one writer, one statement per class).
ALTER TABLE gibbs_nb.theta DROP CONSTRAINT theta_pkey;
CREATE INDEX theta_version_idx ON gibbs_nb.theta (model_name, owner, version);
CREATE INDEX theta_token_idx ON gibbs_nb.theta USING hash (token);
ALTER TABLE gibbs_nb.pi DROP CONSTRAINT pi_pkey;
CREATE INDEX pi_version_idx ON gibbs_nb.pi (model_name, owner, version);
ALTER TABLE gibbs_nb.packed DROP CONSTRAINT packed_pkey,
                            ADD PRIMARY KEY (model_name, owner, version);
DROP INDEX gibbs_nb.jobs_model_idx;
CREATE INDEX jobs_model_idx ON gibbs_nb.jobs (model_name, owner, status);

--
-- Row security on every table, jobs included.  The policy compares a column
-- of the row (the InitPlan runs once per query and short-cuts one's own
-- rows); policies are applied before any condition of the user's query, so a
-- leaky function in a WHERE clause never sees a row the policy hides.
--
ALTER TABLE gibbs_nb.jobs ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON gibbs_nb.jobs TO PUBLIC;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['models', 'theta', 'pi', 'trace', 'packed', 'jobs'] LOOP
        EXECUTE pg_catalog.format(
            'CREATE POLICY owner_sees ON gibbs_nb.%I FOR SELECT USING ('
            'owner OPERATOR(pg_catalog.=) (SELECT CURRENT_USER::pg_catalog.text) '
            'OR gibbs_nb.has_privileges_of(owner))', t);
    END LOOP;
END $$;

-- Jobs, as the roles that may see them see them: security_invoker, so the row
-- security of gibbs_nb.jobs applies to whoever queries the view.  A job whose
-- worker is gone (a restart, a crash) shows as failed before its row is put
-- right: a job never shows 'running' without a live worker.
CREATE VIEW gibbs_nb_jobs WITH (security_invoker = true, security_barrier = true) AS
    SELECT j.job_id, j.model_name, j.owner,
           CASE WHEN w.dead THEN 'failed' ELSE j.status END AS status,
           j.sweep, j.sweeps, j.chain, j.chains, j.source, j.started_at, j.finished_at,
           j.log_likelihood, j.version,
           CASE WHEN w.dead
                THEN 'the job''s worker exited without finishing it (server restart or crash)'
                ELSE j.message END AS message,
           CASE WHEN w.dead THEN '57P01' ELSE j.sqlstate END AS sqlstate,
           j.worker_pid, j.worker_user, j.created_at,
           j.read_seconds, j.sample_seconds, j.publish_seconds
      FROM gibbs_nb.jobs j
     CROSS JOIN LATERAL (
           SELECT j.status OPERATOR(pg_catalog.=) 'running'
                  AND NOT gibbs_nb.job_worker_alive(j.job_id)) w(dead);
GRANT SELECT ON gibbs_nb_jobs TO PUBLIC;

/*
 * gibbs_nb_wait: the job's row once it has ended (or, after `timeout`, as it
 * is then).  Polls the job's row, which its worker keeps up to date.
 */
CREATE FUNCTION gibbs_nb_wait(job_id bigint, timeout interval DEFAULT NULL)
RETURNS @extschema@.gibbs_nb_jobs
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r @extschema@.gibbs_nb_jobs;
    deadline timestamptz := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) timeout;
BEGIN
    IF job_id IS NULL THEN
        RAISE EXCEPTION 'job_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    LOOP
        SELECT * INTO r FROM @extschema@.gibbs_nb_jobs j
         WHERE j.job_id OPERATOR(pg_catalog.=) gibbs_nb_wait.job_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'gibbs_nb job % does not exist', job_id USING ERRCODE = '42704';
        END IF;
        IF r.status OPERATOR(pg_catalog.<>) 'running'
           OR (deadline IS NOT NULL AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline) THEN
            RETURN r;
        END IF;
        PERFORM pg_catalog.pg_sleep(0.1);
    END LOOP;
END $$;

/*
 * gibbs_nb_cancel: stop a running job that the caller may see (its worker
 * records it as cancelled, publishing nothing).  True if it was told to stop.
 */
CREATE FUNCTION gibbs_nb_cancel(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_cancel'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/*
 * gibbs_nb_retrain: train again with the parameters (seed included) of the
 * model's latest version, reading its source afresh: the relation the model
 * was trained on, followed by OID, never found again by name.  Meant for
 * pg_cron.
 */
CREATE FUNCTION gibbs_nb_retrain(model_name text, wait boolean DEFAULT true)
RETURNS SETOF gibbs_nb.train_result
AS 'MODULE_PATHNAME', 'gibbs_nb_retrain'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

--
-- Version numbers are never issued twice for a model, not after its newest
-- version is dropped, not after the whole model is: the last one issued is
-- kept here (and a version's identity, version_id, is never reused at all).
--
CREATE TABLE gibbs_nb.versions_issued (
    owner         text NOT NULL,
    model_name    text NOT NULL,
    last_version  int NOT NULL,
    PRIMARY KEY (model_name, owner)
);
REVOKE ALL ON gibbs_nb.versions_issued FROM PUBLIC;
INSERT INTO gibbs_nb.versions_issued (owner, model_name, last_version)
SELECT owner, model_name, pg_catalog.max(version) FROM gibbs_nb.models GROUP BY owner, model_name;

--
-- Backups carry models: pg_dump dumps the rows of these tables and the
-- sequences' positions (CREATE EXTENSION recreates the tables themselves).
-- The rows restore anywhere: owners are role names, and source_relid and
-- labels_relid are regclass, which pg_dump writes as qualified names and a
-- restore resolves to the new OIDs.
--
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.models', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.theta', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.pi', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.packed', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.trace', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.jobs', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.versions_issued', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.version_id_seq', '');

-- DROP EXTENSION gibbs_nb waits for no job: it is refused while jobs run.
CREATE FUNCTION gibbs_nb.guard_drop_extension()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'gibbs_nb_guard_drop_extension'
LANGUAGE C;
CREATE EVENT TRIGGER gibbs_nb_guard_drop ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION gibbs_nb.guard_drop_extension();

--
-- Nothing grows without bound.
--
-- Versions: each model keeps its newest keep_versions versions (older ones
-- are dropped when a new one is published); gibbs_nb_set_retention changes
-- it for a model, and a new version inherits its model's setting.
ALTER TABLE gibbs_nb.models ADD COLUMN keep_versions int NOT NULL DEFAULT 5
    CHECK (keep_versions >= 1);

/*
 * gibbs_nb_set_retention: how many of a model's newest versions to keep;
 * applied now and at every publish.  Returns the number of versions dropped.
 */
CREATE FUNCTION gibbs_nb_set_retention(model_name text, keep_versions int)
RETURNS int
AS 'MODULE_PATHNAME', 'gibbs_nb_set_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Jobs: finished jobs older than gibbs_nb.job_retention are pruned as new
-- jobs start, and a model's owner may delete its finished jobs' rows.
GRANT DELETE ON gibbs_nb.jobs TO PUBLIC;
CREATE POLICY owner_deletes_finished ON gibbs_nb.jobs FOR DELETE USING (
    (owner OPERATOR(pg_catalog.=) (SELECT CURRENT_USER::pg_catalog.text)
     OR gibbs_nb.has_privileges_of(owner))
    AND status OPERATOR(pg_catalog.<>) 'running');

--
-- The aggregate's support functions are no user's business: out of the
-- user's schema, into the extension's (the aggregate keeps them by OID).
--
ALTER FUNCTION gibbs_nb_class_counts_add(internal, text, text[]) SET SCHEMA gibbs_nb;
ALTER FUNCTION gibbs_nb_class_counts_add(internal, text, tsvector) SET SCHEMA gibbs_nb;
ALTER FUNCTION gibbs_nb_class_counts_combine(internal, internal) SET SCHEMA gibbs_nb;
ALTER FUNCTION gibbs_nb_class_counts_serialize(internal) SET SCHEMA gibbs_nb;
ALTER FUNCTION gibbs_nb_class_counts_deserialize(bytea, internal) SET SCHEMA gibbs_nb;
ALTER FUNCTION gibbs_nb_class_counts_final(internal) SET SCHEMA gibbs_nb;

--
-- What \dx+, \df+ and \d+ say.
--
COMMENT ON FUNCTION gibbs_nb_train(text, regclass, text, text, text, int, int, int, int, int, text,
                                   float8, float8, float8, bigint, text, boolean)
    IS 'train a version of one of your models in a background worker that runs as you';
COMMENT ON FUNCTION gibbs_nb_retrain(text, boolean)
    IS 'train a model again with its latest version''s parameters, on its source (by OID)';
COMMENT ON FUNCTION gibbs_nb_drop(text, int)
    IS 'drop a model (and the labels table training made for it), or one version';
COMMENT ON FUNCTION gibbs_nb_set_retention(text, int)
    IS 'keep only a model''s newest versions, now and at every publish';
COMMENT ON FUNCTION gibbs_nb_predict(text, text[]) IS 'the most probable class of a document (text[] tokens)';
COMMENT ON FUNCTION gibbs_nb_predict(text, tsvector) IS 'the most probable class of a document (tsvector)';
COMMENT ON FUNCTION gibbs_nb_predict_proba(text, text[]) IS 'P(class | document) per class, in gibbs_nb_classes order (text[] tokens)';
COMMENT ON FUNCTION gibbs_nb_predict_proba(text, tsvector) IS 'P(class | document) per class, in gibbs_nb_classes order (tsvector)';
COMMENT ON FUNCTION gibbs_nb_classes(text) IS 'the classes of a model, in the order of every per-class array';
COMMENT ON FUNCTION gibbs_nb_label_trigger() IS 'trigger: sets a label column to the predicted class (args: model, tokens column, label column)';
COMMENT ON AGGREGATE gibbs_nb_class_counts(text, text[]) IS 'class x word count matrix of the rows it sees (parallel)';
COMMENT ON AGGREGATE gibbs_nb_class_counts(text, tsvector) IS 'class x word count matrix of the rows it sees (parallel)';
COMMENT ON FUNCTION gibbs_nb_class_counts_rows(bytea) IS 'the cells of a gibbs_nb_class_counts value as (class, token, count) rows';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_add(internal, text, text[]) IS 'internal: transition function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_add(internal, text, tsvector) IS 'internal: transition function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_combine(internal, internal) IS 'internal: combine function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_serialize(internal) IS 'internal: serialise function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_deserialize(bytea, internal) IS 'internal: deserialise function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_final(internal) IS 'internal: final function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb_wait(bigint, interval) IS 'a job''s row once it has ended (or after timeout, as it is then)';
COMMENT ON FUNCTION gibbs_nb_cancel(bigint) IS 'tell a running job''s worker to stop; it publishes nothing';
COMMENT ON FUNCTION gibbs_nb_trace_plot(bigint, int) IS 'a job''s chains drawn for a terminal, one line per chain';
COMMENT ON VIEW gibbs_nb_jobs IS 'training jobs of the models you may see, a dead worker''s shown as failed';
COMMENT ON FUNCTION gibbs_nb.has_privileges_of(text) IS 'internal: row security of the gibbs_nb tables';
COMMENT ON FUNCTION gibbs_nb.job_worker_alive(bigint) IS 'internal: whether a job''s worker holds its lock';
COMMENT ON FUNCTION gibbs_nb.guard_drop_extension() IS 'internal: refuses DROP EXTENSION gibbs_nb while jobs run';
COMMENT ON TABLE gibbs_nb.models IS 'one row per model version (row security: your models)';
COMMENT ON TABLE gibbs_nb.theta IS 'theta-hat: P(word | class) per model version';
COMMENT ON TABLE gibbs_nb.pi IS 'pi-hat: P(class) per model version';
COMMENT ON TABLE gibbs_nb.packed IS 'a model version as prediction loads it';
COMMENT ON TABLE gibbs_nb.trace IS 'each chain''s log joint and share of labels changed, per sweep';
COMMENT ON TABLE gibbs_nb.versions_issued IS 'internal: the last version number issued per model, so none is issued twice';
COMMENT ON TABLE gibbs_nb.jobs IS 'training jobs, written by their workers (row security: your models'' jobs)';

--
-- Serving a chosen version: gibbs_nb_deploy pins one version of a model
-- (prediction uses it instead of the latest; retention never drops it) and
-- rolls back or forward, with the labels table following: each version keeps
-- its documents' labels (ids as text, probabilities documents x classes),
-- from which the labels table is rewritten.  Versions made before 0.2.0 have
-- none and cannot be deployed.
--
ALTER TABLE gibbs_nb.packed
    ADD COLUMN pinned boolean NOT NULL DEFAULT false,
    ADD COLUMN label_ids text[],
    ADD COLUMN label_probabilities float8[];
ALTER TABLE gibbs_nb.packed ALTER COLUMN label_ids SET STORAGE EXTERNAL,
                            ALTER COLUMN label_probabilities SET STORAGE EXTERNAL;

/*
 * gibbs_nb_deploy: serve this version of a model (NULL: the latest again),
 * and rewrite its labels table with that version's labels.  Returns the
 * version now serving.
 */
CREATE FUNCTION gibbs_nb_deploy(model_name text, version int)
RETURNS int
AS 'MODULE_PATHNAME', 'gibbs_nb_deploy'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb_deploy(text, int)
    IS 'serve one version of a model (roll back or forward), the labels table following';

-- ==== hardening: a hostile role's attacks (test/sql/hostile_hardening.sql) ====
--
-- No role but the extension's owner has a privilege on the extension's
-- tables beyond SELECT: LOCK TABLE in any mode stronger than ACCESS SHARE
-- needs only UPDATE, DELETE or TRUNCATE (row security does not apply), and a
-- role holding ACCESS EXCLUSIVE on gibbs_nb.jobs would stop every other
-- role's jobs from starting, progressing and publishing.  Finished jobs'
-- rows are deleted with gibbs_nb_delete_job instead.
REVOKE DELETE ON gibbs_nb.jobs FROM PUBLIC;
DROP POLICY owner_deletes_finished ON gibbs_nb.jobs;

/*
 * gibbs_nb_delete_job: delete the row of a job that has ended (and its
 * trace, unless a version keeps it), for a role that may see the job.
 */
CREATE FUNCTION gibbs_nb_delete_job(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_delete_job'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb_delete_job(bigint)
    IS 'delete the row of a job that has ended (and its trace unless a version keeps it)';
