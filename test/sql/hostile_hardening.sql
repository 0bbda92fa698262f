-- More attacks of a hostile role (threats.md), each written as the attack:
-- what the attacker does, and what must hold for the victim.  gnb_h_mallory
-- is the attacker (CREATE on a schema of its own, nothing else);
-- gnb_h_victim trains and serves its models.
CREATE EXTENSION gibbs_nb;
CREATE ROLE gnb_h_victim;
CREATE ROLE gnb_h_mallory;
CREATE SCHEMA hv AUTHORIZATION gnb_h_victim;
CREATE SCHEMA hm AUTHORIZATION gnb_h_mallory;
SET ROLE gnb_h_victim;
CREATE TABLE hv.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO hv.mail
SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills,buy}'::text[] ELSE '{meeting,agenda,notes}' END,
       CASE WHEN i <= 20 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 40) i;
SELECT model_name, version, status
FROM gibbs_nb_train('hv', 'hv.mail', 'tokens', 'label', sweeps => 20, seed => 1);
RESET ROLE;

--
-- 1. Holding up another role's publish.  Publishing takes a per-model lock;
--    if that is a user advisory lock on (hashtext(owner), hashtext(model)),
--    any role can take it first, in a session it keeps open, and the
--    victim's job never gets past publishing.  The victim's job must finish
--    while mallory holds that advisory lock (bounded wait: 120 s).
--
SET ROLE gnb_h_mallory;
SELECT pg_advisory_lock(hashtext('gnb_h_victim'), hashtext('hv')) AS mallory_holds_the_key;
RESET ROLE;
SET ROLE gnb_h_victim;
SELECT job_id AS blocked_job
FROM gibbs_nb_train('hv', 'hv.mail', 'tokens', 'label', sweeps => 20, seed => 2, wait => false) \gset
SELECT status, version FROM gibbs_nb_wait(:blocked_job, '120 s');
RESET ROLE;
SELECT pg_advisory_unlock(hashtext('gnb_h_victim'), hashtext('hv')) AS mallory_lets_go;
SELECT status, version FROM gibbs_nb_wait(:blocked_job);

-- clean up
SET ROLE gnb_h_victim;
SELECT gibbs_nb_drop('hv');
RESET ROLE;
DROP SCHEMA hv CASCADE;
DROP SCHEMA hm CASCADE;
DROP OWNED BY gnb_h_victim, gnb_h_mallory;
DROP ROLE gnb_h_victim, gnb_h_mallory;
DROP EXTENSION gibbs_nb;
