-- gibbs_nb_class_counts: the class x word counts as a parallel aggregate.
CREATE EXTENSION gibbs_nb;

-- real-looking data: varied lengths and words, repeats, NULL elements,
-- NULL labels, NULL tokens, empty documents
CREATE TABLE src (id int PRIMARY KEY, label text, tokens text[]);
INSERT INTO src
SELECT i,
       CASE WHEN i % 7 = 0 THEN NULL ELSE (ARRAY['sport', 'politics', 'tech'])[1 + i % 3] END,
       CASE WHEN i % 11 = 0 THEN NULL
            WHEN i % 13 = 0 THEN '{}'::text[]
            ELSE array(SELECT CASE WHEN (i * k) % 17 = 0 THEN NULL
                                   ELSE 'w' || ((i * k * 7919) % (50 + i % 400)) END
                       FROM generate_series(1, 5 + i % 60) k) END
FROM generate_series(1, 3000) i;
ANALYZE src;

CREATE VIEW reference AS
  SELECT label AS class, tok AS token, count(*) AS count
  FROM src, unnest(tokens) tok
  WHERE label IS NOT NULL AND tok IS NOT NULL GROUP BY 1, 2;

-- the same rows as GROUP BY, serially
SET max_parallel_workers_per_gather = 0;
CREATE TABLE serial_counts AS
  SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM src));
SELECT (SELECT count(*) FROM serial_counts) AS cells,
       (SELECT sum(count) FROM serial_counts) AS tokens,
       (SELECT count(*) FROM reference) AS reference_cells;
SELECT count(*) AS differing FROM (
  (SELECT * FROM reference EXCEPT SELECT * FROM serial_counts)
  UNION ALL
  (SELECT * FROM serial_counts EXCEPT SELECT * FROM reference)) d;

-- forced into a parallel plan: partial aggregates combined, the same rows
SET max_parallel_workers_per_gather = 4;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
ALTER TABLE src SET (parallel_workers = 4);
EXPLAIN (COSTS OFF) SELECT gibbs_nb_class_counts(label, tokens) FROM src;
SELECT count(*) AS differing FROM (
  (SELECT * FROM serial_counts
   EXCEPT SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM src)))
  UNION ALL
  (SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM src))
   EXCEPT SELECT * FROM serial_counts)) d;
-- four workers, three rows: workers with no rows give the combine NULL states
SELECT sum(count) AS tokens FROM gibbs_nb_class_counts_rows(
  (SELECT gibbs_nb_class_counts(label, tokens) FROM src WHERE id IN (1, 2, 4)));
SELECT count(*) AS tokens FROM src, unnest(tokens) t
WHERE id IN (1, 2, 4) AND label IS NOT NULL AND t IS NOT NULL;
-- grouped, in parallel: one matrix per group
SELECT id % 2 AS half, sum(c.count) AS tokens
FROM (SELECT id % 2 AS id, gibbs_nb_class_counts(label, tokens) AS counts FROM src GROUP BY 1) g,
     gibbs_nb_class_counts_rows(g.counts) c
GROUP BY 1 ORDER BY 1;
SELECT id % 2 AS half, count(*) FROM src, unnest(tokens) tok
WHERE label IS NOT NULL AND tok IS NOT NULL GROUP BY 1 ORDER BY 1;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- zero rows: an empty value, not NULL and not an error
SELECT gibbs_nb_class_counts(label, tokens) IS NOT NULL AS not_null,
       (SELECT count(*) FROM gibbs_nb_class_counts_rows(gibbs_nb_class_counts(label, tokens))) AS cells
FROM src WHERE false;
-- all labels NULL: empty too
SELECT count(*) FROM gibbs_nb_class_counts_rows(
  (SELECT gibbs_nb_class_counts(NULL::text, tokens) FROM src));
-- one class
SELECT class, count(*) AS tokens_kinds, sum(count) FROM gibbs_nb_class_counts_rows(
  (SELECT gibbs_nb_class_counts('only', tokens) FROM src WHERE id <= 20)) GROUP BY 1;

