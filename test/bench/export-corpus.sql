-- The bench corpus for the stand-alone drivers (bench_core, numpy_samplers.py):
-- the table mail (id, truth, tokens, label) as "D V K" and one line per
-- document "label truth n w1 c1 ... wn cn".  Word ids in the words' byte
-- order, as the worker numbers its vocabulary (the order a version stores;
-- until 2026-12-02 this export numbered them by first occurrence, which
-- hid a cost of the blocked sampler that only the server's order shows:
-- docs/performance.md); classes 0 = ham, 1 = spam; label -1 = hidden.
\set QUIET on
\pset tuples_only on
\pset format unaligned
CREATE TEMP TABLE bench_vocab AS
  SELECT tok, (row_number() OVER (ORDER BY tok COLLATE "C") - 1)::int AS w
  FROM mail m, unnest(m.tokens) AS t(tok) GROUP BY tok;
CREATE TEMP TABLE bench_pairs AS
  SELECT m.id, v.w, count(*) AS c FROM mail m, unnest(m.tokens) AS t(tok)
  JOIN bench_vocab v USING (tok) GROUP BY m.id, v.w;
SELECT (SELECT count(*) FROM mail) || ' ' || (SELECT count(*) FROM bench_vocab) || ' 2';
SELECT CASE m.label WHEN 'ham' THEN 0 WHEN 'spam' THEN 1 ELSE -1 END || ' ' ||
       CASE m.truth WHEN 'ham' THEN 0 ELSE 1 END || ' ' || count(p.w) ||
       coalesce(' ' || string_agg(p.w || ' ' || p.c, ' ' ORDER BY p.w), '')
FROM mail m LEFT JOIN bench_pairs p USING (id) GROUP BY m.id, m.label, m.truth ORDER BY m.id;
