-- The library itself: on PostgreSQL 18 and later it names itself and its
-- version in its magic block (PG_MODULE_MAGIC_EXT), which
-- pg_get_loaded_modules() shows; the version is the extension's.  (Before
-- 18 there is no such function: the check says so instead.)
CREATE EXTENSION gibbs_nb;
SELECT try($$SELECT gibbs_nb_classes('no_such_model')$$) <> '' AS library_loaded;
DO $$
DECLARE
  v text;
  ext text := (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'gibbs_nb');
BEGIN
  IF pg_catalog.current_setting('server_version_num')::int < 180000 THEN
    RAISE NOTICE 'library version: as the extension''s';
    RETURN;
  END IF;
  EXECUTE $q$SELECT version FROM pg_catalog.pg_get_loaded_modules()
             WHERE module_name = 'gibbs_nb'$q$ INTO v;
  IF v IS DISTINCT FROM ext THEN
    RAISE EXCEPTION 'pg_get_loaded_modules() shows gibbs_nb version %, the extension is %', v, ext;
  END IF;
  RAISE NOTICE 'library version: as the extension''s';
END $$;
DROP EXTENSION gibbs_nb;
