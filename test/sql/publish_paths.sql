-- Publishing writes theta through the table access method (the bulk path)
-- when gibbs_nb.theta is as the extension made it, and through INSERT
-- statements otherwise (here: when the table has a trigger, which the bulk
-- path would not fire).  Both give the same rows, found through both indexes.
CREATE EXTENSION gibbs_nb;
CREATE TABLE ppmail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO ppmail
SELECT i, ARRAY['w' || (i % 7), 'v' || (i % 5), CASE WHEN i % 2 = 0 THEN 'cheap' ELSE 'agenda' END],
       CASE WHEN i <= 30 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 60) i;
CREATE TABLE pp_fired (n int);
CREATE FUNCTION pp_count() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN INSERT INTO public.pp_fired VALUES (1); RETURN NULL; END $$;

-- version 1: the bulk path (no trigger to fire)
SELECT version FROM gibbs_nb_train('pp', 'ppmail', 'tokens', 'label', sweeps => 30, seed => 3);
-- version 2: the same training through INSERT statements
CREATE TRIGGER pp_statements AFTER INSERT ON gibbs_nb.theta
  FOR EACH STATEMENT EXECUTE FUNCTION pp_count();
SELECT version FROM gibbs_nb_retrain('pp');
SELECT count(*) > 0 AS sql_path_ran FROM pp_fired;
DROP TRIGGER pp_statements ON gibbs_nb.theta;
TRUNCATE pp_fired;
-- version 3: the bulk path again
SELECT version FROM gibbs_nb_retrain('pp');

SELECT version, count(*) AS rows, count(DISTINCT token) AS tokens, count(DISTINCT class) AS classes,
       round(sum(probability)::numeric, 9) AS total
FROM gibbs_nb.theta WHERE model_name = 'pp' GROUP BY version ORDER BY version;
-- every version's rows are the same, token by token
SELECT count(*) AS differing
FROM gibbs_nb.theta a FULL JOIN gibbs_nb.theta b
  ON a.token = b.token AND a.class = b.class AND b.model_name = 'pp' AND b.version = 2
WHERE a.model_name = 'pp' AND a.version IN (1, 3)
  AND (a.probability IS DISTINCT FROM b.probability OR a.owner IS DISTINCT FROM b.owner);
-- the indexes find exactly the rows a sequential scan finds
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS by_token_index FROM gibbs_nb.theta WHERE token = 'cheap';
SELECT count(*) AS by_version_index FROM gibbs_nb.theta
WHERE model_name = 'pp' AND owner = current_user AND version = 3;
RESET enable_seqscan;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS by_seqscan FROM gibbs_nb.theta WHERE token = 'cheap';
RESET enable_indexscan;
RESET enable_bitmapscan;
-- prediction reads the packed row either way
SELECT gibbs_nb_predict('pp', '{cheap}'::text[]) AS cheap_is, gibbs_nb_predict('pp', '{agenda}'::text[]) AS agenda_is;

SELECT gibbs_nb_drop('pp');
DROP TABLE ppmail, pp_fired;
DROP FUNCTION pp_count();
DROP EXTENSION gibbs_nb;
