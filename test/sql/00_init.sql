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
