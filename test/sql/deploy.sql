-- gibbs_nb_deploy: serve a chosen version of a model (roll back, roll
-- forward), the labels table following; retention never drops it.
CREATE EXTENSION gibbs_nb;
CREATE TABLE dmail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO dmail
SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills,buy}'::text[] ELSE '{meeting,agenda,notes}' END,
       CASE WHEN i <= 20 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 40) i;
SELECT version FROM gibbs_nb_train('dm', 'dmail', 'tokens', 'label', sweeps => 20, seed => 1);
SELECT gibbs_nb_predict_proba('dm', '{cheap,agenda}'::text[])::text AS v1_proba \gset
CREATE TABLE v1_labels AS SELECT * FROM dm_labels;
-- version 2 learns the other way round
UPDATE dmail SET label = CASE label WHEN 'spam' THEN 'ham' ELSE 'spam' END WHERE label IS NOT NULL;
SELECT version FROM gibbs_nb_retrain('dm');
SELECT gibbs_nb_predict('dm', '{cheap}'::text[]) AS v2_says;

-- roll back to version 1: prediction and the labels table follow
SELECT gibbs_nb_deploy('dm', 1);
SELECT gibbs_nb_predict('dm', '{cheap}'::text[]) AS v1_says,
       gibbs_nb_predict_proba('dm', '{cheap,agenda}'::text[])::text = :'v1_proba' AS same_as_v1;
SELECT count(*) AS rows, min(version), max(version) FROM dm_labels;
SELECT count(*) AS differ_from_v1
FROM dm_labels l FULL JOIN v1_labels o USING (id)
WHERE l.label IS DISTINCT FROM o.label OR l.probabilities IS DISTINCT FROM o.probabilities;

-- a new version while version 1 is deployed: published, not served, and the
-- labels table stays version 1's
SELECT version FROM gibbs_nb_retrain('dm');
SELECT gibbs_nb_predict('dm', '{cheap}'::text[]) AS still_v1;
SELECT DISTINCT version FROM dm_labels;
-- retention keeps the deployed version, whatever its age
SELECT gibbs_nb_set_retention('dm', 1) AS dropped;
SELECT array_agg(version ORDER BY version) AS versions FROM gibbs_nb.models WHERE model_name = 'dm';
-- each version keeps its documents' labels (40 of them), a dropped version's go
-- with it
SELECT m.version, count(d.id) AS document_labels
FROM gibbs_nb.models m LEFT JOIN gibbs_nb.document_labels d USING (version_id)
WHERE m.model_name = 'dm' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS orphan_document_labels FROM gibbs_nb.document_labels d
WHERE NOT EXISTS (SELECT 1 FROM gibbs_nb.models m WHERE m.version_id = d.version_id);

-- roll forward: NULL serves the latest again, its labels with it
SELECT gibbs_nb_deploy('dm', NULL);
SELECT gibbs_nb_predict('dm', '{cheap}'::text[]) AS latest_says;
SELECT DISTINCT version FROM dm_labels;

-- dropping the version that serves: the one that serves next fills the
-- labels table (it was left empty: its rows went with the dropped version)
SELECT gibbs_nb_set_retention('dm', 5) AS dropped;
SELECT gibbs_nb_deploy('dm', 1);
SELECT gibbs_nb_drop('dm', 1);
SELECT serving_version, deployed FROM gibbs_nb_models WHERE model_name = 'dm';
SELECT version, count(*) FROM dm_labels GROUP BY version;
-- the same for the latest, nothing deployed
SELECT version FROM gibbs_nb_retrain('dm');
SELECT gibbs_nb_drop('dm', 4);
SELECT serving_version, deployed FROM gibbs_nb_models WHERE model_name = 'dm';
SELECT version, count(*) FROM dm_labels GROUP BY version;
-- a version that does not serve goes alone: the labels table stays
SELECT version FROM gibbs_nb_retrain('dm');
SELECT gibbs_nb_drop('dm', 3);
SELECT serving_version, deployed FROM gibbs_nb_models WHERE model_name = 'dm';
SELECT version, count(*) FROM dm_labels GROUP BY version;

