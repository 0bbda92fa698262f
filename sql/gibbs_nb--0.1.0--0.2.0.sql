/* gibbs_nb--0.1.0--0.2.0.sql: models in per-role namespaces, owners by name */

\echo Use "ALTER EXTENSION gibbs_nb UPDATE TO '0.2.0'" to load this file. \quit

-- There is no gibbs_nb--0.2.0.sql: CREATE EXTENSION runs the 0.1.0 script and
-- then this one, so a new database and an upgraded one are the same.
--
-- By object: each object 0.2.0 adds is created once, in its final form, and
-- each 0.1.0 object that changes is changed in one place.  The steps that
-- move a 0.1.0 database's rows are with the table they concern: owners from
-- OIDs to names, new columns filled, theta's rows checked against packed.

--
-- Owners by name; a model is (owner, model_name): two roles may each have a
-- model "spam", and neither learns of the other's.  Owners are stored by
-- name (a restore or another node gives the same role another OID); a name
-- that is no role (dropped, or not restored) is nobody's.  Where a name was
-- registered (gibbs_nb.owners, at the end of this script) it means the role
-- registered for it, by OID.
--
-- What depends on 0.1.0's owner columns (type oid) goes first, and is made
-- again below once they are text: the policies (theta's goes with its
-- table), the jobs view, and gibbs_nb_wait, which returns the view's row.
DROP FUNCTION gibbs_nb_wait(bigint, interval);
DROP VIEW gibbs_nb_jobs;
DROP POLICY owner_sees ON gibbs_nb.models;
DROP POLICY owner_sees ON gibbs_nb.pi;
DROP POLICY owner_sees ON gibbs_nb.trace;
DROP POLICY owner_sees ON gibbs_nb.packed;

--
-- gibbs_nb.models: one row per model version.
--

/*
 * The source and the labels table are kept by OID (source_relid,
 * labels_relid: retraining follows a rename) and by name (source,
 * labels_table).  An OID means something only in the catalogs it was taken
 * from: `catalog` says which (gibbs_nb.catalog_identity: the cluster, the
 * database and this installation of the extension).  A restored row, or one
 * of a database recreated by pg_restore --clean, is from other catalogs and
 * is found by its name again, if the model's owner owns a relation of that
 * name (gibbs_nb.model_relation).  Plain oid and text, not regclass: pg_dump
 * wrote a regclass as the name it had when the COPY ran, not in the dump's
 * snapshot, so a relation renamed meanwhile, or left out of the dump, made
 * the restore of gibbs_nb.models fail, every role's models with it.
 */
CREATE FUNCTION gibbs_nb.catalog_identity()
RETURNS text
AS 'MODULE_PATHNAME', 'gibbs_nb_catalog_identity'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION gibbs_nb.model_relation(relid pg_catalog.oid, name text, catalog text, owner text)
RETURNS pg_catalog.oid
AS 'MODULE_PATHNAME', 'gibbs_nb_model_relation'
LANGUAGE C STABLE PARALLEL SAFE;

-- A version's identity, never reused (not after a drop, not across models):
-- what the per-backend prediction cache is keyed on.
CREATE SEQUENCE gibbs_nb.version_id_seq;
REVOKE ALL ON SEQUENCE gibbs_nb.version_id_seq FROM PUBLIC;

-- The owner by name, and the columns a 0.1.0 row is given values for ...
ALTER TABLE gibbs_nb.models
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    ADD COLUMN trained_by text,
    ADD COLUMN source_relid pg_catalog.oid,
    ADD COLUMN catalog text,
    ADD COLUMN version_id bigint;
UPDATE gibbs_nb.models SET version_id = pg_catalog.nextval('gibbs_nb.version_id_seq'::pg_catalog.regclass),
                           trained_by = owner,
                           -- 0.1.0 kept only the name: the best that can be done once
                           source_relid = pg_catalog.to_regclass(source)::pg_catalog.oid,
                           catalog = gibbs_nb.catalog_identity();
-- ... then its keys, and the columns with defaults, which 0.1.0's rows take
-- (in a statement that rewrites nothing, so that the defaults are kept once,
-- in the catalog, as for a column added to a table that holds rows).
ALTER TABLE gibbs_nb.models
    ALTER COLUMN version_id SET NOT NULL,
    ALTER COLUMN trained_by SET NOT NULL,
    ADD UNIQUE (version_id),
    DROP CONSTRAINT models_pkey,
    ADD PRIMARY KEY (model_name, owner, version),
    -- Nothing grows without bound: each model keeps its newest keep_versions
    -- versions (older ones are dropped when a new one is published);
    -- gibbs_nb_set_retention changes it for a model, and a new version
    -- inherits its model's setting.  (Finished jobs: see gibbs_nb.jobs.)
    ADD COLUMN keep_versions int NOT NULL DEFAULT 5
        CHECK (keep_versions >= 1),
    -- gibbs_nb_train(..., holdout => share): a seeded share of the labelled
    -- rows (chosen by a hash of the seed and the row's id as text, whatever
    -- the scan order) is left out of training; each version records the share
    -- and the held-out rows' metrics (gibbs_nb_evaluate's, as jsonb).  retrain
    -- keeps it.
    ADD COLUMN holdout float8 NOT NULL DEFAULT 0
        CHECK (holdout OPERATOR(pg_catalog.>=) 0 AND holdout OPERATOR(pg_catalog.<) 1),
    ADD COLUMN holdout_metrics jsonb,
    -- gamma_pi => NULL / gamma_theta => NULL in gibbs_nb_train samples that
    -- gamma every sweep (the model row then holds its posterior mean and says
    -- it was sampled; retrain samples it again); every version records the
    -- diagnostics of its log joint and the warnings its training raised.
    ADD COLUMN gamma_pi_sampled boolean NOT NULL DEFAULT false,
    ADD COLUMN gamma_theta_sampled boolean NOT NULL DEFAULT false,
    ADD COLUMN ess float8,
    ADD COLUMN split_r_hat float8,
    ADD COLUMN warnings text[] NOT NULL DEFAULT '{}',
    -- init => 'labels' (the default) starts the unlabelled labels from the
    -- labelled-only model; 0.1.0's versions started at random, and their rows
    -- say so.  Every version records how its model agrees with its labels,
    -- and how a model of the labels alone does, and with several chains how
    -- their labels agree (docs/model.md).
    ADD COLUMN init text NOT NULL DEFAULT 'random',
    ALTER COLUMN init SET DEFAULT 'labels',
    ADD COLUMN labels_agreement float8,
    ADD COLUMN labels_only_agreement float8,
    ADD COLUMN chain_agreement float8,
    ADD COLUMN unlabeled_weight_chosen boolean NOT NULL DEFAULT false,
    -- How a version's tokens were made, as far as training can tell: the
    -- tokens column's type, and the expression of a generated column (e.g.
    -- "tsvector = to_tsvector('english'::regconfig, body)").  NULL for older
    -- versions and imported ones that did not carry it.
    ADD COLUMN tokenizer text,
    -- gibbs_nb_train(..., tokenizer => 'to_tsvector(''english'', body)')
    -- records how the tokens were made when the catalogs cannot tell (a plain
    -- column, a view): tokenizer_stated keeps what was said (retrain says it
    -- again), and tokenizer shows it in place of the column's type.
    ADD COLUMN tokenizer_stated text;
