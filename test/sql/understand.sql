-- Understanding a model (issue 13): what the README promised and the
-- software did differently, gibbs_nb_explain, gibbs_nb_top_words and the
-- gibbs_nb_models view.
\set VERBOSITY terse
-- the settings exist once the library is loaded in the session
SELECT try('SHOW gibbs_nb.max_jobs');
LOAD 'gibbs_nb';
SHOW gibbs_nb.max_jobs;
CREATE EXTENSION gibbs_nb;

-- 240 documents over 2 classes, half of them labelled; 4 rows with NULL tokens
CREATE TABLE mail (id int PRIMARY KEY, body text, tokens text[], tsv tsvector, label text);
INSERT INTO mail (id, body, label)
SELECT i,
       CASE WHEN i % 2 = 0
            THEN 'cheap offer money click ' || (ARRAY['win', 'prize', 'free', 'now'])[1 + (i / 4) % 4]
                 || ' meeting'
            ELSE 'meeting notes patch review ' || (ARRAY['build', 'kernel', 'tuesday', 'gcc'])[1 + (i / 4) % 4]
                 || ' offer meeting' END,
       CASE WHEN i % 4 < 2 THEN (ARRAY['ham', 'spam'])[1 + (i + 1) % 2] END
FROM generate_series(1, 240) i;
UPDATE mail SET tokens = regexp_split_to_array(body, ' '), tsv = to_tsvector('english', body)
WHERE id > 4;
ALTER TABLE mail ADD COLUMN predicted text;   -- the Getting-started trigger's column

-- the class counts "same rows as": text[] and tsvector each with its own SQL
SELECT count(*) AS cells, bool_and(c.count = q.count) AS same
FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail)) c
FULL JOIN (SELECT label, tok, count(*) FROM mail, unnest(tokens) tok
           WHERE label IS NOT NULL AND tok IS NOT NULL GROUP BY 1, 2) q
  ON c.class = q.label AND c.token = q.tok;
SELECT count(*) AS cells, bool_and(c.count = q.count) AS same
FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tsv) FROM mail)) c
FULL JOIN (SELECT label, t.lexeme, sum(greatest(coalesce(array_length(t.positions, 1), 0), 1)) AS count
           FROM mail, unnest(tsv) t WHERE label IS NOT NULL GROUP BY 1, 2) q
  ON c.class = q.label AND c.token = q.lexeme;

SELECT job_id AS job, status, version FROM gibbs_nb_train('spam', 'mail', 'tokens', 'label',
                                                           sweeps => 60, seed => 5) \gset
SELECT :'status', :version;
-- rows with NULL tokens are no documents: skipped, counted, no labels row
SELECT n_documents, n_skipped FROM gibbs_nb.models WHERE model_name = 'spam';
SELECT count(*) AS labels_rows, count(*) FILTER (WHERE id <= 4) AS of_null_tokens FROM spam_labels;

-- the trigger of Getting started
CREATE TRIGGER label_mail BEFORE INSERT OR UPDATE OF tokens ON mail
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('spam', 'tokens', 'predicted');
UPDATE mail SET tokens = tokens WHERE id IN (5, 6);
SELECT id, predicted FROM mail WHERE id IN (5, 6) ORDER BY id;
DROP TRIGGER label_mail ON mail;

-- jobs: chains count from 1 (the trace's and pg_stat_activity's numbering)
SELECT chain, chains FROM gibbs_nb_jobs WHERE job_id = :job;
SELECT DISTINCT chain FROM gibbs_nb.trace WHERE job_id = :job;
-- gibbs_nb_trace_plot of a job nobody may see is an error, as for gibbs_nb_wait
SELECT try('SELECT gibbs_nb_trace_plot(987654)');
SELECT try('SELECT gibbs_nb_trace_plot(NULL)');
SELECT try($$SELECT gibbs_nb_trace_plot($$ || :job || $$, NULL)$$);
SELECT gibbs_nb_trace_plot(:job, 10) ~ '^chain 1  [▁▂▃▄▅▆▇█]{10}  min ' AS plotted;
-- NULL arguments are 22004 everywhere
SELECT try('SELECT gibbs_nb_cancel(NULL)');
SELECT try('SELECT gibbs_nb_retrain(NULL)');
SELECT try($$SELECT gibbs_nb_retrain('spam', NULL)$$);
SELECT try('SELECT gibbs_nb_wait(NULL)');
SELECT try('SELECT gibbs_nb_drop(NULL)');
SELECT try('SELECT gibbs_nb_deploy(NULL, 1)');
SELECT try('SELECT gibbs_nb_set_retention(NULL, 1)');

