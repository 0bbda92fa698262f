-- A hostile role against gibbs_nb (../docs or README, Security): each attack
-- that worked on 0.1.0, written as the attack.  What must hold: no crash,
-- nothing runs as anyone but the caller, nothing leaks about a model the
-- attacker may not see.  gnb_mallory is the attacker: CREATE on public and
-- on a schema of its own, nothing else.
CREATE EXTENSION gibbs_nb;
CREATE ROLE gnb_victim;
CREATE ROLE gnb_mallory;
CREATE ROLE gnb_team;
CREATE ROLE gnb_team2;
CREATE ROLE gnb_member IN ROLE gnb_team, gnb_team2;   -- has both groups' privileges
GRANT CREATE ON SCHEMA public TO gnb_victim, gnb_mallory, gnb_team, gnb_team2, gnb_member;
CREATE SCHEMA victim AUTHORIZATION gnb_victim;
CREATE SCHEMA mallory AUTHORIZATION gnb_mallory;
-- what mallory's code does when it runs is written down here, by whoever it runs as
CREATE TABLE public.evidence (ran_as text, what text);
GRANT INSERT, SELECT ON public.evidence TO PUBLIC;

SET ROLE gnb_victim;
CREATE TABLE victim.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO victim.mail
SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills,buy}'::text[] ELSE '{meeting,agenda,notes}' END,
       CASE WHEN i <= 20 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 40) i;
CREATE TABLE victim.secret (x int);
SELECT model_name, version, status
FROM gibbs_nb_train('vm', 'victim.mail', 'tokens', 'label', sweeps => 20, seed => 1);
SELECT model_name, version, status
FROM gibbs_nb_train('private', 'victim.mail', 'tokens', 'label', sweeps => 20, seed => 1);
RESET ROLE;

SET ROLE gnb_mallory;
CREATE TABLE mallory.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO mallory.mail SELECT i, '{a,b}', CASE WHEN i <= 4 THEN (ARRAY['x', 'y'])[1 + i % 2] END
FROM generate_series(1, 8) i;
RESET ROLE;