-- tsvector: a lexeme counts once per position, once if stripped
SELECT class, token, count FROM gibbs_nb_class_counts_rows(
  (SELECT gibbs_nb_class_counts(l, t) FROM (VALUES
     ('a', 'cat:1,2,3 dog:4'::tsvector),
     ('a', strip('cat:1,2 bird:5'::tsvector)),
     ('b', 'cat fish'::tsvector),
     (NULL, 'cat:1,2'::tsvector),
     ('b', NULL::tsvector)) v(l, t)))
ORDER BY 1, 2;

-- text[] tokens as the transition walks them: a short token at the end of
-- an array (read byte by byte) and in the middle of one (one 8-byte load,
-- masked) is the same token; long ones that share their first 8 bytes are
-- not; the empty string is a token; a word in four classes (two cells held
-- by the word, two beyond)
SELECT class, token, count FROM gibbs_nb_class_counts_rows(
  (SELECT gibbs_nb_class_counts(l, t) FROM (VALUES
     ('a', '{x,abcdefgh1,abcdefgh2,"",x}'::text[]),
     ('b', '{x,"",abcdefgh1,x,abcdefg}'),
     ('c', '{abcdefg,x}'),
     ('d', '{x,abcdefgh2,abcdefgh2}')) v(l, t)))
ORDER BY 1, 2;

-- a value from elsewhere is checked, not trusted
SELECT * FROM gibbs_nb_class_counts_rows('\x00'::bytea);
SELECT * FROM gibbs_nb_class_counts_rows('\x434e4247010000000100000001000000ffffffff00000000'::bytea);
SELECT * FROM gibbs_nb_class_counts_rows(
  overlay((SELECT gibbs_nb_class_counts('x', '{a,b}'::text[])) placing '\x09' from 1 for 1));
SELECT count(*) FROM gibbs_nb_class_counts_rows(
  (SELECT gibbs_nb_class_counts('x', '{a,b}'::text[])) || '\x00'::bytea);
SELECT count(*) AS rows_from_null FROM gibbs_nb_class_counts_rows(NULL);

-- classes and tokens come out as text: bytes a text value cannot hold in
-- the database's encoding (UTF8 here), or NUL, are rejected (22021), never
-- returned.  The values are made by hand: magic, format, 1 class, 1 token,
-- 1 cell; the class and the token (int32 length, bytes); the cell (class 0,
-- token 0, count 1).
CREATE FUNCTION pg_temp.one_cell(class bytea, token bytea) RETURNS bytea
LANGUAGE sql AS $$
  SELECT '\x434e42470100000001000000010000000100000000000000'::bytea
         || set_byte('\x00000000'::bytea, 0, length(class)) || class
         || set_byte('\x00000000'::bytea, 0, length(token)) || token
         || '\x00000000000000000100000000000000'::bytea $$;
SELECT * FROM gibbs_nb_class_counts_rows(pg_temp.one_cell('a', '\x636166c3a9'));
SELECT try($$SELECT * FROM gibbs_nb_class_counts_rows(pg_temp.one_cell('a', '\xff'))$$);
SELECT try($$SELECT * FROM gibbs_nb_class_counts_rows(pg_temp.one_cell('\xc3', 'b'))$$);
SELECT try($$SELECT * FROM gibbs_nb_class_counts_rows(pg_temp.one_cell('a', '\x780079'))$$);
-- a token twice (x, then a twice)
SELECT try($$SELECT * FROM gibbs_nb_class_counts_rows('\x434e4247010000000100000002000000010000000000000001000000780100000061010000006100000000000000000100000000000000'::bytea)$$);

-- The state type, gibbs_nb.class_counts_state: what travels between
-- processes (parallel workers: flattened; Citus: its text form, base64 of
-- its binary form).  An aggregate without a final
-- function shows the state itself.
CREATE AGGREGATE pg_temp.raw_counts(text, text[]) (
    SFUNC = gibbs_nb.gibbs_nb_class_counts_add,
    STYPE = gibbs_nb.class_counts_state,
    COMBINEFUNC = gibbs_nb.gibbs_nb_class_counts_combine,
    PARALLEL = SAFE);
