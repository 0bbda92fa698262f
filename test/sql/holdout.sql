-- gibbs_nb_train(..., holdout => share): a seeded share of the labelled rows
-- is left out of training, labelled by the new version like any new
-- document, and its metrics are stored with the version.  Every row is
-- labelled: the model trained on the rest is the closed form, whatever the
-- sampler.
CREATE EXTENSION gibbs_nb;
-- training's NOTICEs (progress, diagnostics) are not what this test checks
SET client_min_messages = warning;
CREATE TABLE hdocs (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO hdocs
SELECT i,
       array(SELECT (ARRAY['red', 'green', 'blue', 'red'])[1 + (i * k + k * k) % 4] || '_' || (k % 7)
             FROM generate_series(1, 2 + i % 6) k)
       || array(SELECT 'shared_' || ((i + k) % 11) FROM generate_series(1, 3) k),
       (ARRAY['red', 'green', 'blue'])[1 + (i * 7 + i / 5) % 3]
FROM generate_series(1, 400) i;
UPDATE hdocs SET tokens = NULL WHERE id % 97 = 0;

-- the held-out rows, as the README says to select them: the id as text
-- hashed with the seed, its low 53 bits below holdout x 2^53
CREATE FUNCTION held_out(id int, label text, seed bigint, holdout float8) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT label IS NOT NULL
         AND (hashtextextended(id::text, seed) & 9007199254740991) < floor(holdout * 9007199254740992)::bigint $$;
-- a word only a held-out document has, and a label only held-out documents have
UPDATE hdocs SET tokens = tokens || '{only_held_out}'::text[]
WHERE id = (SELECT min(id) FROM hdocs WHERE held_out(id, label, 7, 0.25) AND tokens IS NOT NULL);
UPDATE hdocs SET label = 'purple'
WHERE id IN (SELECT id FROM hdocs WHERE held_out(id, label, 7, 0.25) AND tokens IS NOT NULL
             ORDER BY id DESC LIMIT 2);
SELECT count(*) FILTER (WHERE label IS NOT NULL) AS labelled,
       count(*) FILTER (WHERE held_out(id, label, 7, 0.25)) AS held_out,
       count(*) FILTER (WHERE held_out(id, label, 7, 0.25) AND tokens IS NOT NULL) AS held_out_with_tokens,
       count(*) FILTER (WHERE tokens IS NULL) AS no_tokens
FROM hdocs;

SELECT status FROM gibbs_nb_train('h', 'hdocs', 'tokens', 'label', sweeps => 40, seed => 7,
                                  holdout => 0.25);
-- training saw only the rest: its labelled count, its classes, its vocabulary
SELECT n_documents, n_labeled, n_skipped, classes, holdout,
       holdout_metrics->'n_documents' AS held_out_scored,
       holdout_metrics->'n_skipped' AS held_out_without_tokens
FROM gibbs_nb.models WHERE model_name = 'h';
SELECT count(*) AS theta_rows_of_the_held_out_word FROM gibbs_nb.theta
WHERE model_name = 'h' AND token = 'only_held_out';
-- every document with tokens has a row in the labels table, the held-out
-- ones too, labelled as gibbs_nb_predict_proba labels them
SELECT count(*) AS label_rows FROM h_labels;
SELECT count(*) AS held_out_rows,
       count(*) FILTER (WHERE l.probabilities = gibbs_nb_predict_proba('h', d.tokens)) AS as_predicted,
       count(*) FILTER (WHERE l.label = gibbs_nb_predict('h', d.tokens)) AS same_label
FROM hdocs d JOIN h_labels l USING (id) WHERE held_out(d.id, d.label, 7, 0.25);

-- the stored metrics are gibbs_nb_evaluate's on the held-out rows (the log
-- loss summed in another order)
CREATE VIEW h_held AS SELECT * FROM hdocs WHERE held_out(id, label, 7, 0.25);
SELECT m.holdout_metrics - 'log_loss' = to_jsonb(e) - '{model_name,version,log_loss}'::text[] AS same_metrics,
       abs((m.holdout_metrics->>'log_loss')::float8 - e.log_loss) < 1e-12 AS same_log_loss
FROM gibbs_nb.models m, gibbs_nb_evaluate('h', 'h_held', 'tokens', 'label') e
WHERE m.model_name = 'h';
SELECT holdout_metrics->'classes' AS classes, holdout_metrics->'support' AS support,
       holdout_metrics->'n_unknown' AS n_unknown, holdout_metrics->'confusion' AS confusion,
       round((holdout_metrics->>'accuracy')::numeric, 6) AS accuracy
FROM gibbs_nb.models WHERE model_name = 'h';

-- the split depends on the seed and the ids, not on the scan order: the same
-- rows in another physical order give the same held-out metrics
CREATE TABLE hdocs_reversed (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO hdocs_reversed SELECT * FROM hdocs ORDER BY id DESC;
SELECT status FROM gibbs_nb_train('h_rev', 'hdocs_reversed', 'tokens', 'label', sweeps => 40, seed => 7,
                                  holdout => 0.25);
SELECT a.holdout_metrics = b.holdout_metrics AS same_split_same_metrics
FROM gibbs_nb.models a, gibbs_nb.models b WHERE a.model_name = 'h' AND b.model_name = 'h_rev';
-- another seed, another share: other rows
SELECT status FROM gibbs_nb_train('h_rev', 'hdocs_reversed', 'tokens', 'label', sweeps => 40, seed => 8,
                                  holdout => 0.5);
SELECT (holdout_metrics->>'n_documents')::int AS held_out_scored,
       (SELECT count(*) FROM hdocs WHERE held_out(id, label, 8, 0.5) AND tokens IS NOT NULL) AS expected
FROM gibbs_nb.models WHERE model_name = 'h_rev' AND version = 2;

-- retrain keeps the share (and the seed, so the same rows)
SELECT status, version FROM gibbs_nb_retrain('h');
SELECT version, holdout, holdout_metrics->'n_documents' AS held_out_scored, n_labeled
FROM gibbs_nb.models WHERE model_name = 'h' ORDER BY version;

-- without holdout: nothing held out, no metrics
SELECT status FROM gibbs_nb_train('h0', 'hdocs', 'tokens', 'label', sweeps => 10, seed => 7);
SELECT holdout, holdout_metrics, n_labeled FROM gibbs_nb.models WHERE model_name = 'h0';

-- bad values
SELECT try($$SELECT * FROM gibbs_nb_train('hx', 'hdocs', 'tokens', 'label', holdout => -0.1)$$);
SELECT try($$SELECT * FROM gibbs_nb_train('hx', 'hdocs', 'tokens', 'label', holdout => 1)$$);
SELECT try($$SELECT * FROM gibbs_nb_train('hx', 'hdocs', 'tokens', 'label', holdout => 'NaN')$$);
SELECT try($$SELECT * FROM gibbs_nb_train('hx', 'hdocs', 'tokens', 'label', holdout => NULL)$$);
SELECT try($$SELECT * FROM gibbs_nb_train('hx', 'hdocs', 'tokens', n_classes => 2, holdout => 0.1)$$);
SELECT count(*) AS models_left_behind FROM gibbs_nb.models WHERE model_name = 'hx';

SELECT gibbs_nb_drop('h'), gibbs_nb_drop('h_rev'), gibbs_nb_drop('h0');
DROP VIEW h_held;
DROP FUNCTION held_out(int, text, bigint, float8);
DROP TABLE hdocs, hdocs_reversed;
DROP EXTENSION gibbs_nb;
RESET client_min_messages;
