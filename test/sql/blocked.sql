-- The blocked sampler (issue 27): sampler => 'blocked' trains, records its
-- name, and gives the same model whether its chains run in parallel
-- workers or one after another; a blocked model exports, imports and
-- retrains like any other.
CREATE EXTENSION gibbs_nb;
CREATE TABLE blocked_mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO blocked_mail
SELECT i,
       CASE WHEN i % 2 = 0
            THEN ARRAY['cheap', 'pills', 'buy', 'now', 'w' || (i % 7), 'x' || (i % 13)]
            ELSE ARRAY['meeting', 'agenda', 'notes', 'team', 'w' || (i % 5), 'x' || (i % 11)] END,
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 600) i;
-- chain workers take the job slots that are free: none bounds them here
SET gibbs_nb.max_jobs_per_role = 0;

SET gibbs_nb.max_chain_workers = 0;
SELECT status, sweeps_done FROM gibbs_nb_train('bl_seq', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 80, burn_in => 20, chains => 3, seed => 21,
    gamma_theta => NULL, unlabeled_weight => 0.7);
SET gibbs_nb.max_chain_workers = 4;
SELECT status FROM gibbs_nb_train('bl_par', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 80, burn_in => 20, chains => 3, seed => 21,
    gamma_theta => NULL, unlabeled_weight => 0.7);
RESET gibbs_nb.max_chain_workers;
SELECT model_name, sampler, chains, gamma_theta_sampled, unlabeled_weight
FROM gibbs_nb.models WHERE model_name LIKE 'bl_%' ORDER BY 1;
-- every unlabelled document in its kind's class, surely
SELECT count(*) FILTER (WHERE label = CASE WHEN id % 2 = 0 THEN 'spam' ELSE 'ham' END) AS right_labels,
       count(*) AS documents, bool_and(probability > 0.99) AS sure
FROM bl_seq_labels;
-- parallel chains: the same model bit for bit
SELECT p.log_theta = s.log_theta AS theta, p.log_pi = s.log_pi AS pi,
       doc_labels(p.version_id) = doc_labels(s.version_id) AS labels
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_par' AND s.model_name = 'bl_seq';
SELECT p.log_likelihood = s.log_likelihood AND p.ess = s.ess AND p.gamma_theta = s.gamma_theta
       AND p.split_r_hat = s.split_r_hat AS figures
FROM gibbs_nb.models p, gibbs_nb.models s
WHERE p.model_name = 'bl_par' AND s.model_name = 'bl_seq';
-- the same seed and data on another sampler: another model
SELECT status FROM gibbs_nb_train('bl_paper', 'blocked_mail', 'tokens', 'label',
    sampler => 'paper', sweeps => 80, burn_in => 20, chains => 3, seed => 21,
    gamma_theta => NULL, unlabeled_weight => 0.7);
SELECT p.log_theta = s.log_theta AS same_theta
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_paper' AND s.model_name = 'bl_seq';

-- retrain keeps the sampler; export and import carry its name
SELECT status FROM gibbs_nb_retrain('bl_seq');
SELECT version, sampler FROM gibbs_nb.models WHERE model_name = 'bl_seq' ORDER BY version;
SELECT gibbs_nb_import('bl_copy', gibbs_nb_export('bl_seq')) IS NOT NULL AS imported;
SELECT sampler FROM gibbs_nb.models WHERE model_name = 'bl_copy';
SELECT gibbs_nb_predict_proba('bl_seq', '{cheap,team}'::text[]) =
       gibbs_nb_predict_proba('bl_copy', '{cheap,team}'::text[]) AS same_prediction;

-- sweep_workers (issue 27 item 2): one chain's sweeps shared by 1, 2 and 3
-- processes, two chains one after another: the same model bit for bit;
-- the setting gives the number when the call does not
SET gibbs_nb.max_chain_workers = 4;
SELECT w, (SELECT status FROM gibbs_nb_train('bl_sw' || w, 'blocked_mail', 'tokens', 'label',
              sampler => 'blocked', sweeps => 60, burn_in => 20, chains => 2, seed => 33,
              unlabeled_weight => 0.5, gamma_theta => NULL, sweep_workers => w))
FROM generate_series(1, 3) w;
SET gibbs_nb.sweep_workers = 2;
SELECT status FROM gibbs_nb_train('bl_sw_setting', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 60, burn_in => 20, chains => 2, seed => 33,
    unlabeled_weight => 0.5, gamma_theta => NULL);
RESET gibbs_nb.sweep_workers;
RESET gibbs_nb.max_chain_workers;
SELECT p.model_name, p.log_theta = s.log_theta AS theta, p.log_pi = s.log_pi AS pi,
       doc_labels(p.version_id) = doc_labels(s.version_id) AS labels
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name IN ('bl_sw2', 'bl_sw3', 'bl_sw_setting') AND s.model_name = 'bl_sw1'
ORDER BY 1;
SELECT p.model_name, p.log_likelihood = s.log_likelihood AND p.ess = s.ess
       AND p.gamma_theta = s.gamma_theta AS figures
FROM gibbs_nb.models p, gibbs_nb.models s
WHERE p.model_name IN ('bl_sw2', 'bl_sw3', 'bl_sw_setting') AND s.model_name = 'bl_sw1'
ORDER BY 1;
-- the trace too: every sweep of both chains
SELECT m.model_name, count(*) AS differing FROM gibbs_nb.models m
JOIN gibbs_nb.trace t USING (job_id)
WHERE m.model_name IN ('bl_sw2', 'bl_sw3')
  AND NOT EXISTS (SELECT FROM gibbs_nb.trace t1 JOIN gibbs_nb.models s USING (job_id)
                  WHERE s.model_name = 'bl_sw1' AND t1.chain = t.chain AND t1.sweep = t.sweep
                    AND t1.log_likelihood = t.log_likelihood AND t1.changed = t.changed)
GROUP BY 1 ORDER BY 1;
SELECT count(*) AS trace_rows FROM gibbs_nb.trace t JOIN gibbs_nb.models m USING (job_id)
WHERE m.model_name = 'bl_sw3';
-- retrain takes it too, and a warm start shares its sweeps alike
SET gibbs_nb.max_chain_workers = 4;
SELECT status FROM gibbs_nb_retrain('bl_sw1', warm => true, sweep_workers => 1);
SELECT status FROM gibbs_nb_retrain('bl_sw3', warm => true, sweep_workers => 3);
RESET gibbs_nb.max_chain_workers;
SELECT p.log_theta = s.log_theta AND doc_labels(p.version_id) = doc_labels(s.version_id) AS warm_same
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_sw3' AND p.version = 2 AND s.model_name = 'bl_sw1' AND s.version = 2;
-- a document's draws are named by its id (an integer id is its own key,
-- another its type's 64-bit hash), so that whoever holds a document draws it
-- alike: text ids, shared by 1 and 2 processes, give one model; an id type
-- without a hash function is refused, at the call, for this sampler only
CREATE TABLE blocked_mail_text AS SELECT 'mail-' || id AS id, tokens, label FROM blocked_mail;
ALTER TABLE blocked_mail_text ADD PRIMARY KEY (id);
SET gibbs_nb.max_chain_workers = 4;
SELECT w, (SELECT status FROM gibbs_nb_train('bl_text' || w, 'blocked_mail_text', 'tokens', 'label',
              sampler => 'blocked', sweeps => 30, burn_in => 10, seed => 33,
              unlabeled_weight => 0.5, sweep_workers => w))