COMMENT ON TABLE gibbs_nb.models IS 'one row per model version (row security: your models)';
COMMENT ON COLUMN gibbs_nb.models.gamma_pi_sampled
    IS 'gamma_pi was sampled (gamma_pi => NULL): gamma_pi is its posterior mean';
COMMENT ON COLUMN gibbs_nb.models.gamma_theta_sampled
    IS 'gamma_theta was sampled (gamma_theta => NULL): gamma_theta is its posterior mean';
COMMENT ON COLUMN gibbs_nb.models.ess
    IS 'effective sample size of the log joint over the kept sweeps, summed over chains (Geyer)';
COMMENT ON COLUMN gibbs_nb.models.split_r_hat
    IS 'split R-hat of the log joint over the kept sweeps of all chains (BDA3)';
COMMENT ON COLUMN gibbs_nb.models.warnings
    IS 'what the diagnostics found wrong with this training, with advice; empty if nothing';
COMMENT ON COLUMN gibbs_nb.models.init
    IS 'how the unlabelled labels started: labels (from the labelled-only model) or random';
COMMENT ON COLUMN gibbs_nb.models.labels_agreement
    IS 'share of labelled documents (up to 2,000), each left out, the version''s model puts in their class';
COMMENT ON COLUMN gibbs_nb.models.labels_only_agreement
    IS 'the same share for Naive Bayes trained on the labelled documents alone';
COMMENT ON COLUMN gibbs_nb.models.chain_agreement
    IS '1 - the largest mean distance between a chain''s label probabilities and the earlier chains''';
COMMENT ON COLUMN gibbs_nb.models.unlabeled_weight_chosen
    IS 'unlabeled_weight => NULL: unlabeled_weight was chosen, 1 if the unlabelled documents made the model agree with its labels clearly better, else 0 (the labels-only model)';
COMMENT ON COLUMN gibbs_nb.models.tokenizer_stated
    IS 'how the tokens were made, as gibbs_nb_train''s tokenizer argument said; NULL if not said';

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
COMMENT ON TABLE gibbs_nb.versions_issued IS 'internal: the last version number issued per model, so none is issued twice';
INSERT INTO gibbs_nb.versions_issued (owner, model_name, last_version)
SELECT owner, model_name, pg_catalog.max(version) FROM gibbs_nb.models GROUP BY owner, model_name;

--
-- gibbs_nb.packed: a model version as prediction loads it.
--
-- Serving a chosen version: gibbs_nb_deploy pins one version of a model
-- (prediction uses it instead of the latest; retention never drops it) and
-- rolls back or forward, with the labels table following: each version keeps
-- its documents' labels (ids as text, probabilities documents x classes),
-- from which the labels table is rewritten.  Versions made before 0.2.0 have
-- none and cannot be deployed.  word_counts: how often each word of a
-- version occurred in its training documents, in the order of tokens: what
-- gibbs_nb_top_words' min_count is about; NULL for versions published
-- before it was kept.  The arrays are stored uncompressed, as tokens and
-- log_theta are.
--
-- (version_id filled first, the columns with defaults added without a
-- rewrite, as for gibbs_nb.models)
ALTER TABLE gibbs_nb.packed
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    ADD COLUMN version_id bigint;
UPDATE gibbs_nb.packed p SET version_id = m.version_id
  FROM gibbs_nb.models m
 WHERE m.model_name OPERATOR(pg_catalog.=) p.model_name
   AND m.version OPERATOR(pg_catalog.=) p.version;
ALTER TABLE gibbs_nb.packed
    ALTER COLUMN version_id SET NOT NULL,
    ADD UNIQUE (version_id),
    DROP CONSTRAINT packed_pkey,
    ADD PRIMARY KEY (model_name, owner, version),
    ADD COLUMN pinned boolean NOT NULL DEFAULT false,
    ADD COLUMN word_counts bigint[],
    ALTER COLUMN word_counts SET STORAGE EXTERNAL;
COMMENT ON TABLE gibbs_nb.packed IS 'a model version as prediction loads it';

/*
 * gibbs_nb.document_labels: the label probabilities a version gave each of
 * its training documents (K of them, in the version's class order), by the
 * document's id as text, so that gibbs_nb_deploy can restore the version's
 * labels table and a warm start (gibbs_nb_retrain(..., warm => true)) can
 * begin from them.  A row a document, not arrays in the packed row: packed
 * is a reference table on Citus (every node would keep every version's
 * ids), one row is read or written whole (a version's labels were the
 * largest allocation of a job's publishing, a deploy and a warm start), and
 * pg_dump writes a row as one piece of text of at most 1 GB.  On Citus it is
 * distributed by id (gibbs_nb_citus_distribute).  Ids are written and read
 * with DateStyle ISO, IntervalStyle postgres, extra_float_digits 3 and
 * lc_monetary C, whatever the role's or session's settings, so that a date
 * or float id reads back as itself.  No btree on id: an id may be longer
 * than a btree entry can be.  Versions published before 0.2.0 keep none.
 */
CREATE TABLE gibbs_nb.document_labels (
    version_id    bigint NOT NULL,
    owner         text NOT NULL,
    id            text NOT NULL,
    probabilities float8[] NOT NULL
);
CREATE INDEX document_labels_version_idx ON gibbs_nb.document_labels (version_id);
REVOKE ALL ON gibbs_nb.document_labels FROM PUBLIC;
GRANT SELECT ON gibbs_nb.document_labels TO PUBLIC;
ALTER TABLE gibbs_nb.document_labels ENABLE ROW LEVEL SECURITY;
COMMENT ON TABLE gibbs_nb.document_labels
    IS 'the label probabilities a version gave each training document, by id (row security: your models)';

--
-- gibbs_nb.pi and gibbs_nb.trace.
--
-- Tokens and classes may be as long as text allows (a base64 blob in a mail
-- is an ordinary token): a btree entry is limited to about 2,700 bytes, so
-- they are in no btree.  pi is found by version.  Each version's rows are
-- unique by construction (one writer, one statement per class).
ALTER TABLE gibbs_nb.pi
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    DROP CONSTRAINT pi_pkey;
CREATE INDEX pi_version_idx ON gibbs_nb.pi (model_name, owner, version);
COMMENT ON TABLE gibbs_nb.pi IS 'pi-hat: P(class) per model version';