SET max_parallel_workers_per_gather = 0;
-- The text form is base64 of the binary form.  A state travels in the
-- sorted form (format 2: byte 4 of the value); the final value of a state
-- counted in one process is the plain form (format 1), unsorted; both hold
-- the same counts.
CREATE FUNCTION pg_temp.counts_of(v text) RETURNS TABLE (class text, token text, count bigint)
LANGUAGE sql AS $$ SELECT * FROM gibbs_nb_class_counts_rows(decode(v, 'base64')) ORDER BY 1, 2 $$;
SELECT decode(s::text, 'base64') = gibbs_nb.class_counts_state_send(s) AS text_form_is_base64,
       get_byte(gibbs_nb.class_counts_state_send(s), 4) AS state_format,
       get_byte((SELECT gibbs_nb_class_counts(label, tokens) FROM src), 4) AS final_format
FROM (SELECT pg_temp.raw_counts(label, tokens) AS s FROM src) x;
SELECT count(*) AS differing FROM (
  (SELECT * FROM serial_counts
   EXCEPT SELECT * FROM pg_temp.counts_of((SELECT pg_temp.raw_counts(label, tokens) FROM src)::text))
  UNION ALL
  (SELECT * FROM pg_temp.counts_of((SELECT pg_temp.raw_counts(label, tokens) FROM src)::text)
   EXCEPT SELECT * FROM serial_counts)) d;
-- text round trip
SELECT s::text::gibbs_nb.class_counts_state::text = s::text AS text_round_trip
FROM (SELECT pg_temp.raw_counts(label, tokens) AS s FROM src) x;
-- binary round trip (COPY BINARY uses send and receive)
CREATE TEMP TABLE states (s gibbs_nb.class_counts_state);
INSERT INTO states SELECT pg_temp.raw_counts(label, tokens) FROM src;
CREATE TEMP TABLE states_back (LIKE states);
DO $$
DECLARE f text := '/tmp/gibbs_nb_states_' || pg_backend_pid() || '.bin';
BEGIN
  EXECUTE format('COPY states TO PROGRAM %L (FORMAT binary)', 'cat > ' || f);
  EXECUTE format('COPY states_back FROM PROGRAM %L (FORMAT binary)', 'cat ' || f || ' && rm ' || f);
