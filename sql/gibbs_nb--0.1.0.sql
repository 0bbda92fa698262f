/* gibbs_nb--0.1.0.sql: Naive Bayes trained by Gibbs sampling, in PostgreSQL */

\echo Use "CREATE EXTENSION gibbs_nb" to load this file. \quit

-- The extension's tables live in their own schema.  Nobody but the extension
-- (its worker and functions, running as the schema's owner) writes them;
-- every role reads the rows of the models it owns or is a member of.
CREATE SCHEMA gibbs_nb;
GRANT USAGE ON SCHEMA gibbs_nb TO PUBLIC;

CREATE SEQUENCE gibbs_nb.job_id_seq;

-- One row per training job.  Written by the job's worker in short
-- transactions (registered, progress, outcome); read through gibbs_nb_jobs.
CREATE TABLE gibbs_nb.jobs (
    job_id          bigint PRIMARY KEY,
    model_name      text NOT NULL,
    owner           oid NOT NULL,
    status          text NOT NULL
                    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    sweep           int NOT NULL DEFAULT 0,
    sweeps          int NOT NULL,
    chains          int NOT NULL,
    chain           int NOT NULL DEFAULT 0,
    source          text NOT NULL,
    worker_pid      int,
    worker_user     name,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    log_likelihood  float8,
    version         int,
    read_seconds    float8,
    sample_seconds  float8,
    publish_seconds float8,
    message         text,
    sqlstate        text
);
CREATE INDEX jobs_model_idx ON gibbs_nb.jobs (model_name, status);

-- One row per model version.
CREATE TABLE gibbs_nb.models (
    model_name        text NOT NULL,
    version           int NOT NULL,
    owner             oid NOT NULL,
    status            text NOT NULL DEFAULT 'ready',
    created_at        timestamptz NOT NULL DEFAULT pg_catalog.now(),
    job_id            bigint,
    classes           text[] NOT NULL,
    n_documents       int NOT NULL,
    n_labeled         int NOT NULL,
    n_skipped         int NOT NULL,
    n_tokens          bigint NOT NULL,
    vocabulary_size   int NOT NULL,
    source            text NOT NULL,
    tokens_column     text NOT NULL,
    label_column      text,
    id_column         text NOT NULL,
    n_classes         int,
    sweeps            int NOT NULL,
    burn_in           int NOT NULL,
    lag               int NOT NULL,
    chains            int NOT NULL,
    sampler           text NOT NULL,
    gamma_pi          float8 NOT NULL,
    gamma_theta       float8 NOT NULL,
    unlabeled_weight  float8 NOT NULL,
    seed              bigint NOT NULL,
    labels_table      text NOT NULL,
    labels_relid      oid NOT NULL,
    log_likelihood    float8,
    r_hat             float8,
    seconds           float8,
    PRIMARY KEY (model_name, version)
);

-- theta-hat: V x K rows per version.
CREATE TABLE gibbs_nb.theta (
    model_name   text NOT NULL,
    version      int NOT NULL,
    class        text NOT NULL,
    token        text NOT NULL,
    probability  float8 NOT NULL,
    owner        oid NOT NULL,
    PRIMARY KEY (model_name, version, token, class)
);

-- pi-hat: K rows per version.
CREATE TABLE gibbs_nb.pi (
    model_name   text NOT NULL,
    version      int NOT NULL,
    class        text NOT NULL,
    probability  float8 NOT NULL,
    owner        oid NOT NULL,
    PRIMARY KEY (model_name, version, class)
);

-- The model as prediction loads it: one row per version, the vocabulary and
-- log theta-hat as arrays (log_theta[i * K + k + 1] for token i + 1 and class
-- k + 1), stored uncompressed so that loading is one fast read.
CREATE TABLE gibbs_nb.packed (
    model_name  text NOT NULL,
    version     int NOT NULL,
    owner       oid NOT NULL,
    classes     text[] NOT NULL,
    log_pi      float8[] NOT NULL,
    tokens      text[] NOT NULL,
    log_theta   float8[] NOT NULL,
    PRIMARY KEY (model_name, version)
);
ALTER TABLE gibbs_nb.packed ALTER COLUMN tokens SET STORAGE EXTERNAL,
                            ALTER COLUMN log_theta SET STORAGE EXTERNAL;

-- The chains' paths: log joint and share of labels changed, per sweep.
CREATE TABLE gibbs_nb.trace (
    job_id          bigint NOT NULL,
    chain           int NOT NULL,
    sweep           int NOT NULL,
    log_likelihood  float8 NOT NULL,
    changed         float8 NOT NULL,
    owner           oid NOT NULL,
    PRIMARY KEY (job_id, chain, sweep)
);

-- Row security: a role sees the rows of the roles whose privileges it has.
-- The policy compares a column of the row itself (no subquery per row); the
-- scalar subquery is an InitPlan, evaluated once per query, and short-cuts
-- the common case of one's own rows.
REVOKE ALL ON gibbs_nb.jobs, gibbs_nb.models, gibbs_nb.theta, gibbs_nb.pi, gibbs_nb.trace,
              gibbs_nb.packed FROM PUBLIC;
REVOKE ALL ON SEQUENCE gibbs_nb.job_id_seq FROM PUBLIC;
GRANT SELECT ON gibbs_nb.models, gibbs_nb.theta, gibbs_nb.pi, gibbs_nb.trace, gibbs_nb.packed
    TO PUBLIC;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['models', 'theta', 'pi', 'trace', 'packed'] LOOP
        EXECUTE pg_catalog.format('ALTER TABLE gibbs_nb.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format(
            'CREATE POLICY owner_sees ON gibbs_nb.%I FOR SELECT USING ('
            'owner OPERATOR(pg_catalog.=) (SELECT CURRENT_USER::pg_catalog.regrole::pg_catalog.oid) '
            'OR pg_catalog.pg_has_role(owner, ''USAGE''))', t);
    END LOOP;
END $$;

-- Jobs, as their owners see them.  A job whose worker is gone (the server
-- restarted, or the worker crashed) shows as failed even before its row is
-- put right: a job never shows 'running' without a live worker.  The worker
-- is recognised by its pid, its backend type and a start before the job's.
CREATE VIEW gibbs_nb_jobs AS
    SELECT j.job_id, j.model_name, j.owner::pg_catalog.regrole AS owner,
           CASE WHEN j.status IN ('queued', 'running') AND NOT w.alive THEN 'failed'
                ELSE j.status END AS status,
           j.sweep, j.sweeps, j.chain, j.chains, j.source, j.started_at, j.finished_at,
           j.log_likelihood, j.version,
           CASE WHEN j.status IN ('queued', 'running') AND NOT w.alive
                THEN 'the job''s worker exited without finishing it (server restart or crash)'
                ELSE j.message END AS message,
           j.sqlstate, j.worker_pid, j.worker_user, j.created_at,
           j.read_seconds, j.sample_seconds, j.publish_seconds
      FROM gibbs_nb.jobs j
     CROSS JOIN LATERAL (
           SELECT j.worker_pid IS NOT NULL AND EXISTS (
                      SELECT 1 FROM pg_catalog.pg_stat_get_activity(j.worker_pid) a
                       WHERE a.backend_type OPERATOR(pg_catalog.=) 'gibbs_nb worker'
                         AND a.backend_start OPERATOR(pg_catalog.<=) j.started_at)) w(alive)
     WHERE pg_catalog.pg_has_role(j.owner, 'USAGE');
GRANT SELECT ON gibbs_nb_jobs TO PUBLIC;

/*
 * gibbs_nb_train: train a model version in a background worker that runs as
 * the caller.  Returns when the job has ended (wait => true) or at once.
 */
CREATE FUNCTION gibbs_nb_train(
    model_name        text,
    source            regclass,
    tokens_column     text,
    label_column      text DEFAULT NULL,
    id_column         text DEFAULT 'id',
    n_classes         int DEFAULT NULL,
    sweeps            int DEFAULT 1000,
    burn_in           int DEFAULT NULL,
    lag               int DEFAULT 1,
    chains            int DEFAULT 1,
    sampler           text DEFAULT 'paper',
    gamma_pi          float8 DEFAULT 1.0,
    gamma_theta       float8 DEFAULT 1.0,
    unlabeled_weight  float8 DEFAULT 1.0,
    seed              bigint DEFAULT NULL,
    labels_table      text DEFAULT NULL,
    wait              boolean DEFAULT true)
RETURNS TABLE (
    job_id          bigint,
    model_name      text,
    version         int,
    status          text,
    sweeps_done     int,
    seconds         float8,
    log_likelihood  float8)
AS 'MODULE_PATHNAME', 'gibbs_nb_train'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/*
 * gibbs_nb_drop: drop one version of a model, or the whole model (its
 * versions and the labels table training created for it).
 */
CREATE FUNCTION gibbs_nb_drop(model_name text, version int DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'gibbs_nb_drop'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/*
 * Labelling new documents with a model's latest version.  STABLE, not
 * IMMUTABLE: the model behind a name changes when a new version is published.
 * COST 1000: scoring a document is hundreds of hash lookups, and saying so
 * lets the planner run predictions over large tables in parallel workers.
 */
CREATE FUNCTION gibbs_nb_predict(model_name text, tokens text[])
RETURNS text
AS 'MODULE_PATHNAME', 'gibbs_nb_predict_text_array'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb_predict(model_name text, tokens tsvector)
RETURNS text
AS 'MODULE_PATHNAME', 'gibbs_nb_predict_tsvector'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb_predict_proba(model_name text, tokens text[])
RETURNS float8[]
AS 'MODULE_PATHNAME', 'gibbs_nb_predict_proba_text_array'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb_predict_proba(model_name text, tokens tsvector)
RETURNS float8[]
AS 'MODULE_PATHNAME', 'gibbs_nb_predict_proba_tsvector'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb_classes(model_name text)
RETURNS text[]
AS 'MODULE_PATHNAME', 'gibbs_nb_classes'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- Fills a label column as rows arrive:
--   CREATE TRIGGER ... BEFORE INSERT OR UPDATE OF tokens ON t FOR EACH ROW
--   EXECUTE FUNCTION gibbs_nb_label_trigger('model', 'tokens', 'label');
CREATE FUNCTION gibbs_nb_label_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'gibbs_nb_label_trigger'
LANGUAGE C;

/*
 * gibbs_nb_class_counts(label, tokens): the class x word count matrix of the
 * rows it sees (rows with a NULL label or NULL tokens skipped), as a compact
 * bytea; gibbs_nb_class_counts_rows turns it into rows.  A parallel
 * aggregate: partial states are counted in parallel workers and combined.
 * The transition functions say what a row costs (COST 1000, as the predict
 * functions): counting a document's tokens, not one cheap operator.
 */
CREATE FUNCTION gibbs_nb_class_counts_add(internal, text, text[])
RETURNS internal
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_add_text_array'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb_class_counts_add(internal, text, tsvector)
RETURNS internal
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_add_tsvector'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb_class_counts_combine(internal, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION gibbs_nb_class_counts_serialize(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_serialize'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gibbs_nb_class_counts_deserialize(bytea, internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_deserialize'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gibbs_nb_class_counts_final(internal)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_final'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE gibbs_nb_class_counts(label text, tokens text[]) (
    SFUNC = gibbs_nb_class_counts_add,
    STYPE = internal,
    FINALFUNC = gibbs_nb_class_counts_final,
    COMBINEFUNC = gibbs_nb_class_counts_combine,
    SERIALFUNC = gibbs_nb_class_counts_serialize,
    DESERIALFUNC = gibbs_nb_class_counts_deserialize,
    PARALLEL = SAFE);

CREATE AGGREGATE gibbs_nb_class_counts(label text, tokens tsvector) (
    SFUNC = gibbs_nb_class_counts_add,
    STYPE = internal,
    FINALFUNC = gibbs_nb_class_counts_final,
    COMBINEFUNC = gibbs_nb_class_counts_combine,
    SERIALFUNC = gibbs_nb_class_counts_serialize,
    DESERIALFUNC = gibbs_nb_class_counts_deserialize,
    PARALLEL = SAFE);

CREATE FUNCTION gibbs_nb_class_counts_rows(counts bytea)
RETURNS TABLE (class text, token text, count bigint)
AS 'MODULE_PATHNAME', 'gibbs_nb_class_counts_rows'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

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
    deadline timestamptz := clock_timestamp() + timeout;
BEGIN
    IF job_id IS NULL THEN
        RAISE EXCEPTION 'job_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    LOOP
        SELECT * INTO r FROM @extschema@.gibbs_nb_jobs j WHERE j.job_id = gibbs_nb_wait.job_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'gibbs_nb job % does not exist', job_id USING ERRCODE = '42704';
        END IF;
        IF r.status NOT IN ('queued', 'running')
           OR (deadline IS NOT NULL AND clock_timestamp() >= deadline) THEN
            RETURN r;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;

/*
 * gibbs_nb_cancel: stop a running job (its worker records it as cancelled,
 * publishing nothing).  True if the job was running and was told to stop.
 */
CREATE FUNCTION gibbs_nb_cancel(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r @extschema@.gibbs_nb_jobs;
BEGIN
    SELECT * INTO r FROM @extschema@.gibbs_nb_jobs j WHERE j.job_id = gibbs_nb_cancel.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'gibbs_nb job % does not exist', job_id USING ERRCODE = '42704';
    END IF;
    IF r.status NOT IN ('queued', 'running') THEN
        RETURN false;
    END IF;
    -- the view said the worker is alive: its pid is the job's worker
    RETURN pg_terminate_backend(r.worker_pid);
END $$;

/*
 * gibbs_nb_retrain: train again with the parameters (seed included) of the
 * model's latest version, reading the source afresh.  Meant for pg_cron.
 */
CREATE TYPE gibbs_nb.train_result AS (
    job_id bigint, model_name text, version int, status text,
    sweeps_done int, seconds float8, log_likelihood float8);

CREATE FUNCTION gibbs_nb_retrain(model_name text, wait boolean DEFAULT true)
RETURNS SETOF gibbs_nb.train_result
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m gibbs_nb.models;
BEGIN
    SELECT * INTO m FROM gibbs_nb.models x
     WHERE x.model_name = gibbs_nb_retrain.model_name ORDER BY x.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'model "%" does not exist', gibbs_nb_retrain.model_name
            USING ERRCODE = '42704';
    END IF;
    RETURN QUERY SELECT * FROM @extschema@.gibbs_nb_train(
        m.model_name, m.source::regclass, m.tokens_column, m.label_column, m.id_column,
        m.n_classes, m.sweeps, m.burn_in, m.lag, m.chains, m.sampler, m.gamma_pi,
        m.gamma_theta, m.unlabeled_weight, m.seed, m.labels_table, wait);
END $$;

/*
 * gibbs_nb_trace_plot: a job's chains drawn for a terminal, one line of
 * block characters per chain (its log joint over the sweeps, scaled between
 * the chain's min and max), to see convergence at a glance.
 */
CREATE FUNCTION gibbs_nb_trace_plot(job_id bigint, width int DEFAULT 60)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH t AS (
        SELECT chain, sweep, log_likelihood,
               ntile(greatest(least(gibbs_nb_trace_plot.width, 1000), 1))
                   OVER (PARTITION BY chain ORDER BY sweep) AS bucket
          FROM gibbs_nb.trace WHERE trace.job_id = gibbs_nb_trace_plot.job_id),
    b AS (
        SELECT chain, bucket, avg(log_likelihood) AS v FROM t GROUP BY chain, bucket),
    r AS (
        SELECT chain, bucket, v, min(v) OVER w AS lo, max(v) OVER w AS hi
          FROM b WINDOW w AS (PARTITION BY chain))
    SELECT string_agg(line, E'\n' ORDER BY chain) FROM (
        SELECT chain,
               format('chain %s  %s  min %s  max %s', chain,
                      string_agg(substr('▁▂▃▄▅▆▇█',
                                        1 + CASE WHEN hi > lo
                                                 THEN least(7, floor(8 * (v - lo) / (hi - lo)))::int
                                                 ELSE 0 END, 1), '' ORDER BY bucket),
                      round(min(lo)::numeric, 1), round(max(hi)::numeric, 1)) AS line
          FROM r GROUP BY chain) l
$$;