-- the sampled gammas' paths (gamma_pi => NULL, gamma_theta => NULL)
ALTER TABLE gibbs_nb.trace
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    ADD COLUMN gamma_pi float8,
    ADD COLUMN gamma_theta float8;
COMMENT ON TABLE gibbs_nb.trace IS 'each chain''s log joint and share of labels changed, per sweep';
COMMENT ON COLUMN gibbs_nb.trace.gamma_pi
    IS 'gamma_pi after this sweep, if it was sampled';
COMMENT ON COLUMN gibbs_nb.trace.gamma_theta
    IS 'gamma_theta after this sweep, if it was sampled';

--
-- gibbs_nb.theta, a view of the packed models.
--
-- theta-hat would be stored twice per version: V x K rows of a table (and
-- their indexes), and the packed row prediction loads (tokens text[],
-- log_theta float8[] word-major V x K, classes text[]).  Writing the rows
-- was most of publishing.  So gibbs_nb.theta is a view of gibbs_nb.packed,
-- with the same columns, names, types and order as 0.1.0's table: each
-- packed row the caller may see (security_invoker: packed's row security
-- applies to whoever queries the view) expanded into its (class, token,
-- probability) rows by gibbs_nb.theta_rows, probability = exp(log_theta).
-- A query on one model or version reads only its packed rows (the primary
-- key), then expands them.
--

/*
 * gibbs_nb.theta_rows: the rows of one packed theta-hat, word-major.  Any
 * role may call it with any arrays: it checks their shape (one dimension,
 * no NULLs, len(log_theta) = len(tokens) x len(classes)) first.
 */
CREATE FUNCTION gibbs_nb.theta_rows(classes text[], tokens text[], log_theta float8[])
RETURNS TABLE (class text, token text, probability float8)
AS 'MODULE_PATHNAME', 'gibbs_nb_theta_rows'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1000;
COMMENT ON FUNCTION gibbs_nb.theta_rows(text[], text[], float8[])
    IS 'internal: the (class, token, probability) rows of a packed theta-hat (tokens x classes, word-major, exp of log_theta)';

-- Nothing is lost: 0.1.0 wrote a version's theta rows and its packed row in
-- one transaction and deleted them together, so every version with theta
-- rows has its packed row, holding the same theta-hat.  A database where
-- that is not so (rows edited by hand) is not updated: which versions, and
-- what to do, are said.  (The table's owner column is still 0.1.0's OID;
-- packed's is the name by now.)
DO $$
DECLARE
    bad text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%s version %s (owner %s)', b.model_name, b.version, b.owner),
                                 ', ' ORDER BY b.model_name, b.owner, b.version)
      INTO bad
      FROM (SELECT DISTINCT t.model_name, pg_catalog.pg_get_userbyid(t.owner) AS owner, t.version
              FROM gibbs_nb.theta t
              LEFT JOIN (SELECT p.model_name, p.owner, p.version, r.class, r.token, r.probability
                           FROM gibbs_nb.packed p
                          CROSS JOIN LATERAL gibbs_nb.theta_rows(p.classes, p.tokens, p.log_theta) r) e
                ON e.model_name OPERATOR(pg_catalog.=) t.model_name
               AND e.owner OPERATOR(pg_catalog.=) pg_catalog.pg_get_userbyid(t.owner)
               AND e.version OPERATOR(pg_catalog.=) t.version
               AND e.class OPERATOR(pg_catalog.=) t.class
               AND e.token OPERATOR(pg_catalog.=) t.token
             WHERE e.probability IS NULL
                OR pg_catalog.abs(e.probability OPERATOR(pg_catalog.-) t.probability)
                   OPERATOR(pg_catalog.>) (1e-12 OPERATOR(pg_catalog.*) t.probability)) b;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'gibbs_nb.theta has rows that gibbs_nb.packed does not hold: %', bad
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'In 0.2.0 gibbs_nb.theta is a view of gibbs_nb.packed; its table is dropped by this update.',
                  HINT = 'Drop those versions with gibbs_nb_drop (or restore their gibbs_nb.packed rows), then update.';
    END IF;
END $$;

DROP TABLE gibbs_nb.theta;
CREATE VIEW gibbs_nb.theta WITH (security_invoker = true) AS
    SELECT p.model_name, p.version, r.class, r.token, r.probability, p.owner
      FROM gibbs_nb.packed p
     CROSS JOIN LATERAL gibbs_nb.theta_rows(p.classes, p.tokens, p.log_theta) r;
REVOKE ALL ON gibbs_nb.theta FROM PUBLIC;
GRANT SELECT ON gibbs_nb.theta TO PUBLIC;
COMMENT ON VIEW gibbs_nb.theta
    IS 'theta-hat: P(word | class) per model version, the rows of gibbs_nb.packed (row security: your models)';

--
-- gibbs_nb.jobs: one row per training job, written by its worker.
--
-- Jobs start at once or fail: nothing ever wrote 'queued'.
UPDATE gibbs_nb.jobs SET status = 'failed' WHERE status OPERATOR(pg_catalog.=) 'queued';
-- Chains count from 1 in gibbs_nb.jobs (as in gibbs_nb.trace, the progress
-- NOTICE and pg_stat_activity); 0 until a job's first sweep ends.  0.1.0's
-- rows counted from 0.
UPDATE gibbs_nb.jobs SET chain = chain OPERATOR(pg_catalog.+) 1
 WHERE sweep OPERATOR(pg_catalog.>) 0 OR status OPERATOR(pg_catalog.=) 'succeeded';
-- labels_reserved: the labels table a job created before it read (a model's
-- first training), until the job publishes into it or drops it; a job whose
-- worker was lost (a crash) leaves it, and the next job's worker drops it if
-- it is still the model's owner's, empty and no version's.
ALTER TABLE gibbs_nb.jobs
    ADD COLUMN labels_reserved oid,
    ALTER COLUMN owner TYPE text USING pg_catalog.pg_get_userbyid(owner),
    DROP CONSTRAINT jobs_status_check,
    ADD CONSTRAINT jobs_status_check
        CHECK (status OPERATOR(pg_catalog.=) ANY ('{running,succeeded,failed,cancelled}'::pg_catalog.text[])),
    ENABLE ROW LEVEL SECURITY;
