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

--
-- 2. Locking the extension's tables.  LOCK TABLE in any mode stronger than
--    ACCESS SHARE needs only UPDATE, DELETE or TRUNCATE, and row security
--    does not apply to it: a role that could take ACCESS EXCLUSIVE on
--    gibbs_nb.jobs would stop every role's jobs (registering, progress,
--    publishing) for as long as its transaction stays open.  Every mode but
--    ACCESS SHARE must be refused on every table and view of the extension.
--
SET ROLE gnb_h_mallory;
SELECT count(*) AS attempts,
       count(*) FILTER (WHERE r LIKE '42501:%') AS refused,
       string_agg(rel || ' ' || mode || ': ' || r, E'\n') FILTER (WHERE r NOT LIKE '42501:%') AS taken
FROM (SELECT c.oid::regclass::text AS rel, mode,
             try(format('LOCK TABLE %s IN %s MODE', c.oid::regclass, mode)) AS r
        FROM pg_class c
       CROSS JOIN unnest(ARRAY['ROW EXCLUSIVE', 'SHARE UPDATE EXCLUSIVE', 'SHARE',
                               'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE']) mode
       WHERE c.relkind IN ('r', 'v', 'p')
         AND c.oid IN (SELECT objid FROM pg_depend
                        WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gibbs_nb')
                          AND classid = 'pg_class'::regclass)) a;
-- mallory deletes the rows of its own finished jobs, with the function for it
CREATE TABLE hm.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO hm.mail SELECT i, '{a,b}', CASE WHEN i <= 4 THEN (ARRAY['x', 'y'])[1 + i % 2] END
FROM generate_series(1, 8) i;
SELECT job_id AS mallory_job FROM gibbs_nb_train('mm', 'hm.mail', 'tokens', 'label', sweeps => 5, seed => 1) \gset
-- and a cancelled one, once its trace has rows (bounded polling: 60 s)
SELECT job_id AS mallory_cancelled_job
FROM gibbs_nb_train('mm2', 'hm.mail', 'tokens', 'label', sweeps => 5000000, seed => 1, wait => false) \gset
DO $$
BEGIN
  FOR i IN 1..600 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM gibbs_nb.trace t JOIN gibbs_nb.jobs j USING (job_id)
                       WHERE j.model_name = 'mm2');
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT gibbs_nb_delete_job(:mallory_cancelled_job) AS deleted_running_job;
SELECT gibbs_nb_cancel(:mallory_cancelled_job);
SELECT status FROM gibbs_nb_wait(:mallory_cancelled_job);
SELECT count(*) > 0 AS cancelled_job_has_trace FROM gibbs_nb.trace WHERE job_id = :mallory_cancelled_job;
SELECT gibbs_nb_delete_job(:mallory_job) AS deleted_succeeded_job,
       gibbs_nb_delete_job(:mallory_cancelled_job) AS deleted_cancelled_job;
SELECT count(*) AS rows_left FROM gibbs_nb.jobs WHERE job_id IN (:mallory_job, :mallory_cancelled_job);
-- the published version keeps its trace; the cancelled job's went with its row
SELECT count(*) > 0 AS version_keeps_trace FROM gibbs_nb.trace WHERE job_id = :mallory_job;
SELECT count(*) AS cancelled_trace_left FROM gibbs_nb.trace WHERE job_id = :mallory_cancelled_job;
-- not the victim's: it does not exist for mallory
SELECT try(format('SELECT gibbs_nb_delete_job(%s)', :blocked_job));
SELECT try('SELECT gibbs_nb_delete_job(NULL)');
SELECT try('DELETE FROM gibbs_nb.jobs');
SELECT gibbs_nb_drop('mm');
RESET ROLE;
SELECT count(*) AS victim_job_kept FROM gibbs_nb.jobs WHERE job_id = :blocked_job;