-- ---- gibbs_nb_explain ----
-- the prior's row, the top words, the other known words, the unknown ones
SELECT kind, token, count, round(log_odds::numeric, 6) AS log_odds, round(share::numeric, 6) AS share,
       predicted, runner_up
FROM gibbs_nb_explain('spam', '{cheap,offer,offer,click,never_seen,never_seen,meeting}'::text[], 2);
-- its terms add up to gibbs_nb_predict_proba's log-odds, against every class,
-- for every document, text[] and tsvector alike (to 1e-9)
CREATE TABLE probe AS
SELECT id, tokens, tsv, gibbs_nb_predict_proba('spam', tokens) AS p,
       gibbs_nb_predict('spam', tokens) AS label FROM mail WHERE tokens IS NOT NULL;
SELECT count(*) AS pairs,
       bool_and(abs(x.vs[k] - (ln(p[x.pred]) - ln(p[k]))) < 1e-9) AS adds_up,
       bool_and(x.predicted = label) AS same_label,
       bool_and(abs(x.runner_up_odds - (ln(p[x.pred]) - ln(p[3 - x.pred]))) < 1e-9) AS runner_up
FROM probe,
     LATERAL (SELECT e.predicted,
                     array_position(gibbs_nb_classes('spam'), e.predicted) AS pred,
                     ARRAY[sum(e.log_odds_vs[1]), sum(e.log_odds_vs[2])] AS vs,
                     sum(e.log_odds) AS runner_up_odds
              FROM gibbs_nb_explain('spam', tokens, 3) e GROUP BY e.predicted) x,
     generate_series(1, 2) k;
CREATE TABLE probe_tsv AS
SELECT id, tsv, gibbs_nb_predict_proba('spam', tsv) AS p FROM mail WHERE tsv IS NOT NULL;
SELECT count(*) AS documents,
       bool_and(abs(x.odds - abs(ln(p[1]) - ln(p[2]))) < 1e-9) AS adds_up,
       bool_and(x.shares = 1 OR x.odds = 0) AS shares_sum_to_1
FROM probe_tsv,
     LATERAL (SELECT sum(e.log_odds) AS odds, round(sum(e.share)::numeric, 9) AS shares
              FROM gibbs_nb_explain('spam', tsv, 0) e) x;
