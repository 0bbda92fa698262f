-- Tokens from text[] and tsvector, labels and ids of any type, views,
-- unsupervised clustering, both samplers, several chains.
CREATE EXTENSION gibbs_nb;

-- text[]: repeats are counts, NULL elements are ignored, NULL tokens skip
-- the row (counted), empty documents are allowed
CREATE TABLE arr (id text PRIMARY KEY, tokens text[], label int);
INSERT INTO arr VALUES
  ('a', '{x,x,x,y}', 1), ('b', '{y,z,NULL}', 2), ('c', '{x,NULL,x}', NULL),
  ('d', '{}', NULL), ('e', NULL, 1), ('f', '{z,z}', 2);
SELECT status FROM gibbs_nb_train('arr', 'arr', 'tokens', 'label', sweeps => 20, seed => 1,
                                  unlabeled_weight => 1);
SELECT classes, n_documents, n_labeled, n_skipped, n_tokens, vocabulary_size
FROM gibbs_nb.models WHERE model_name = 'arr';
-- labels of type int come back as text; ids keep their type
SELECT id, label, pg_typeof(id) FROM arr_labels ORDER BY id;
-- the empty document gets the posterior class shares, nothing more
SELECT round((probabilities[1] + probabilities[2])::numeric, 12) FROM arr_labels WHERE id = 'd';

-- tsvector: a lexeme counts as often as it has positions, once if stripped
CREATE TABLE tsv (id int PRIMARY KEY, body text, label boolean);
INSERT INTO tsv VALUES (1, 'cats cats cats dogs', true), (2, 'birds birds fish', false),
                       (3, 'cats dogs', NULL), (4, 'fish birds', NULL);
CREATE VIEW tsv_positions AS SELECT id, to_tsvector('english', body) AS doc, label FROM tsv;
CREATE VIEW tsv_stripped AS SELECT id, strip(to_tsvector('english', body)) AS doc, label FROM tsv;
CREATE VIEW tsv_array AS
  SELECT id, array(SELECT unnest(tsvector_to_array(to_tsvector('english', body)))) AS doc, label
  FROM tsv;
SELECT status FROM gibbs_nb_train('tsv_pos', 'tsv_positions', 'doc', 'label', sweeps => 20, seed => 1);
SELECT status FROM gibbs_nb_train('tsv_strip', 'tsv_stripped', 'doc', 'label', sweeps => 20, seed => 1);
SELECT model_name, classes, n_tokens, vocabulary_size FROM gibbs_nb.models
WHERE model_name LIKE 'tsv%' ORDER BY 1;
SELECT id, label FROM tsv_pos_labels ORDER BY id;

-- the same words as text[] and as tsvector give the same model
CREATE TABLE same (id int PRIMARY KEY, words text[], label text);
INSERT INTO same VALUES (1, '{apple,apple,pear}', 'fruit'), (2, '{carrot,leek,leek}', 'veg'),
                        (3, '{pear,plum}', 'fruit'), (4, '{leek,kale}', 'veg');
CREATE VIEW same_tsv AS SELECT id, array_to_tsvector(words) AS words, label FROM same;
CREATE VIEW same_tsv_counted AS
  SELECT id, (SELECT string_agg(w || ':' || n, ' ')::tsvector
              FROM (SELECT w, string_agg(o::text, ',') AS n
                    FROM unnest(words) WITH ORDINALITY AS u(w, o) GROUP BY w) g) AS words,
         label
  FROM same;
SELECT status FROM gibbs_nb_train('same_arr', 'same', 'words', 'label', sweeps => 10, seed => 3);
SELECT status FROM gibbs_nb_train('same_tsv', 'same_tsv_counted', 'words', 'label', sweeps => 10, seed => 3);
SELECT count(*) AS theta_rows,
       count(*) FILTER (WHERE abs(a.probability - b.probability) > 1e-12) AS differing
FROM gibbs_nb.theta a JOIN gibbs_nb.theta b USING (class, token)
WHERE a.model_name = 'same_arr' AND b.model_name = 'same_tsv';