--
-- 3. Choosing the label of a row in the victim's table.  The victim labels
--    its inbox with its model 'hv' through gibbs_nb_label_trigger and lets
--    mallory add mail: INSERT on (id, tokens) only, the label is the
--    model's to write.  Mallory trains a model of its own named 'hv' whose
--    only classes are its own words.  The trigger is the table's: it must
--    label with the model the name means for the table's owner, whoever
--    inserts, and never with the inserting role's model of that name.
--
SET ROLE gnb_h_victim;
CREATE TABLE hv.inbox (id int, tokens text[], label text);
CREATE TRIGGER label_inbox BEFORE INSERT OR UPDATE ON hv.inbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('hv', 'tokens', 'label');
GRANT USAGE ON SCHEMA hv TO gnb_h_mallory;
GRANT INSERT (id, tokens), UPDATE (tokens), SELECT (id) ON hv.inbox TO gnb_h_mallory;
INSERT INTO hv.inbox VALUES (1, '{cheap,pills}');
RESET ROLE;
SET ROLE gnb_h_mallory;
-- with no model of its own of that name, mallory's insert is labelled by the victim's model
INSERT INTO hv.inbox (id, tokens) VALUES (2, '{cheap,pills}');
CREATE TABLE hm.own (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO hm.own VALUES (1, '{cheap,pills}', 'mallory-chose-this'), (2, '{meeting}', 'and-this');
SELECT status FROM gibbs_nb_train('hv', 'hm.own', 'tokens', 'label', sweeps => 5, seed => 1,
                                  labels_table => 'hm.hv_labels');
SELECT gibbs_nb_predict('hv', '{cheap,pills}'::text[]) AS mallory_model_says;
INSERT INTO hv.inbox (id, tokens) VALUES (3, '{cheap,pills}');
UPDATE hv.inbox SET tokens = '{pills,cheap}' WHERE id = 2;
SELECT try('UPDATE hv.inbox SET label = ''mallory-chose-this''');
SELECT gibbs_nb_drop('hv');
RESET ROLE;
SELECT id, tokens, label FROM hv.inbox ORDER BY id;
REVOKE ALL ON hv.inbox FROM gnb_h_mallory;
REVOKE USAGE ON SCHEMA hv FROM gnb_h_mallory;

--
-- 4. Making the worker hold far more than gibbs_nb.max_job_memory.  The
--    attacker's view makes each row a large token of its own (it could be
--    1 GB): reading held a batch of 2,000 such rows, and a copy of every new
--    token, before anything was checked against the budget; with enough of
--    them the worker is killed for memory and the postmaster restarts every
--    session.  The job must fail with 53200 while reading, after a few rows
--    past the budget, not after all of them.
--
SET gibbs_nb.max_job_memory = '8MB';   -- a superuser's setting, as ALTER ROLE ... SET would
SET ROLE gnb_h_mallory;
CREATE SEQUENCE hm.rows_made;
-- counts the rows the worker makes (the caller's checks make them too)
CREATE FUNCTION hm.big_token(g int) RETURNS text[] LANGUAGE sql VOLATILE
AS $$ SELECT ARRAY[repeat(chr(65 + g % 26) || g::text, 200000) ||
                   CASE WHEN current_setting('application_name') = 'gibbs_nb worker'
                        THEN nextval('hm.rows_made')::text END] $$;
-- 200 rows of about 0.5 MB to 1 MB each: 150 MB in all.  Ids of a type
-- without an ordering: no sort, each row is made as the worker asks for it.
CREATE VIEW hm.huge AS SELECT g::text::xid AS id, hm.big_token(g) AS tokens
FROM generate_series(1, 200) g;
DO $$
DECLARE
  state text; msg text; detail text;
BEGIN
  PERFORM gibbs_nb_train('huge', 'hm.huge', 'tokens', n_classes => 2, sweeps => 5, seed => 1);
  RAISE NOTICE 'the job succeeded';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
  RAISE NOTICE '%: % / %', state, regexp_replace(msg, '\d+', 'N', 'g'), split_part(detail, ':', 1);
END $$;
SELECT last_value < 50 AS worker_stopped_early FROM hm.rows_made;
RESET ROLE;
RESET gibbs_nb.max_job_memory;
SELECT count(*) AS mallory_models FROM gibbs_nb.models WHERE owner = 'gnb_h_mallory';

--
-- 5. Taking more job slots than gibbs_nb.max_jobs_per_role allows, from
--    another database.  The per-role bound must count the role's jobs in
--    the whole cluster, as gibbs_nb.max_jobs does: with 2 jobs running in
--    database hh_other, mallory's third job here is refused (53400).
--
SHOW gibbs_nb.max_jobs_per_role;
SELECT current_database() AS regress_db \gset
CREATE DATABASE hh_other;
\c hh_other
CREATE EXTENSION gibbs_nb;
CREATE TABLE public.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO public.mail SELECT i, '{a,b}', CASE WHEN i <= 4 THEN (ARRAY['x', 'y'])[1 + i % 2] END
FROM generate_series(1, 8) i;
GRANT SELECT ON public.mail TO gnb_h_mallory;
CREATE SCHEMA hm AUTHORIZATION gnb_h_mallory;
SET ROLE gnb_h_mallory;
SELECT job_id AS other_job_1 FROM gibbs_nb_train('o1', 'public.mail', 'tokens', 'label', sweeps => 10000000,
                                                 seed => 1, labels_table => 'hm.o1', wait => false) \gset
SELECT job_id AS other_job_2 FROM gibbs_nb_train('o2', 'public.mail', 'tokens', 'label', sweeps => 10000000,
                                                 seed => 1, labels_table => 'hm.o2', wait => false) \gset
SELECT count(*) AS running_in_hh_other FROM gibbs_nb_jobs WHERE status = 'running';
RESET ROLE;
\c :regress_db
SET ROLE gnb_h_mallory;
SELECT try($$SELECT gibbs_nb_train('o3', 'hm.mail', 'tokens', 'label', sweeps => 5, seed => 1)$$);
RESET ROLE;
\c hh_other
SET ROLE gnb_h_mallory;
SELECT gibbs_nb_cancel(:other_job_1), gibbs_nb_cancel(:other_job_2);
SELECT status FROM gibbs_nb_wait(:other_job_1);
SELECT status FROM gibbs_nb_wait(:other_job_2);
RESET ROLE;
\c :regress_db
DROP DATABASE hh_other;
-- and with them ended, mallory trains here again
SET ROLE gnb_h_mallory;
SELECT status FROM gibbs_nb_train('o3', 'hm.mail', 'tokens', 'label', sweeps => 5, seed => 1);
SELECT gibbs_nb_drop('o3');
RESET ROLE;

--
-- 5b. Taking more job slots than a login should, through roles: a login that
--    may SET ROLE to two groups took gibbs_nb.max_jobs_per_role's slots of
--    each (4 of 4 under max_jobs = 4; other roles got 53400).  Jobs are
--    counted by login too (session user: SET ROLE does not change it), under
--    gibbs_nb.max_jobs_per_login (2): the third is refused, whatever role.
--
CREATE ROLE gnb_h_group_a;
CREATE ROLE gnb_h_group_b;
CREATE ROLE gnb_h_member IN ROLE gnb_h_group_a, gnb_h_group_b;
CREATE SCHEMA hg;
GRANT USAGE, CREATE ON SCHEMA hg TO gnb_h_group_a, gnb_h_group_b;
CREATE TABLE hg.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO hg.mail SELECT i, '{a,b}', CASE WHEN i <= 4 THEN (ARRAY['x', 'y'])[1 + i % 2] END
FROM generate_series(1, 8) i;
GRANT SELECT ON hg.mail TO gnb_h_group_a, gnb_h_group_b;
SHOW gibbs_nb.max_jobs_per_login;
SET SESSION AUTHORIZATION gnb_h_member;
SET ROLE gnb_h_group_a;
SELECT job_id AS group_job_1 FROM gibbs_nb_train('g1', 'hg.mail', 'tokens', 'label', sweeps => 10000000,
                                                 seed => 1, labels_table => 'hg.g1', wait => false) \gset
SET ROLE gnb_h_group_b;
SELECT job_id AS group_job_2 FROM gibbs_nb_train('g2', 'hg.mail', 'tokens', 'label', sweeps => 10000000,
                                                 seed => 1, labels_table => 'hg.g2', wait => false) \gset
-- group_a runs one job of its max_jobs_per_role's 2: the login's third is refused
SET ROLE gnb_h_group_a;
SELECT try($$SELECT gibbs_nb_train('g3', 'hg.mail', 'tokens', 'label', sweeps => 5, seed => 1,
                                    labels_table => 'hg.g3')$$);
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT gibbs_nb_cancel(:group_job_1), gibbs_nb_cancel(:group_job_2);
SELECT status FROM gibbs_nb_wait(:group_job_1);
SELECT status FROM gibbs_nb_wait(:group_job_2);
DROP SCHEMA hg CASCADE;
DROP OWNED BY gnb_h_group_a, gnb_h_group_b, gnb_h_member;
DROP ROLE gnb_h_member, gnb_h_group_a, gnb_h_group_b;

--
-- 6. Learning another role's model names from pg_locks, which every role
--    may read.  A lock whose tag is made from (owner, model name), such as
--    an advisory lock on their hashes, shows the hashes to anyone who looks
--    while the model publishes, and a name can be tried against them.  The
--    victim's publish is held (by a trigger of its own on its labels table)
--    while mallory looks: no lock in pg_locks may carry the hash of the
--    victim's role or model name.
--
SET ROLE gnb_h_victim;
CREATE TABLE hv.go_on (x int);
CREATE FUNCTION hv.hold_publish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..1200 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM hv.go_on);
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER hold BEFORE INSERT ON hv.hv_labels FOR EACH STATEMENT EXECUTE FUNCTION hv.hold_publish();
SELECT job_id AS held_job
FROM gibbs_nb_train('hv', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 3, wait => false) \gset
RESET ROLE;
-- the harness (a superuser) waits until the worker is publishing (bounded: 120 s)
DO $$
BEGIN
  FOR i IN 1..1200 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE query LIKE '%: publishing');
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT count(*) AS publishing FROM pg_stat_activity WHERE query LIKE '%: publishing';
SET ROLE gnb_h_mallory;
SELECT count(*) AS locks_naming_the_victim
FROM pg_locks
WHERE locktype = 'advisory'
  AND (classid::bigint IN ((hashtext('gnb_h_victim')::bigint + 4294967296) % 4294967296)
       OR objid::bigint IN ((hashtext('hv')::bigint + 4294967296) % 4294967296));
