-- Bad input gets a clear error with a SQLSTATE before any worker starts,
-- and nothing is written.
CREATE EXTENSION gibbs_nb;

-- show an error's SQLSTATE and message
CREATE TABLE docs (id int PRIMARY KEY, tokens text[], label text, body text, meta json);
INSERT INTO docs VALUES (1, '{a,b}', 'x', 'a b', '{}'), (2, '{c,d}', 'y', 'c d', '{}'),
                        (3, '{a,c}', NULL, 'a c', '{}');

-- the source and its columns
SELECT try($$SELECT gibbs_nb_train('m', 'no_such_table', 'tokens', 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'no_such_column', 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'no_such_column')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', id_column => 'nope')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'body', 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', id_column => 'ctid')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', id_column => 'meta')$$);
CREATE SEQUENCE not_a_table;
SELECT try($$SELECT gibbs_nb_train('m', 'not_a_table', 'tokens', 'label')$$);

-- ids must be present and unique
CREATE TABLE dup (id int, tokens text[], label text);
INSERT INTO dup VALUES (1, '{a}', 'x'), (2, '{b}', 'y'), (2, '{c}', NULL);
SELECT try($$SELECT gibbs_nb_train('m', 'dup', 'tokens', 'label')$$);
CREATE TABLE nullid (id int, tokens text[], label text);
INSERT INTO nullid VALUES (1, '{a}', 'x'), (NULL, '{b}', 'y');
SELECT try($$SELECT gibbs_nb_train('m', 'nullid', 'tokens', 'label')$$);

-- classes
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', n_classes => 1)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', n_classes => 3)$$);
CREATE TABLE unlabelled (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO unlabelled VALUES (1, '{a}', NULL), (2, '{b}', NULL);
SELECT try($$SELECT gibbs_nb_train('m', 'unlabelled', 'tokens', 'label')$$);
CREATE TABLE oneclass (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO oneclass VALUES (1, '{a}', 'x'), (2, '{b}', 'x'), (3, '{b}', NULL);
SELECT try($$SELECT gibbs_nb_train('m', 'oneclass', 'tokens', 'label')$$);

-- a source with no documents is an error, not an empty model
CREATE TABLE nodocs (id int PRIMARY KEY, tokens text[]);
SELECT try($$SELECT gibbs_nb_train('m', 'nodocs', 'tokens', n_classes => 2)$$);
INSERT INTO nodocs VALUES (1, NULL), (2, NULL);
SELECT try($$SELECT gibbs_nb_train('m', 'nodocs', 'tokens', n_classes => 2)$$);
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'm';

-- a memory cap: what a job needs is checked by the worker once it has read
-- the corpus, before it allocates (0.1.0 let the OOM killer end a job of 64
-- chains of 10,000,000 sweeps; the trace is now written as the job samples,
-- never held as chains x sweeps arrays)
-- (the sizes depend on the allocator: masked)
SET gibbs_nb.max_job_memory = '1MB';
SELECT regexp_replace(try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', n_classes => 1000, sweeps => 10)$$),
                      '\d+ MB', 'N MB', 'g') AS refused;
RESET gibbs_nb.max_job_memory;
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'm';

-- the sampler's numbers
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 0)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => -5)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 10, burn_in => 10)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', burn_in => -1)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', lag => 0)$$);
-- a lag past the kept window keeps no sweep: 0.1.0 published a NaN model
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 10, burn_in => 5, lag => 6)$$);
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'm';
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', chains => 0)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', chains => 65)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sampler => 'lda')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', gamma_pi => 0)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', gamma_pi => -1)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', gamma_theta => 'NaN')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', gamma_theta => 'Infinity')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', gamma_theta => 1e300, sampler => 'blocked')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', gamma_pi => 1000001)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', unlabeled_weight => 1.5)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', unlabeled_weight => -0.1)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', unlabeled_weight => 'NaN')$$);

