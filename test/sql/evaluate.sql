-- gibbs_nb_evaluate: metrics of a model on a labelled table, checked against
-- the same metrics computed here in plain SQL from gibbs_nb_predict and
-- gibbs_nb_predict_proba (make check-sklearn compares the same fixture with
-- scikit-learn: test/metrics).
CREATE EXTENSION gibbs_nb;
-- training's NOTICEs (progress, diagnostics) are not what this test checks
SET client_min_messages = warning;
-- fixture begin (make check-sklearn loads the lines up to 'fixture end')
-- A model of three colours (every training document labelled: the model is
-- the closed form, whatever the sampler), and 400 labelled documents to evaluate it on:
-- mixtures of the colours' words (and words it never saw), labelled with
-- their first word's colour, except that some labels are wrong, some are
-- colours the model does not know ('purple', 'amber'), some are NULL, and
-- some documents have no tokens.
CREATE TABLE colour_train (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO colour_train
SELECT i,
       array(SELECT (ARRAY['red', 'green', 'blue'])[1 + i % 3] || '_' || ((i * k) % 7)
             FROM generate_series(1, 4 + i % 5) k)
       || array(SELECT 'shared_' || ((i + k) % 11) FROM generate_series(1, 3) k),
       (ARRAY['red', 'green', 'blue'])[1 + i % 3]
FROM generate_series(1, 300) i;
SELECT status FROM gibbs_nb_train('colours', 'colour_train', 'tokens', 'label', sweeps => 60,
                                  seed => 5, gamma_theta => 0.5);
CREATE TABLE labelled (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO labelled
SELECT i,
       CASE WHEN i % 41 <> 0 THEN
         array(SELECT (ARRAY['red', 'green', 'blue', 'unseen'])[1 + (i * k + k * k) % 4] || '_' || (k % 7)
               FROM generate_series(1, 1 + i % 6) k)
         || array(SELECT 'shared_' || ((i * k) % 11) FROM generate_series(1, i % 3) k)
       END,
       CASE WHEN i % 37 = 0 THEN NULL
            WHEN i % 23 = 0 THEN 'purple'
            WHEN i % 31 = 0 THEN 'amber'
            WHEN i % 7 = 0 THEN (ARRAY['red', 'green', 'blue'])[1 + i % 3]
            ELSE (ARRAY['red', 'green', 'blue', 'red'])[1 + (i + 1) % 4]
       END
FROM generate_series(1, 400) i;
-- fixture end

-- the row, rounded for display
SELECT model_name, version, n_documents, n_skipped, n_unknown,
       round(accuracy::numeric, 10) AS accuracy, round(macro_f1::numeric, 10) AS macro_f1,
       round(log_loss::numeric, 10) AS log_loss, classes,
       (SELECT array_agg(round(x::numeric, 6)) FROM unnest("precision") x) AS "precision",
       (SELECT array_agg(round(x::numeric, 6)) FROM unnest(recall) x) AS recall,
       (SELECT array_agg(round(x::numeric, 6)) FROM unnest(f1) x) AS f1,
       support, confusion
FROM gibbs_nb_evaluate('colours', 'labelled', 'tokens', 'label') \gx

-- the same metrics in SQL, from each document's prediction
CREATE TEMP TABLE scored AS
SELECT label, gibbs_nb_predict('colours', tokens) AS pred,
       gibbs_nb_predict_proba('colours', tokens) AS p
FROM labelled WHERE label IS NOT NULL AND tokens IS NOT NULL;
-- the model's classes, then unknown labels in byte order
CREATE TEMP TABLE cls AS
SELECT c AS class, o AS pos FROM unnest(gibbs_nb_classes('colours')) WITH ORDINALITY u(c, o)
UNION ALL
SELECT label, 3 + row_number() OVER (ORDER BY label COLLATE "C")
FROM (SELECT DISTINCT label FROM scored WHERE label <> ALL (gibbs_nb_classes('colours'))) u;
CREATE TEMP TABLE per_class AS
SELECT c.class, c.pos,
       count(*) FILTER (WHERE s.label = c.class) AS support,
       count(*) FILTER (WHERE s.pred = c.class) AS predicted,
       count(*) FILTER (WHERE s.label = c.class AND s.pred = c.class) AS tp
FROM cls c CROSS JOIN scored s GROUP BY c.class, c.pos;
CREATE TEMP VIEW reference AS
WITH pr AS (
  SELECT class, pos, support, predicted,
         CASE WHEN predicted = 0 THEN 0 ELSE tp::float8 / predicted END AS prec,
         CASE WHEN support = 0 THEN 0 ELSE tp::float8 / support END AS rec
  FROM per_class),
f AS (
  SELECT *, CASE WHEN prec + rec = 0 THEN 0 ELSE 2 * prec * rec / (prec + rec) END AS f1
  FROM pr)
SELECT (SELECT count(*) FROM scored) AS n_documents,
       (SELECT count(*) FROM labelled) - (SELECT count(*) FROM scored) AS n_skipped,
       (SELECT count(*) FROM scored WHERE label <> ALL (gibbs_nb_classes('colours'))) AS n_unknown,
       (SELECT avg((label = pred)::int) FROM scored)::float8 AS accuracy,
       (SELECT avg(f1) FROM f WHERE support > 0 OR predicted > 0) AS macro_f1,
       (SELECT avg(-ln(greatest(least(coalesce(p[array_position(gibbs_nb_classes('colours'), label)], 0),
                                      1 - 2.220446049250313e-16), 2.220446049250313e-16)))
        FROM scored) AS log_loss,
       (SELECT array_agg(class ORDER BY pos) FROM f) AS classes,
       (SELECT array_agg(prec ORDER BY pos) FROM f) AS "precision",
       (SELECT array_agg(rec ORDER BY pos) FROM f) AS recall,
       (SELECT array_agg(f1 ORDER BY pos) FROM f) AS f1,
       (SELECT array_agg(support ORDER BY pos) FROM f) AS support,
       (SELECT array_agg(r ORDER BY t.pos) FROM
          (SELECT t.pos, array_agg((SELECT count(*) FROM scored s WHERE s.label = t.class AND s.pred = q.class)
                                   ORDER BY q.pos) AS r
           FROM cls t CROSS JOIN cls q GROUP BY t.pos) t) AS confusion;
CREATE FUNCTION max_diff(a float8[], b float8[]) RETURNS float8 LANGUAGE sql AS $$
  SELECT max(abs(x - y)) FROM unnest(a, b) u(x, y) $$;
SELECT e.n_documents = r.n_documents AS n_documents, e.n_skipped = r.n_skipped AS n_skipped,
       e.n_unknown = r.n_unknown AS n_unknown,
       abs(e.accuracy - r.accuracy) < 1e-12 AS accuracy, abs(e.macro_f1 - r.macro_f1) < 1e-12 AS macro_f1,
       abs(e.log_loss - r.log_loss) < 1e-12 AS log_loss, e.classes = r.classes AS classes,
       max_diff(e."precision", r."precision") < 1e-12 AS "precision",
       max_diff(e.recall, r.recall) < 1e-12 AS recall, max_diff(e.f1, r.f1) < 1e-12 AS f1,
       e.support = r.support AS support, e.confusion = r.confusion AS confusion
FROM gibbs_nb_evaluate('colours', 'labelled', 'tokens', 'label') e, reference r \gx
-- an unknown label costs -ln(eps)
SELECT round(-ln(2.220446049250313e-16)::numeric, 4) AS unknown_label_cost;
-- the confusion matrix is classes x classes: rows true, columns predicted
SELECT array_dims(confusion) FROM gibbs_nb_evaluate('colours', 'labelled', 'tokens', 'label');
-- per-class rows, as a user would unnest them
SELECT u.class, round(u.p::numeric, 4) AS "precision", round(u.r::numeric, 4) AS recall,
       round(u.f::numeric, 4) AS f1, u.s AS support
FROM gibbs_nb_evaluate('colours', 'labelled', 'tokens', 'label') e,
     unnest(e.classes, e."precision", e.recall, e.f1, e.support) u(class, p, r, f, s);

-- a class that no document has and none is predicted as: no precision,
-- recall or F1 (NULL), and not in macro-F1; the other classes' are
CREATE TABLE two_red (id int, tokens text[], label text);
INSERT INTO two_red VALUES (1, '{red_1,red_2}', 'red'), (2, '{red_3}', 'red');
SELECT n_documents, accuracy, macro_f1, "precision", recall, f1, support
FROM gibbs_nb_evaluate('colours', 'two_red', 'tokens', 'label');
-- nothing to score: counts, no metrics
CREATE TABLE nothing (id int, tokens text[], label text);
INSERT INTO nothing VALUES (1, '{red_1}', NULL), (2, NULL, 'red');
SELECT n_documents, n_skipped, accuracy, macro_f1, log_loss, support, confusion
FROM gibbs_nb_evaluate('colours', 'nothing', 'tokens', 'label');

-- tsvector tokens, a label of another type (compared as text), quoted and
-- schema-qualified names, a view
CREATE SCHEMA "Eval Schema";
CREATE TABLE "Eval Schema"."odd ""table""" ("Tok ens" tsvector, "La;bel" varchar(10));
INSERT INTO "Eval Schema"."odd ""table"""
SELECT (SELECT string_agg(t || ':' || o, ' ') FROM unnest(tokens) WITH ORDINALITY u(t, o))::tsvector,
       label
FROM labelled WHERE id <= 100;
CREATE VIEW "Eval Schema".v AS SELECT * FROM "Eval Schema"."odd ""table""";
SELECT n_documents, n_skipped, round(accuracy::numeric, 6) AS accuracy
FROM gibbs_nb_evaluate('colours', '"Eval Schema"."odd ""table"""', 'Tok ens', 'La;bel');
SELECT n_documents, round(accuracy::numeric, 6) AS accuracy
FROM gibbs_nb_evaluate('colours', '"Eval Schema".v', 'Tok ens', 'La;bel');
-- the same documents as text[] (a lexeme's positions are its repeats): the
-- same metrics
CREATE VIEW labelled_100 AS SELECT * FROM labelled WHERE id <= 100;
SELECT a.confusion = b.confusion AND a.log_loss = b.log_loss AS same_metrics
FROM gibbs_nb_evaluate('colours', '"Eval Schema".v', 'Tok ens', 'La;bel') a,
     gibbs_nb_evaluate('colours', 'labelled_100', 'tokens', 'label') b;
CREATE TABLE int_labels (tokens text[], label int);
INSERT INTO int_labels VALUES ('{red_1}', 1), ('{blue_2}', 2);
SELECT n_documents, n_unknown, classes, support FROM gibbs_nb_evaluate('colours', 'int_labels', 'tokens', 'label');

-- errors
SELECT try($$SELECT * FROM gibbs_nb_evaluate('no_such_model', 'labelled', 'tokens', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate(NULL, 'labelled', 'tokens', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', NULL, 'tokens', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled', NULL, 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled', 'tokens', NULL)$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled', 'no_such_column', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled', 'tokens', 'no_such_column')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled', 'label', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled', 'ctid', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 'labelled_pkey', 'tokens', 'label')$$);
SELECT try($$SELECT * FROM gibbs_nb_evaluate('colours', 0, 'tokens', 'label')$$);

-- the source is read as the caller, with row security and column
-- privileges; a role sees only its own models
CREATE ROLE eval_owner;
CREATE ROLE eval_other;
GRANT CREATE ON SCHEMA public TO eval_owner;
GRANT SELECT ON colour_train TO eval_owner;
GRANT SELECT (tokens) ON labelled TO eval_owner;
CREATE TABLE secured (tokens text[], label text, who text);
INSERT INTO secured VALUES ('{red_1}', 'red', 'eval_owner'), ('{blue_1}', 'blue', 'someone_else');
ALTER TABLE secured ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON secured USING (who = current_user);
GRANT SELECT ON secured TO eval_owner, eval_other;
SET ROLE eval_owner;
SELECT status FROM gibbs_nb_train('owned', 'colour_train', 'tokens', 'label', sweeps => 10, seed => 1,
                                  labels_table => 'owned_labels');
SELECT n_documents, support FROM gibbs_nb_evaluate('owned', 'secured', 'tokens', 'label');
SELECT try($$SELECT * FROM gibbs_nb_evaluate('owned', 'labelled', 'tokens', 'label')$$);
SET ROLE eval_other;
SELECT try($$SELECT * FROM gibbs_nb_evaluate('owned', 'secured', 'tokens', 'label')$$);
SET ROLE eval_owner;
SELECT gibbs_nb_drop('owned');
RESET ROLE;
REVOKE ALL ON SCHEMA public FROM eval_owner;
REVOKE ALL ON colour_train, labelled, secured FROM eval_owner, eval_other;
DROP ROLE eval_owner;
DROP ROLE eval_other;

SELECT gibbs_nb_drop('colours');
DROP SCHEMA "Eval Schema" CASCADE;
DROP FUNCTION max_diff(float8[], float8[]);
DROP VIEW labelled_100, reference;
DROP TABLE colour_train, labelled, two_red, nothing, int_labels, secured;
DROP EXTENSION gibbs_nb;
RESET client_min_messages;