RESET ROLE;
INSERT INTO hv.go_on VALUES (1);
-- (with its SQLSTATE and message, so that a failure says why)
SELECT status, version, sqlstate, message FROM gibbs_nb_wait(:held_job);
DROP TRIGGER hold ON hv.hv_labels;

--
-- 7. A version served from this backend's prediction cache to another role,
--    after the extension was dropped and created
--    again (a reinstall), which starts version_id again at 1.  A session
--    that serves several roles (SET ROLE, as a pooling application does)
--    predicted with the victim's version 1; mallory's first model after the
--    reinstall is version_id 1 as well, and must be mallory's, not the
--    victim's from the cache.
--
DROP TRIGGER label_inbox ON hv.inbox;
DROP EXTENSION gibbs_nb;
CREATE EXTENSION gibbs_nb;
SET ROLE gnb_h_victim;
SELECT version FROM gibbs_nb_train('first', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 1,
                                   labels_table => 'hv.first_labels');
SELECT gibbs_nb_classes('first') AS victim_classes;
RESET ROLE;
DROP EXTENSION gibbs_nb;
CREATE EXTENSION gibbs_nb;
SET ROLE gnb_h_mallory;
SELECT version FROM gibbs_nb_train('mine', 'hm.own', 'tokens', 'label', sweeps => 5, seed => 1,
                                   labels_table => 'hm.mine_labels');