-- ids cross versions as text: a date id written under the DateStyle of the
-- job's role and read back under the deploying session's lands on its own
-- row (13/01/2024, written under 'SQL, DMY', did not read under 'ISO, MDY';
-- 02/01/2024 read as 1 February: another row's labels)
CREATE TABLE ddate (id date PRIMARY KEY, tokens text[], label text);
INSERT INTO ddate
SELECT DATE '2024-01-01' + i,
       CASE WHEN i % 2 = 0 THEN '{cheap,pills}'::text[] ELSE '{agenda,notes}' END,
       CASE WHEN i < 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(0, 39) i;
ALTER ROLE CURRENT_USER SET datestyle = 'SQL, DMY';   -- the worker takes its role's settings
SELECT version FROM gibbs_nb_train('dd', 'ddate', 'tokens', 'label', sweeps => 10, seed => 1);
ALTER ROLE CURRENT_USER RESET datestyle;
SET datestyle = 'ISO, MDY';
CREATE TABLE dd_v1 AS SELECT * FROM dd_labels;
UPDATE ddate SET label = CASE label WHEN 'spam' THEN 'ham' ELSE 'spam' END WHERE label IS NOT NULL;
SELECT version FROM gibbs_nb_retrain('dd');
SELECT gibbs_nb_deploy('dd', 1);
SELECT count(*) AS rows, count(*) FILTER (WHERE l.label IS DISTINCT FROM o.label) AS differ_from_v1
FROM dd_labels l FULL JOIN dd_v1 o USING (id);
RESET datestyle;
SELECT gibbs_nb_drop('dd');
DROP TABLE ddate, dd_v1;

-- more documents than a batch of rows (50,000) and a fetch of them (10,000):
-- their labels written in two batches, read back in six fetches, all of them
-- deployed
CREATE TABLE dbig AS
SELECT i AS id, ARRAY['w' || i % 7, 'v' || i % 3] AS tokens,
       CASE WHEN i <= 200 THEN CASE WHEN i % 7 < 3 THEN 'a' ELSE 'b' END END AS label
FROM generate_series(1, 50001) i;
SELECT version FROM gibbs_nb_train('big', 'dbig', 'tokens', 'label', sweeps => 2, seed => 1);
CREATE TABLE big_v1 AS SELECT * FROM big_labels;
SELECT count(*) AS document_labels FROM gibbs_nb.document_labels d JOIN gibbs_nb.models m USING (version_id)
WHERE m.model_name = 'big';
SELECT version FROM gibbs_nb_retrain('big');
SELECT gibbs_nb_deploy('big', 1);
SELECT count(*) AS rows, min(version), max(version) FROM big_labels;
SELECT count(*) AS differ_from_v1
FROM big_labels l FULL JOIN big_v1 o USING (id)
WHERE l.label IS DISTINCT FROM o.label OR l.probabilities IS DISTINCT FROM o.probabilities;
SELECT gibbs_nb_drop('big');
DROP TABLE dbig, big_v1;

-- errors
SELECT try($$SELECT gibbs_nb_deploy('dm', 99)$$);
SELECT try($$SELECT gibbs_nb_deploy('nope', 1)$$);
SELECT try($$SELECT gibbs_nb_deploy(NULL, 1)$$);
CREATE ROLE gnb_deploy_other;
SET ROLE gnb_deploy_other;
SELECT try($$SELECT gibbs_nb_deploy('dm', 1)$$);
RESET ROLE;
DROP ROLE gnb_deploy_other;

SELECT gibbs_nb_drop('dm');
SELECT count(*) AS document_labels_left FROM gibbs_nb.document_labels;
DROP TABLE dmail, v1_labels;
DROP EXTENSION gibbs_nb;
