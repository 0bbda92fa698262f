-- theta-hat is stored once per version, in gibbs_nb.packed; gibbs_nb.theta
-- is a view of it (security_invoker), expanded by gibbs_nb.theta_rows.
-- Publishing writes no row per word and class; the view gives exactly
-- exp(log_theta) of the packed row, each class's rows sum to 1, a role sees
-- only its own models' rows, and the expanding function checks its arrays.
CREATE EXTENSION gibbs_nb;
CREATE ROLE pp_alice;
CREATE ROLE pp_bob;
CREATE SCHEMA pp_alice AUTHORIZATION pp_alice;
CREATE SCHEMA pp_bob AUTHORIZATION pp_bob;

-- what theta is now: a view, its row security that of the caller
SELECT c.relkind, c.reloptions FROM pg_class c
WHERE c.oid = 'gibbs_nb.theta'::regclass;
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
WHERE a.attrelid = 'gibbs_nb.theta'::regclass AND a.attnum > 0 ORDER BY a.attnum;
SELECT has_table_privilege('pp_bob', 'gibbs_nb.theta', 'SELECT') AS bob_selects,
       has_table_privilege('pp_bob', 'gibbs_nb.theta', 'INSERT') AS bob_inserts;
-- the extension's tables: none of them is theta
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'gibbs_nb'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1;
-- and pg_dump's list of them (pg_extension.extconfig) does not name it
SELECT count(*) AS extconfig_tables,
       count(*) FILTER (WHERE c.oid IS NULL) AS extconfig_missing,
       bool_or(c.relname = 'theta') AS extconfig_has_theta
FROM pg_extension e, unnest(e.extconfig) x(oid) LEFT JOIN pg_class c ON c.oid = x.oid
WHERE e.extname = 'gibbs_nb';

SET ROLE pp_alice;
CREATE TABLE pp_alice.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO pp_alice.mail
SELECT i, ARRAY['w' || (i % 7), 'v' || (i % 5), CASE WHEN i % 2 = 0 THEN 'cheap' ELSE 'agenda' END],
       CASE WHEN i <= 30 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 60) i;
SELECT version FROM gibbs_nb_train('pp', 'pp_alice.mail', 'tokens', 'label', sweeps => 30, seed => 3);
SELECT version FROM gibbs_nb_retrain('pp');
RESET ROLE;
SET ROLE pp_bob;
CREATE TABLE pp_bob.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO pp_bob.mail
SELECT i, ARRAY['x' || (i % 3), CASE WHEN i % 2 = 0 THEN 'win' ELSE 'lunch' END],
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 20) i;
SELECT version FROM gibbs_nb_train('pp_b', 'pp_bob.mail', 'tokens', 'label', sweeps => 10, seed => 1);
RESET ROLE;

-- a version's rows: vocabulary x classes, each class summing to 1
SELECT version, class, count(*) AS rows, round(sum(probability)::numeric, 12) AS total
FROM gibbs_nb.theta WHERE model_name = 'pp' GROUP BY version, class ORDER BY version, class;
SELECT m.version, m.vocabulary_size, cardinality(m.classes) AS classes,
       (SELECT count(*) FROM gibbs_nb.theta t
         WHERE t.model_name = m.model_name AND t.version = m.version) AS theta_rows
FROM gibbs_nb.models m WHERE m.model_name = 'pp' ORDER BY 1;
-- exactly exp(log_theta) of the packed row, element by element (SQL's own
-- unnest and exp, compared with =), and the same owner
WITH expected AS (
  SELECT p.model_name, p.owner, p.version, c.class, w.token,
         exp(p.log_theta[(w.i - 1) * cardinality(p.classes) + c.k]) AS probability
  FROM gibbs_nb.packed p,
       unnest(p.tokens) WITH ORDINALITY w(token, i),
       unnest(p.classes) WITH ORDINALITY c(class, k))
SELECT count(*) AS rows,
       count(*) FILTER (WHERE t.probability IS DISTINCT FROM e.probability
                           OR t.owner IS DISTINCT FROM e.owner) AS differing