END $$;
SELECT (SELECT s::text FROM states) = (SELECT s::text FROM states_back) AS binary_round_trip;
-- a state that starts flat (a user's aggregate with an INITCOND): the
-- transition takes a copy of it and counts on
DO $$
BEGIN
  EXECUTE format('CREATE AGGREGATE pg_temp.counts_from(text, text[]) ('
                 'SFUNC = gibbs_nb.gibbs_nb_class_counts_add, STYPE = gibbs_nb.class_counts_state, '
                 'INITCOND = %L)',
                 (SELECT pg_temp.raw_counts(l, t) FROM (VALUES ('x', '{a,b,a}'::text[])) v(l, t))::text);
END $$;
SELECT * FROM pg_temp.counts_of((SELECT pg_temp.counts_from(l, t)::text
                                 FROM (VALUES ('x', '{a,c}'::text[]), ('y', '{a}')) v(l, t)));
-- combining flat states (what Citus's coordinator does with the shards'
-- texts): the two halves of src, combined, are src's counts
CREATE AGGREGATE pg_temp.merge_states(gibbs_nb.class_counts_state) (
    SFUNC = gibbs_nb.gibbs_nb_class_counts_combine,
    STYPE = gibbs_nb.class_counts_state);
CREATE TEMP TABLE halves AS
  SELECT (pg_temp.raw_counts(label, tokens))::text AS s FROM src GROUP BY id % 2;
SELECT count(*) AS differing FROM (
  (SELECT * FROM serial_counts
   EXCEPT SELECT * FROM gibbs_nb_class_counts_rows(decode(
     (SELECT pg_temp.merge_states(s::gibbs_nb.class_counts_state) FROM halves)::text, 'base64')))
  UNION ALL
  (SELECT * FROM gibbs_nb_class_counts_rows(decode(
     (SELECT pg_temp.merge_states(s::gibbs_nb.class_counts_state) FROM halves)::text, 'base64'))
   EXCEPT SELECT * FROM serial_counts)) d;
-- twelve states combined: more than a state holds as runs (8), so that
-- the runs are merged as they come, then with the rest at the end
SELECT count(*) AS differing FROM (
  (SELECT * FROM serial_counts
   EXCEPT SELECT * FROM gibbs_nb_class_counts_rows(decode(
     (SELECT pg_temp.merge_states(s) FROM (SELECT pg_temp.raw_counts(label, tokens) AS s
                                           FROM src GROUP BY id % 12) t)::text, 'base64')))
  UNION ALL
  (SELECT * FROM gibbs_nb_class_counts_rows(decode(
     (SELECT pg_temp.merge_states(s) FROM (SELECT pg_temp.raw_counts(label, tokens) AS s
                                           FROM src GROUP BY id % 12) t)::text, 'base64'))
   EXCEPT SELECT * FROM serial_counts)) d;
-- A state that holds both a run and what its own process counted: a
-- user's aggregate with an INITCOND and the extension's final function,
-- which merges the two (five classes: cells beyond a word's first two).
CREATE TEMP TABLE five (id int, l text, t text[]);
INSERT INTO five SELECT i, (ARRAY['a','b','c','d','e'])[1 + i % 5],
       array(SELECT 'w' || ((i * k) % 37) FROM generate_series(1, 1 + i % 9) k)
FROM generate_series(1, 200) i;
DO $$ BEGIN
  EXECUTE format('CREATE AGGREGATE pg_temp.counts_init(text, text[]) ('
                 'SFUNC = gibbs_nb.gibbs_nb_class_counts_add, STYPE = gibbs_nb.class_counts_state, '
                 'FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final, INITCOND = %L)',
                 (SELECT pg_temp.raw_counts(l, t) FROM five WHERE id <= 50)::text);
END $$;
CREATE TEMP VIEW five_twice AS
  SELECT l AS class, x AS token, count(*) AS count
  FROM (SELECT l, x FROM five, unnest(t) x UNION ALL
        SELECT l, x FROM five, unnest(t) x WHERE id <= 50) u GROUP BY 1, 2;
SELECT count(*) AS differing FROM (
  (SELECT * FROM gibbs_nb_class_counts_rows((SELECT pg_temp.counts_init(l, t) FROM five))
   EXCEPT ALL SELECT * FROM five_twice)
  UNION ALL
  (SELECT * FROM five_twice
   EXCEPT ALL SELECT * FROM gibbs_nb_class_counts_rows((SELECT pg_temp.counts_init(l, t) FROM five)))) d;
-- as a window aggregate: the final function, called row after row on that
-- state, leaves it as it was
SELECT count(*) FILTER (WHERE got <> want) AS bad_rows FROM (
  SELECT (SELECT sum(count) FROM gibbs_nb_class_counts_rows(v)) AS got,
         (SELECT count(*) FROM five f, unnest(f.t) x WHERE f.id <= w.id)
         + (SELECT count(*) FROM five f, unnest(f.t) x WHERE f.id <= 50) AS want
  FROM (SELECT id, pg_temp.counts_init(l, t) OVER (ORDER BY id) AS v FROM five) w) z;
-- a state flattened between transitions (an aggregate without a final
-- function, as a window aggregate: its state is copied after every row):
-- what was sorted for one flatten is not used for the next
SELECT count(*) FILTER (WHERE got <> want) AS bad_rows FROM (
  SELECT (SELECT sum(count) FROM gibbs_nb_class_counts_rows(decode(v::text, 'base64'))) AS got,
         (SELECT count(*) FROM five f, unnest(f.t) x WHERE f.id <= w.id) AS want
  FROM (SELECT id, pg_temp.raw_counts(l, t) OVER (ORDER BY id) AS v FROM five) w) z;
DROP VIEW five_twice;
DROP AGGREGATE pg_temp.counts_init(text, text[]);
DROP TABLE five;
RESET max_parallel_workers_per_gather;

-- as a window aggregate (the state is read by the final function row after
-- row, and rebuilt when the frame's start moves): running and sliding sums
SELECT id, (SELECT sum(count) FROM gibbs_nb_class_counts_rows(running)) AS running,
       (SELECT sum(count) FROM gibbs_nb_class_counts_rows(sliding)) AS sliding,
       (SELECT count(*) FROM unnest(tokens) t WHERE label IS NOT NULL AND t IS NOT NULL) AS own
FROM (SELECT id, label, tokens,
             gibbs_nb_class_counts(label, tokens) OVER (ORDER BY id) AS running,
             gibbs_nb_class_counts(label, tokens) OVER (ORDER BY id ROWS 1 PRECEDING) AS sliding
      FROM src WHERE id <= 8) w
ORDER BY id;

-- a role's moving aggregate over the state, its inverse a PL/pgSQL function
-- that hands the state back: PL/pgSQL takes a read-write state over and
-- returns it into short-lived memory, and the window node kept the pointer
-- it had passed.  The backend crashed (the next call read freed memory);
-- in a window node that runs an aggregate of a role's own the state now
-- goes flat, row by row.
CREATE FUNCTION pg_temp.keep_counts(s gibbs_nb.class_counts_state, l text, t text[])
RETURNS gibbs_nb.class_counts_state LANGUAGE plpgsql AS $$ BEGIN RETURN s; END $$;
CREATE AGGREGATE pg_temp.moving_counts(text, text[]) (
  SFUNC = gibbs_nb.gibbs_nb_class_counts_add, STYPE = gibbs_nb.class_counts_state,
  FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final,
  MSFUNC = gibbs_nb.gibbs_nb_class_counts_add, MINVFUNC = pg_temp.keep_counts,
  MSTYPE = gibbs_nb.class_counts_state, MFINALFUNC = gibbs_nb.gibbs_nb_class_counts_final);
SELECT count(*) AS rows_, count(*) FILTER (WHERE got <> want) AS bad_rows FROM (
  SELECT (SELECT sum(count) FROM gibbs_nb_class_counts_rows(x)) AS got,
         -- the inverse keeps every row: the frame's counts are the running ones
         3 * i AS want
  FROM (SELECT i, pg_temp.moving_counts(l, t) OVER (ORDER BY i ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS x
        FROM (SELECT i, (ARRAY['a', 'b', 'c', 'd', 'e'])[1 + i % 5] AS l,
                     ARRAY['w' || (i % 50), 'v' || (i % 7), repeat('z', 1 + i % 20)] AS t
              FROM generate_series(1, 200) i) s) w) z;
-- the same aggregate dropped by the query itself before its first row is
-- counted (the Sort below the window node reads all rows first): the node
-- still runs it, and a look at pg_aggregate then would find nothing
CREATE AGGREGATE pg_temp.vanishing_counts(text, text[]) (
  SFUNC = gibbs_nb.gibbs_nb_class_counts_add, STYPE = gibbs_nb.class_counts_state,
  FINALFUNC = gibbs_nb.gibbs_nb_class_counts_final,
  MSFUNC = gibbs_nb.gibbs_nb_class_counts_add, MINVFUNC = pg_temp.keep_counts,
  MSTYPE = gibbs_nb.class_counts_state, MFINALFUNC = gibbs_nb.gibbs_nb_class_counts_final);
CREATE FUNCTION pg_temp.vanish() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'vanishing_counts') THEN
    DROP AGGREGATE pg_temp.vanishing_counts(text, text[]);
  END IF;
  RETURN true;
END $$;
SELECT count(*) AS rows_, count(*) FILTER (WHERE got <> want) AS bad_rows FROM (
  SELECT (SELECT sum(count) FROM gibbs_nb_class_counts_rows(x)) AS got, 3 * i AS want
  FROM (SELECT i, pg_temp.vanishing_counts(l, t) OVER (ORDER BY i ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS x
        FROM (SELECT i, (ARRAY['a', 'b', 'c', 'd', 'e'])[1 + i % 5] AS l,
                     ARRAY['w' || (i % 50), 'v' || (i % 7), repeat('z', 1 + i % 20)] AS t
              FROM generate_series(1, 200) i WHERE pg_temp.vanish()) s) w) z;
DROP FUNCTION pg_temp.vanish();
-- and the running sums of the aggregate itself still hold
SELECT id, (SELECT sum(count) FROM gibbs_nb_class_counts_rows(running)) AS running
FROM (SELECT id, gibbs_nb_class_counts(label, tokens) OVER (ORDER BY id) AS running
      FROM src WHERE id <= 4) w
ORDER BY id;
DROP AGGREGATE pg_temp.moving_counts(text, text[]);
DROP FUNCTION pg_temp.keep_counts(gibbs_nb.class_counts_state, text, text[]);

CREATE FUNCTION pg_temp.b64(v bytea) RETURNS text
LANGUAGE sql AS $$ SELECT translate(encode(v, 'base64'), E'\n', '') $$;
-- A state in the sorted form made by hand: magic, format 2, 1 class, the
-- given number of tokens and cells; the class (int32 length, bytes); then
-- each token's record: its hash (4 bytes, as tokens.h's token_hash gives
-- it, computed outside and written here little-endian), its length (one
-- byte: a varint), its bytes, its number of cells (1), and the cell (class
-- 0, count 1, varints).
CREATE FUNCTION pg_temp.sorted(class bytea, n int, records bytea) RETURNS bytea
LANGUAGE sql AS $$
  SELECT '\x434e42470200000001000000'::bytea
         || set_byte('\x00000000'::bytea, 0, n)
         || set_byte('\x0000000000000000'::bytea, 0, n)
         || set_byte('\x00000000'::bytea, 0, length(class)) || class || records $$;
CREATE FUNCTION pg_temp.record(token bytea, hash bytea) RETURNS bytea
LANGUAGE sql AS $$
  SELECT hash || set_byte('\x00'::bytea, 0, length(token)) || token || '\x010001'::bytea $$;
-- the input functions check everything: not base64, a bad layout, a string
-- twice, a token out of order or under a hash not its own, the plain form,
-- bytes that are not text
SELECT try($$SELECT 'not base64!'::gibbs_nb.class_counts_state$$);
SELECT try($$SELECT 'AA=='::gibbs_nb.class_counts_state$$);
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(overlay(decode((SELECT pg_temp.raw_counts('x', '{a,b}'::text[]))::text, 'base64')
                                 placing '\x09' from 1 for 1))));
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(overlay(decode((SELECT pg_temp.raw_counts('x', '{a,b}'::text[]))::text, 'base64')
                                 placing '\x05' from 5 for 1))));
