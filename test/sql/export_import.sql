-- Moving a model: gibbs_nb_export and gibbs_nb_import (issue 13).
\set VERBOSITY terse
CREATE EXTENSION gibbs_nb;
CREATE TABLE docs (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO docs
SELECT i, array(SELECT (ARRAY['red', 'green', 'blue'])[1 + i % 3] || '_' || ((i * k) % 7)
                FROM generate_series(1, 4 + i % 5) k)
          || array(SELECT 'shared_' || ((i + k) % 11) FROM generate_series(1, 3) k)
          || CASE WHEN i = 7 THEN ARRAY['café', 'naïve'] ELSE '{}' END,
       CASE WHEN i % 2 = 0 THEN (ARRAY['red', 'green', 'blue'])[1 + i % 3] END
FROM generate_series(1, 150) i;
SELECT status FROM gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 30, seed => 2,
                                  chains => 2);

-- the value: magic, format 2, K = 3, V, flags (word counts)
CREATE TABLE exported AS SELECT gibbs_nb_export('m') AS v;
SELECT encode(substr(v, 1, 12), 'escape') AS header, get_byte(v, 12) AS k,
       get_byte(v, 16) + 256 * get_byte(v, 17) AS v, get_byte(v, 20) AS flags,
       length(v) AS bytes FROM exported;
CREATE TABLE before AS
SELECT d.id, gibbs_nb_predict_proba('m', d.tokens) AS p FROM docs d;
CREATE TABLE before_packed AS SELECT classes, log_pi, tokens, log_theta, word_counts FROM gibbs_nb.packed;

-- export, drop, import: the same probabilities, bit for bit
SELECT gibbs_nb_drop('m');
SELECT gibbs_nb_import('m', v) AS version FROM exported;
SELECT count(*) AS documents, bool_and(gibbs_nb_predict_proba('m', d.tokens) = b.p) AS identical
FROM docs d JOIN before b USING (id);
SELECT p.classes = b.classes AND p.log_pi = b.log_pi AND p.tokens = b.tokens
       AND p.log_theta = b.log_theta AND p.word_counts = b.word_counts AS same_packed
FROM gibbs_nb.packed p, before_packed b;
-- what the imported version says of itself
SELECT model_name, serving_version, classes, n_documents, n_labeled, vocabulary_size, sampler, sweeps,
       chains, seed, r_hat IS NOT NULL AS has_r_hat, source, labels_table, trained_by, tokenizer,
       init, unlabeled_weight_chosen
FROM gibbs_nb_models;
-- and that its training diagnostics did not come along
SELECT warnings, ess, split_r_hat, gamma_theta_sampled, holdout_metrics FROM gibbs_nb_models;
SELECT count(*) AS theta_rows,
       bool_and(abs(t.probability - exp(p.log_theta[(array_position(p.tokens, t.token) - 1) * 3
                                                    + array_position(p.classes, t.class)]))
                <= 1e-15 * t.probability) AS theta_matches
FROM gibbs_nb.theta t, gibbs_nb.packed p;
-- it explains and ranks words as the original did
SELECT rank, token, count FROM gibbs_nb_top_words('m', 'red', 3, 10);
-- exported again, it is the same value but for the version number it got
SELECT substr(gibbs_nb_export('m'), 1, 100) = substr(v, 1, 100) AS same_head,
       length(gibbs_nb_export('m')) = length(v) AS same_length FROM exported;
-- it has no source and no labels: not retrained, not deployed
SELECT try($$SELECT gibbs_nb_retrain('m')$$) ~ '^42P01' AS no_retrain;
SELECT try($$SELECT gibbs_nb_deploy('m', 2)$$);
-- importing again makes a new version; a model of that name may already exist
SELECT gibbs_nb_import('m', v) AS version FROM exported;
SELECT gibbs_nb_import('copy', v) AS version FROM exported;
SELECT model_name, serving_version, versions FROM gibbs_nb_models ORDER BY 1;

-- malformed and hostile values: 22P03 (or 22021), nothing written.  A value
-- ends with the CRC-32C of the rest: seal() (00_init) writes it again after a
-- change, as a crafted value would, so that each field's own check is reached
SELECT seal(v) = v AS export_sealed FROM exported;
SELECT try($$SELECT gibbs_nb_import('bad', '\x'::bytea)$$);
SELECT try($$SELECT gibbs_nb_import('bad', 'not a model at all'::bytea)$$);
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing le32(1) from 9))))
FROM exported;
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing le32(1) from 13))))
FROM exported;
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing le32(5000) from 13))))
FROM exported;
-- a vocabulary of 4 billion words in a few kB: refused before anything is allocated
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing le32(4294967295) from 17))))
FROM exported;
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing le32(6) from 21))))
FROM exported;
-- cut short anywhere, or with a byte too many: as they are, the checksum
-- says so; sealed again, the fields do
SELECT n, try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', substr(v, 1, n)))
FROM exported, unnest(ARRAY[7, 14, 20, 30, 150, 400]) n;
SELECT n, try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(substr(v, 1, n) || '\x00000000')))
FROM exported, unnest(ARRAY[20, 30, 150, 400]) n;
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', substr(v, 1, length(v) - 1)))
FROM exported;
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', v || '\x00'::bytea)) FROM exported;
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(v || '\x00'::bytea))) FROM exported;
-- the last log theta (before the 34 word counts) NaN, then 0 (a log
-- probability, but its class's then sum to more than one: it was imported,
-- and such a model predicted NaN), then log 2
SELECT x, try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)',
                     seal(overlay(v placing x from length(v) - 4 - 8 * 34 - 7))))