FROM generate_series(1, 2) w;
RESET gibbs_nb.max_chain_workers;
SELECT p.log_theta = s.log_theta AND doc_labels(p.version_id) = doc_labels(s.version_id) AS text_ids_same
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_text2' AND s.model_name = 'bl_text1';
SELECT count(*) FILTER (WHERE label = CASE WHEN substr(id, 6)::int % 2 = 0 THEN 'spam' ELSE 'ham' END)
         AS right_labels, count(*) AS documents
FROM public.bl_text1_labels;
-- a chain whose documents are held by nodes (issue 27 item 3): with
-- gibbs_nb.blocked_nodes = n (a developer's setting) the job's documents
-- are cut into n parts, each a node reached through SQL; the chain holds
-- only the counts.  The same model bit for bit as bl_sw1's (integer ids,
-- lambda 0.5, gamma_theta sampled) and bl_text1's (hashed text ids)
SET gibbs_nb.blocked_nodes = 1;
SELECT status FROM gibbs_nb_train('bl_nodes1', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 60, burn_in => 20, chains => 2, seed => 33,
    unlabeled_weight => 0.5, gamma_theta => NULL);
SET gibbs_nb.blocked_nodes = 3;
SELECT status FROM gibbs_nb_train('bl_nodes3', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 60, burn_in => 20, chains => 2, seed => 33,
    unlabeled_weight => 0.5, gamma_theta => NULL);
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_text_nodes', 'blocked_mail_text', 'tokens', 'label',
    sampler => 'blocked', sweeps => 30, burn_in => 10, seed => 33, unlabeled_weight => 0.5);
