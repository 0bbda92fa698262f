-- Labelling new documents: gibbs_nb_predict, gibbs_nb_predict_proba,
-- gibbs_nb_classes, the model cache, and gibbs_nb_label_trigger.
CREATE EXTENSION gibbs_nb;
-- 300 documents over 3 classes, each a mix of its class's words and shared
-- words, a third of them labelled
CREATE TABLE docs (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO docs
SELECT i,
       array(SELECT (ARRAY['red', 'green', 'blue'])[1 + i % 3] || '_' || ((i * k) % 7)
             FROM generate_series(1, 4 + i % 5) k)
       || array(SELECT 'shared_' || ((i + k) % 11) FROM generate_series(1, 3) k),
       CASE WHEN i % 3 = 0 AND i % 2 = 0 THEN 'red' WHEN i % 3 = 1 AND i % 2 = 0 THEN 'green'
            WHEN i % 3 = 2 AND i % 2 = 0 THEN 'blue' END
FROM generate_series(1, 300) i;
SELECT status FROM gibbs_nb_train('colors', 'docs', 'tokens', 'label', sweeps => 100, seed => 11,
                                  gamma_theta => 0.5);

SELECT gibbs_nb_classes('colors');

-- new documents, some with words the model has never seen
CREATE TABLE new_docs (id int PRIMARY KEY, tokens text[]);
INSERT INTO new_docs
SELECT i, array(SELECT (ARRAY['red', 'green', 'blue', 'unseen'])[1 + (i * k) % 4] || '_' || (k % 7)
                FROM generate_series(1, 1 + i % 6) k)
FROM generate_series(1, 300) i;
INSERT INTO new_docs VALUES (1001, '{}'), (1002, '{never,seen,words}'), (1003, '{red_1,NULL,red_1}');

-- the same computation written as plain SQL over gibbs_nb.theta and gibbs_nb.pi
CREATE VIEW reference AS
WITH latest AS (SELECT max(version) AS version FROM gibbs_nb.models WHERE model_name = 'colors'),
scores AS (
  SELECT d.id, p.class, ln(p.probability) + coalesce(sum(ln(t.probability)), 0) AS score
  FROM new_docs d
  CROSS JOIN gibbs_nb.pi p
  JOIN latest l ON p.version = l.version
  LEFT JOIN LATERAL unnest(d.tokens) tok ON true
  LEFT JOIN gibbs_nb.theta t ON t.model_name = 'colors' AND t.version = l.version
                             AND t.class = p.class AND t.token = tok
  WHERE p.model_name = 'colors'
  GROUP BY d.id, p.class, p.probability),
shifted AS (SELECT id, class, exp(score - max(score) OVER (PARTITION BY id)) AS e FROM scores)
SELECT id, class, e / sum(e) OVER (PARTITION BY id) AS probability FROM shifted;

-- gibbs_nb_predict_proba matches it on every document, in gibbs_nb_classes order
SELECT count(DISTINCT r.id) AS documents,
       max(abs(r.probability - (gibbs_nb_predict_proba('colors', d.tokens))[array_position(gibbs_nb_classes('colors'), r.class)])) < 1e-9 AS probabilities_match
FROM reference r JOIN new_docs d USING (id);
-- gibbs_nb_predict is its argmax
SELECT count(*) AS labels_differing FROM new_docs d
WHERE gibbs_nb_predict('colors', d.tokens) <>
      (SELECT class FROM reference r WHERE r.id = d.id ORDER BY probability DESC LIMIT 1);
SELECT bool_and(abs(p[1] + p[2] + p[3] - 1) < 1e-12) AS sums_to_1
FROM (SELECT gibbs_nb_predict_proba('colors', tokens) AS p FROM new_docs) s;
-- the documents of each color get their color
SELECT count(*) FILTER (WHERE gibbs_nb_predict('colors', tokens) = split_part(tokens[1], '_', 1)) AS right,
       count(*) AS total
FROM docs WHERE label IS NULL;

-- no known word: the class prior, pi-hat
SELECT (SELECT max(abs(p.probability - (gibbs_nb_predict_proba('colors', '{}'::text[]))[array_position(gibbs_nb_classes('colors'), p.class)]))
        FROM gibbs_nb.pi p WHERE model_name = 'colors') < 1e-12 AS empty_is_prior,
       gibbs_nb_predict_proba('colors', '{}'::text[]) = gibbs_nb_predict_proba('colors', '{never,seen}'::text[]) AS unknown_is_prior;

-- tsvector and text[] agree on the same words (counts from positions)
SELECT count(*) AS documents,
       count(*) FILTER (WHERE abs(a[1] - b[1]) + abs(a[2] - b[2]) + abs(a[3] - b[3]) > 1e-12) AS differing
FROM (SELECT gibbs_nb_predict_proba('colors', tokens) AS a,
             gibbs_nb_predict_proba('colors',
               (SELECT string_agg(w || ':' || n, ' ')::tsvector
                FROM (SELECT w, string_agg(o::text, ',') AS n
                      FROM unnest(tokens) WITH ORDINALITY AS u(w, o) WHERE w IS NOT NULL GROUP BY w) g)) AS b
      FROM new_docs WHERE cardinality(tokens) > 0) s;
SELECT gibbs_nb_predict('colors', 'red_1:1,2 blue_2:3'::tsvector) AS with_positions,
       gibbs_nb_predict('colors', strip('red_1:1,2 blue_2:3'::tsvector)) AS stripped;

-- honest function properties
SELECT proname, pg_get_function_identity_arguments(oid) AS args, provolatile, proparallel, proisstrict
FROM pg_proc WHERE proname IN ('gibbs_nb_predict', 'gibbs_nb_predict_proba', 'gibbs_nb_classes')
ORDER BY 1, 2;
SELECT gibbs_nb_predict(NULL, '{a}'::text[]) IS NULL AS null_model,
       gibbs_nb_predict('colors', NULL::text[]) IS NULL AS null_tokens,
       gibbs_nb_classes(NULL) IS NULL AS null_classes;

-- a model that does not exist
SELECT try($$SELECT gibbs_nb_predict('no_such_model', '{a}'::text[])$$);
SELECT try($$SELECT gibbs_nb_classes(repeat('x', 100))$$);

-- the trigger fills a label column as rows arrive, in the column's own type
CREATE TYPE color AS ENUM ('red', 'green', 'blue');
CREATE TABLE inbox (id int PRIMARY KEY, tokens text[], predicted color);
CREATE TRIGGER label_inbox BEFORE INSERT OR UPDATE OF tokens ON inbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('colors', 'tokens', 'predicted');
INSERT INTO inbox VALUES (1, '{green_1,green_2}', NULL), (2, NULL, 'red'), (3, '{blue_3}', 'red');
SELECT * FROM inbox ORDER BY id;
UPDATE inbox SET tokens = '{green_3}' WHERE id = 3;
SELECT * FROM inbox ORDER BY id;
CREATE TABLE badinbox (id int, words text);
CREATE TRIGGER bad BEFORE INSERT ON badinbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('colors', 'words', 'id');
SELECT try($$INSERT INTO badinbox VALUES (1, 'x')$$);
CREATE TRIGGER bad2 AFTER INSERT ON inbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('colors', 'tokens', 'predicted');
SELECT try($$INSERT INTO inbox VALUES (4, '{red_1}')$$);
DROP TRIGGER bad2 ON inbox;
CREATE TRIGGER bad3 BEFORE INSERT ON inbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('colors', 'nope', 'predicted');
SELECT try($$INSERT INTO inbox VALUES (4, '{red_1}')$$);
DROP TRIGGER bad3 ON inbox;
-- a generated tokens column is computed after BEFORE triggers: the trigger
-- saw it NULL on INSERT (no label) and as it was on UPDATE (the old
-- tokens' label), so it is refused
CREATE TABLE geninbox (id int, body text,
                       tokens text[] GENERATED ALWAYS AS (string_to_array(body, ' ')) STORED,
                       predicted text);
CREATE TRIGGER gen BEFORE INSERT OR UPDATE ON geninbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('colors', 'tokens', 'predicted');
SELECT try($$INSERT INTO geninbox (id, body) VALUES (1, 'green_1 green_2')$$);
DROP TABLE geninbox;
-- nor a generated label column, which would overwrite the trigger's label
CREATE TABLE genlabel (id int, tokens text[], predicted text GENERATED ALWAYS AS ('none') STORED);
CREATE TRIGGER gen BEFORE INSERT ON genlabel
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('colors', 'tokens', 'predicted');
SELECT try($$INSERT INTO genlabel (id, tokens) VALUES (1, '{green_1}')$$);
DROP TABLE genlabel;

-- a new version is used from the next statement on
CREATE VIEW docs_flipped AS
  SELECT id, tokens, CASE label WHEN 'red' THEN 'blue' WHEN 'blue' THEN 'red' ELSE label END AS label
  FROM docs;
SELECT gibbs_nb_predict('colors', '{red_1,red_2}'::text[]) AS before_retraining;
SELECT version FROM gibbs_nb_train('colors', 'docs_flipped', 'tokens', 'label', sweeps => 100,
                                   seed => 11, gamma_theta => 0.5);
SELECT gibbs_nb_predict('colors', '{red_1,red_2}'::text[]) AS after_retraining;
-- and the reference, which reads the latest version, still matches
SELECT max(abs(r.probability - (gibbs_nb_predict_proba('colors', d.tokens))[array_position(gibbs_nb_classes('colors'), r.class)])) < 1e-9 AS probabilities_match
FROM reference r JOIN new_docs d USING (id);

-- a parallel plan gives the same labels as a serial one
CREATE TABLE serial_labels AS SELECT id, gibbs_nb_predict('colors', tokens) AS label FROM new_docs;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
-- VERBOSE shows the workers' scan computing gibbs_nb_predict
EXPLAIN (VERBOSE, COSTS OFF)
SELECT gibbs_nb_predict('colors', tokens) AS label, count(*), sum(id) FROM new_docs GROUP BY 1;
SELECT gibbs_nb_predict('colors', tokens) AS label, count(*), sum(id) FROM new_docs GROUP BY 1
EXCEPT
SELECT label, count(*), sum(id) FROM serial_labels GROUP BY 1;
SELECT debug_parallel_guc() AS debug_parallel \gset
SET :"debug_parallel" = on;
SELECT count(*) AS differing FROM new_docs d JOIN serial_labels s USING (id)
WHERE gibbs_nb_predict('colors', d.tokens) <> s.label;
RESET :"debug_parallel";
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- other roles do not see the model: for them it does not exist
CREATE ROLE gnb_other;
GRANT SELECT ON new_docs TO gnb_other;
SET ROLE gnb_other;
SELECT try($$SELECT gibbs_nb_predict('colors', '{red_1}'::text[])$$);
SELECT try($$SELECT gibbs_nb_classes('colors')$$);
RESET ROLE;
DROP OWNED BY gnb_other;
DROP ROLE gnb_other;


-- many classes (more than are summed in registers): still the right class
CREATE TABLE many (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO many SELECT i, ARRAY['word' || (i % 17), 'word' || (i % 17), 'common'], 'class' || (i % 17)
FROM generate_series(1, 68) i;
SELECT status FROM gibbs_nb_train('many', 'many', 'tokens', 'label', sweeps => 5, seed => 1);
SELECT cardinality(gibbs_nb_classes('many')) AS classes,
       count(*) FILTER (WHERE gibbs_nb_predict('many', tokens) = label) AS right, count(*) AS total,
       bool_and(abs((SELECT sum(p) FROM unnest(gibbs_nb_predict_proba('many', tokens)) p) - 1) < 1e-12) AS sums_to_1
FROM many;
-- a cache too small for two models: each load evicts the other, the model in
-- use is always kept, and the answers do not change
CREATE TABLE cache_check AS
  SELECT id, gibbs_nb_predict('colors', tokens) AS c, gibbs_nb_predict('many', tokens) AS m
  FROM new_docs;
SET gibbs_nb.model_cache_size = '1kB';
SELECT count(*) AS differing FROM new_docs d JOIN cache_check x USING (id)
WHERE gibbs_nb_predict('colors', d.tokens) <> x.c OR gibbs_nb_predict('many', d.tokens) <> x.m;
SELECT gibbs_nb_classes('colors') = gibbs_nb_classes('colors') AS stable_across_evictions;
RESET gibbs_nb.model_cache_size;
DROP TABLE cache_check;
SELECT gibbs_nb_drop('many');
DROP TABLE many;

-- a dropped model: a clear error on the next call
SELECT gibbs_nb_drop('colors');
SELECT try($$SELECT gibbs_nb_predict('colors', '{red_1}'::text[])$$);
SELECT try($$INSERT INTO inbox VALUES (5, '{red_1}')$$);

DROP TABLE inbox, badinbox, serial_labels;
DROP TYPE color;
DROP VIEW reference, docs_flipped;
DROP TABLE docs, new_docs;
DROP EXTENSION gibbs_nb;