DROP INDEX gibbs_nb.jobs_model_idx;
CREATE INDEX jobs_model_idx ON gibbs_nb.jobs (model_name, owner, status);
-- Every role reads the rows of the jobs it may see, and nothing more.  No
-- role but the extension's owner has a privilege on the extension's tables
-- beyond SELECT: LOCK TABLE in any mode stronger than ACCESS SHARE needs only
-- UPDATE, DELETE or TRUNCATE (row security does not apply), and a role
-- holding ACCESS EXCLUSIVE on gibbs_nb.jobs would stop every other role's
-- jobs from starting, progressing and publishing (test/sql/hostile_hardening.sql).
-- Finished jobs older than gibbs_nb.job_retention are pruned as new jobs
-- start; a role deletes its finished jobs' rows with gibbs_nb_delete_job.
GRANT SELECT ON gibbs_nb.jobs TO PUBLIC;
COMMENT ON TABLE gibbs_nb.jobs IS 'training jobs, written by their workers (row security: your models'' jobs)';

--
-- Row security on every table, jobs included: a role sees the rows of a
-- model whose owner is itself or a role whose privileges it has, and one
-- function decides that for every table and view.  The policies compare a
-- column of the row, with no subquery (Citus refuses a policy with one on
-- its tables): gibbs_nb.has_privileges_of(owner) alone decides (true for
-- one's own rows; it keeps its last answer per query, so a table's rows cost
-- a comparison each).  Policies are applied before any condition of the
-- user's query, so a leaky function in a WHERE clause never sees a row the
-- policy hides.
--
CREATE FUNCTION gibbs_nb.has_privileges_of(owner text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_has_privileges_of'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION gibbs_nb.has_privileges_of(text) IS 'internal: row security of the gibbs_nb tables';
CREATE POLICY owner_sees ON gibbs_nb.models FOR SELECT USING (gibbs_nb.has_privileges_of(owner));
CREATE POLICY owner_sees ON gibbs_nb.pi FOR SELECT USING (gibbs_nb.has_privileges_of(owner));
CREATE POLICY owner_sees ON gibbs_nb.trace FOR SELECT USING (gibbs_nb.has_privileges_of(owner));
CREATE POLICY owner_sees ON gibbs_nb.packed FOR SELECT USING (gibbs_nb.has_privileges_of(owner));
CREATE POLICY owner_sees ON gibbs_nb.document_labels FOR SELECT USING (gibbs_nb.has_privileges_of(owner));
CREATE POLICY owner_sees ON gibbs_nb.jobs FOR SELECT USING (gibbs_nb.has_privileges_of(owner));

--
-- Jobs, as the roles that may see them see them.
--

-- Is the job's worker running?  True while the worker holds the job's lock,
-- which it takes before it registers the job and keeps until it exits (a
-- crash or restart releases it).  It does not depend on who asks.
CREATE FUNCTION gibbs_nb.job_worker_alive(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_job_worker_alive'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION gibbs_nb.job_worker_alive(bigint) IS 'internal: whether a job''s worker holds its lock';

-- Does the job's row say running though its worker is gone?  The lock is
-- looked at first and the row read after it with the latest snapshot: a
-- worker commits its job's outcome before it lets go of the lock, so a job
-- that ends while a query runs is never taken for one whose worker died.
-- Parallel unsafe: no new snapshot may be taken in a parallel operation.
CREATE FUNCTION gibbs_nb.job_worker_lost(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_job_worker_lost'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb.job_worker_lost(bigint) IS 'internal: whether a job''s row says running with no worker left';

-- security_invoker, so the row security of gibbs_nb.jobs applies to whoever
-- queries the view.  A job whose worker is gone (a restart, a crash) shows
-- as failed before its row is put right.  As of the query's snapshot: in
-- repeatable read, a job that ended after the transaction's snapshot still
-- shows 'running'.
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
                  AND gibbs_nb.job_worker_lost(j.job_id)) w(dead);
GRANT SELECT ON gibbs_nb_jobs TO PUBLIC;
COMMENT ON VIEW gibbs_nb_jobs IS 'training jobs of the models you may see, a dead worker''s shown as failed';

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
    polls int := 0;
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
        -- a transaction that reads one snapshot would never see the job end
        IF pg_catalog.current_setting('transaction_isolation')
           OPERATOR(pg_catalog.=) ANY ('{repeatable read,serializable}'::pg_catalog.text[]) THEN
            RAISE EXCEPTION 'gibbs_nb_wait cannot wait for a running job in a % transaction',
                  pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
                  USING ERRCODE = '25000',
                        HINT = 'Wait in a READ COMMITTED transaction; gibbs_nb_jobs shows the job as this one sees it.';
        END IF;
        -- once a second: a worker that waits for a lock this transaction
        -- holds never ends, and no deadlock detector sees this wait
        polls := polls OPERATOR(pg_catalog.+) 1;
        IF polls OPERATOR(pg_catalog.%) 10 OPERATOR(pg_catalog.=) 1 AND r.worker_pid IS NOT NULL
           AND pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.=) ANY (pg_catalog.pg_blocking_pids(r.worker_pid)) THEN
            RAISE EXCEPTION 'gibbs_nb job % waits for a lock this transaction holds', job_id
                USING ERRCODE = '55P03',
                      DETAIL = 'This transaction changed the model or its labels table, or registered its owner''s name (a first gibbs_nb_import), before it waited for the job.',
                      HINT = 'Commit first, then wait.';
        END IF;
        PERFORM pg_catalog.pg_sleep(0.1);
    END LOOP;
END $$;
COMMENT ON FUNCTION gibbs_nb_wait(bigint, interval) IS 'a job''s row once it has ended (or after timeout, as it is then)';

/*
 * gibbs_nb_cancel: stop a running job that the caller may see (its worker
 * records it as cancelled, publishing nothing).  True if it was told to stop.
 * (0.1.0's was PL/pgSQL over the view.)
 */
DROP FUNCTION gibbs_nb_cancel(bigint);
CREATE FUNCTION gibbs_nb_cancel(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gibbs_nb_cancel'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb_cancel(bigint) IS 'tell a running job''s worker to stop; it publishes nothing';

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

/*
 * gibbs_nb_trace_plot: a job's chains drawn for a terminal, one line of
 * block characters per chain (its log joint over the sweeps, scaled between
 * the chain's min and max), to see convergence at a glance.  A job the
 * caller may not see (or that does not exist) is an error, 42704, as for
 * gibbs_nb_wait; NULL arguments are 22004.  A job with no trace yet gives
 * NULL.
 */
CREATE OR REPLACE FUNCTION gibbs_nb_trace_plot(job_id bigint, width int DEFAULT 60)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    plot text;
BEGIN
    IF job_id IS NULL OR width IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN job_id IS NULL THEN 'job_id' ELSE 'width' END
            USING ERRCODE = '22004';
    END IF;
    PERFORM FROM gibbs_nb.jobs j WHERE j.job_id OPERATOR(pg_catalog.=) gibbs_nb_trace_plot.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'gibbs_nb job % does not exist', job_id USING ERRCODE = '42704';
    END IF;
    WITH t AS (
        SELECT tr.chain, tr.sweep, tr.log_likelihood,
               pg_catalog.ntile(greatest(least(gibbs_nb_trace_plot.width, 1000), 1))
                   OVER (PARTITION BY tr.chain ORDER BY tr.sweep) AS bucket
          FROM gibbs_nb.trace tr WHERE tr.job_id OPERATOR(pg_catalog.=) gibbs_nb_trace_plot.job_id),
    b AS (
        SELECT t.chain, t.bucket, pg_catalog.avg(t.log_likelihood) AS v FROM t GROUP BY t.chain, t.bucket),
    r AS (
        SELECT b.chain, b.bucket, b.v, pg_catalog.min(b.v) OVER w AS lo, pg_catalog.max(b.v) OVER w AS hi
          FROM b WINDOW w AS (PARTITION BY b.chain))
    SELECT pg_catalog.string_agg(l.line, E'\n' ORDER BY l.chain) INTO plot FROM (
        SELECT r.chain,
               pg_catalog.format('chain %s  %s  min %s  max %s', r.chain,
                      pg_catalog.string_agg(pg_catalog.substr('▁▂▃▄▅▆▇█',
                                        1 OPERATOR(pg_catalog.+) CASE WHEN r.hi OPERATOR(pg_catalog.>) r.lo
                                                 THEN least(7, pg_catalog.floor(8 OPERATOR(pg_catalog.*) (r.v OPERATOR(pg_catalog.-) r.lo) OPERATOR(pg_catalog./) (r.hi OPERATOR(pg_catalog.-) r.lo)))::int
                                                 ELSE 0 END, 1), '' ORDER BY r.bucket),
                      pg_catalog.round(pg_catalog.min(r.lo)::numeric, 1), pg_catalog.round(pg_catalog.max(r.hi)::numeric, 1)) AS line
          FROM r GROUP BY r.chain) l;
    RETURN plot;
END $$;
COMMENT ON FUNCTION gibbs_nb_trace_plot(bigint, int) IS 'a job''s chains drawn for a terminal, one line per chain';

--
-- Training.
--

/*
 * gibbs_nb_train: train a model version in a background worker that runs as
 * the caller.  Returns when the job has ended (wait => true) or at once.
 * 0.2.0's arguments: holdout (the share of labelled rows left out, see
 * gibbs_nb.models.holdout), tokenizer (what gibbs_nb.models.tokenizer_stated
 * keeps), init (how the unlabelled labels start), and unlabeled_weight =>
 * NULL by default (chosen by the label check); gamma_pi or gamma_theta =>
 * NULL samples that gamma; sweep_workers (the blocked sampler's processes
 * per chain; NULL: gibbs_nb.sweep_workers).
 */
DROP FUNCTION gibbs_nb_train(text, regclass, text, text, text, int, int, int, int, int, text,
                             float8, float8, float8, bigint, text, boolean);
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
    unlabeled_weight  float8 DEFAULT NULL,
    seed              bigint DEFAULT NULL,
    labels_table      text DEFAULT NULL,
    wait              boolean DEFAULT true,
    holdout           float8 DEFAULT 0,
    tokenizer         text DEFAULT NULL,
    init              text DEFAULT 'labels',
    sweep_workers     int DEFAULT NULL)
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
COMMENT ON FUNCTION gibbs_nb_train(text, regclass, text, text, text, int, int, int, int, int, text,
                                   float8, float8, float8, bigint, text, boolean, float8, text, text, int)
    IS 'train a version of one of your models in a background worker that runs as you';

/*
 * gibbs_nb_retrain: train again with the parameters (seed included) of the
 * model's latest version, reading its source afresh: the relation the model
 * was trained on, followed by OID, never found again by name.  Meant for
 * pg_cron.  warm: start the chains from the serving version's labels (of the
 * documents still in the source) instead of the prior, so a nightly retrain
 * need not find its way from nothing again.  sweep_workers: as gibbs_nb_train's
 * (processes, not the model: not taken from the version).
 */
DROP FUNCTION gibbs_nb_retrain(text, boolean);
CREATE FUNCTION gibbs_nb_retrain(model_name text, wait boolean DEFAULT true, warm boolean DEFAULT false,
                                 sweep_workers int DEFAULT NULL)
RETURNS SETOF gibbs_nb.train_result
AS 'MODULE_PATHNAME', 'gibbs_nb_retrain'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb_retrain(text, boolean, boolean, int)
    IS 'train a model again with its latest version''s parameters, on its source (by OID); warm: from the serving version''s labels';

--
-- Versions: how many are kept, which one serves.
--

/*
 * gibbs_nb_set_retention: how many of a model's newest versions to keep;
 * applied now and at every publish.  Returns the number of versions dropped.
 */
CREATE FUNCTION gibbs_nb_set_retention(model_name text, keep_versions int)
RETURNS int
AS 'MODULE_PATHNAME', 'gibbs_nb_set_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb_set_retention(text, int)
    IS 'keep only a model''s newest versions, now and at every publish';

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

--
-- Understand, compare and move a model.
--

-- gibbs_nb_evaluate scores a labelled table with the serving version of a
-- model (the arithmetic and cache of gibbs_nb_predict_proba) and returns one
-- row: counts, accuracy, macro-F1, log loss, and per-class arrays in the
-- order of `classes` (the model's classes, then labels it does not know).
CREATE FUNCTION gibbs_nb_evaluate(
    INOUT model_name text,
    source         regclass,
    tokens_column  text,
    label_column   text,
    OUT version      int,
    OUT n_documents  bigint,
    OUT n_skipped    bigint,
    OUT n_unknown    bigint,
    OUT accuracy     float8,
    OUT macro_f1     float8,
    OUT log_loss     float8,
    OUT classes      text[],
    OUT "precision"  float8[],
    OUT recall       float8[],
    OUT f1           float8[],
    OUT support      bigint[],
    OUT confusion    bigint[])
RETURNS record
AS 'MODULE_PATHNAME', 'gibbs_nb_evaluate'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION gibbs_nb_evaluate(text, regclass, text, text)
    IS 'accuracy, per-class precision/recall/F1/support, macro-F1, log loss and confusion matrix of a model on a labelled table';

/*
 * gibbs_nb_explain: the terms of a document's score under the version
 * prediction uses: the prior's, the `top` words that move the label most,
 * the other known words together, and how many tokens the model does not
 * know.  log_odds: the term's part of log P(predicted) - log P(runner_up);
 * log_odds_vs: against each class, in gibbs_nb_classes order.
 */
CREATE FUNCTION gibbs_nb_explain(model_name text, tokens text[], top int DEFAULT 10)
RETURNS TABLE (kind text, token text, count bigint, log_odds float8, share float8,
               log_odds_vs float8[], predicted text, runner_up text)
AS 'MODULE_PATHNAME', 'gibbs_nb_explain_text_array'
LANGUAGE C STABLE PARALLEL SAFE ROWS 12;
CREATE FUNCTION gibbs_nb_explain(model_name text, tokens tsvector, top int DEFAULT 10)
RETURNS TABLE (kind text, token text, count bigint, log_odds float8, share float8,
               log_odds_vs float8[], predicted text, runner_up text)
AS 'MODULE_PATHNAME', 'gibbs_nb_explain_tsvector'
LANGUAGE C STABLE PARALLEL SAFE ROWS 12;
COMMENT ON FUNCTION gibbs_nb_explain(text, text[], int)
    IS 'why a document gets its label: the prior''s and each word''s part of the log-odds (text[] tokens)';
COMMENT ON FUNCTION gibbs_nb_explain(text, tsvector, int)
    IS 'why a document gets its label: the prior''s and each word''s part of the log-odds (tsvector)';

/*
 * gibbs_nb_top_words: the words that most set a class apart in the version
 * prediction uses: log theta-hat of the class minus log P(word | another
 * class), among words seen at least min_count times in training.
 */
CREATE FUNCTION gibbs_nb_top_words(model_name text, class text, n int DEFAULT 20,
                                   min_count bigint DEFAULT 5)
RETURNS TABLE (rank int, token text, log_ratio float8, theta float8, count bigint)
AS 'MODULE_PATHNAME', 'gibbs_nb_top_words'
LANGUAGE C STABLE PARALLEL SAFE ROWS 20;
COMMENT ON FUNCTION gibbs_nb_top_words(text, text, int, bigint)
    IS 'the words that most set a class apart (log ratio of theta-hat, a minimum count)';

/*
 * gibbs_nb_models: one row per model the role may see (row security of
 * gibbs_nb.models and gibbs_nb.packed, security_invoker): the version that
 * serves (deployed, else the latest) with its training parameters and
 * figures, how many versions are kept, and their size.  Columns that later
 * versions of gibbs_nb.models gain are added at the end of the select list.
 */
CREATE VIEW gibbs_nb_models WITH (security_invoker = true, security_barrier = true) AS
    SELECT m.model_name, m.owner, m.version AS serving_version, s.pinned AS deployed,
           k.versions, k.latest_version, m.classes, m.n_documents, m.n_labeled, m.n_skipped,
           m.n_tokens, m.vocabulary_size, m.sampler, m.sweeps, m.burn_in, m.lag, m.chains,
           m.gamma_pi, m.gamma_theta, m.unlabeled_weight, m.seed, m.log_likelihood, m.r_hat,
           m.created_at AS trained_at, m.seconds AS training_seconds, m.trained_by, m.job_id,
           gibbs_nb.model_relation(m.source_relid, m.source, m.catalog, m.owner)::pg_catalog.regclass
               AS source,
           gibbs_nb.model_relation(m.labels_relid, m.labels_table, m.catalog, m.owner)::pg_catalog.regclass
               AS labels_table,
           m.keep_versions, m.tokenizer,
           m.gamma_pi_sampled, m.gamma_theta_sampled, m.ess, m.split_r_hat, m.warnings,
           m.holdout, m.holdout_metrics,
           k.packed_bytes,
           pg_catalog.pg_total_relation_size(gibbs_nb.model_relation(m.labels_relid, m.labels_table,
                                                                     m.catalog, m.owner)::pg_catalog.regclass)
               AS labels_bytes,
           m.init, m.labels_agreement, m.labels_only_agreement, m.chain_agreement,
           m.unlabeled_weight_chosen
      FROM (SELECT DISTINCT ON (p.owner, p.model_name) p.owner, p.model_name, p.version, p.pinned
              FROM gibbs_nb.packed p
             ORDER BY p.owner, p.model_name, p.pinned DESC, p.version DESC) s
      JOIN gibbs_nb.models m
        ON m.owner OPERATOR(pg_catalog.=) s.owner
       AND m.model_name OPERATOR(pg_catalog.=) s.model_name
       AND m.version OPERATOR(pg_catalog.=) s.version
     CROSS JOIN LATERAL (
           SELECT pg_catalog.count(*) AS versions, pg_catalog.max(p.version) AS latest_version,
                  pg_catalog.sum(pg_catalog.pg_column_size(p.*))::bigint AS packed_bytes
             FROM gibbs_nb.packed p
            WHERE p.owner OPERATOR(pg_catalog.=) m.owner
              AND p.model_name OPERATOR(pg_catalog.=) m.model_name) k;
GRANT SELECT ON gibbs_nb_models TO PUBLIC;
COMMENT ON VIEW gibbs_nb_models IS 'the models you may see: the serving version, its parameters, figures and size';

/*
 * gibbs_nb_export, gibbs_nb_import: a model version as one self-describing
 * bytea (magic "GNBMODEL", a format number, the parameters, the classes,
 * log pi-hat, the vocabulary, log theta-hat bit for bit, the word counts),
 * and a new version of the caller's model made of one, predicting exactly
 * as the exported version did.  A malformed value is 22P03.
 */
CREATE FUNCTION gibbs_nb_export(model_name text)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_export'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION gibbs_nb_import(model_name text, value bytea)
RETURNS int
AS 'MODULE_PATHNAME', 'gibbs_nb_import'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION gibbs_nb_export(text)
    IS 'the version a model serves as one self-describing value, for gibbs_nb_import';
COMMENT ON FUNCTION gibbs_nb_import(text, bytea)
    IS 'a new version of your model made of a gibbs_nb_export value (predicts identically)';

--
-- The count aggregate, whose state travels (Citus).
--
-- gibbs_nb_class_counts's state is a real type, gibbs_nb.class_counts_state,
-- with text and binary forms, not `internal` (which only PostgreSQL's own
-- parallel workers can pass around, through serialise functions): so Citus
-- pushes the aggregate down to its shards (worker_partial_agg) and combines
-- the partial states on the coordinator; PostgreSQL's parallel aggregation
-- uses the same combine function.  While the aggregate runs the state is an
-- expanded object changed in place; it is flattened only to leave the
-- process.  The aggregates keep 0.1.0's names and argument types, so the
-- training's internal SQL (which calls them by signature, with the schema)
-- is the same; the final value is the same bytea as 0.1.0's.  The support
-- functions are no user's business: they are in the extension's schema (the
-- aggregate keeps them by OID), not the user's.
--
-- 0.1.0's aggregates, and their support functions on `internal`:
DROP AGGREGATE gibbs_nb_class_counts(text, text[]);
DROP AGGREGATE gibbs_nb_class_counts(text, tsvector);
DROP FUNCTION gibbs_nb_class_counts_add(internal, text, text[]);
DROP FUNCTION gibbs_nb_class_counts_add(internal, text, tsvector);
DROP FUNCTION gibbs_nb_class_counts_combine(internal, internal);
DROP FUNCTION gibbs_nb_class_counts_serialize(internal);
DROP FUNCTION gibbs_nb_class_counts_deserialize(bytea, internal);
DROP FUNCTION gibbs_nb_class_counts_final(internal);

CREATE TYPE gibbs_nb.class_counts_state;

CREATE FUNCTION gibbs_nb.class_counts_state_in(cstring)
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_in'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gibbs_nb.class_counts_state_out(gibbs_nb.class_counts_state)
RETURNS cstring
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_out'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gibbs_nb.class_counts_state_recv(internal)
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_recv'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION gibbs_nb.class_counts_state_send(gibbs_nb.class_counts_state)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_send'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE gibbs_nb.class_counts_state (
    INPUT = gibbs_nb.class_counts_state_in,
    OUTPUT = gibbs_nb.class_counts_state_out,
    RECEIVE = gibbs_nb.class_counts_state_recv,
    SEND = gibbs_nb.class_counts_state_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = double,
    STORAGE = extended);
COMMENT ON TYPE gibbs_nb.class_counts_state
    IS 'internal: the partial state of gibbs_nb_class_counts (text form: base64 of its bytes)';
COMMENT ON FUNCTION gibbs_nb.class_counts_state_in(cstring) IS 'internal: text input of class_counts_state';
COMMENT ON FUNCTION gibbs_nb.class_counts_state_out(gibbs_nb.class_counts_state) IS 'internal: text output of class_counts_state';
COMMENT ON FUNCTION gibbs_nb.class_counts_state_recv(internal) IS 'internal: binary input of class_counts_state';
COMMENT ON FUNCTION gibbs_nb.class_counts_state_send(gibbs_nb.class_counts_state) IS 'internal: binary output of class_counts_state';

CREATE FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, text[])
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_add_text_array'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, tsvector)
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_add_tsvector'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;

-- (with the budget in kB: the transition of gibbs_nb.labelled_counts below)
CREATE FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, text[], bigint)
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_add_text_array'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, tsvector, bigint)
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_add_tsvector'
LANGUAGE C IMMUTABLE PARALLEL SAFE COST 1000;