RESET gibbs_nb.blocked_nodes;
-- (the job's worker read only the ids and the words' counts: the vocabulary,
-- the counts and the ids are the same as the local read's)
SELECT p.model_name, p.log_theta = s.log_theta AS theta, p.log_pi = s.log_pi AS pi,
       doc_labels(p.version_id) = doc_labels(s.version_id) AS labels,
       p.tokens = s.tokens AND p.word_counts = s.word_counts
       AS vocabulary
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE (p.model_name IN ('bl_nodes1', 'bl_nodes3') AND s.model_name = 'bl_sw1' AND s.version = 1)
   OR (p.model_name = 'bl_text_nodes' AND s.model_name = 'bl_text1')
ORDER BY 1;
SELECT p.model_name, p.log_likelihood = s.log_likelihood AND p.ess IS NOT DISTINCT FROM s.ess
       AND p.gamma_theta = s.gamma_theta AND p.split_r_hat IS NOT DISTINCT FROM s.split_r_hat
       AS figures,
       (p.n_documents, p.n_labeled, p.n_skipped, p.n_tokens, p.vocabulary_size, p.warnings,
        p.labels_agreement, p.labels_only_agreement, p.chain_agreement) IS NOT DISTINCT FROM
       (s.n_documents, s.n_labeled, s.n_skipped, s.n_tokens, s.vocabulary_size, s.warnings,
        s.labels_agreement, s.labels_only_agreement, s.chain_agreement) AS counts
FROM gibbs_nb.models p, gibbs_nb.models s
WHERE (p.model_name IN ('bl_nodes1', 'bl_nodes3') AND s.model_name = 'bl_sw1' AND s.version = 1)
   OR (p.model_name = 'bl_text_nodes' AND s.model_name = 'bl_text1')
ORDER BY 1;
SELECT m.model_name, count(*) AS differing FROM gibbs_nb.models m
JOIN gibbs_nb.trace t USING (job_id)
WHERE m.model_name = 'bl_nodes3'
  AND NOT EXISTS (SELECT FROM gibbs_nb.trace t1 JOIN gibbs_nb.models s USING (job_id)
                  WHERE s.model_name = 'bl_sw1' AND s.version = 1 AND t1.chain = t.chain
                    AND t1.sweep = t.sweep AND t1.log_likelihood = t.log_likelihood
                    AND t1.changed = t.changed)
GROUP BY 1 ORDER BY 1;
-- few_labels.sql's misfit, by default: the label check makes the version
-- the labels-only model, whose probabilities the nodes give for the
-- documents they hold, the same as the local job's
CREATE TABLE bl_misfit (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO bl_misfit
SELECT i, ARRAY[t || '1', t || '2', t || '3', t || '4', t || '5', l], CASE WHEN i <= 20 THEN l END
FROM generate_series(1, 800) i,
     LATERAL (SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END,
                     CASE WHEN i % 4 < 2 THEN 'x' ELSE 'y' END) s(t, l);
SELECT status FROM gibbs_nb_train('bl_misfit', 'bl_misfit', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'blocked');
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_misfit_nodes', 'bl_misfit', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'blocked');
RESET gibbs_nb.blocked_nodes;
SELECT m.model_name, m.unlabeled_weight, m.unlabeled_weight_chosen,
       doc_labels(p.version_id) = doc_labels(s.version_id) AS labels, p.log_theta = s.log_theta AS theta
FROM gibbs_nb.models m JOIN gibbs_nb.packed p USING (model_name, version), gibbs_nb.packed s
WHERE m.model_name = 'bl_misfit_nodes' AND s.model_name = 'bl_misfit';
-- The nodes write their documents' rows of the labels table where they are
-- (one INSERT ... SELECT over the source, each row's label from the node
-- that holds it: gibbs_nb.blocked_node_label) when the job's caller owns the
-- model; else (a member of the owner's role retrains, which a node in the
-- caller's backend cannot write as the owner; a version deployed in its
-- stead) the job's worker takes their estimates and writes them itself.
-- The same rows either way, and the local job's.  Each INSERT into the
-- labels table is logged with its number of rows: the clamped documents'
-- then the nodes', or all in one
CREATE FUNCTION bl_labels_differ(a regclass, b regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s x FULL JOIN %s y USING (id) '
                 'WHERE x.id IS NULL OR y.id IS NULL OR (x.label, x.probability, x.probabilities) '
                 'IS DISTINCT FROM (y.label, y.probability, y.probabilities)', a, b) INTO n;
  RETURN n;
END $$;
SELECT bl_labels_differ('bl_misfit_labels', 'bl_misfit_nodes_labels') AS misfit_rows_differing;
CREATE ROLE bl_group;
CREATE ROLE bl_member IN ROLE bl_group;
GRANT CREATE ON SCHEMA public TO bl_group;
GRANT SELECT ON bl_misfit TO bl_group;
CREATE TABLE bl_label_statements (n serial, rows bigint, version int);
GRANT INSERT ON bl_label_statements TO bl_group;
GRANT USAGE ON SEQUENCE bl_label_statements_n_seq TO bl_group;
CREATE FUNCTION bl_log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.bl_label_statements (rows, version) SELECT count(*), max(version) FROM new_rows;
  RETURN NULL;
END $$;
SET gibbs_nb.blocked_nodes = 2;
SET ROLE bl_group;
SELECT status FROM gibbs_nb_train('bl_grp', 'bl_misfit', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'blocked');
CREATE TRIGGER log_rows AFTER INSERT ON bl_grp_labels REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION public.bl_log_statement();
SELECT status FROM gibbs_nb_retrain('bl_grp');
SET ROLE bl_member;
SELECT status FROM gibbs_nb_retrain('bl_grp');
SET ROLE bl_group;
SELECT gibbs_nb_deploy('bl_grp', 1);
SELECT status FROM gibbs_nb_retrain('bl_grp');
RESET ROLE;
RESET gibbs_nb.blocked_nodes;
SELECT string_agg(rows || ' of version ' || version, ', ' ORDER BY n) AS inserts FROM bl_label_statements;
SELECT p.version, doc_labels(p.version_id) = doc_labels(s.version_id) AS labels
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_grp' AND s.model_name = 'bl_misfit' ORDER BY 1;
SELECT bl_labels_differ('bl_misfit_labels', 'bl_grp_labels') AS group_rows_differing;
-- ids whose text depends on the settings (dates): the nodes write their
-- rows, and the version's labels keep the ids read back as text made under
-- fixed settings (whatever the caller's DateStyle): the local job's
TRUNCATE bl_label_statements;
CREATE TABLE bl_dated AS SELECT DATE '2020-01-01' + id AS id, tokens, label FROM bl_misfit;
SELECT status FROM gibbs_nb_train('bl_dated_local', 'bl_dated', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'blocked');
SET gibbs_nb.blocked_nodes = 2;
SET datestyle = 'SQL, DMY';
SELECT status FROM gibbs_nb_train('bl_dated', 'bl_dated', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'blocked');
CREATE TRIGGER log_rows AFTER INSERT ON bl_dated_labels REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION public.bl_log_statement();
SELECT status FROM gibbs_nb_retrain('bl_dated');
RESET datestyle;
RESET gibbs_nb.blocked_nodes;
SELECT string_agg(rows || ' of version ' || version, ', ' ORDER BY n) AS inserts FROM bl_label_statements;
SELECT doc_labels(p.version_id) = doc_labels(s.version_id) AS labels,
       bl_labels_differ('bl_dated_local_labels', 'bl_dated_labels') AS rows_differing
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_dated' AND p.version = 2 AND s.model_name = 'bl_dated_local';
-- a labels table whose ids are no longer of the source's type (its owner
-- altered it): the job's worker writes the rows, as the table takes them
ALTER TABLE bl_dated_labels ALTER COLUMN id TYPE timestamp;
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_retrain('bl_dated');
RESET gibbs_nb.blocked_nodes;
SELECT string_agg(rows || ' of version ' || version, ', ' ORDER BY n) AS inserts FROM bl_label_statements;
SELECT doc_labels(p.version_id) = doc_labels(s.version_id) AS labels
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_dated' AND p.version = 3 AND s.model_name = 'bl_dated_local';
-- a warm start through nodes under another DateStyle (the database's, which
-- the job's worker takes): the job's worker makes the ids' text under the
-- fixed settings the version's labels were written under, so each document
-- starts warm as it does locally (a few sweeps, so that the start shows)
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET datestyle = %L', current_database(), 'SQL, DMY'); END $$;
SELECT status FROM gibbs_nb_train('bl_dw_local', 'bl_dated', 'tokens', 'label', sweeps => 3,
                                  burn_in => 0, seed => 3, sampler => 'blocked', unlabeled_weight => 0.5);
SELECT status FROM gibbs_nb_retrain('bl_dw_local', warm => true);
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_dw', 'bl_dated', 'tokens', 'label', sweeps => 3,
                                  burn_in => 0, seed => 3, sampler => 'blocked', unlabeled_weight => 0.5);
SELECT status FROM gibbs_nb_retrain('bl_dw', warm => true);
RESET gibbs_nb.blocked_nodes;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET datestyle', current_database()); END $$;
SELECT p.version, p.log_theta = s.log_theta AND doc_labels(p.version_id) = doc_labels(s.version_id) AS same,
       doc_labels(p.version_id) = doc_labels(c.version_id) AS as_cold
FROM gibbs_nb.packed p JOIN gibbs_nb.packed s USING (version), gibbs_nb.packed c
WHERE p.model_name = 'bl_dw' AND s.model_name = 'bl_dw_local'
  AND c.model_name = 'bl_dw_local' AND c.version = 1 ORDER BY 1;
SELECT gibbs_nb_drop('bl_dw'), gibbs_nb_drop('bl_dw_local');
SELECT gibbs_nb_drop('bl_dated'), gibbs_nb_drop('bl_dated_local');
DROP TABLE bl_dated;
-- more documents than the read-back takes at a time (GNB_LABELS_FETCH,
-- 10,000): every batch read and written, the local job's labels
CREATE TABLE bl_many (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO bl_many
SELECT i, ARRAY['w' || i % 7, 'v' || i % 11], CASE WHEN i % 50 = 0 THEN (ARRAY['a', 'b'])[1 + i % 100 / 50] END
FROM generate_series(1, 10300) i;
SELECT status FROM gibbs_nb_train('bl_many_local', 'bl_many', 'tokens', 'label', sweeps => 4,
                                  burn_in => 1, seed => 2, sampler => 'blocked', unlabeled_weight => 0.5);
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_many', 'bl_many', 'tokens', 'label', sweeps => 4,
                                  burn_in => 1, seed => 2, sampler => 'blocked', unlabeled_weight => 0.5);
RESET gibbs_nb.blocked_nodes;
SELECT doc_labels(p.version_id) = doc_labels(s.version_id) AS labels,
       bl_labels_differ('bl_many_local_labels', 'bl_many_labels') AS rows_differing
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_many' AND s.model_name = 'bl_many_local';
-- and when the nodes cannot write them where they are (here: the labels
-- table's ids altered to another type), their labels come to the job's
-- worker a batch at a time, into the version's documents' labels, and the
-- labels table is written from those, a batch at a time
ALTER TABLE bl_many_labels ALTER COLUMN id TYPE bigint;
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_retrain('bl_many');
RESET gibbs_nb.blocked_nodes;
SELECT doc_labels(p.version_id) = doc_labels(s.version_id) AS labels,
       bl_labels_differ('bl_many_local_labels', 'bl_many_labels') AS rows_differing,
       (SELECT count(*) FROM bl_many_labels WHERE version = 2) AS rows
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_many' AND p.version = 2 AND s.model_name = 'bl_many_local';
SELECT gibbs_nb_drop('bl_many'), gibbs_nb_drop('bl_many_local');
DROP TABLE bl_many;
-- the version's labels read back from a labels table whose owner's trigger
-- emptied them: refused (55000), nothing published
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_emptied', 'bl_misfit', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked');
CREATE FUNCTION bl_empty_probabilities() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.probabilities := NULL;
  RETURN NEW;
END $$;
CREATE TRIGGER empty_them BEFORE INSERT ON bl_emptied_labels
FOR EACH ROW EXECUTE FUNCTION public.bl_empty_probabilities();
SELECT try($$SELECT gibbs_nb_retrain('bl_emptied')$$) AS emptied;
RESET gibbs_nb.blocked_nodes;
SELECT max(version) AS versions FROM gibbs_nb.models WHERE model_name = 'bl_emptied';
SELECT gibbs_nb_drop('bl_emptied');
DROP FUNCTION bl_empty_probabilities();
-- rows of the source gone between the job's read and the nodes' writing
-- (a view that shows 10 fewer once the labels table's first INSERT, the
-- clamped documents', has run): 55000, nothing of the version published
CREATE TABLE bl_gate (closed bool);
CREATE VIEW bl_closing AS
SELECT id, tokens, label FROM bl_misfit
WHERE id <= CASE WHEN EXISTS (SELECT FROM public.bl_gate) THEN 790 ELSE 800 END;
SET client_min_messages = warning;
SELECT status FROM gibbs_nb_train('bl_closing', 'bl_closing', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked', unlabeled_weight => 0.5);
RESET client_min_messages;
CREATE FUNCTION bl_close_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.bl_gate VALUES (true);
  RETURN NULL;
END $$;
-- try(sql) with the error's detail (which check failed), job numbers hidden
CREATE FUNCTION bl_try_detail(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  detail text;
BEGIN
  EXECUTE sql;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM || ' / ' || detail, 'job \d+', 'job N');
END $$;
-- the model retrained through 2 nodes: bl_try_detail's answer
CREATE FUNCTION bl_retrain_nodes(model text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  outcome text;
BEGIN
  SET gibbs_nb.blocked_nodes = 2;
  outcome := bl_try_detail(format('SELECT gibbs_nb_retrain(%L)', model));
  RESET gibbs_nb.blocked_nodes;
  RETURN outcome;
END $$;
CREATE TRIGGER close_gate AFTER INSERT ON bl_closing_labels
FOR EACH STATEMENT EXECUTE FUNCTION public.bl_close_gate();
SELECT bl_retrain_nodes('bl_closing') AS closing;
SELECT max(version) AS versions, (SELECT count(*) FROM bl_gate) AS gate_rows
FROM gibbs_nb.models WHERE model_name = 'bl_closing';
-- a row whose id became another document's (790's row shows the id 789 once
-- the gate is closed): as many rows as documents, one of them twice: 55000
-- (the labels table's key, which would refuse the second, dropped by its owner)
CREATE VIEW bl_swapping AS
SELECT CASE WHEN id = 790 AND EXISTS (SELECT FROM public.bl_gate) THEN 789 ELSE id END AS id,
       tokens, label
FROM bl_misfit;
SET client_min_messages = warning;
SELECT status FROM gibbs_nb_train('bl_swapping', 'bl_swapping', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked', unlabeled_weight => 0.5);
RESET client_min_messages;
CREATE TRIGGER close_gate AFTER INSERT ON bl_swapping_labels
FOR EACH STATEMENT EXECUTE FUNCTION public.bl_close_gate();
ALTER TABLE bl_swapping_labels DROP CONSTRAINT bl_swapping_labels_pkey;
SELECT bl_retrain_nodes('bl_swapping') AS swapping;
SELECT max(version) AS versions FROM gibbs_nb.models WHERE model_name = 'bl_swapping';
-- labelled rows gone between the job's read and their rows' writing (the
-- view shows none of ids 1 to 5 once the labels table's old rows are
-- deleted, the publishing's first statement there): 55000; and held-out
-- ones (the same once the first INSERT, the labelled rows', has run: the
-- held-out rows are read last)
TRUNCATE bl_gate;
CREATE VIEW bl_hiding AS
SELECT id, tokens, label FROM bl_misfit
WHERE id > CASE WHEN EXISTS (SELECT FROM public.bl_gate) THEN 5 ELSE 0 END;
SET client_min_messages = warning;
SELECT status FROM gibbs_nb_train('bl_hiding', 'bl_hiding', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked', holdout => 0.3);
RESET client_min_messages;
CREATE TRIGGER close_gate AFTER DELETE ON bl_hiding_labels
FOR EACH STATEMENT EXECUTE FUNCTION public.bl_close_gate();
SELECT bl_retrain_nodes('bl_hiding') AS hiding;
DROP TRIGGER close_gate ON bl_hiding_labels;
CREATE TRIGGER close_gate AFTER INSERT ON bl_hiding_labels
FOR EACH STATEMENT EXECUTE FUNCTION public.bl_close_gate();
SELECT bl_retrain_nodes('bl_hiding') AS hiding;
SELECT max(version) AS versions, (SELECT count(*) FROM bl_gate) AS gate_rows
FROM gibbs_nb.models WHERE model_name = 'bl_hiding';
-- a label moved from a document to another since the job read them (while
-- the job's worker publishes, 3 shows no label and 21 the label x): as many
-- rows of labelled documents, and of unlabelled ones, as it read, but 21's
-- twice and none of 3's: 55000 (the ids' sum differs), whether the rows are
-- written where they are (the labels table's key, which would refuse the
-- second, dropped by its owner) or come to the job's worker (its ids altered
-- to bigint)
CREATE FUNCTION bl_publishing() RETURNS bool LANGUAGE sql VOLATILE AS $$
SELECT coalesce((SELECT query LIKE '%: publishing' FROM pg_catalog.pg_stat_activity
                 WHERE pid = pg_catalog.pg_backend_pid()), false)
$$;
CREATE VIEW bl_relabeling AS
SELECT id, tokens,
       CASE WHEN id = 3 AND public.bl_publishing() THEN NULL
            WHEN id = 21 AND public.bl_publishing() THEN 'x' ELSE label END AS label
FROM bl_misfit;
SELECT status FROM gibbs_nb_train('bl_relabeling', 'bl_relabeling', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked');
ALTER TABLE bl_relabeling_labels DROP CONSTRAINT bl_relabeling_labels_pkey;
SELECT bl_retrain_nodes('bl_relabeling') AS relabeling;
ALTER TABLE bl_relabeling_labels ALTER COLUMN id TYPE bigint;
SELECT bl_retrain_nodes('bl_relabeling') AS relabeling;
SELECT max(version) AS versions FROM gibbs_nb.models WHERE model_name = 'bl_relabeling';
SELECT gibbs_nb_drop('bl_closing'), gibbs_nb_drop('bl_swapping'), gibbs_nb_drop('bl_hiding'),
       gibbs_nb_drop('bl_relabeling');
-- held-out rows gone while the labels come to the job's worker (the view
-- shows none of them while it publishes; the labels table's ids bigint):
-- 55000 from the held-out rows' count, before anything is written
CREATE VIEW bl_unholding AS
SELECT id, tokens, label FROM bl_misfit
WHERE NOT (public.bl_publishing() AND label IS NOT NULL
           AND (pg_catalog.hashtextextended(id::text COLLATE "C", 1) & 9007199254740991)
               < 2702159776422297);
SELECT status FROM gibbs_nb_train('bl_unholding', 'bl_unholding', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked', holdout => 0.3);
ALTER TABLE bl_unholding_labels ALTER COLUMN id TYPE bigint;
SELECT bl_retrain_nodes('bl_unholding') AS unholding;
SELECT gibbs_nb_drop('bl_unholding');
DROP VIEW bl_closing, bl_swapping, bl_hiding, bl_relabeling, bl_unholding;
DROP FUNCTION bl_publishing();
-- a labels table whose ids' typmod its owner changed (numeric(10,2) to
-- numeric(10,1), which rounds them): the labels come to the job's worker,
-- and the retrain succeeds (written where they are, the rows' rounded ids
-- would not sum to the read's: 55000)
CREATE TABLE bl_rounded AS SELECT (id + 0.25)::numeric(10,2) AS id, tokens, label FROM bl_misfit;
SELECT status FROM gibbs_nb_train('bl_rounded', 'bl_rounded', 'tokens', 'label', sweeps => 10,
                                  seed => 1, sampler => 'blocked');
ALTER TABLE bl_rounded_labels ALTER COLUMN id TYPE numeric(10,1);
SELECT bl_retrain_nodes('bl_rounded') AS rounded;
SELECT version, count(*), min(id), max(id) FROM bl_rounded_labels GROUP BY 1;
SELECT gibbs_nb_drop('bl_rounded');
DROP TABLE bl_rounded;
DROP TABLE bl_gate;
DROP FUNCTION bl_retrain_nodes(text), bl_close_gate();
SET ROLE bl_group;
SELECT gibbs_nb_drop('bl_grp');
RESET ROLE;
DROP TABLE bl_label_statements;
DROP FUNCTION bl_log_statement();
REVOKE CREATE ON SCHEMA public FROM bl_group;
REVOKE SELECT ON bl_misfit FROM bl_group;
DROP ROLE bl_member, bl_group;
-- a label that is the empty string is a label through nodes too (the job's
-- worker counts the labelled and the unlabelled documents' words apart): the
-- same model as without nodes
CREATE TABLE bl_empty_label (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO bl_empty_label
SELECT i, ARRAY['a' || i % 5, 'b' || i % 3],
       CASE WHEN i % 4 = 0 THEN '' WHEN i % 4 = 1 THEN 'x' END
FROM generate_series(1, 400) i;
SELECT status FROM gibbs_nb_train('bl_empty', 'bl_empty_label', 'tokens', 'label',
                                  sampler => 'blocked', sweeps => 20, seed => 3);
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_empty_nodes', 'bl_empty_label', 'tokens', 'label',
                                  sampler => 'blocked', sweeps => 20, seed => 3);
RESET gibbs_nb.blocked_nodes;
SELECT p.classes, p.log_theta = s.log_theta AS theta,
       doc_labels(p.version_id) = doc_labels(s.version_id) AS labels, p.word_counts = s.word_counts AS counts
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_empty_nodes' AND s.model_name = 'bl_empty';
SELECT gibbs_nb_drop('bl_empty'), gibbs_nb_drop('bl_empty_nodes');
-- every document labelled: the nodes hold none, the labels table's rows all
-- come from the source; the local job's model and labels
UPDATE bl_empty_label SET label = 'y' WHERE label IS NULL;
SELECT status FROM gibbs_nb_train('bl_all', 'bl_empty_label', 'tokens', 'label',
                                  sampler => 'blocked', sweeps => 5, seed => 3);
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_all_nodes', 'bl_empty_label', 'tokens', 'label',
                                  sampler => 'blocked', sweeps => 5, seed => 3);
RESET gibbs_nb.blocked_nodes;
SELECT p.log_theta = s.log_theta AS theta, doc_labels(p.version_id) = doc_labels(s.version_id) AS labels,
       bl_labels_differ('bl_all_labels', 'bl_all_nodes_labels') AS rows_differing,
       (SELECT count(*) FROM bl_all_nodes_labels) AS rows
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_all_nodes' AND s.model_name = 'bl_all';
SELECT gibbs_nb_drop('bl_all'), gibbs_nb_drop('bl_all_nodes');
DROP TABLE bl_empty_label;
-- a source that changes between the job's read and its nodes' reads: a view
-- of 700 rows in the job worker's first transaction (its read) and of 750
-- after (the nodes read theirs at their first call, one transaction each).
-- The nodes hold other documents than the job counted: 55000, nothing
-- published
CREATE FUNCTION bl_shift_rows() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF coalesce(current_setting('gnb_test.first_read', true), '') = '' THEN
    PERFORM set_config('gnb_test.first_read', 'done', false);
    PERFORM set_config('gnb_test.in_first_read', 'yes', true);
  END IF;
  RETURN CASE WHEN current_setting('gnb_test.in_first_read', true) = 'yes' THEN 700 ELSE 750 END;
END $$;
CREATE VIEW bl_shifting AS
SELECT id, tokens, label FROM bl_misfit WHERE id <= (SELECT bl_shift_rows());
SET gibbs_nb.blocked_nodes = 2;
DO $$
DECLARE
  state text; msg text; detail text;
BEGIN
  PERFORM gibbs_nb_train('bl_shift', 'bl_shifting', 'tokens', 'label', sweeps => 10, seed => 1,
                         sampler => 'blocked');
  RAISE NOTICE 'the job succeeded';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
  RAISE NOTICE '%: % / %', state, regexp_replace(msg, 'job \d+', 'job N'), detail;
END $$;
RESET gibbs_nb.blocked_nodes;
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'bl_shift';
DROP VIEW bl_shifting;
DROP FUNCTION bl_shift_rows();
-- the job's worker does not hold the documents its nodes hold: 3,000
-- documents of 300 words, too many for an 11 MB job locally (53200), train
-- through nodes under the same cap (the nodes' memory has a budget of its
-- own: gibbs_nb.max_job_memory of the backend that holds them, all of its
-- nodes together, so two nodes of about 4 MB exceed 5 MB)
CREATE TABLE bl_bulk (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO bl_bulk
SELECT i, ARRAY(SELECT 'w' || ((i * 7 + j * 13) % 600) FROM generate_series(1, 300) j),
       CASE WHEN i % 10 = 0 THEN CASE WHEN i % 20 = 0 THEN 'a' ELSE 'b' END END
FROM generate_series(1, 3000) i;
SET gibbs_nb.max_job_memory = '11MB';
SELECT left(try($$SELECT gibbs_nb_train('bl_bulk', 'bl_bulk', 'tokens', 'label', sampler => 'blocked',
                                        sweeps => 10, seed => 1, unlabeled_weight => 0.5)$$), 5) AS local;
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_train('bl_bulk', 'bl_bulk', 'tokens', 'label', sampler => 'blocked',
                                  sweeps => 10, seed => 1, unlabeled_weight => 0.5);
SET gibbs_nb.max_job_memory = '5MB';
SELECT left(try($$SELECT gibbs_nb_train('bl_bulk', 'bl_bulk', 'tokens', 'label', sampler => 'blocked',
                                        sweeps => 10, seed => 1, unlabeled_weight => 0.5)$$), 5) AS nodes;
RESET gibbs_nb.max_job_memory;
RESET gibbs_nb.blocked_nodes;
-- neither the job's worker nor its nodes keep the documents' ids: 10,000
-- documents of 1,000-byte ids (10 MB of them) are refused locally under an
-- 8 MB cap (53200), and train through 3 nodes under it (the job's worker
-- counts the ids, checks them and lets them go; each node reads its third,
-- keeps the documents' keys and lets their ids go), the local job's model
-- (bl_long_train: under the cap locally, then through the nodes; without
-- it locally; the two compared)
CREATE TABLE bl_long_ids (id text PRIMARY KEY, tokens text[], label text);
INSERT INTO bl_long_ids
SELECT repeat('x', 990) || lpad(i::text, 10, '0'), ARRAY['w' || i % 5, 'v' || i % 3],
       CASE WHEN i % 100 = 0 THEN (ARRAY['a', 'b'])[1 + i % 200 / 100] END
FROM generate_series(1, 10000) i;
CREATE FUNCTION bl_long_train(cap text, held_out float8, OUT local text, OUT nodes text,
                              OUT n_labeled int, OUT same bool, OUT rows_differing bigint)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('gibbs_nb.max_job_memory', cap, false);
  local := left(try(format($q$SELECT gibbs_nb_train('bl_long', 'bl_long_ids', 'tokens', 'label', sampler => 'blocked',
                                             sweeps => 4, seed => 1, unlabeled_weight => 0.5, holdout => %s)$q$,
                           held_out)), 5);
  SET gibbs_nb.blocked_nodes = 3;
  SELECT status INTO nodes FROM gibbs_nb_train('bl_long', 'bl_long_ids', 'tokens', 'label', sampler => 'blocked',
                                               sweeps => 4, seed => 1, unlabeled_weight => 0.5,
                                               holdout => held_out);
  RESET gibbs_nb.blocked_nodes;
  RESET gibbs_nb.max_job_memory;
  PERFORM gibbs_nb_train('bl_long_local', 'bl_long_ids', 'tokens', 'label', sampler => 'blocked',
                         sweeps => 4, seed => 1, unlabeled_weight => 0.5, holdout => held_out);
  SELECT m.n_labeled, p.log_theta = s.log_theta AND doc_labels(p.version_id) = doc_labels(s.version_id)
         AND m.holdout_metrics IS NOT DISTINCT FROM l.holdout_metrics,
         bl_labels_differ('bl_long_local_labels', 'bl_long_labels')
  INTO n_labeled, same, rows_differing
  FROM gibbs_nb.models m JOIN gibbs_nb.packed p USING (model_name, version),
       gibbs_nb.models l JOIN gibbs_nb.packed s USING (model_name, version)
  WHERE m.model_name = 'bl_long' AND l.model_name = 'bl_long_local';
  PERFORM gibbs_nb_drop('bl_long'), gibbs_nb_drop('bl_long_local');
END $$;
SELECT * FROM bl_long_train('8MB', 0);
-- nor the labelled documents' ids: 9,100 of them labelled (9 MB of ids),
-- refused locally under the 8 MB cap, trained through 3 nodes under it
-- (the labelled documents' rows are written from the source), the local
-- job's model and labels
UPDATE bl_long_ids SET label = (ARRAY['a', 'b'])[1 + right(id, 3)::int % 2]
WHERE right(id, 1) <> '0';
SELECT * FROM bl_long_train('8MB', 0);
-- nor the held-out ones (about half of the labelled, 4.5 MB of ids; read
-- and scored when the job publishes, a batch at a time), under a 4 MB cap;
-- the local job's metrics too
SELECT * FROM bl_long_train('4MB', 0.5);
DROP FUNCTION bl_long_train(text, float8);
-- a held-out row of 5 MB under the 4 MB cap: refused when the job reads it
-- to score it (53200, after sampling: "the held-out rows, read to be
-- scored"), as the local job's read refuses it
UPDATE bl_long_ids SET tokens = array(SELECT 'x' || k FROM generate_series(1, 450000) k)
WHERE id = (SELECT min(id) FROM bl_long_ids
            WHERE label IS NOT NULL
              AND (pg_catalog.hashtextextended(id COLLATE "C", 1) & 9007199254740991) < 4503599627370496);
SET gibbs_nb.max_job_memory = '4MB';
SET gibbs_nb.blocked_nodes = 3;
SELECT bl_try_detail($$SELECT gibbs_nb_train('bl_long', 'bl_long_ids', 'tokens', 'label',
                                             sampler => 'blocked', sweeps => 4, seed => 1,
                                             unlabeled_weight => 0.5, holdout => 0.5)$$) AS big_held_out;
RESET gibbs_nb.blocked_nodes;
RESET gibbs_nb.max_job_memory;
DROP TABLE bl_long_ids;
-- ids the job's worker does not keep are checked as they are read: one of
-- an unlabelled document longer than an entry of the labels table's
-- primary key (2,704 bytes) fails the job through nodes as locally, before
-- it samples (54000)
CREATE TABLE bl_longer_ids AS
SELECT CASE WHEN i % 4 = 0 THEN i::text
            ELSE (SELECT string_agg(md5(i::text || '-' || k), '') FROM generate_series(1, 100) k) END AS id,
       array(SELECT 'w' || ((i * 7 + k * 13) % 50) FROM generate_series(1, 20) k) AS tokens,
       CASE WHEN i % 4 = 0 THEN (ARRAY['a', 'b'])[1 + (i / 4) % 2] END AS label
FROM generate_series(1, 40) i;
SET gibbs_nb.blocked_nodes = 2;
SELECT try($$SELECT status FROM gibbs_nb_train('bl_longer', 'bl_longer_ids', 'tokens', 'label',
                                               sampler => 'blocked', sweeps => 5, seed => 1)$$);
RESET gibbs_nb.blocked_nodes;
SELECT sweep, sample_seconds IS NULL AS not_sampled FROM gibbs_nb_jobs WHERE model_name = 'bl_longer';
DROP TABLE bl_longer_ids;
-- (a warm start shows in few sweeps: with keyed draws, chains from two
-- starts that reach one state go on as one) the nodes' first labels from
-- the version are the local warm start's; through nodes under the cap that
-- refuses the local job
SELECT status FROM gibbs_nb_train('bl_warm_local', 'bl_bulk', 'tokens', 'label', sampler => 'blocked',
                                  sweeps => 3, burn_in => 0, seed => 3, unlabeled_weight => 0.5);
SELECT status FROM gibbs_nb_retrain('bl_warm_local', warm => true);
SET gibbs_nb.blocked_nodes = 2;
SET gibbs_nb.max_job_memory = '11MB';
SELECT status FROM gibbs_nb_train('bl_warm_nodes', 'bl_bulk', 'tokens', 'label', sampler => 'blocked',
                                  sweeps => 3, burn_in => 0, seed => 3, unlabeled_weight => 0.5);
SELECT status FROM gibbs_nb_retrain('bl_warm_nodes', warm => true);
RESET gibbs_nb.max_job_memory;
RESET gibbs_nb.blocked_nodes;
SELECT p.version, p.log_theta = s.log_theta AND doc_labels(p.version_id) = doc_labels(s.version_id) AS same,
       doc_labels(p.version_id) = doc_labels(c.version_id) AS as_cold
FROM gibbs_nb.packed p JOIN gibbs_nb.packed s USING (version), gibbs_nb.packed c
WHERE p.model_name = 'bl_warm_nodes' AND s.model_name = 'bl_warm_local'
  AND c.model_name = 'bl_warm_local' AND c.version = 1 ORDER BY 1;
-- sources of other shapes read for nodes as for the local chain: tokens as
-- tsvector, no label column, held-out rows, labels of another type than
-- text (numeric: 2.50 is the class '2.50')
CREATE TABLE bl_shapes AS
SELECT id, pg_catalog.array_to_tsvector(tokens) AS lexemes, tokens, label,
       CASE label WHEN 'spam' THEN 2.50 WHEN 'ham' THEN 10 END AS code
FROM blocked_mail;
ALTER TABLE bl_shapes ADD PRIMARY KEY (id);
CREATE FUNCTION bl_shape_train(suffix text) RETURNS TABLE (v text, status text)
LANGUAGE sql AS $$
SELECT v, (SELECT status FROM gibbs_nb_train('bl_shape_' || v || suffix, 'bl_shapes',
               CASE v WHEN 'tsv' THEN 'lexemes' ELSE 'tokens' END,
               CASE v WHEN 'nolabel' THEN NULL WHEN 'code' THEN 'code' ELSE 'label' END,
               n_classes => CASE v WHEN 'nolabel' THEN 2 END,
               holdout => CASE v WHEN 'holdout' THEN 0.3 ELSE 0 END,
               sampler => 'blocked', sweeps => 20, burn_in => 5, seed => 5,
               unlabeled_weight => 0.5))
FROM (VALUES ('tsv'), ('nolabel'), ('holdout'), ('code')) v(v) ORDER BY 1
$$;
SELECT * FROM bl_shape_train('0');
SET gibbs_nb.blocked_nodes = 2;
SELECT * FROM bl_shape_train('2');
RESET gibbs_nb.blocked_nodes;
DROP FUNCTION bl_shape_train(text);
SELECT m.model_name, p.log_theta = s.log_theta AND p.log_pi = s.log_pi AND p.tokens = s.tokens
       AND p.word_counts = s.word_counts
       AND doc_labels(p.version_id) = doc_labels(s.version_id) AS same,
       (m.n_documents, m.n_labeled, m.n_skipped, m.n_tokens, m.holdout_metrics::text)
       IS NOT DISTINCT FROM (l.n_documents, l.n_labeled, l.n_skipped, l.n_tokens,
                             l.holdout_metrics::text) AS counts,
       bl_labels_differ((l.model_name || '_labels')::regclass,
                        (m.model_name || '_labels')::regclass) AS rows_differing
FROM gibbs_nb.models m JOIN gibbs_nb.packed p USING (model_name, version)
JOIN gibbs_nb.models l ON l.model_name = pg_catalog.replace(m.model_name, '2', '0')
JOIN gibbs_nb.packed s ON s.model_name = l.model_name AND s.version = l.version
WHERE m.model_name LIKE 'bl\_shape\_%2' ORDER BY 1;
SELECT classes FROM gibbs_nb.packed WHERE model_name = 'bl_shape_code2';
-- held-out rows when the labels come to the job's worker (the labels
-- table's ids altered to bigint): the local job's labels
ALTER TABLE bl_shape_holdout2_labels ALTER COLUMN id TYPE bigint;
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_retrain('bl_shape_holdout2');
RESET gibbs_nb.blocked_nodes;
SELECT doc_labels(p.version_id) = doc_labels(s.version_id) AS same,
       bl_labels_differ('bl_shape_holdout0_labels', 'bl_shape_holdout2_labels') AS rows_differing,
       (SELECT count(*) FROM bl_shape_holdout2_labels WHERE version = 2) AS rows
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_shape_holdout2' AND p.version = 2 AND s.model_name = 'bl_shape_holdout0';
-- a warm start through nodes, each taking its documents' first labels from
-- the version: bl_nodes3's warm retrain is bl_sw1's
SET gibbs_nb.blocked_nodes = 2;
SELECT status FROM gibbs_nb_retrain('bl_nodes3', warm => true);
RESET gibbs_nb.blocked_nodes;
SELECT p.log_theta = s.log_theta AND doc_labels(p.version_id) = doc_labels(s.version_id) AS warm_same
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_nodes3' AND p.version = 2 AND s.model_name = 'bl_sw1' AND s.version = 2;
-- the setting is a superuser's; the node function refuses what no chain sends
CREATE ROLE bl_nodes_role;
SET ROLE bl_nodes_role;
SELECT try($$SET gibbs_nb.blocked_nodes = 2$$);
-- a node reads only what its caller may read, checked first
SELECT try($$SELECT gibbs_nb.blocked_node(1, 'blocked_mail'::regclass, 0, 1, '\x00'::bytea,
    '\x474e42430100000000000000000000000000000000000000000000000000000000000000'::bytea)$$);
RESET ROLE;
DROP ROLE bl_nodes_role;
-- (calls of the right form: 'GNBC', kind 2 or 1, chain 0, sweep 1 or 0, kept 0, gammas 0)
SELECT try($$SELECT gibbs_nb.blocked_node(1, 'blocked_mail'::regclass, 0, 1, NULL,
    '\x474e42430200000000000000010000000000000000000000000000000000000000000000'::bytea)$$);
SELECT try($$SELECT gibbs_nb.blocked_node(1, 'blocked_mail'::regclass, 0, 1, NULL, '\x00'::bytea)$$);
SELECT try($$SELECT gibbs_nb.blocked_node(1, 'blocked_mail'::regclass, 0, 1, '\x474e4253'::bytea,
    '\x474e42430100000000000000000000000000000000000000000000000000000000000000'::bytea)$$);
SELECT try($$SELECT gibbs_nb.blocked_node(1, 'blocked_mail'::regclass, 2, 2, NULL, NULL)$$);
SELECT try($$SELECT gibbs_nb.blocked_node(NULL, 'blocked_mail'::regclass, 0, 1, NULL, NULL)$$);
SELECT gibbs_nb.blocked_node(1, 'blocked_mail'::regclass, 0, 1, NULL, NULL) IS NULL AS released;
-- the labels-only scores: of a node this role started, with a model of its shape
SELECT try($$SELECT gibbs_nb.blocked_node_scores(1, 'blocked_mail'::regclass, 0, 1, '\x00'::bytea)$$);
SELECT try($$SELECT gibbs_nb.blocked_node_scores(1, 'blocked_mail'::regclass, 0, 1, NULL)$$);
SELECT try($$SELECT gibbs_nb.blocked_node_scores(1, 'blocked_mail'::regclass, 0, 0, '\x00'::bytea)$$);
-- a document's label: from a node of the job this role started in this
-- session (none here: no row)
SELECT (SELECT count(*) FROM gibbs_nb.blocked_node_label(1, 5)) AS no_node,
       (SELECT count(*) FROM gibbs_nb.blocked_node_label(NULL, 5)) AS no_job,
       (SELECT count(*) FROM gibbs_nb.blocked_node_label(1, NULL::int)) AS no_id;
-- the chains combined on the nodes: of a node this role started, with a chain
-- and its alignment, or the number of chains
SELECT try($$SELECT gibbs_nb.blocked_node_fold(1, 'blocked_mail'::regclass, 0, 1, 0, '{0,1}')$$);
SELECT try($$SELECT gibbs_nb.blocked_node_fold(1, 'blocked_mail'::regclass, 0, 1, 0, NULL)$$);
SELECT try($$SELECT gibbs_nb.blocked_node_fold(1, 'blocked_mail'::regclass, 0, 1, NULL, '{0,1}')$$);
SELECT try($$SELECT gibbs_nb.blocked_node_combined(1, 'blocked_mail'::regclass, 0, 1, 2)$$);
SELECT try($$SELECT gibbs_nb.blocked_node_combined(1, 'blocked_mail'::regclass, 0, 1, NULL)$$);
SELECT try($$SELECT gibbs_nb.blocked_node_combined(1, 'blocked_mail'::regclass, 1, 1, 2)$$);
-- the same documents read in another order (ids as text under two
-- collations that sort them differently, so the read's ORDER BY id differs):
-- the same model, document by document (lambda < 1, gamma fixed: the split
-- counts and the log joint's integer sums).  Documents whose kind shows
-- only now and then, so that their labels stay uncertain and the model
-- depends on every draw.
CREATE TABLE blocked_mail_c AS
SELECT (CASE WHEN i % 2 = 0 THEN 'x' ELSE 'X' END || lpad(i::text, 4, '0')) COLLATE "C" AS id,
       ARRAY['w' || (i % 7), 'x' || (i % 11), 'y' || (i * 7 % 13),
             CASE WHEN (i * 37) % 10 < 6 THEN CASE WHEN i % 2 = 0 THEN 'cheap' ELSE 'team' END
                  ELSE CASE WHEN i % 2 = 0 THEN 'team' ELSE 'cheap' END END] AS tokens,
       CASE WHEN i <= 20 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END AS label
FROM generate_series(1, 400) i;
CREATE TABLE blocked_mail_icu AS
SELECT id COLLATE "und-x-icu" AS id, tokens, label FROM blocked_mail_c;
ALTER TABLE blocked_mail_c ADD PRIMARY KEY (id);
ALTER TABLE blocked_mail_icu ADD PRIMARY KEY (id);
SELECT (SELECT array_agg(id::text COLLATE "C" ORDER BY id) FROM blocked_mail_c)
       <> (SELECT array_agg(id::text COLLATE "C" ORDER BY id) FROM blocked_mail_icu) AS orders_differ;
SELECT t, (SELECT status FROM gibbs_nb_train('bl_' || t, 'blocked_mail_' || t, 'tokens', 'label',
              sampler => 'blocked', sweeps => 30, burn_in => 10, chains => 2, seed => 5,
              unlabeled_weight => 0.5))
FROM unnest(ARRAY['c', 'icu']) t;
SELECT p.log_theta = s.log_theta AND p.log_pi = s.log_pi AS same_theta_pi
FROM gibbs_nb.packed p, gibbs_nb.packed s WHERE p.model_name = 'bl_c' AND s.model_name = 'bl_icu';
SELECT p.log_likelihood = s.log_likelihood AND p.ess IS NOT DISTINCT FROM s.ess AS same_figures
FROM gibbs_nb.models p, gibbs_nb.models s WHERE p.model_name = 'bl_c' AND s.model_name = 'bl_icu';
SELECT count(*) AS documents,
       count(*) FILTER (WHERE a.label = b.label AND a.probability = b.probability) AS same_labels,
       count(*) FILTER (WHERE a.probability < 0.9) > 50 AS uncertain
FROM public.bl_c_labels a JOIN public.bl_icu_labels b ON a.id::text = b.id::text;
CREATE TABLE blocked_mail_money AS SELECT id::money AS id, tokens, label FROM blocked_mail;
SELECT try($$SELECT gibbs_nb_train('m', 'blocked_mail_money', 'tokens', 'label',
                                   sampler => 'blocked', sweeps => 5)$$);
SELECT count(*) AS jobs_of_m FROM gibbs_nb_jobs WHERE model_name = 'm';
SELECT status FROM gibbs_nb_train('bl_money_paper', 'blocked_mail_money', 'tokens', 'label',
                                  sweeps => 5, seed => 1);
-- two unlabelled documents whose ids have one 64-bit hash would share their
-- draws: the job stops (ids of a row type: a row hashes as 31 x its first
-- field's hash + its second's, an int8 as its halves' XOR, so (a,0) and
-- (a,4294967297) collide), the other samplers train
CREATE TYPE bl_pair AS (tag text, n bigint);
CREATE TABLE blocked_mail_pairs (id bl_pair PRIMARY KEY, tokens text[], label text);
INSERT INTO blocked_mail_pairs VALUES
    ('(a,0)', '{cheap,win}', NULL), ('(a,4294967297)', '{team,meeting}', NULL),
    ('(a,1)', '{cheap,cash}', 'spam'), ('(a,2)', '{team,notes}', 'ham');
SELECT try($$SELECT status FROM gibbs_nb_train('bl_pairs', 'blocked_mail_pairs', 'tokens', 'label',
                                              sampler => 'blocked', sweeps => 5, seed => 1)$$);
SELECT status, sqlstate, message FROM gibbs_nb_jobs WHERE model_name = 'bl_pairs';
-- and through nodes, where the job's worker does not make the keys: the two
-- are in one node's part (parts go by key), whose check stops the job
SET gibbs_nb.blocked_nodes = 3;
SELECT try($$SELECT status FROM gibbs_nb_train('bl_pairs_nodes', 'blocked_mail_pairs', 'tokens', 'label',
                                              sampler => 'blocked', sweeps => 5, seed => 1)$$);
RESET gibbs_nb.blocked_nodes;
-- and so does a warm start through nodes whose previous version had both
-- (labelled then): the job's worker takes their first labels by key, and
-- stops as the nodes would (it said 22P03, "invalid gibbs_nb node setup")
CREATE TABLE bl_pairs_warm (id bl_pair PRIMARY KEY, tokens text[], label text);
INSERT INTO bl_pairs_warm SELECT * FROM blocked_mail_pairs;
UPDATE bl_pairs_warm SET label = 'spam' WHERE id = '(a,0)'::bl_pair;
UPDATE bl_pairs_warm SET label = 'ham' WHERE id = '(a,4294967297)'::bl_pair;
INSERT INTO bl_pairs_warm VALUES ('(b,1)', '{cheap,win}', NULL), ('(b,2)', '{team,notes}', NULL);
SELECT status FROM gibbs_nb_train('bl_pairs_warm', 'bl_pairs_warm', 'tokens', 'label',
                                  sampler => 'blocked', sweeps => 5, seed => 1);
UPDATE bl_pairs_warm SET label = NULL WHERE (id).n <> 1 AND (id).n <> 2;
SET gibbs_nb.blocked_nodes = 2;
SELECT try($$SELECT status FROM gibbs_nb_retrain('bl_pairs_warm', warm => true)$$);
RESET gibbs_nb.blocked_nodes;
SELECT gibbs_nb_drop('bl_pairs_warm');
DROP TABLE bl_pairs_warm;
SELECT status FROM gibbs_nb_train('bl_pairs_paper', 'blocked_mail_pairs', 'tokens', 'label',
                                  sweeps => 5, seed => 1);
-- (the labels table takes row-typed ids as ids, not as their fields: it
-- failed, "column id is of type bl_pair but expression is of type bigint")
SELECT id, label, version FROM public.bl_pairs_paper_labels ORDER BY id;
SELECT gibbs_nb_deploy('bl_pairs_paper', 1) IS NOT NULL AS deployed;
SELECT count(*) AS rows, count(*) FILTER (WHERE id = '(a,4294967297)'::bl_pair) AS big_id
FROM public.bl_pairs_paper_labels;
SELECT gibbs_nb_drop('bl_pairs_paper');
DROP TABLE blocked_mail_pairs;
DROP TYPE bl_pair;
-- refused: out of range, or said to a sampler that has no sweep workers
SELECT try($$SELECT gibbs_nb_train('m', 'blocked_mail', 'tokens', 'label', sampler => 'blocked',
                                   sweep_workers => 0)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'blocked_mail', 'tokens', 'label', sampler => 'blocked',
                                   sweep_workers => 65)$$);
SELECT try($$SELECT gibbs_nb_train('m', 'blocked_mail', 'tokens', 'label', sweep_workers => 2)$$);
SELECT try($$SELECT gibbs_nb_retrain('bl_paper', sweep_workers => 2)$$);
-- the setting is only a default: other samplers ignore it
SET gibbs_nb.sweep_workers = 3;
SELECT status FROM gibbs_nb_train('bl_paper_setting', 'blocked_mail', 'tokens', 'label',
    sweeps => 20, seed => 1);
RESET gibbs_nb.sweep_workers;

DROP TABLE bl_seq_labels, bl_par_labels, bl_paper_labels, bl_sw1_labels, bl_sw2_labels,
    bl_sw3_labels, bl_sw_setting_labels, bl_paper_setting_labels, bl_text1_labels,
    bl_text2_labels, bl_money_paper_labels, bl_c_labels, bl_icu_labels, bl_nodes1_labels,
    bl_nodes3_labels, bl_text_nodes_labels, bl_misfit_labels, bl_misfit_nodes_labels, bl_misfit,
    bl_shape_tsv0_labels, bl_shape_tsv2_labels, bl_shape_nolabel0_labels, bl_shape_nolabel2_labels,
    bl_shape_holdout0_labels, bl_shape_holdout2_labels, bl_shape_code0_labels, bl_shape_code2_labels,
    bl_shapes, bl_bulk_labels, bl_warm_local_labels, bl_warm_nodes_labels, bl_bulk;
DROP FUNCTION bl_labels_differ(regclass, regclass), bl_try_detail(text);
DROP EXTENSION gibbs_nb CASCADE;
DROP TABLE blocked_mail, blocked_mail_text, blocked_mail_money, blocked_mail_c, blocked_mail_icu;