-- unsupervised: no label column, n_classes clusters named 1..K
CREATE TABLE clusters (id int PRIMARY KEY, tokens text[]);
INSERT INTO clusters
SELECT i, CASE WHEN i % 2 = 0 THEN '{sun,sea,sand,beach}'::text[] ELSE '{snow,ice,ski,cold}' END
FROM generate_series(1, 30) i;
SELECT status FROM gibbs_nb_train('clusters', 'clusters', 'tokens', n_classes => 2,
                                  sampler => 'collapsed', sweeps => 100, seed => 5);
SELECT classes, n_labeled, label_column, n_classes FROM gibbs_nb.models WHERE model_name = 'clusters';
-- the two kinds of documents end up in two different clusters
SELECT count(DISTINCT label) AS clusters_used,
       bool_and(probability > 0.99) AS sure
FROM clusters_labels;
SELECT count(*) AS mixed FROM (
  SELECT id % 2 AS kind, count(DISTINCT label) AS labels FROM clusters_labels GROUP BY 1
) k WHERE labels > 1;

-- several chains, lag and burn-in, the collapsed sampler, weights, priors
SELECT status, sweeps_done FROM gibbs_nb_train('clusters', 'clusters', 'tokens', n_classes => 2,
                                  sampler => 'collapsed', sweeps => 60, burn_in => 20, lag => 4,
                                  chains => 3, gamma_pi => 0.5, gamma_theta => 0.01, seed => 6);
SELECT version, chains, burn_in, lag, gamma_pi, gamma_theta, r_hat IS NOT NULL AS has_r_hat
FROM gibbs_nb.models WHERE model_name = 'clusters' ORDER BY version;
SELECT chain, count(*) FROM gibbs_nb.trace t JOIN gibbs_nb.models m USING (job_id)
WHERE m.model_name = 'clusters' AND m.version = 2 GROUP BY chain ORDER BY chain;
-- chains are aligned before they are averaged: still two clean clusters
SELECT count(*) AS mixed FROM (
  SELECT id % 2 AS kind, count(DISTINCT label) AS labels FROM clusters_labels GROUP BY 1
) k WHERE labels > 1;
SELECT bool_and(probability > 0.99) AS sure FROM clusters_labels;

-- unlabeled_weight 0: unlabelled documents leave theta-hat to the labelled ones
CREATE VIEW arr_labelled AS SELECT * FROM arr WHERE label IS NOT NULL;
SELECT status FROM gibbs_nb_train('arr_supervised_only', 'arr_labelled', 'tokens', 'label',
                                  sweeps => 20, seed => 1);
SELECT status FROM gibbs_nb_train('arr_w0', 'arr', 'tokens', 'label', sweeps => 20, seed => 1,
                                  unlabeled_weight => 0);
SELECT count(*) AS theta_rows,
       count(*) FILTER (WHERE abs(a.probability - b.probability) > 1e-12) AS differing
FROM gibbs_nb.theta a JOIN gibbs_nb.theta b USING (class, token)
WHERE a.model_name = 'arr_w0' AND b.model_name = 'arr_supervised_only';
-- with every document labelled, theta-hat is (N_kw + g) / (N_k + V g) and
-- pi-hat (C_k + g) / (N + K g), exactly: class 1 has x 3 times and y once
-- (row 'e' has no tokens), V = 3, 3 documents, g = 1
SELECT t.token, abs(t.probability - e.expected) < 1e-12 AS exact
FROM gibbs_nb.theta t
JOIN (VALUES ('x', 4 / 7.0), ('y', 2 / 7.0), ('z', 1 / 7.0)) e(token, expected) USING (token)
WHERE model_name = 'arr_supervised_only' AND class = '1' ORDER BY token;
SELECT class, abs(probability - CASE class WHEN '1' THEN 2 / 5.0 ELSE 3 / 5.0 END) < 1e-12 AS exact
FROM gibbs_nb.pi WHERE model_name = 'arr_supervised_only' ORDER BY class;
-- and with weight 1 they do count
SELECT count(*) FILTER (WHERE abs(a.probability - b.probability) > 1e-12) > 0 AS differs
FROM gibbs_nb.theta a JOIN gibbs_nb.theta b USING (class, token)
WHERE a.model_name = 'arr' AND b.model_name = 'arr_supervised_only';