CREATE FUNCTION gibbs_nb.gibbs_nb_class_counts_combine(gibbs_nb.class_counts_state,
                                                       gibbs_nb.class_counts_state)
RETURNS gibbs_nb.class_counts_state
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION gibbs_nb.gibbs_nb_class_counts_final(gibbs_nb.class_counts_state)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_counts_state_final'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, text[])
    IS 'internal: transition function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, tsvector)
    IS 'internal: transition function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, text[], bigint)
    IS 'internal: transition function of gibbs_nb.labelled_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_add(gibbs_nb.class_counts_state, text, tsvector, bigint)
    IS 'internal: transition function of gibbs_nb.labelled_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_combine(gibbs_nb.class_counts_state, gibbs_nb.class_counts_state)
    IS 'internal: combine function of gibbs_nb_class_counts';
COMMENT ON FUNCTION gibbs_nb.gibbs_nb_class_counts_final(gibbs_nb.class_counts_state)
    IS 'internal: final function of gibbs_nb_class_counts';

CREATE AGGREGATE gibbs_nb_class_counts(label text, tokens text[]) (
    SFUNC = gibbs_nb.gibbs_nb_class_counts_add,
    STYPE = gibbs_nb.class_counts_state,
    FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final,
    COMBINEFUNC = gibbs_nb.gibbs_nb_class_counts_combine,
    PARALLEL = SAFE);