SELECT version_id FROM gibbs_nb.packed WHERE model_name = 'mine';
SELECT gibbs_nb_classes('mine') AS mallory_classes;
SELECT gibbs_nb_predict('mine', '{cheap,pills}'::text[]) AS mallory_prediction;
SELECT gibbs_nb_drop('mine');
RESET ROLE;
-- ... and after gibbs_nb.version_id_seq went backwards (a superuser's
-- data-only restore of an older backup does it): the victim's version is
-- cached and dropped, and mallory's next version gets its version_id again.
-- The cache compares the packed row itself (its xmin), not only the id.
SET ROLE gnb_h_victim;
SELECT version FROM gibbs_nb_train('again', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 1,
                                   labels_table => 'hv.again_labels');
SELECT gibbs_nb_classes('again') AS victim_classes;
SELECT version_id AS victim_version_id FROM gibbs_nb.packed WHERE model_name = 'again' \gset
SELECT gibbs_nb_drop('again');
RESET ROLE;
SELECT setval('gibbs_nb.version_id_seq', :victim_version_id - 1) IS NOT NULL AS rewound;
SET ROLE gnb_h_mallory;
SELECT version FROM gibbs_nb_train('again', 'hm.own', 'tokens', 'label', sweeps => 5, seed => 1,
                                   labels_table => 'hm.again_labels');
SELECT version_id = :victim_version_id AS same_version_id FROM gibbs_nb.packed
WHERE model_name = 'again';
SELECT gibbs_nb_classes('again') AS mallory_classes;
SELECT gibbs_nb_drop('again');
RESET ROLE;

--
-- 8. Renaming a schema under a statement that names a relation in it.  The
--    victim keeps the labels table of its model 'lt' in mallory's schema hm
--    (mallory granted it CREATE there).  While the victim's job publishes
--    (its DELETE of the old labels is slow: a trigger of the victim's own
--    holds it), mallory, with CREATE on the database, renames hm and
--    creates a new hm holding a look-alike labels table whose trigger
--    records who runs it; the job's next statement, by name, would insert
--    into the look-alike as the victim.  The rename must wait until the
--    publish is over (here: fail on lock_timeout), and mallory's trigger
--    must never run as the victim.
--
SELECT format('GRANT CREATE ON DATABASE %I TO gnb_h_mallory', current_database()) \gexec
CREATE TABLE public.hh_evidence (ran_as text);
GRANT INSERT, SELECT ON public.hh_evidence TO PUBLIC;
GRANT USAGE, CREATE ON SCHEMA hm TO gnb_h_victim;
SET ROLE gnb_h_victim;
SELECT version FROM gibbs_nb_train('lt', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 1,
                                   labels_table => 'hm.lt_labels');
CREATE TABLE hv.go_on_2 (x int);
CREATE FUNCTION hv.slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..1200 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM hv.go_on_2);
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER slow BEFORE DELETE ON hm.lt_labels FOR EACH STATEMENT EXECUTE FUNCTION hv.slow_delete();
SELECT job_id AS lt_job
FROM gibbs_nb_train('lt', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 2,
                    labels_table => 'hm.lt_labels', wait => false) \gset
RESET ROLE;
-- the harness waits until the worker is publishing and inside the slow
-- DELETE, past the locks publishing takes (bounded: 120 s)
DO $$
BEGIN
  FOR i IN 1..1200 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity
                      WHERE query LIKE '%: publishing' AND wait_event = 'PgSleep');
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SET ROLE gnb_h_mallory;
SET lock_timeout = '3s';
SELECT try('ALTER SCHEMA hm RENAME TO hm_old') AS rename_under_publish;
RESET lock_timeout;
-- if the rename went through, the look-alike
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'hm_old') THEN
    CREATE SCHEMA hm;
    GRANT USAGE ON SCHEMA hm TO gnb_h_victim;
    CREATE TABLE hm.lt_labels (id int, label text, probability float8, probabilities float8[],
                               version int);
    GRANT ALL ON hm.lt_labels TO gnb_h_victim;
    CREATE FUNCTION hm.record() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
      INSERT INTO public.hh_evidence VALUES (current_user);
      RETURN NULL;
    END $f$;
    CREATE TRIGGER record BEFORE INSERT ON hm.lt_labels
      FOR EACH STATEMENT EXECUTE FUNCTION hm.record();
  END IF;
END $$;
RESET ROLE;
INSERT INTO hv.go_on_2 VALUES (1);
SELECT status, version FROM gibbs_nb_wait(:lt_job);
SELECT ran_as FROM public.hh_evidence;
-- the victim's own labels table holds the new version
SET ROLE gnb_h_victim;
SELECT labels_table, (SELECT max(version) FROM hm.lt_labels) AS labels_version
FROM gibbs_nb.models WHERE model_name = 'lt' ORDER BY version DESC LIMIT 1;
SELECT gibbs_nb_drop('lt');
RESET ROLE;
-- The lock never makes a job wait for its own caller: a caller that altered
-- the source's schema in its open transaction gets a clear error at once
-- (bounded: statement_timeout 60 s), not a job that waits for it for ever.
BEGIN;
SET LOCAL ROLE gnb_h_victim;
GRANT USAGE ON SCHEMA hv TO gnb_h_mallory;
SET LOCAL statement_timeout = '60s';
SELECT try($$SELECT gibbs_nb_train('st', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 1)$$);
ROLLBACK;
DROP SCHEMA IF EXISTS hm_old CASCADE;
DROP TABLE public.hh_evidence;
SELECT format('REVOKE CREATE ON DATABASE %I FROM gnb_h_mallory', current_database()) \gexec