-- b (hash 0xcad13618) before c (0xc0988834): out of order; b twice
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(pg_temp.sorted('a', 2, pg_temp.record('b', '\x1836d1ca')
                                                     || pg_temp.record('c', '\x348898c0')))));
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(pg_temp.sorted('a', 2, pg_temp.record('b', '\x1836d1ca')
                                                     || pg_temp.record('b', '\x1836d1ca')))));
SELECT * FROM pg_temp.counts_of(pg_temp.b64(pg_temp.sorted('a', 2, pg_temp.record('c', '\x348898c0')
                                                                  || pg_temp.record('b', '\x1836d1ca'))));
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(pg_temp.sorted('a', 1, pg_temp.record('\x636166c3a9', '\x00000000')))));
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(pg_temp.one_cell('a', '\x636166c3a9'))));
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(pg_temp.sorted('a', 1, pg_temp.record('\xff', '\x736f5a48')))));
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(pg_temp.sorted('a', 1, pg_temp.record('\x780079', '\x45775800')))));
SELECT * FROM pg_temp.counts_of(pg_temp.b64(pg_temp.sorted('a', 1, pg_temp.record('\x636166c3a9', '\x46451b5a')))::gibbs_nb.class_counts_state::text);
-- a token with two cells of one class (b: its record, then 2 cells of class 0)
SELECT try(format('SELECT %L::gibbs_nb.class_counts_state',
                  pg_temp.b64(overlay(pg_temp.sorted('a', 1, '\x1836d1ca0162020001'::bytea || '\x0001'::bytea)
                                 placing '\x02' from 17 for 1))));

DROP VIEW reference;
DROP AGGREGATE pg_temp.raw_counts(text, text[]), pg_temp.counts_from(text, text[]),
  pg_temp.merge_states(gibbs_nb.class_counts_state);
DROP TABLE src, serial_counts, states, states_back, halves;
DROP EXTENSION gibbs_nb;
