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

-- doc_labels(version_id): a version's documents' labels (gibbs_nb.document_labels)
-- as one value, each id with its probabilities, by id: two versions' are
-- equal when they gave the same documents the same probabilities, bit for
-- bit (float8 text is its shortest exact form).  (PL/pgSQL: the extension
-- is created after this file.)
CREATE FUNCTION public.doc_labels(v bigint) RETURNS text[] LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT pg_catalog.array_agg(d.id || '=' || d.probabilities::text ORDER BY d.id COLLATE "C")
          FROM gibbs_nb.document_labels d WHERE d.version_id = v);
END $$;

-- debug_parallel_guc(): the setting that forces parallel plans, by the name
-- this server gives it (force_parallel_mode until PostgreSQL 15,
-- debug_parallel_query since 16).  In psql:
--   SELECT debug_parallel_guc() AS debug_parallel \gset
--   SET :"debug_parallel" = on;
CREATE FUNCTION public.debug_parallel_guc() RETURNS text LANGUAGE sql AS $$
  SELECT CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 160000
              THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END
$$;

-- CRC-32C (Castagnoli, as pg_crc32c), for tests that make gibbs_nb_export
-- values by hand: a value ends with the CRC-32C of its other bytes.
-- le32(n): n as 4 bytes little-endian.  crc32c_byte(crc, b): the register
-- after byte b.  crc32c_bytes(crc, bytes), crc32c_run(crc, b, n): after
-- those bytes, after n bytes b (n as large as a bytea, by squaring the
-- byte's map, which is affine over GF(2)).  test_crc32c(bytes): the CRC.
-- seal(value): the value with its last 4 bytes the CRC of the others.
CREATE FUNCTION public.le32(n bigint) RETURNS bytea LANGUAGE sql IMMUTABLE AS
$$ SELECT set_byte(set_byte(set_byte(set_byte('\x00000000'::bytea, 0, (n & 255)::int),
          1, ((n >> 8) & 255)::int), 2, ((n >> 16) & 255)::int), 3, ((n >> 24) & 255)::int) $$;
CREATE FUNCTION public.crc32c_byte(crc bigint, b int) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  crc := crc # b;
  FOR k IN 1 .. 8 LOOP
    crc := CASE WHEN crc & 1 = 1 THEN (crc >> 1) # 2197175160 ELSE crc >> 1 END;  -- 0x82F63B78
  END LOOP;
  RETURN crc;
END $$;
CREATE TABLE public.crc32c_table AS
SELECT b, public.crc32c_byte(0, b) AS v FROM generate_series(0, 255) b;
GRANT SELECT ON public.crc32c_table TO PUBLIC;
CREATE FUNCTION public.crc32c_bytes(crc bigint, bytes bytea) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  t bigint[] := ARRAY(SELECT v FROM public.crc32c_table ORDER BY b);
BEGIN
  FOR i IN 0 .. length(bytes) - 1 LOOP
    crc := t[1 + ((crc # get_byte(bytes, i)) & 255)] # (crc >> 8);
  END LOOP;
  RETURN crc;
END $$;
-- a 32 x 32 matrix over GF(2) as its columns: m times the vector v
CREATE FUNCTION public.gf2_times(m bigint[], v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  r bigint := 0;
BEGIN
  FOR i IN 0 .. 31 LOOP
    IF (v >> i) & 1 = 1 THEN r := r # m[i + 1]; END IF;
  END LOOP;
  RETURN r;
END $$;
CREATE FUNCTION public.crc32c_run(crc bigint, b int, n bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  c bigint := public.crc32c_byte(0, b);   -- one byte's map: r -> M r # c
  m bigint[];
  rm bigint[];                              -- the map of the bytes so far, identity at first
  rc bigint := 0;
  sq bigint[];
BEGIN
  FOR i IN 0 .. 31 LOOP
    m[i + 1] := public.crc32c_byte(1::bigint << i, b) # c;
    rm[i + 1] := 1::bigint << i;
  END LOOP;
  WHILE n > 0 LOOP
    IF n & 1 = 1 THEN
      FOR j IN 1 .. 32 LOOP sq[j] := public.gf2_times(m, rm[j]); END LOOP;
      rm := sq;
      rc := public.gf2_times(m, rc) # c;
    END IF;
    c := public.gf2_times(m, c) # c;
    FOR j IN 1 .. 32 LOOP sq[j] := public.gf2_times(m, m[j]); END LOOP;
    m := sq;
    n := n >> 1;
  END LOOP;
  RETURN public.gf2_times(rm, crc) # rc;
END $$;
CREATE FUNCTION public.test_crc32c(bytes bytea) RETURNS bigint LANGUAGE sql AS
$$ SELECT public.crc32c_bytes(4294967295, bytes) # 4294967295 $$;
CREATE FUNCTION public.seal(v bytea) RETURNS bytea LANGUAGE sql AS
$$ SELECT substr(v, 1, length(v) - 4) || public.le32(public.test_crc32c(substr(v, 1, length(v) - 4))) $$;
SELECT public.test_crc32c('123456789'::bytea) = 3808858755 AS crc32c_check,
       public.crc32c_run(4294967295, 97, 1000) = public.crc32c_bytes(4294967295, convert_to(repeat('a', 1000), 'UTF8'))
         AS run_check;
