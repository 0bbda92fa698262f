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
DROP TABLE mail;
DROP EXTENSION gibbs_nb;
