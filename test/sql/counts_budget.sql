-- The training worker bounds gibbs_nb_class_counts's state by what is left
-- of its job's gibbs_nb.max_job_memory while the state is built, in its own
-- process and in its parallel workers (gibbs_nb.class_counts_budget, which
-- it sets and they inherit).  Before, a cap of 8 MB let the aggregate build
-- a value of 125 MB (its worker 1 GB resident), and millions of distinct tokens grew it to
-- gigabytes before the worker could check the value: an OOM kill.
CREATE EXTENSION gibbs_nb;

-- labelled rows with many large distinct tokens: ~25 MB of distinct tokens
CREATE TABLE wide (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO wide
SELECT i, array(SELECT repeat(md5(i::text || ':' || k), 6) FROM generate_series(1, 30) k),
       CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END
FROM generate_series(1, 4000) i;
ANALYZE wide;

-- the job fails with 53200 while the aggregate counts (its message names
-- gibbs_nb_class_counts: the value is never built), and nothing is published
-- (the sizes depend on the allocator: masked)
SET gibbs_nb.max_job_memory = '8MB';
SELECT regexp_replace(try($$SELECT gibbs_nb_train('wide', 'wide', 'tokens', 'label', sweeps => 2)$$),
                      '\d+ MB', 'N MB', 'g') AS refused;
RESET gibbs_nb.max_job_memory;
SELECT status, sqlstate, regexp_replace(message, '\d+ MB', 'N MB', 'g') AS message
FROM gibbs_nb_jobs WHERE model_name = 'wide';
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'wide';
-- the budget was the job's query's own: the worker's session is unchanged
-- and so is this one
SHOW gibbs_nb.class_counts_budget;

-- a source whose view runs RESET ALL, as any role may write one: it reset
-- the setting the count was bounded by (its worker reached 2 GB under a 64 MB
-- cap); the job's budget is the aggregate's argument, which it cannot reset
CREATE FUNCTION reset_all() RETURNS boolean LANGUAGE plpgsql AS
$$ BEGIN RESET ALL; RETURN true; END $$;
CREATE VIEW wide_reset AS SELECT * FROM wide WHERE reset_all();
SET gibbs_nb.max_job_memory = '8MB';
SELECT regexp_replace(try($$SELECT gibbs_nb_train('wide3', 'wide_reset', 'tokens', 'label', sweeps => 2)$$),
                      '\d+ MB', 'N MB', 'g') AS refused;
RESET gibbs_nb.max_job_memory;
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'wide3';

-- a source whose query itself builds more than the job may hold before its
-- one row is done (5 million tokens by array_agg): the worker watches its
-- memory while it reads, and the job fails with 53200 as it passes the cap
-- (and 64 MB); before, the worker built all of it first (a job of such a
-- view reached 1.2 GB under a 32 MB cap) and failed only at its own check
CREATE VIEW one_big_row AS
SELECT 1 AS id, (SELECT array_agg('token' || i) FROM generate_series(1, 5000000) i) AS tokens;
SET gibbs_nb.max_job_memory = '32MB';
SELECT regexp_replace(try($$SELECT gibbs_nb_train('big_row', 'one_big_row', 'tokens', NULL, n_classes => 2,
                                                 sweeps => 2)$$),
                      'job \d+', 'job N', 'g') AS refused;
RESET gibbs_nb.max_job_memory;
-- and one that catches the cancel (by name: PL/pgSQL can) and goes on for
-- ever, its memory held: a cancel that lands between its blocks ends it
-- (53200), one it catches a second later terminates the worker, which
-- nothing catches (where the cancel lands depends on timing: either way the
-- job fails and nothing is published); before, it ran for ever
CREATE FUNCTION stubborn_tokens() RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  held text[] := '{}';
BEGIN
  -- (the caller's own checks read the source too: only the job's worker is held)
  IF current_setting('application_name') <> 'gibbs_nb worker' THEN
    RETURN ARRAY['a', 'b'];
  END IF;
  LOOP
    BEGIN
      IF cardinality(held) < 8 THEN
        held := array_append(held, repeat('x', 16000000));  -- 16 MB more each time
      END IF;
      PERFORM pg_sleep(0.01);
    EXCEPTION WHEN query_canceled THEN
      NULL;
    END;
  END LOOP;
END $$;
CREATE VIEW stubborn AS SELECT 1 AS id, stubborn_tokens() AS tokens;
SET gibbs_nb.max_job_memory = '32MB';
SELECT try($$SELECT gibbs_nb_train('stubborn', 'stubborn', 'tokens', NULL, n_classes => 2,
                                   sweeps => 2)$$)
       ~ '^(53200: gibbs_nb job \d+: reading public.stubborn took more|58000: gibbs_nb worker of job \d+ exited)'
       AS refused;
RESET gibbs_nb.max_job_memory;
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'stubborn';
SELECT status FROM gibbs_nb_jobs WHERE model_name = 'stubborn';
-- a terminated worker leaves the labels table it reserved (a known gap: a
-- lost job's table is not yet dropped by reconciliation); dropped here, so
-- that later tests see the same tables either way
SET client_min_messages = warning;
DROP TABLE IF EXISTS stubborn_labels;
RESET client_min_messages;

-- the same under plans that count in parallel workers (the job's session
-- takes the role's settings)
DO $$ BEGIN
  EXECUTE format('ALTER ROLE %I SET max_parallel_workers_per_gather = 2', current_user);
  EXECUTE format('ALTER ROLE %I SET parallel_setup_cost = 0', current_user);
  EXECUTE format('ALTER ROLE %I SET parallel_tuple_cost = 0', current_user);
  EXECUTE format('ALTER ROLE %I SET min_parallel_table_scan_size = 0', current_user);
  EXECUTE format('ALTER ROLE %I SET %I = on', current_user, public.debug_parallel_guc());
  EXECUTE format('ALTER ROLE %I SET parallel_leader_participation = off', current_user);
END $$;
SET gibbs_nb.max_job_memory = '8MB';
SELECT regexp_replace(try($$SELECT gibbs_nb_train('wide2', 'wide', 'tokens', 'label', sweeps => 2)$$),
                      '\d+ MB', 'N MB', 'g') AS refused;
RESET gibbs_nb.max_job_memory;
DO $$ BEGIN
  EXECUTE format('ALTER ROLE %I RESET ALL', current_user);
END $$;
SELECT count(*) AS published FROM gibbs_nb.models WHERE model_name = 'wide2';

-- counting wide under the current settings: 'no error', or the error
-- (sizes masked) and whether a parallel worker raised it
CREATE FUNCTION pg_temp.count_wide() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  ctx text;
BEGIN
  PERFORM gibbs_nb_class_counts(label, tokens) FROM wide;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
  RETURN format('%s: %s; in a parallel worker: %s', SQLSTATE,
                regexp_replace(SQLERRM, '\d+ MB', 'N MB', 'g'), ctx LIKE '%parallel worker%');
END $$;
-- in the parallel workers themselves: with the leader not counting, the
-- error comes from a worker's partial state
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT gibbs_nb_class_counts(label, tokens) FROM wide;
SET gibbs_nb.class_counts_budget = '2MB';
SELECT pg_temp.count_wide();
-- and in the leader, which keeps the workers' states (each under 20 MB
-- here) and merges them: at 36 MB the merge's value does not fit beside
-- them, and the error is the leader's; at 60 MB all of it does
SET gibbs_nb.class_counts_budget = '36MB';
SELECT pg_temp.count_wide();
SET gibbs_nb.class_counts_budget = '60MB';
SELECT sum(count) = 4000 * 30 AS all_counted
FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM wide));
-- a parallel plan that gets no worker: the leader runs the partial
-- aggregate itself and holds its state beside the state it combines it
-- into.  The budget bounds the process's states together: 60 MB, enough
-- for a serial count, is not enough for both.
SET max_parallel_workers = 0;
SELECT pg_temp.count_wide();
SET max_parallel_workers_per_gather = 0;
SELECT sum(count) = 4000 * 30 AS all_counted_serially
FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM wide));
RESET ALL;

-- a user's own query is bounded by nothing of ours (as array_agg is not):
-- the default budget is 0
SELECT pg_column_size(gibbs_nb_class_counts(label, tokens)) > 8 * 1024 * 1024 AS unbounded
FROM wide;

-- no role but a superuser can set the budget, so none can raise it for a
-- job (a function in a source could try)
CREATE ROLE budget_user;
SET ROLE budget_user;
SELECT try($$SET gibbs_nb.class_counts_budget = '100GB'$$);
SELECT try($$SELECT set_config('gibbs_nb.class_counts_budget', '0', true)$$);
RESET ROLE;
DROP ROLE budget_user;

DROP VIEW wide_reset, one_big_row, stubborn;
DROP FUNCTION stubborn_tokens();
DROP FUNCTION reset_all();
DROP TABLE wide;
DROP EXTENSION gibbs_nb;