--
-- 4. The jobs view and the tables are not leaky: a cheap function in WHERE
--    (IMMUTABLE, so the planner may push it down) sees only rows the policy
--    lets through: none of the victim's, so no NOTICE.
--
SET ROLE gnb_mallory;
CREATE FUNCTION mallory.leak(VARIADIC t text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE COST 0.0000001 AS $$
BEGIN
  RAISE NOTICE 'leaked %', t;
  RETURN true;
END $$;
SELECT count(*) FROM gibbs_nb_jobs WHERE mallory.leak(model_name, source);
SELECT count(*) FROM gibbs_nb.jobs WHERE mallory.leak(model_name, owner::text, source, message);
SELECT count(*) FROM gibbs_nb.models WHERE mallory.leak(model_name, owner::text, source);
SELECT count(*) FROM gibbs_nb.packed WHERE mallory.leak(model_name, owner::text);
SELECT count(*) FROM gibbs_nb.document_labels WHERE mallory.leak(id, owner, probabilities::text);
RESET ROLE;
SELECT * FROM public.evidence;

--
-- 5. No existence oracle, no squatting: a model mallory may not see is
--    exactly like one that does not exist, and taking a name first takes it
--    only for mallory.
--
SET ROLE gnb_mallory;
SELECT try($$SELECT gibbs_nb_predict('vm', '{cheap}'::text[])$$);
SELECT try($$SELECT gibbs_nb_predict('no_such_model', '{cheap}'::text[])$$);
SELECT try($$SELECT gibbs_nb_classes('vm')$$);
SELECT try($$SELECT gibbs_nb_drop('vm')$$);
SELECT try($$SELECT gibbs_nb_retrain('vm')$$);
-- mallory's own "vm" is mallory's, in mallory's namespace
SELECT model_name, version, status
FROM gibbs_nb_train('vm', 'mallory.mail', 'tokens', 'label', sweeps => 10, seed => 1,
                    labels_table => 'mallory.vm_labels');
SELECT owner, version FROM gibbs_nb.models WHERE model_name = 'vm';
RESET ROLE;
-- the victim's "vm" is untouched and still the victim's answer
SET ROLE gnb_victim;
SELECT owner, version FROM gibbs_nb.models WHERE model_name = 'vm';
SELECT gibbs_nb_predict('vm', '{cheap}'::text[]);
-- a name mallory took first does not block the victim
SELECT model_name, version, status
FROM gibbs_nb_train('vm2', 'victim.mail', 'tokens', 'label', sweeps => 10, seed => 1);
-- nor does a job of the victim's tell mallory the name exists (55006)
SELECT job_id AS victim_job
FROM gibbs_nb_train('long', 'victim.mail', 'tokens', 'label', sweeps => 2000000, seed => 1,
                    wait => false) \gset
RESET ROLE;
SET ROLE gnb_mallory;
SELECT model_name, version, status
FROM gibbs_nb_train('long', 'mallory.mail', 'tokens', 'label', sweeps => 10, seed => 1,
                    labels_table => 'mallory.long_labels');
SELECT try(format('SELECT gibbs_nb_cancel(%s)', :victim_job));
SELECT try(format('SELECT gibbs_nb_wait(%s)', :victim_job));
-- nor does probing job ids with the view's own liveness functions: not the
-- running job, nor a row of the victim's whose worker is gone (a crash)
SELECT gibbs_nb.job_worker_alive(:victim_job) AS mallory_sees_it_run;
RESET ROLE;
INSERT INTO gibbs_nb.jobs (job_id, model_name, owner, status, sweeps, chains, source, started_at)
VALUES (-7, 'long', 'gnb_victim', 'running', 10, 1, 'victim.mail', now());
SET ROLE gnb_mallory;
SELECT gibbs_nb.job_worker_lost(-7) AS mallory_sees_it_lost,
       gibbs_nb.job_worker_lost(:victim_job) AS mallory_sees_running_lost;
RESET ROLE;
SET ROLE gnb_victim;
SELECT gibbs_nb.job_worker_lost(-7) AS victim_sees_it_lost;
RESET ROLE;
DELETE FROM gibbs_nb.jobs WHERE job_id = -7;
SET ROLE gnb_victim;
SELECT gibbs_nb_cancel(:victim_job);
SELECT status, sqlstate FROM gibbs_nb_wait(:victim_job);
RESET ROLE;
-- a superuser has every role's privileges, but a name never silently means
-- another role's model: it resolves to the superuser's own (SET ROLE to use
-- another's)
SELECT try($$SELECT gibbs_nb_predict('vm', '{cheap}'::text[])$$);

--
-- 3. The model cache checks access per role and per snapshot, not once per
--    statement: a SECURITY DEFINER function of the victim loads the model,
--    and mallory's direct call in the same statement must not get it.
--
SET ROLE gnb_victim;
CREATE FUNCTION victim.label_of(t text[]) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
AS $$ SELECT public.gibbs_nb_predict('private', t) $$;
GRANT USAGE ON SCHEMA victim TO gnb_mallory;
GRANT EXECUTE ON FUNCTION victim.label_of(text[]) TO gnb_mallory;
RESET ROLE;
SET ROLE gnb_mallory;
SELECT victim.label_of('{cheap}') AS definer_label,
       gibbs_nb_predict_proba('private', '{cheap}'::text[]) AS direct;
SELECT victim.label_of('{cheap}') AS definer_label,
       gibbs_nb_classes('private') AS direct;
SELECT victim.label_of(tokens) AS definer_label,
       gibbs_nb_predict('private', tokens) AS direct
FROM (VALUES ('{cheap}'::text[]), ('{agenda}')) d(tokens);
-- a name means the caller's own model: the victim's "private" for the
-- definer, mallory's own "vm" for mallory, in one statement
SELECT victim.label_of('{cheap}') AS definer_label,
       gibbs_nb_predict('vm', '{a}'::text[]) AS mallorys_own;
RESET ROLE;
-- roles switched by SET ROLE inside one protocol message (one statement
-- timestamp, one transaction)
SET ROLE gnb_victim \; SELECT gibbs_nb_predict('vm2', '{cheap}'::text[]) AS as_victim \; SET ROLE gnb_mallory \; SELECT gibbs_nb_predict_proba('vm2', '{cheap}'::text[]) AS as_mallory;
RESET ROLE;
-- a model dropped inside one message is gone for the next statement
SET ROLE gnb_victim;
SELECT gibbs_nb_predict('vm2', '{cheap}'::text[]) AS before_drop \; SELECT gibbs_nb_drop('vm2') \; SELECT gibbs_nb_predict('vm2', '{cheap}'::text[]) AS after_drop;
RESET ROLE;

--
-- 2. No other role's code inside your job: with a tokens column whose type
--    is a domain, an aggregate mallory creates in public with a better
--    matching signature must not be what the worker calls.
--
SET ROLE gnb_victim;
CREATE DOMAIN public.victim_tokens AS text[];
CREATE TABLE victim.dmail (id int PRIMARY KEY, tokens public.victim_tokens, label text);
INSERT INTO victim.dmail SELECT id, tokens, label FROM victim.mail;
RESET ROLE;
SET ROLE gnb_mallory;
CREATE FUNCTION public.steal(s bytea, l text, t public.victim_tokens) RETURNS bytea
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.evidence VALUES (current_user, 'shadow aggregate');
  BEGIN
    EXECUTE 'GRANT SELECT ON victim.secret TO gnb_mallory';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN NULL;               -- 0.1.0 then crashed the server
END $$;
CREATE AGGREGATE public.gibbs_nb_class_counts(text, public.victim_tokens)
  (SFUNC = public.steal, STYPE = bytea);
RESET ROLE;
SET ROLE gnb_victim;
SELECT model_name, version, status, sweeps_done
FROM gibbs_nb_train('dm', 'victim.dmail', 'tokens', 'label', sweeps => 20, seed => 1);
SELECT n_documents, n_labeled FROM gibbs_nb.models WHERE model_name = 'dm';
RESET ROLE;
SELECT * FROM public.evidence;
SELECT has_table_privilege('gnb_mallory', 'victim.secret', 'SELECT') AS mallory_reads_secret;

--
-- 1. A long quoted name: 63 double quotes, quoted, are 128 bytes, and with
--    "sharedws." 137.  0.1.0 truncated the qualified name to 135 bytes,
--    which reads as sharedws."<62 quotes>": mallory's table, whose tokens
--    are an int.  The worker crashed.  Now it names the relation from the
--    OID it locked.
--
CREATE SCHEMA sharedws;
GRANT USAGE, CREATE ON SCHEMA sharedws TO gnb_victim, gnb_mallory;
SET ROLE gnb_victim;
DO $$ BEGIN
  EXECUTE format('CREATE TABLE sharedws.%I (id int PRIMARY KEY, tokens text[], label text)', repeat('"', 63));
  EXECUTE format('INSERT INTO sharedws.%I SELECT * FROM victim.mail', repeat('"', 63));
END $$;
RESET ROLE;
SET ROLE gnb_mallory;
DO $$ BEGIN
  EXECUTE format('CREATE TABLE sharedws.%I (id int, tokens int, label text)', repeat('"', 62));
  EXECUTE format('INSERT INTO sharedws.%I SELECT i, i, (ARRAY[''a'', ''b''])[1 + i %% 2] FROM generate_series(1, 5) i', repeat('"', 62));
  EXECUTE format('GRANT SELECT ON sharedws.%I TO PUBLIC', repeat('"', 62));
END $$;
RESET ROLE;
SET ROLE gnb_victim;
SELECT model_name, version, status
FROM gibbs_nb_train('longname', format('sharedws.%I', repeat('"', 63))::regclass, 'tokens', 'label',
                    sweeps => 10, seed => 1, labels_table => 'victim.longname_labels');
SELECT n_documents, n_labeled, length(source) FROM gibbs_nb.models WHERE model_name = 'longname';
RESET ROLE;

--
-- 6. Retrain follows the source by OID, never its name again: the victim's
--    source is dropped, mallory puts a view under the same name, and the
--    victim's retrain (a pg_cron job, say) must not read it.
--
SET ROLE gnb_victim;
CREATE TABLE public.shared_src AS SELECT * FROM victim.mail;
SELECT model_name, version, status
FROM gibbs_nb_train('rt', 'public.shared_src', 'tokens', 'label', sweeps => 10, seed => 1,
                    labels_table => 'victim.rt_labels');
DROP TABLE public.shared_src;
RESET ROLE;
SET ROLE gnb_mallory;
CREATE FUNCTION mallory.tokens_of(t text[]) RETURNS text[] LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.evidence VALUES (current_user, 'view under the old name');
  RETURN t;
END $$;
CREATE VIEW public.shared_src AS SELECT id, mallory.tokens_of(tokens) AS tokens, label FROM mallory.mail;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
GRANT SELECT ON public.shared_src, mallory.mail TO PUBLIC;
RESET ROLE;
SET ROLE gnb_victim;
SELECT try($$SELECT gibbs_nb_retrain('rt')$$);
SELECT max(version) FROM gibbs_nb.models WHERE model_name = 'rt';
RESET ROLE;
SELECT * FROM public.evidence;

--
-- 7. A job started under SET ROLE is the role's job: shown as running, and
--    the role and its members can wait for it and cancel it, although its
--    worker's session belongs to another login role.
--
SET ROLE gnb_team;
CREATE TABLE public.team_mail (id int, tokens text[], label text);
INSERT INTO public.team_mail
SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills}'::text[] ELSE '{agenda,notes}' END,
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 20) i;
ALTER TABLE public.team_mail ADD PRIMARY KEY (id);
GRANT SELECT ON public.team_mail TO gnb_team2;
SELECT job_id AS team_job
FROM gibbs_nb_train('tm', 'public.team_mail', 'tokens', 'label', sweeps => 2000000, seed => 1,
                    wait => false) \gset