FROM exported, unnest(ARRAY['\x000000000000f87f', '\x0000000000000000', '\xef39fafe422ee63f']::bytea[]) x;
-- and -1e308: finite, but below any log probability a double holds (so
-- crafted that every class's thetas still summed to one, a document's
-- scores were -inf in every class, its probabilities NaN)
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)',
                  seal(overlay(v placing '\xa0c8eb85f3cce1ff'::bytea from length(v) - 4 - 8 * 34 - 7))))
FROM exported;
-- the first log pi (after the classes, "red" the last) 0: the priors sum to more than one
SELECT position(convert_to('red', 'UTF8') IN v) + 3 AS pi_at FROM exported \gset
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)',
                  seal(overlay(v placing '\x0000000000000000'::bytea from :pi_at))))
FROM exported;
SELECT position(convert_to('blue', 'UTF8') IN v) AS blue_at FROM exported \gset
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing '\xff'::bytea from :blue_at))))
FROM exported;
-- classes out of order: "blue" made "zlue"
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', seal(overlay(v placing 'z'::bytea from :blue_at))))
FROM exported;
-- an import needs about five times the value's size: bounded by gibbs_nb.max_job_memory
SET gibbs_nb.max_job_memory = '1MB';
SELECT try(format('SELECT gibbs_nb_import(''bad'', %L::bytea)', v || convert_to(repeat('x', 300000), 'UTF8')))
FROM exported;
RESET gibbs_nb.max_job_memory;
SELECT count(*) AS bad_models FROM gibbs_nb.models WHERE model_name = 'bad';
SELECT try($$SELECT gibbs_nb_import(NULL, '\x'::bytea)$$);
SELECT try($$SELECT gibbs_nb_import('x', NULL)$$);
SELECT try($$SELECT gibbs_nb_import('', '\x'::bytea)$$);
SELECT try(format('SELECT gibbs_nb_import(%L, %L::bytea)', repeat('x', 64), v)) FROM exported;
SELECT try($$SELECT gibbs_nb_export(NULL)$$);
SELECT try($$SELECT gibbs_nb_export('nobody')$$);

-- every single-bit flip of a small export, and every cut, is refused (XX001
-- where the checksum finds it; 22P03 where the magic or format does), and
-- nothing is created
CREATE TABLE tiny_docs AS
SELECT i AS id, ARRAY[(ARRAY['a', 'b'])[1 + i % 2], 'c'] AS tokens,
       CASE WHEN i <= 6 THEN (ARRAY['x', 'y'])[1 + i % 2] END AS label
FROM generate_series(1, 10) i;
SELECT status FROM gibbs_nb_train('tiny', 'tiny_docs', 'tokens', 'label', sweeps => 4, seed => 1,
                                  init => 'random', unlabeled_weight => 1);
CREATE TABLE tiny AS SELECT gibbs_nb_export('tiny') AS v;
CREATE FUNCTION import_outcome(b bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM gibbs_nb_import('flipped', b);
  RETURN 'imported';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
SELECT length(v) AS bytes, import_outcome(v) AS unchanged FROM tiny;
-- (how it was trained came along: not the columns' defaults)
SELECT init, unlabeled_weight, unlabeled_weight_chosen FROM gibbs_nb_models WHERE model_name = 'flipped';
SELECT gibbs_nb_drop('flipped');
SELECT import_outcome(set_bit(v, bit, 1 - get_bit(v, bit))) AS outcome, count(*) AS flips
FROM tiny, generate_series(0, 8 * length(v) - 1) bit GROUP BY 1 ORDER BY 1;
SELECT import_outcome(substr(v, 1, n)) AS outcome, count(*) AS cuts
FROM tiny, generate_series(0, length(v) - 1) n GROUP BY 1 ORDER BY 1;
SELECT count(*) AS flipped_models FROM gibbs_nb.models WHERE model_name = 'flipped';
SELECT gibbs_nb_drop('tiny');
DROP TABLE tiny, tiny_docs;
DROP FUNCTION import_outcome(bytea);

-- another role may neither export nor see the models; what it imports is its own
CREATE ROLE gnb_mover;
GRANT SELECT ON exported TO gnb_mover;
SET ROLE gnb_mover;
SELECT try($$SELECT gibbs_nb_export('m')$$);
SELECT gibbs_nb_import('m', v) AS version FROM exported;
SELECT model_name, owner, serving_version FROM gibbs_nb_models;
SELECT gibbs_nb_drop('m');
RESET ROLE;
SELECT model_name, owner, serving_version FROM gibbs_nb_models ORDER BY 1;
REVOKE SELECT ON exported FROM gnb_mover;
DROP ROLE gnb_mover;

DROP TABLE docs, exported, before, before_packed;
DROP EXTENSION gibbs_nb;