-- three classes: against each of them
CREATE TABLE docs3 (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO docs3
SELECT i, array(SELECT (ARRAY['red', 'green', 'blue'])[1 + i % 3] || '_' || ((i * k) % 7)
                FROM generate_series(1, 4 + i % 5) k)
          || array(SELECT 'shared_' || ((i + k) % 11) FROM generate_series(1, 3) k),
       CASE WHEN i % 2 = 0 THEN (ARRAY['red', 'green', 'blue'])[1 + i % 3] END
FROM generate_series(1, 150) i;
SELECT status FROM gibbs_nb_train('three', 'docs3', 'tokens', 'label', sweeps => 30, seed => 2);
SELECT count(*) AS pairs, bool_and(abs(x.vs[k] - (ln(p[x.pred]) - ln(p[k]))) < 1e-9) AS adds_up,
       bool_and(abs(ln(x.ru) - ln((SELECT max(p[j]) FROM generate_series(1, 3) j WHERE j <> x.pred))) < 1e-9)
         AS runner_up  -- (ties as close as rounding may go either way)
FROM (SELECT tokens || ARRAY['red_1', 'blue_2'] AS tokens,
             gibbs_nb_predict_proba('three', tokens || ARRAY['red_1', 'blue_2']) AS p FROM docs3) d,
     LATERAL (SELECT array_position(gibbs_nb_classes('three'), min(e.predicted)) AS pred,
                     d.p[array_position(gibbs_nb_classes('three'), min(e.runner_up))] AS ru,
                     ARRAY[sum(e.log_odds_vs[1]), sum(e.log_odds_vs[2]), sum(e.log_odds_vs[3])] AS vs
              FROM gibbs_nb_explain('three', d.tokens, 2) e) x,
     generate_series(1, 3) k;
SELECT gibbs_nb_drop('three');
DROP TABLE docs3;
-- top => 0: the prior, the known words together, and the unknown ones, counted
SELECT kind, count FROM gibbs_nb_explain('spam', '{cheap,offer,zzz,zzz,zzz}'::text[], 0);
SELECT kind, count FROM gibbs_nb_explain('spam', to_tsvector('english', 'offer offer unheard'), 5);
-- a document the model knows nothing of: the prior alone decides
SELECT kind, count, share, predicted FROM gibbs_nb_explain('spam', '{}'::text[]);
SELECT try($$SELECT * FROM gibbs_nb_explain('spam', NULL::text[])$$);
SELECT try($$SELECT * FROM gibbs_nb_explain('spam', '{a}'::text[], -1)$$);
SELECT try($$SELECT * FROM gibbs_nb_explain('nobody', '{a}'::text[])$$);

-- ---- gibbs_nb_top_words ----
-- the log ratio of theta-hat against the other class, words seen min_count
-- times or more: the same as SQL over gibbs_nb.theta and the source
CREATE VIEW top_reference AS
SELECT t.class, t.token, ln(t.probability) - ln(o.probability) AS log_ratio, t.probability AS theta,
       c.n AS count
FROM gibbs_nb.theta t
JOIN gibbs_nb.theta o ON o.model_name = t.model_name AND o.version = t.version
                     AND o.token = t.token AND o.class <> t.class
JOIN (SELECT tok, count(*) AS n FROM mail, unnest(tokens) tok WHERE tok IS NOT NULL GROUP BY tok) c
  ON c.tok = t.token
WHERE t.model_name = 'spam' AND t.version = 1;
SELECT rank, token, round(log_ratio::numeric, 6) AS log_ratio, round(theta::numeric, 6) AS theta, count
FROM gibbs_nb_top_words('spam', 'spam', 5, 10);
SELECT count(*) AS words, bool_and(abs(w.log_ratio - r.log_ratio) < 1e-9) AS same_ratio,
       bool_and(abs(w.theta - r.theta) < 1e-12) AS same_theta, bool_and(w.count = r.count) AS same_count
FROM gibbs_nb_top_words('spam', 'ham', 1000, 0) w JOIN top_reference r ON r.class = 'ham' AND r.token = w.token;
SELECT array_agg(token ORDER BY rank) = (SELECT array_agg(token ORDER BY log_ratio DESC, token)
                                         FROM top_reference WHERE class = 'ham' AND count >= 30)
       AS same_ranking
FROM gibbs_nb_top_words('spam', 'ham', 1000, 30);
SELECT try($$SELECT * FROM gibbs_nb_top_words('spam', 'eggs')$$);
SELECT try($$SELECT * FROM gibbs_nb_top_words('spam', 'ham', -1)$$);
SELECT try($$SELECT * FROM gibbs_nb_top_words('spam', NULL)$$);

-- ---- gibbs_nb_models ----
-- a second version, then the first deployed: the view shows the serving one
SELECT version FROM gibbs_nb_train('spam', 'mail', 'tokens', 'label', sweeps => 40, seed => 6,
                                   gamma_theta => 0.5);
SELECT model_name, owner, serving_version, deployed, versions, latest_version, classes,
       n_documents, n_labeled, n_skipped, n_tokens, vocabulary_size, sampler, sweeps, gamma_theta,
       source, labels_table, packed_bytes > 0 AS has_size, labels_bytes > 0 AS has_labels_size
FROM gibbs_nb_models;
SELECT gibbs_nb_deploy('spam', 1);
SELECT serving_version, deployed, sweeps, gamma_theta FROM gibbs_nb_models;
-- top words follow the deployed version
SELECT bool_and(abs(w.theta - r.theta) < 1e-12) AS version_1
FROM gibbs_nb_top_words('spam', 'spam', 5, 10) w JOIN top_reference r ON r.class = 'spam' AND r.token = w.token;
-- how the tokens were made: the column's type, and a generated column's expression
SELECT tokenizer FROM gibbs_nb_models;
CREATE TABLE mail_tsv (id int PRIMARY KEY, body text, label text,
                       tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED);
INSERT INTO mail_tsv (id, body, label) SELECT id, body, label FROM mail;
SELECT status FROM gibbs_nb_train('stemmed', 'mail_tsv', 'tsv', 'label', sweeps => 10, seed => 1);
SELECT model_name, tokenizer FROM gibbs_nb_models ORDER BY 1;
-- and what the model knows of a document tokenized otherwise: a stemmed
-- model is given unstemmed words
SELECT kind, count FROM gibbs_nb_explain('stemmed', '{meeting,notes,offers}'::text[], 5);
SELECT gibbs_nb_drop('stemmed');
DROP TABLE mail_tsv;
-- another role sees none of it
CREATE ROLE gnb_other;
GRANT SELECT ON mail TO gnb_other;
SET ROLE gnb_other;
SELECT count(*) FROM gibbs_nb_models;
SELECT try($$SELECT * FROM gibbs_nb_top_words('spam', 'spam')$$);
SELECT try($$SELECT * FROM gibbs_nb_explain('spam', '{offer}'::text[])$$);
RESET ROLE;
REVOKE SELECT ON mail FROM gnb_other;
DROP ROLE gnb_other;

-- ---- warm starts: gibbs_nb_retrain(..., warm => true) ----
-- short documents, no labels: a cold chain climbs for some sweeps
CREATE TABLE notes (id int PRIMARY KEY, tokens text[]);
INSERT INTO notes
SELECT i, array(SELECT (ARRAY['red', 'green', 'blue'])[1 + i % 3] || '_' || ((i * k) % 5)
                FROM generate_series(1, 2) k) || ARRAY['shared_' || i % 4]
FROM generate_series(1, 600) i;
SELECT job_id AS cold_job FROM gibbs_nb_train('clusters', 'notes', 'tokens', n_classes => 3,
                                              sweeps => 60, burn_in => 30, seed => 4) \gset
CREATE TABLE v1_labels AS SELECT id, label FROM clusters_labels;
SELECT job_id AS warm_job FROM gibbs_nb_retrain('clusters', warm => true) \gset
-- the warm chain starts where the cold one was after its burn-in, not where it began
SELECT w.log_likelihood > c.log_likelihood AS warm_starts_higher,
       w.log_likelihood >= (SELECT min(log_likelihood) FROM gibbs_nb.trace
                            WHERE job_id = :cold_job AND sweep > 30) AS at_stationary_level
FROM gibbs_nb.trace w, gibbs_nb.trace c
WHERE w.job_id = :warm_job AND w.sweep = 1 AND c.job_id = :cold_job AND c.sweep = 1;
-- and keeps the clusters' names: documents keep their label
SELECT avg((a.label = b.label)::int) > 0.9 AS same_clusters
FROM clusters_labels b JOIN v1_labels a USING (id);
SELECT try($$SELECT gibbs_nb_retrain('clusters', true, NULL)$$);
SELECT gibbs_nb_drop('clusters');
DROP TABLE notes, v1_labels;
-- a warm start holds the previous version's labels, each id's text, beside
-- the corpus: within gibbs_nb.max_job_memory (3,000 ids of 1,000 bytes, about
-- 3 MB; not counted before, the warm retrain ran under a cap it broke)
CREATE TABLE long_ids (id text PRIMARY KEY, tokens text[], label text);
INSERT INTO long_ids
SELECT lpad(i::text, 1000, 'y'), ARRAY['w' || i % 7, 'v' || i % 5],
       CASE WHEN i % 10 = 0 THEN CASE WHEN i % 20 = 0 THEN 'a' ELSE 'b' END END
FROM generate_series(1, 3000) i;
SELECT status FROM gibbs_nb_train('long', 'long_ids', 'tokens', 'label', sweeps => 4, seed => 1);
SET gibbs_nb.max_job_memory = '6MB';
SELECT status AS cold_under_6mb FROM gibbs_nb_retrain('long');
DO $$
DECLARE
  state text; msg text; detail text; hint text;
BEGIN
  PERFORM gibbs_nb_retrain('long', warm => true);
  RAISE NOTICE 'the warm job succeeded';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
                          hint = PG_EXCEPTION_HINT;
  RAISE NOTICE '%: % / % / %', state, regexp_replace(msg, '\d+', 'N', 'g'), split_part(detail, ':', 1),
               hint;
END $$;
RESET gibbs_nb.max_job_memory;
SELECT status AS warm_with_room FROM gibbs_nb_retrain('long', warm => true);
-- a version trained before gammas were bounded (or imported from one):
-- retraining says it is the model's gamma, not an argument of the call
UPDATE gibbs_nb.models SET gamma_theta = 5e6
WHERE model_name = 'long' AND version = (SELECT max(version) FROM gibbs_nb.models
                                         WHERE model_name = 'long');
SELECT try($$SELECT gibbs_nb_retrain('long')$$);
SELECT gibbs_nb_drop('long');
DROP TABLE long_ids;

DROP VIEW top_reference;
DROP TABLE mail, probe, probe_tsv;
DROP EXTENSION gibbs_nb;
