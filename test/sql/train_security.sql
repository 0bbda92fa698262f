-- The worker runs as the calling role; a model belongs to the role that
-- trained it, and other roles neither see nor touch it.
CREATE EXTENSION gibbs_nb;
CREATE ROLE gnb_alice;
CREATE ROLE gnb_bob;
CREATE ROLE gnb_team;
GRANT gnb_alice TO gnb_team;          -- gnb_team has alice's privileges
CREATE SCHEMA alice AUTHORIZATION gnb_alice;
CREATE SCHEMA bob AUTHORIZATION gnb_bob;
GRANT USAGE ON SCHEMA bob TO gnb_alice;

SET ROLE gnb_alice;
CREATE TABLE alice.mail (id bigint PRIMARY KEY, tokens text[], label text);
INSERT INTO alice.mail
SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills,buy}'::text[] ELSE '{meeting,agenda,notes}' END,
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 20) i;
SELECT model_name, version, status
FROM gibbs_nb_train('alice_spam', 'alice.mail', 'tokens', 'label', sweeps => 50, seed => 1);
-- the worker acted as alice, not as a superuser
SELECT worker_user, owner FROM gibbs_nb_jobs;
SELECT owner, trained_by FROM gibbs_nb.models;
-- the labels table is alice's, in the source's schema
SELECT tableowner FROM pg_tables WHERE schemaname = 'alice' AND tablename = 'alice_spam_labels';
SELECT count(*) FROM alice.alice_spam_labels;
RESET ROLE;

-- bob cannot read alice's table: a permission error, before any worker starts
GRANT USAGE ON SCHEMA alice TO gnb_bob;
SET ROLE gnb_bob;
SELECT try($$SELECT gibbs_nb_train('bob_spam', 'alice.mail', 'tokens', 'label', sweeps => 10)$$);
-- nor see alice's model, its job, or its estimates
SELECT count(*) AS models FROM gibbs_nb.models;
SELECT count(*) AS theta FROM gibbs_nb.theta;
SELECT count(*) AS pi FROM gibbs_nb.pi;
SELECT count(*) AS trace FROM gibbs_nb.trace;
SELECT count(*) AS jobs FROM gibbs_nb_jobs;
-- nor drop it (it does not exist, for bob), nor take its name
SELECT try($$SELECT gibbs_nb_drop('alice_spam')$$);
CREATE TABLE bob.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO bob.mail VALUES (1, '{a}', 'x'), (2, '{b}', 'y'), (3, '{a,b}', NULL);
-- a model name is per owner: bob's own "alice_spam" is another model, and
-- bob learns nothing of alice's
SELECT model_name, version, status
FROM gibbs_nb_train('alice_spam', 'bob.mail', 'tokens', 'label', sweeps => 10, seed => 1);
SELECT owner, version FROM gibbs_nb.models WHERE model_name = 'alice_spam';
RESET ROLE;

-- column privileges are enough when they cover the columns used
REVOKE ALL ON bob.mail FROM gnb_alice;
GRANT SELECT (id, tokens) ON bob.mail TO gnb_alice;
SET ROLE gnb_alice;
SELECT try($$SELECT gibbs_nb_train('alice_bob', 'bob.mail', 'tokens', 'label', sweeps => 10, labels_table => 'alice.abl')$$);
SELECT status FROM gibbs_nb_train('alice_bob', 'bob.mail', 'tokens', n_classes => 2,
                                  sweeps => 10, seed => 1, labels_table => 'alice.abl');
-- but not the right to create the labels table where one may not
SELECT try($$SELECT gibbs_nb_train('alice_bob2', 'bob.mail', 'tokens', n_classes => 2, sweeps => 10)$$);
RESET ROLE;

-- a member of the owner role sees and may retrain and drop the model
SET ROLE gnb_team;
SELECT model_name, version FROM gibbs_nb.models ORDER BY 1, 2;
SELECT count(*) > 0 AS sees_theta FROM gibbs_nb.theta WHERE model_name = 'alice_spam';
RESET ROLE;

-- row security: alice's own query over theta reads only alice's rows
SET ROLE gnb_alice;
SELECT DISTINCT model_name FROM gibbs_nb.theta ORDER BY 1;
SELECT gibbs_nb_drop('alice_bob');
SELECT gibbs_nb_drop('alice_spam');
RESET ROLE;

DROP SCHEMA alice, bob CASCADE;
DROP OWNED BY gnb_alice, gnb_bob, gnb_team;
DROP ROLE gnb_alice, gnb_bob, gnb_team;
DROP EXTENSION gibbs_nb;