CREATE AGGREGATE gibbs_nb_class_counts(label text, tokens tsvector) (
    SFUNC = gibbs_nb.gibbs_nb_class_counts_add,
    STYPE = gibbs_nb.class_counts_state,
    FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final,
    COMBINEFUNC = gibbs_nb.gibbs_nb_class_counts_combine,
    PARALLEL = SAFE);
COMMENT ON AGGREGATE gibbs_nb_class_counts(text, text[])
    IS 'class x word count matrix of the rows it sees (parallel; pushed down by Citus)';
COMMENT ON AGGREGATE gibbs_nb_class_counts(text, tsvector)
    IS 'class x word count matrix of the rows it sees (parallel; pushed down by Citus)';

-- The same aggregate under a name in the extension's own schema, where no
-- other role can create anything: what the training worker counts with.  The
-- public aggregate lives in the extension's schema, often public, where any
-- role with CREATE there could add an overload (say with a third argument
-- that has a default) and make every worker's call of it ambiguous, failing
-- every role's training on labelled rows.  Its third argument is the memory
-- its states may take in each process, in kB: a constant of the worker's
-- query, which its parallel workers run too, so that nothing the source
-- runs (RESET ALL) can lift it.
CREATE AGGREGATE gibbs_nb.labelled_counts(label text, tokens text[], budget_kb bigint) (
    SFUNC = gibbs_nb.gibbs_nb_class_counts_add,
    STYPE = gibbs_nb.class_counts_state,
    FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final,
    COMBINEFUNC = gibbs_nb.gibbs_nb_class_counts_combine,
    PARALLEL = SAFE);