SELECT status FROM gibbs_nb_jobs WHERE job_id = :team_job;
RESET ROLE;
SET ROLE gnb_member;
SELECT owner, status FROM gibbs_nb_jobs WHERE job_id = :team_job;
SELECT status FROM gibbs_nb_wait(:team_job, '10 ms');
SELECT gibbs_nb_cancel(:team_job);
SELECT status, sqlstate FROM gibbs_nb_wait(:team_job);
RESET ROLE;

--
-- 8. A member's retrain makes a version of the group's model: owned by the
--    group, visible to it, in its labels table; the group's drop of that
--    version removes exactly it.
--
SET ROLE gnb_team;
SELECT model_name, version, status
FROM gibbs_nb_train('tm', 'public.team_mail', 'tokens', 'label', sweeps => 10, seed => 1);
RESET ROLE;
SET ROLE gnb_member;
SELECT model_name, version, status FROM gibbs_nb_retrain('tm');
RESET ROLE;
SET ROLE gnb_team;
-- (0.1.0: 1, the member's version was the member's and hidden from the owner)
SELECT max(version) AS newest_the_owner_sees FROM gibbs_nb.models WHERE model_name = 'tm';
SELECT version, owner, trained_by FROM gibbs_nb.models WHERE model_name = 'tm' ORDER BY version;
SELECT DISTINCT version FROM public.tm_labels;
SELECT gibbs_nb_drop('tm', 2);
SELECT version FROM gibbs_nb.models WHERE model_name = 'tm';
SELECT gibbs_nb_predict('tm', '{cheap}'::text[]);
RESET ROLE;
-- a name two of the member's groups each use is ambiguous, never a guess
SET ROLE gnb_team2;
CREATE TABLE public.team2_mail AS SELECT * FROM public.team_mail;
SELECT model_name, version, status
FROM gibbs_nb_train('tm', 'public.team2_mail', 'tokens', 'label', sweeps => 10, seed => 1,
                    labels_table => 'public.tm2_labels');
RESET ROLE;
SET ROLE gnb_member;
SELECT try($$SELECT gibbs_nb_predict('tm', '{cheap}'::text[])$$);
RESET ROLE;

-- the server is up and nothing ran as anyone else
SELECT * FROM public.evidence;

DROP SCHEMA victim, mallory CASCADE;
DROP TABLE public.evidence, public.team_mail, public.team2_mail, public.tm_labels, public.tm2_labels;
DROP SCHEMA sharedws CASCADE;
DROP AGGREGATE public.gibbs_nb_class_counts(text, public.victim_tokens);
DROP FUNCTION public.steal(bytea, text, public.victim_tokens);
DROP DOMAIN public.victim_tokens;
DROP EXTENSION gibbs_nb;
REVOKE CREATE ON SCHEMA public FROM gnb_victim, gnb_mallory, gnb_team, gnb_team2, gnb_member;
DROP ROLE gnb_victim, gnb_mallory, gnb_team, gnb_team2, gnb_member;