--
-- 9. Making every role's training fail.  The aggregate the worker counts
--    labelled rows with, gibbs_nb_class_counts, lives in the extension's
--    schema, here public, where mallory may create (many databases grant
--    it).  An overload with a defaulted third argument makes a call with two
--    arguments ambiguous.  The victim's training on labelled rows must not
--    care (the worker counts with gibbs_nb.labelled_counts, in a schema no
--    other role can create in).
--
GRANT CREATE ON SCHEMA public TO gnb_h_mallory;
SET ROLE gnb_h_mallory;
CREATE FUNCTION public.gibbs_nb_class_counts(l text, t text[], x int DEFAULT 0)
RETURNS bytea LANGUAGE sql AS $$ SELECT NULL::bytea $$;
RESET ROLE;
SET ROLE gnb_h_victim;
SELECT status, version FROM gibbs_nb_train('amb', 'hv.mail', 'tokens', 'label', sweeps => 5, seed => 1);
SELECT gibbs_nb_drop('amb');
RESET ROLE;
DROP FUNCTION public.gibbs_nb_class_counts(text, text[], int);
REVOKE CREATE ON SCHEMA public FROM gnb_h_mallory;

--
-- 10. Running code as another member of a shared group.  The group
--     gnb_h_team owns a model and so its labels table; victim and mallory
--     are both members.  Mallory, with the group's rights, puts a trigger on
--     the group's labels table; when the victim deploys, drops or retrains
--     the group's model, the trigger must not run as the victim (it ran with
--     the victim's privileges: it could grant mallory the victim's tables).
--     Labels tables are written as their owner, the model's: the trigger
--     runs as the group, whose rights mallory has anyway.  And a labels
--     table mallory takes for herself is refused, not written.
--
CREATE ROLE gnb_h_team;
GRANT gnb_h_team TO gnb_h_victim, gnb_h_mallory;
CREATE SCHEMA ht AUTHORIZATION gnb_h_team;
CREATE TABLE public.hh_runs (ran_as text, op text);
GRANT INSERT, SELECT ON public.hh_runs TO PUBLIC;
SET ROLE gnb_h_team;
CREATE TABLE ht.mail AS SELECT * FROM (VALUES (1, '{cheap,pills}'::text[], 'spam'),
                                              (2, '{meeting,notes}'::text[], 'ham'),
                                              (3, '{cheap,meeting}'::text[], NULL)) v(id, tokens, label);
ALTER TABLE ht.mail ADD PRIMARY KEY (id);
SELECT status, version FROM gibbs_nb_train('tm', 'ht.mail', 'tokens', 'label', sweeps => 5, seed => 1);
RESET ROLE;
SET ROLE gnb_h_mallory;
CREATE FUNCTION hm.record_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.hh_runs VALUES (current_user, TG_OP);
  RETURN NULL;
END $$;
GRANT USAGE ON SCHEMA hm TO PUBLIC;
CREATE TRIGGER record_runs AFTER INSERT OR DELETE ON ht.tm_labels
  FOR EACH STATEMENT EXECUTE FUNCTION hm.record_runs();