CREATE AGGREGATE gibbs_nb.labelled_counts(label text, tokens tsvector, budget_kb bigint) (
    SFUNC = gibbs_nb.gibbs_nb_class_counts_add,
    STYPE = gibbs_nb.class_counts_state,
    FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final,
    COMBINEFUNC = gibbs_nb.gibbs_nb_class_counts_combine,
    PARALLEL = SAFE);
COMMENT ON AGGREGATE gibbs_nb.labelled_counts(text, text[], bigint)
    IS 'internal: gibbs_nb_class_counts as the training worker calls it, with its budget';
COMMENT ON AGGREGATE gibbs_nb.labelled_counts(text, tsvector, bigint)
    IS 'internal: gibbs_nb_class_counts as the training worker calls it, with its budget';

/*
 * gibbs_nb_citus_distribute(): on a Citus coordinator, make gibbs_nb.packed
 * (the table prediction reads) a Citus reference table, so that every node
 * holds the models and gibbs_nb_predict runs wherever Citus puts it, and
 * gibbs_nb.document_labels (a row a training document) a table distributed
 * by the document's id, so that no node holds every version's labels.  A
 * superuser runs it once, after CREATE EXTENSION gibbs_nb and adding the
 * workers (Citus copies reference tables to nodes added later).  Returns
 * the tables it distributed (none if they already were).
 */