FROM expected e FULL JOIN gibbs_nb.theta t
  ON t.model_name = e.model_name AND t.version = e.version
 AND t.class = e.class AND t.token = e.token;
-- in gibbs_nb_classes order per token (word-major, as packed holds them)
SELECT class, token, round(probability::numeric, 9) AS probability
FROM gibbs_nb.theta WHERE model_name = 'pp' AND version = 2 AND token IN ('cheap', 'agenda');
-- a query on one version reads that version's packed row by the primary key
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM gibbs_nb.theta WHERE model_name = 'pp' AND version = 2 AND token = 'cheap';
SELECT count(*) AS cheap_rows FROM gibbs_nb.theta WHERE model_name = 'pp' AND version = 2 AND token = 'cheap';
RESET enable_seqscan;

-- row security is the caller's (security_invoker): each role sees its own
SET ROLE pp_alice;
SELECT model_name, owner, count(*) FROM gibbs_nb.theta GROUP BY 1, 2 ORDER BY 1, 2;
RESET ROLE;
SET ROLE pp_bob;
SELECT model_name, owner, count(*) FROM gibbs_nb.theta GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS alice_rows_bob_sees FROM gibbs_nb.theta WHERE owner = 'pp_alice';
-- nor can bob write it
SELECT try($$DELETE FROM gibbs_nb.theta$$);
SELECT try($$INSERT INTO gibbs_nb.theta VALUES ('pp', 9, 'ham', 'x', 1, 'pp_bob')$$);
RESET ROLE;

-- dropping a version takes its theta rows with it
SET ROLE pp_alice;
SELECT gibbs_nb_drop('pp', 1);
SELECT version, count(*) FROM gibbs_nb.theta WHERE model_name = 'pp' GROUP BY 1 ORDER BY 1;
RESET ROLE;

-- gibbs_nb.theta_rows: any role may call it, with any arrays
SET ROLE pp_bob;
SELECT * FROM gibbs_nb.theta_rows('{a,b}', '{x,y,z}', '{0,-1,-2,-3,-4,-5}');
SELECT * FROM gibbs_nb.theta_rows('{a}', '{x}', '{-Infinity}');
-- empty and NULL arrays: no rows
SELECT count(*) AS empty FROM gibbs_nb.theta_rows('{}', '{}', '{}');
SELECT count(*) AS no_classes FROM gibbs_nb.theta_rows('{}', '{x,y}', '{}');
SELECT count(*) AS null_tokens FROM gibbs_nb.theta_rows('{a}', NULL, '{0}');
-- arrays of more than one dimension: 2202E
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{{a},{b}}', '{x}', '{0,0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a}', '{{x},{y}}', '{0,0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a}', '{x,y}', '{{0},{0}}')$$);
-- NULL elements: 22004
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a,NULL}', '{x}', '{0,0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a}', '{x,NULL}', '{0,0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a}', '{x}', '{NULL}')$$);
-- lengths that do not agree: 2202E
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a,b}', '{x,y}', '{0,0,0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a,b}', '{x,y}', '{0,0,0,0,0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{a}', '{}', '{0}')$$);
SELECT try($$SELECT * FROM gibbs_nb.theta_rows('{}', '{x}', '{0}')$$);
-- the length check comes before anything is sized: 100,000 x 100,000 is
-- 10^10 rows, refused at once
SELECT try($$SELECT * FROM gibbs_nb.theta_rows(array_fill('c'::text, ARRAY[100000]),
                                               array_fill('t'::text, ARRAY[100000]), '{0}')$$);
RESET ROLE;

SET ROLE pp_alice;
SELECT gibbs_nb_drop('pp');
RESET ROLE;
SET ROLE pp_bob;
SELECT gibbs_nb_drop('pp_b');
RESET ROLE;
DROP SCHEMA pp_alice, pp_bob CASCADE;
DROP ROLE pp_alice, pp_bob;
DROP EXTENSION gibbs_nb;