-- the labelled documents' counts may be taken by parallel workers (the
-- worker picks up role settings when it connects): the model is the same
CREATE TABLE par (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO par
SELECT i, array(SELECT 'w' || ((i * k * 31) % 97) FROM generate_series(1, 3 + i % 9) k),
       CASE WHEN i % 3 <> 0 THEN (ARRAY['x', 'y'])[1 + i % 2] END
FROM generate_series(1, 2000) i;
SELECT status FROM gibbs_nb_train('par_serial', 'par', 'tokens', 'label', sweeps => 30, seed => 4);
ALTER TABLE par SET (parallel_workers = 3);
ALTER ROLE CURRENT_USER SET max_parallel_workers_per_gather = 3;
ALTER ROLE CURRENT_USER SET parallel_setup_cost = 0;
ALTER ROLE CURRENT_USER SET parallel_tuple_cost = 0;
ALTER ROLE CURRENT_USER SET min_parallel_table_scan_size = 0;
SELECT status FROM gibbs_nb_train('par_parallel', 'par', 'tokens', 'label', sweeps => 30, seed => 4);
ALTER ROLE CURRENT_USER RESET ALL;
SELECT count(*) AS theta_rows,
       count(*) FILTER (WHERE a.probability <> b.probability) AS differing
FROM gibbs_nb.theta a JOIN gibbs_nb.theta b USING (class, token)
WHERE a.model_name = 'par_serial' AND b.model_name = 'par_parallel';
SELECT count(*) AS labels_differing FROM par_serial_labels a JOIN par_parallel_labels b USING (id)
WHERE a.probabilities <> b.probabilities;

-- dropping each model drops the labels tables training created
SELECT model_name, gibbs_nb_drop(model_name) AS versions
FROM (SELECT DISTINCT model_name FROM gibbs_nb.models) m ORDER BY 1;
SELECT relname FROM pg_class WHERE relname LIKE '%\_labels' AND relkind = 'r'
  AND relnamespace <> 'gibbs_nb'::regnamespace;
DROP VIEW tsv_positions, tsv_stripped, tsv_array, same_tsv, same_tsv_counted, arr_labelled;
DROP TABLE arr, tsv, same, clusters, par;
-- tokens of any length (up to what text allows) and labels of up to 1,024
-- bytes: a 1 MB token and the longest label train, publish and predict (0.1.0
-- failed at publish, after all the sampling, on a btree's 2,704-byte limit);
-- a longer label is refused before (hostile_hardening)
CREATE TABLE longtok (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO longtok
SELECT i, CASE WHEN i % 2 = 0 THEN ARRAY[repeat('b64', 349526), 'cheap'] ELSE ARRAY['agenda', 'notes'] END,
       CASE WHEN i <= 6 THEN (CASE WHEN i % 2 = 0 THEN repeat('L', 1024) ELSE 'ham' END) END
FROM generate_series(1, 12) i;
SELECT status FROM gibbs_nb_train('longtok', 'longtok', 'tokens', 'label', sweeps => 20, seed => 1);
SELECT max(octet_length(token)) AS longest_token FROM gibbs_nb.theta WHERE model_name = 'longtok';
SELECT octet_length(gibbs_nb_predict('longtok', ARRAY[repeat('b64', 349526)])) AS predicted_label_bytes,
       gibbs_nb_predict('longtok', '{agenda}'::text[]) AS short;
SELECT count(*) FROM gibbs_nb.theta WHERE model_name = 'longtok' AND token = repeat('b64', 349526);
SELECT gibbs_nb_drop('longtok');
DROP TABLE longtok;

-- an id longer than an entry of the labels table's primary key (a btree:
-- 2,704 bytes) fails the job before it samples (it sampled, then failed to
-- write its labels table); a long id that compresses into an entry trains
-- (made by a view: it reaches the worker uncompressed)
CREATE TABLE longid AS
SELECT (SELECT string_agg(md5(i::text || '-' || k), '') FROM generate_series(1, 100) k) AS id,
       array(SELECT 'w' || ((i * 7 + k * 13) % 50) FROM generate_series(1, 20) k) AS tokens,
       CASE WHEN i % 4 = 0 THEN (ARRAY['a', 'b'])[1 + (i / 4) % 2] END AS label
FROM generate_series(1, 40) i;
SELECT try($$SELECT status FROM gibbs_nb_train('longid', 'longid', 'tokens', 'label', sweeps => 5,
                                               seed => 1)$$);
SELECT sweep, sample_seconds IS NULL AS not_sampled FROM gibbs_nb_jobs WHERE model_name = 'longid';
CREATE VIEW longid_compressible AS
SELECT repeat('x', 5000) || row_number() OVER (ORDER BY id) AS id, tokens, label FROM longid;
SELECT status FROM gibbs_nb_train('longidc', 'longid_compressible', 'tokens', 'label', sweeps => 5,
                                  seed => 1);
SELECT count(*) AS rows, min(octet_length(id)) AS shortest_id FROM longidc_labels;
SELECT gibbs_nb_drop('longidc');
-- while another version is deployed, publishing writes no labels row: such
-- ids train (the deployed version's labels table stays)
CREATE TABLE longid_src AS SELECT row_number() OVER (ORDER BY id)::text AS id, tokens, label FROM longid;
SELECT status FROM gibbs_nb_train('longidp', 'longid_src', 'tokens', 'label', sweeps => 5, seed => 1);
SELECT gibbs_nb_deploy('longidp', 1);
UPDATE longid_src s SET id = l.id FROM (SELECT row_number() OVER (ORDER BY id)::text AS n, id FROM longid) l
WHERE s.id = l.n;
SELECT version, status FROM gibbs_nb_retrain('longidp');
SELECT DISTINCT version FROM longidp_labels;
SELECT gibbs_nb_drop('longidp');
DROP VIEW longid_compressible;
DROP TABLE longid, longid_src;

-- ids stored out of line (2,240 bytes, STORAGE EXTERNAL), their table
-- truncated while the job samples (its out-of-line values gone at once):
-- the job kept the ids themselves, not pointers to them (publishing failed
-- with XX001, "missing chunk number 0 for toast value")
CREATE TABLE toasted_ids (id text PRIMARY KEY, tokens text[], label text);
ALTER TABLE toasted_ids ALTER COLUMN id SET STORAGE EXTERNAL;
INSERT INTO toasted_ids
SELECT (SELECT string_agg(md5(i::text || '-' || k), '') FROM generate_series(1, 70) k),
       array(SELECT 'w' || ((i * 7 + k * 13) % 50) FROM generate_series(1, 20) k),
       CASE WHEN i % 4 = 0 THEN (ARRAY['a', 'b'])[1 + (i / 4) % 2] END
FROM generate_series(1, 300) i;
CREATE TABLE toasted_before AS SELECT id FROM toasted_ids;
-- bounded polling: until the job samples (its read committed), at most 60 s
CREATE FUNCTION wait_for_sampling(j bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 6000 LOOP
    IF (SELECT sweep > 0 FROM gibbs_nb_jobs WHERE job_id = j) THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN false;
END $$;
SELECT job_id AS toasted_job
FROM gibbs_nb_train('toasted', 'toasted_ids', 'tokens', 'label', sweeps => 200000, seed => 1,
                    wait => false) \gset
SELECT wait_for_sampling(:toasted_job) AS sampling;
TRUNCATE toasted_ids;
SELECT status, sqlstate, message FROM gibbs_nb_wait(:toasted_job);
SELECT count(*) AS labelled_ids, count(*) FILTER (WHERE b.id IS NULL) AS unknown
FROM toasted_labels l LEFT JOIN toasted_before b USING (id);
SELECT gibbs_nb_drop('toasted');
DROP TABLE toasted_ids, toasted_before;
DROP FUNCTION wait_for_sampling(bigint);

DROP EXTENSION gibbs_nb;