CREATE FUNCTION gibbs_nb_citus_distribute()
RETURNS SETOF regclass
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'CREATE EXTENSION citus on the coordinator first (shared_preload_libraries = ''citus'' on every node).';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'gibbs_nb_citus_distribute runs on the Citus coordinator'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition d
                   WHERE d.logicalrelid OPERATOR(pg_catalog.=) 'gibbs_nb.packed'::pg_catalog.regclass) THEN
        PERFORM pg_catalog.create_reference_table('gibbs_nb.packed'::pg_catalog.regclass);
        RETURN NEXT 'gibbs_nb.packed'::pg_catalog.regclass;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition d
                   WHERE d.logicalrelid OPERATOR(pg_catalog.=) 'gibbs_nb.document_labels'::pg_catalog.regclass) THEN
        -- in no user table's colocation group (a group moves as one); no key,
        -- so a shard move's logical replication finds deleted rows by all columns
        ALTER TABLE gibbs_nb.document_labels REPLICA IDENTITY FULL;
        PERFORM pg_catalog.create_distributed_table('gibbs_nb.document_labels'::pg_catalog.regclass, 'id',
                                                    colocate_with => 'none');
        RETURN NEXT 'gibbs_nb.document_labels'::pg_catalog.regclass;
    END IF;
END $$;
REVOKE ALL ON FUNCTION gibbs_nb_citus_distribute() FROM PUBLIC;
COMMENT ON FUNCTION gibbs_nb_citus_distribute()
    IS 'on a Citus coordinator (superuser, once): the models become a reference table, so prediction runs on every node, and the documents'' labels a table distributed by id';

--
-- DROP EXTENSION gibbs_nb waits for no job: it is refused while jobs run.
--
CREATE FUNCTION gibbs_nb.guard_drop_extension()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'gibbs_nb_guard_drop_extension'
LANGUAGE C;
COMMENT ON FUNCTION gibbs_nb.guard_drop_extension() IS 'internal: refuses DROP EXTENSION gibbs_nb while jobs run';
CREATE EVENT TRIGGER gibbs_nb_guard_drop ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION gibbs_nb.guard_drop_extension();

--
-- Owners registered by OID in the cluster they were registered in.
--
-- A model's rows name their owner (a role name: rows restore anywhere, and
-- Citus copies them to other nodes).  Names alone let a role created under
-- a dropped role's name have the dropped role's models, and left a renamed
-- role's models nobody's.  Each owner name is registered here with the role
-- it stood for, by OID, and the cluster that OID belongs to
-- (gibbs_nb.cluster_identity(): role OIDs are the cluster's, the same in
-- every database and across a pg_restore --clean), when its first job runs
-- or model is imported; gibbs_nb.has_privileges_of and every owner check
-- take the registered role in that cluster, and the role of that name in
-- another (a dump restored elsewhere; the next training there claims the
-- name again).  A name registered to role 0 is nobody's anywhere.
--
CREATE FUNCTION gibbs_nb.cluster_identity()
RETURNS text
AS 'MODULE_PATHNAME', 'gibbs_nb_cluster_identity'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION gibbs_nb.cluster_identity() IS 'internal: which cluster the role OIDs of gibbs_nb.owners belong to';
CREATE TABLE gibbs_nb.owners (
    owner     text PRIMARY KEY,
    role_oid  pg_catalog.oid NOT NULL,
    cluster   text NOT NULL
);
REVOKE ALL ON gibbs_nb.owners FROM PUBLIC;
COMMENT ON TABLE gibbs_nb.owners
    IS 'internal: the role each owner name stands for, by OID, in the cluster it was registered in';
-- the names in use now; a name no role has now (a role dropped before this
-- update) is registered to no role: a role created under it later does not
-- get its models
INSERT INTO gibbs_nb.owners (owner, role_oid, cluster)
SELECT o.owner, COALESCE(r.oid, 0::pg_catalog.oid), gibbs_nb.cluster_identity()
  FROM (SELECT owner FROM gibbs_nb.models
        UNION SELECT owner FROM gibbs_nb.jobs
        UNION SELECT owner FROM gibbs_nb.versions_issued) o
  LEFT JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) o.owner;

--
-- A node of a blocked chain (src/worker/nodes.h): the job's worker calls it
-- in the backend that holds its part of the source (on Citus, a shard),
-- once a call of the chain; it reads its part once and keeps it in that
-- backend's memory.  Internal.  As the caller: it reads only what the
-- caller may read.
--
CREATE FUNCTION gibbs_nb.blocked_node(job bigint, relation pg_catalog.oid, part int, parts int,
                                      setup bytea, call bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_blocked_node'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION gibbs_nb.blocked_node_scores(job bigint, relation pg_catalog.oid, part int,
                                             parts int, model bytea)
RETURNS bigint
AS 'MODULE_PATHNAME', 'gibbs_nb_blocked_node_scores'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION gibbs_nb.blocked_node_fold(job bigint, relation pg_catalog.oid, part int,
                                           parts int, chain int, perm int[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_blocked_node_fold'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION gibbs_nb.blocked_node_combined(job bigint, relation pg_catalog.oid, part int,
                                               parts int, chains int)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gibbs_nb_blocked_node_combined'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- a document's label, by its id, from the node that holds it (no row if
-- none in this backend does): publishing writes the labels table with it
-- where the documents are
CREATE FUNCTION gibbs_nb.blocked_node_label(job bigint, id anyelement,
                                            OUT class_number int, OUT probability float8,
                                            OUT probabilities float8[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'gibbs_nb_blocked_node_label'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE ROWS 1;

--
-- What \df+ says of 0.1.0's functions that are otherwise the same.
--
COMMENT ON FUNCTION gibbs_nb_drop(text, int)
    IS 'drop a model (and the labels table training made for it), or one version';
COMMENT ON FUNCTION gibbs_nb_predict(text, text[]) IS 'the most probable class of a document (text[] tokens)';
COMMENT ON FUNCTION gibbs_nb_predict(text, tsvector) IS 'the most probable class of a document (tsvector)';
COMMENT ON FUNCTION gibbs_nb_predict_proba(text, text[]) IS 'P(class | document) per class, in gibbs_nb_classes order (text[] tokens)';
COMMENT ON FUNCTION gibbs_nb_predict_proba(text, tsvector) IS 'P(class | document) per class, in gibbs_nb_classes order (tsvector)';
COMMENT ON FUNCTION gibbs_nb_classes(text) IS 'the classes of a model, in the order of every per-class array';
COMMENT ON FUNCTION gibbs_nb_label_trigger() IS 'trigger: sets a label column to the predicted class (args: model, tokens column, label column)';
COMMENT ON FUNCTION gibbs_nb_class_counts_rows(bytea) IS 'the cells of a gibbs_nb_class_counts value as (class, token, count) rows';

--
-- Backups carry models: pg_dump dumps the rows of these tables and the
-- sequences' positions (CREATE EXTENSION recreates the tables themselves).
-- The rows restore anywhere: owners are role names, and a restored row finds
-- its source and labels table by name (see gibbs_nb.model_relation).
--
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.models', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.pi', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.packed', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.document_labels', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.trace', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.jobs', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.versions_issued', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.version_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gibbs_nb.owners', '');