RESET ROLE;
SET ROLE gnb_h_victim;
SELECT gibbs_nb_deploy('tm', NULL) AS deployed;
RESET ROLE;
SELECT DISTINCT ran_as FROM public.hh_runs;
-- nor a domain's CHECK another member put on its id column: a deploy makes
-- the ids (their type's input) as the owner too
SET ROLE gnb_h_mallory;
CREATE FUNCTION hm.record_check(x int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.hh_runs VALUES (current_user, 'CHECK');
  RETURN true;
END $$;
CREATE DOMAIN hm.watched_id AS int CHECK (hm.record_check(VALUE));
ALTER TABLE ht.tm_labels ALTER COLUMN id TYPE hm.watched_id;
RESET ROLE;
TRUNCATE public.hh_runs;
SET ROLE gnb_h_victim;
SELECT gibbs_nb_deploy('tm', NULL) AS deployed_again;
RESET ROLE;
SELECT ran_as, op FROM public.hh_runs GROUP BY 1, 2 ORDER BY 1, 2;
-- nor close, nor read from, the cursor a deploy reads the version's labels
-- with (gibbs_nb.document_labels, 10,000 rows a fetch), which is open while
-- the CHECK runs: a cursor closed under it was used after it was freed.
-- CLOSE fails on it; rows read away fail the deploy, which changes nothing
SET ROLE gnb_h_team;
CREATE TABLE ht.many AS
SELECT i AS id, ARRAY['w' || i % 5] AS tokens,
       CASE WHEN i <= 10 THEN CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END END AS label
FROM generate_series(1, 10005) i;
SELECT status FROM gibbs_nb_train('tmb', 'ht.many', 'tokens', 'label', sweeps => 2, seed => 1);
RESET ROLE;
SET ROLE gnb_h_mallory;
CREATE FUNCTION hm.take_cursors(x int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  names text[];
  n text;
  c refcursor;
  r record;
BEGIN
  IF coalesce(current_setting('hm.cursor_op', true), '') = '' THEN
    RETURN true;
  END IF;
  SELECT array_agg(name) INTO names FROM pg_catalog.pg_cursors;
  FOREACH n IN ARRAY coalesce(names, '{}') LOOP
    c := n;
    IF current_setting('hm.cursor_op') = 'close' THEN
      CLOSE c;
    ELSE
      FETCH c INTO r;
    END IF;
  END LOOP;
  RETURN true;
END $$;
CREATE DOMAIN hm.taking_id AS int CHECK (hm.take_cursors(VALUE));
ALTER TABLE ht.tmb_labels ALTER COLUMN id TYPE hm.taking_id;
RESET ROLE;
SET ROLE gnb_h_victim;
SET hm.cursor_op = 'close';
SELECT regexp_replace(try($$SELECT gibbs_nb_deploy('tmb', NULL)$$), 'portal \d+', 'portal N') AS closing;
SET hm.cursor_op = 'fetch';
SELECT try($$SELECT gibbs_nb_deploy('tmb', NULL)$$) AS reading;
RESET hm.cursor_op;
SELECT gibbs_nb_deploy('tmb', NULL) AS deployed_when_left_alone;
SELECT count(*) AS rows, min(version) FROM ht.tmb_labels;
SELECT gibbs_nb_drop('tmb') AS dropped;
RESET ROLE;
-- a labels table dropped and made again by a member's retrain is the group's
SET ROLE gnb_h_mallory;
DROP TABLE ht.tm_labels;
SELECT status, version FROM gibbs_nb_retrain('tm');
RESET ROLE;
SELECT tableowner FROM pg_tables WHERE schemaname = 'ht' AND tablename = 'tm_labels';
-- a labels table mallory takes for herself: deploying it is refused, and
-- dropping the model leaves it alone (a WARNING), running nothing of hers
SET ROLE gnb_h_mallory;
ALTER TABLE ht.tm_labels OWNER TO gnb_h_mallory;
CREATE TRIGGER record_runs AFTER INSERT OR DELETE ON ht.tm_labels
  FOR EACH STATEMENT EXECUTE FUNCTION hm.record_runs();
RESET ROLE;
TRUNCATE public.hh_runs;
SET ROLE gnb_h_victim;
SELECT try($$SELECT gibbs_nb_deploy('tm', 2)$$);
-- a retrain is refused when it is asked for, before a job runs every sweep
SELECT count(*) AS jobs_before FROM gibbs_nb.jobs WHERE model_name = 'tm' \gset
SELECT try($$SELECT gibbs_nb_retrain('tm')$$);
SELECT count(*) = :jobs_before AS no_job_started FROM gibbs_nb.jobs WHERE model_name = 'tm';
SELECT gibbs_nb_drop('tm') AS dropped;
RESET ROLE;
SELECT count(*) AS runs FROM public.hh_runs;
SELECT count(*) AS labels_table_left FROM pg_tables WHERE schemaname = 'ht' AND tablename = 'tm_labels';
DROP TABLE public.hh_runs;
DROP SCHEMA ht CASCADE;
DROP FUNCTION hm.record_runs();
DROP ROLE gnb_h_team;

--
-- 11. Making every backup of the database fail.  pg_dump writes each row of
--    the extension's tables as one piece of text of at most 1 GB, and
--    escaping makes text longer than its bytes: a backslash in a text[]
--    element is four characters as COPY writes it.  A model whose packed row
--    was longer (a token of 256 MB of backslashes: a few MB on disk) made
--    every pg_dump of the database fail, for every role.  Such a version is
--    refused before anything of it is stored (54000), trained or imported;
--    a class name is at most 1024 bytes (a model's rows hold its classes
--    many times over), an imported tokenizer 1 MB.
--
SET gibbs_nb.max_job_memory = '3GB';   -- memory is not what stops it here
SET ROLE gnb_h_mallory;
CREATE TABLE hm.small (id int, tokens text[], label text);
INSERT INTO hm.small
SELECT i, ARRAY['w' || i % 4, 'v' || i % 3], CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END
FROM generate_series(1, 40) i;
-- one token of 2^28 backslashes: 2^30 + 3 characters in a dump
CREATE VIEW hm.backslashes AS
SELECT id, CASE WHEN id = 1 THEN ARRAY[repeat(E'\\', 268435456)] ELSE tokens END AS tokens,
       label
FROM hm.small;
SELECT regexp_replace(try($$SELECT status FROM gibbs_nb_train('bs', 'hm.backslashes', 'tokens', 'label',
                                               sweeps => 2, seed => 1)$$), '\d{7,}', 'N', 'g') AS try;
-- the same for a document's id: each document's labels are a row of their
-- own (gibbs_nb.document_labels, the id a text column: COPY doubles a
-- backslash), and one id of 2^29 backslashes makes it 1 GB.  Such an id is
-- too long for the labels table's primary key, which refuses it first;
-- while another version is deployed no labels row is written, and the
-- dump's bound refuses it
CREATE TABLE hm.long_id_on (on_ boolean);
INSERT INTO hm.long_id_on VALUES (false);
CREATE VIEW hm.backslash_id AS
SELECT CASE WHEN id = 1 AND (SELECT on_ FROM hm.long_id_on) THEN repeat(E'\\', 536870912)
            ELSE id::text END AS id, tokens, label
FROM hm.small;
SELECT status FROM gibbs_nb_train('bsid', 'hm.backslash_id', 'tokens', 'label', sweeps => 2, seed => 1);
UPDATE hm.long_id_on SET on_ = true;
SELECT regexp_replace(try($$SELECT status FROM gibbs_nb_retrain('bsid')$$), '\d{7,}', 'N', 'g')
       AS not_deployed;
SELECT gibbs_nb_deploy('bsid', 1);
SELECT regexp_replace(try($$SELECT status FROM gibbs_nb_retrain('bsid')$$), '\d{7,}', 'N', 'g')
       AS deployed;
SELECT gibbs_nb_drop('bsid');
-- a label of 1025 bytes: refused when training is asked for, and by the
-- worker (here a view gives it to the worker only)
CREATE VIEW hm.long_label AS
SELECT id, tokens, CASE WHEN id = 2 THEN repeat('a', 1025) ELSE label END AS label FROM hm.small;
SELECT try($$SELECT status FROM gibbs_nb_train('ll', 'hm.long_label', 'tokens', 'label',
                                               sweeps => 2, seed => 1)$$);
CREATE VIEW hm.late_label AS
SELECT id, tokens,
       CASE WHEN id = 2 AND current_setting('application_name') = 'gibbs_nb worker'
            THEN repeat('a', 1025) ELSE label END AS label
FROM hm.small;
SELECT try($$SELECT status FROM gibbs_nb_train('ll', 'hm.late_label', 'tokens', 'label',
                                               sweeps => 2, seed => 1)$$);
-- 1024 bytes are a class name
CREATE VIEW hm.longest_label AS
SELECT id, tokens, CASE WHEN label = 'a' THEN repeat('a', 1024) ELSE label END AS label
FROM hm.small;
SELECT status FROM gibbs_nb_train('ll', 'hm.longest_label', 'tokens', 'label', sweeps => 2,
                                  seed => 1);
SELECT octet_length(classes[1]) AS longest_class FROM gibbs_nb_models WHERE model_name = 'll';
-- the same through gibbs_nb_import: a model of mallory's, its first class
-- ("a", after the tokenizer "text[]", init "labels" and whether unlabeled_weight
-- was chosen), tokenizer and first token ("v0") made longer; each value sealed
-- with its CRC-32C again (00_init), as an attacker would
SELECT status FROM gibbs_nb_train('sm', 'hm.small', 'tokens', 'label', sweeps => 2, seed => 1);
CREATE TABLE hm.value AS SELECT gibbs_nb_export('sm') AS v;
CREATE FUNCTION hm.try_import(v bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM gibbs_nb_import('bad', v);
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT position('\x06000000746578745b5d060000006c6162656c73'::bytea IN v) AS tokenizer_at,
       position('\x020000007630'::bytea IN v) AS token_at FROM hm.value \gset
SELECT substr(v, :tokenizer_at + 24, 5) = '\x0100000061'::bytea AS class_a_found FROM hm.value;
SELECT hm.try_import(seal(overlay(v placing '\x01040000'::bytea || convert_to(repeat('a', 1025), 'UTF8')
                                  from :tokenizer_at + 24 for 5))) AS long_class FROM hm.value;
SELECT hm.try_import(seal(overlay(v placing '\x01001000'::bytea || convert_to(repeat('t', 1048577), 'UTF8')
                                  from :tokenizer_at for 10))) AS long_tokenizer FROM hm.value;
-- (the 256 MB token's CRC by crc32c_run: the value is before || 2^28 backslashes || after)
SELECT substr(v, 1, :token_at - 1) || '\x00000010'::bytea AS before,
       substr(v, :token_at + 6, length(v) - 4 - (:token_at + 5)) AS after FROM hm.value \gset hm_
SELECT regexp_replace(hm.try_import(:'hm_before'::bytea || convert_to(repeat(E'\\', 268435456), 'UTF8')
                                    || :'hm_after'::bytea
                                    || le32(crc32c_bytes(crc32c_run(crc32c_bytes(4294967295, :'hm_before'::bytea),
                                                                    92, 268435456),
                                                         :'hm_after'::bytea) # 4294967295)),
                      '\d{7,}', 'N', 'g') AS backslash_token;
SELECT hm.try_import(v) AS unchanged FROM hm.value;
SELECT model_name, versions FROM gibbs_nb_models
WHERE model_name IN ('bs', 'll', 'sm', 'bad') ORDER BY 1;
RESET ROLE;
RESET gibbs_nb.max_job_memory;

--
-- 12. Taking a dropped role's models by taking its name.  Owners are stored
--    by name, and nothing in the catalogs depends on a role that owns only
--    models: DROP ROLE succeeds, and a role created later under the same
--    name saw, served and retrained every one of them.
--    A name now stands for the role it was registered for, by OID: the new
--    role sees none of them and may not add to them, a superuser may give
--    them to it; a renamed role keeps its models (they were nobody's).
--
CREATE ROLE gnb_h_gone;
CREATE SCHEMA hg AUTHORIZATION gnb_h_gone;
CREATE TABLE public.hg_value (v bytea);
GRANT SELECT, INSERT ON public.hg_value TO gnb_h_gone;
SET ROLE gnb_h_gone;
CREATE TABLE hg.mail (id int, tokens text[], label text);
INSERT INTO hg.mail
SELECT i, ARRAY['g' || i % 4, 'h' || i % 3], CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END
FROM generate_series(1, 40) i;
SELECT status FROM gibbs_nb_train('gm', 'hg.mail', 'tokens', 'label', sweeps => 2, seed => 1);
INSERT INTO public.hg_value SELECT gibbs_nb_export('gm');
RESET ROLE;
DROP SCHEMA hg CASCADE;
DROP OWNED BY gnb_h_gone;
DROP ROLE gnb_h_gone;
CREATE ROLE gnb_h_gone;
CREATE SCHEMA hg AUTHORIZATION gnb_h_gone;
GRANT SELECT ON public.hg_value TO gnb_h_gone;
SET ROLE gnb_h_gone;
CREATE TABLE hg.mail (id int, tokens text[], label text);
INSERT INTO hg.mail VALUES (1, '{x}', 'a'), (2, '{y}', 'b');
-- the dropped role's model, its rows and its job: none of it is the new role's
SELECT (SELECT count(*) FROM gibbs_nb_models) AS models,
       (SELECT count(*) FROM gibbs_nb.packed) AS packed,
       (SELECT count(*) FROM gibbs_nb.theta) AS theta,
       (SELECT count(*) FROM gibbs_nb_jobs) AS jobs;
SELECT try($$SELECT gibbs_nb_predict('gm', '{g1,h1}'::text[])$$);
-- nor may it add versions to them, by training or by import
SELECT try($$SELECT status FROM gibbs_nb_train('gm', 'hg.mail', 'tokens', 'label', sweeps => 2, seed => 1)$$);
SELECT try($$SELECT gibbs_nb_import('gi', (SELECT v FROM public.hg_value))$$);
RESET ROLE;
-- a superuser gives them to the role now of that name
UPDATE gibbs_nb.owners SET role_oid = 'gnb_h_gone'::regrole WHERE owner = 'gnb_h_gone';
SET ROLE gnb_h_gone;
SELECT model_name, versions FROM gibbs_nb_models;
SELECT gibbs_nb_predict('gm', '{g1,h1}'::text[]) IS NOT NULL AS predicts;
RESET ROLE;
-- a renamed role keeps its models, under the name they were stored with
ALTER ROLE gnb_h_gone RENAME TO gnb_h_renamed;
SET ROLE gnb_h_renamed;
SELECT model_name, owner, versions FROM gibbs_nb_models;
SELECT gibbs_nb_predict('gm', '{g1,h1}'::text[]) IS NOT NULL AS predicts;
RESET ROLE;
-- gibbs_nb.model_relation answers by name only for a caller who may act for
-- the owner: whom a name is registered to (a rename) is not for others to learn
SET ROLE gnb_h_mallory;
SELECT gibbs_nb.model_relation(0, 'hg.mail', 'another cluster', 'gnb_h_gone') AS for_mallory;
RESET ROLE;
SET ROLE gnb_h_renamed;
SELECT gibbs_nb.model_relation(0, 'hg.mail', 'another cluster', 'gnb_h_gone') = 'hg.mail'::regclass
       AS for_the_owner;
RESET ROLE;
DROP SCHEMA hg CASCADE;
DROP TABLE public.hg_value;
DROP OWNED BY gnb_h_renamed;
DROP ROLE gnb_h_renamed;

--
-- 13. Dropping the locks that count a job as running.  A job's worker holds
--     session advisory locks (its job, its role, its chain slots);
--     pg_advisory_unlock_all() releases every such lock of the process, and
--     mallory's own source runs in her worker.  With them gone her jobs were
--     neither counted (max_jobs, max_jobs_per_role, one job per model) nor
--     cancellable, and could take every worker slot.  The worker refuses the
--     call; the call's own checks, in her session, may still make it.
--
SET ROLE gnb_h_mallory;
CREATE FUNCTION hm.unlock_all() RETURNS boolean LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM pg_catalog.pg_advisory_unlock_all(); RETURN true; END $$;
CREATE VIEW hm.unlocking AS SELECT id, tokens, label FROM hm.mail WHERE hm.unlock_all();
SELECT try($$SELECT gibbs_nb_train('ul', 'hm.unlocking', 'tokens', 'label', sweeps => 5, seed => 1)$$);
SELECT status, sqlstate, message FROM gibbs_nb_jobs WHERE model_name = 'ul';
SELECT count(*) AS versions FROM gibbs_nb.models WHERE model_name = 'ul';
DROP VIEW hm.unlocking;
DROP FUNCTION hm.unlock_all();
RESET ROLE;

-- clean up
RESET ROLE;
DROP SCHEMA hv CASCADE;
DROP SCHEMA hm CASCADE;
DROP OWNED BY gnb_h_victim, gnb_h_mallory;
DROP ROLE gnb_h_victim, gnb_h_mallory;
DROP EXTENSION gibbs_nb;