-- required arguments
SELECT try($$SELECT gibbs_nb_train(NULL, 'docs', 'tokens', 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', NULL, 'tokens', 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', NULL, 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => NULL)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', wait => NULL)$$);
SELECT try($$SELECT gibbs_nb_train('', 'docs', 'tokens', 'label')$$);
SELECT try($$SELECT gibbs_nb_train(repeat('m', 64), 'docs', 'tokens', 'label')$$);
SELECT try($$SELECT gibbs_nb_train(repeat('m', 60), 'docs', 'tokens', 'label')$$);

-- the labels table: never someone else's table
CREATE TABLE m_labels (x int);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', labels_table => 'docs')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', labels_table => 'no_schema.t')$$);
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', labels_table => 'a.b.c')$$);
-- nor a name a type has (anyone's, with CREATE on the schema): said before
-- the job starts, not by the CREATE TABLE at publish after every sweep
CREATE TYPE squatted_labels AS ENUM ('a');
SELECT try($$SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', labels_table => 'squatted_labels')$$);
DROP TYPE squatted_labels;

-- nothing was written by any of these
SELECT count(*) AS jobs FROM gibbs_nb.jobs;
SELECT count(*) AS models FROM gibbs_nb.models;
SELECT count(*) AS theta FROM gibbs_nb.theta;
SELECT relname FROM pg_class WHERE relname LIKE '%labels' AND relnamespace <> 'gibbs_nb'::regnamespace ORDER BY 1;

-- an error inside the worker comes back with its message and SQLSTATE,
-- the job is recorded as failed, and nothing is published
CREATE FUNCTION fail_in_worker() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('application_name') = 'gibbs_nb worker' THEN
    RAISE EXCEPTION 'the source cannot be read now' USING ERRCODE = 'P0099',
      DETAIL = 'a detail', HINT = 'a hint';
  END IF;
  RETURN true;
END $$;
CREATE VIEW flaky AS SELECT * FROM docs WHERE fail_in_worker();
SELECT try($$SELECT gibbs_nb_train('f', 'flaky', 'tokens', 'label')$$);
\set VERBOSITY default
SELECT * FROM gibbs_nb_train('f', 'flaky', 'tokens', 'label');
\set VERBOSITY terse
SELECT model_name, status, sqlstate, regexp_replace(message, '\d+ MB', 'N MB', 'g') AS message, version
FROM gibbs_nb_jobs ORDER BY job_id;
SELECT count(*) AS models FROM gibbs_nb.models;
SELECT to_regclass('f_labels');
-- a failing job's message is kept to 1000 bytes, cut on a character
-- boundary (0.1.0 kept every byte: 95 MB in 9 s from 50 calls)
CREATE FUNCTION fail_long_in_worker() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('application_name') = 'gibbs_nb worker' THEN
    RAISE EXCEPTION '%', repeat('é', 300000);
  END IF;
  RETURN true;
END $$;
CREATE VIEW flaky_long AS SELECT * FROM docs WHERE fail_long_in_worker();
SELECT try($$SELECT gibbs_nb_train('fl', 'flaky_long', 'tokens', 'label')$$) IS NOT NULL AS failed;
SELECT octet_length(message) <= 1000 AS capped, message LIKE 'ééé%...' AS whole_characters
FROM gibbs_nb.jobs WHERE model_name = 'fl';

-- the internal tables are not writable by the public
CREATE ROLE gnb_intruder;
SET ROLE gnb_intruder;
-- nor are the limits a role's to raise
SELECT try($$SET gibbs_nb.max_job_memory = '100GB'$$);
SELECT try($$SET gibbs_nb.max_jobs_per_role = 100$$);
SELECT try($$INSERT INTO gibbs_nb.models (model_name, version, owner, classes) VALUES ('x', 1, 1, '{}')$$);
SELECT try($$DELETE FROM gibbs_nb.theta$$);
SELECT try($$DELETE FROM gibbs_nb.packed$$);
SELECT try($$UPDATE gibbs_nb.jobs SET status = 'failed'$$);
SELECT count(*) AS jobs_the_intruder_sees FROM gibbs_nb.jobs;
SELECT try($$SELECT nextval('gibbs_nb.job_id_seq')$$);
RESET ROLE;
DROP ROLE gnb_intruder;

DROP VIEW flaky, flaky_long;
DROP FUNCTION fail_in_worker(), fail_long_in_worker();
DROP TABLE docs, dup, nullid, unlabelled, oneclass, nodocs, m_labels;
DROP SEQUENCE not_a_table;
DROP EXTENSION gibbs_nb;
