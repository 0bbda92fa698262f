-- Citus support, on a server without Citus: gibbs_nb_citus_distribute
-- refuses clearly (superusers only, and only where Citus is); the row
-- security policies have no subquery (Citus refuses those on its tables).
-- The Citus cluster itself is tested by test/t/008_citus.pl.
CREATE EXTENSION gibbs_nb;
SELECT try('SELECT gibbs_nb_citus_distribute()');
CREATE ROLE regress_gnb_citus_user;
SET ROLE regress_gnb_citus_user;
SELECT try('SELECT gibbs_nb_citus_distribute()');
RESET ROLE;
DROP ROLE regress_gnb_citus_user;
SELECT c.relname, p.polname, pg_get_expr(p.polqual, p.polrelid) AS qual
FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
WHERE c.relnamespace = 'gibbs_nb'::regnamespace
ORDER BY 1, 2;
DROP EXTENSION gibbs_nb;
