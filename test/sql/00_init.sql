-- Helpers the other tests share; pg_regress runs this file first (the names
-- sort) in the database they all use.
-- try(sql): runs a statement and returns 'no error' or 'SQLSTATE: message',
-- so that a test can show an error and go on.
CREATE FUNCTION public.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- No progress NOTICEs in any test: how many a training prints depends on how
-- fast the server is.  (For the sessions of every later test in this
-- database; the isolation specs set it in their sessions.)
SELECT current_database() AS db \gset
ALTER DATABASE :"db" SET gibbs_nb.progress_interval = 0;

-- debug_parallel_guc(): the setting that forces parallel plans, by the name
-- this server gives it (force_parallel_mode until PostgreSQL 15,
-- debug_parallel_query since 16).  In psql:
--   SELECT debug_parallel_guc() AS debug_parallel \gset
--   SET :"debug_parallel" = on;
CREATE FUNCTION public.debug_parallel_guc() RETURNS text LANGUAGE sql AS $$
  SELECT CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 160000
              THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END
$$;
