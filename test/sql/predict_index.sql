-- The vocabulary index (vocab_index.c, issue 12) with two classes: words
-- that agree on their first 8 bytes and their length (the part a record
-- compares first) differ only in their further bytes, and each must still
-- get its own log theta-hat, alone, in a document longer than a scoring
-- block, and in gibbs_nb_explain.  (An entry holds a word's first 8 bytes
-- and length and is compared on them first: these words are told apart by
-- the comparison of their further bytes.)
CREATE EXTENSION gibbs_nb;
CREATE TABLE two (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO two
SELECT i,
       array(SELECT CASE WHEN i % 2 = 0 THEN 'prefix__a_' ELSE 'prefix__b_' END || ((i * k) % 40 + 10)
             FROM generate_series(1, 3 + i % 4) k)
       || array(SELECT 'w' || ((i + k) % 9) FROM generate_series(1, 2) k)
       || CASE WHEN i % 2 = 0 THEN '{12345678,x}'::text[] ELSE '{1234567,a_much_longer_word_of_the_b_class}'::text[] END,
       CASE WHEN i % 3 = 0 THEN CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END END
FROM generate_series(1, 200) i;
SELECT status FROM gibbs_nb_train('pair', 'two', 'tokens', 'label', sweeps => 50, seed => 5);
SELECT gibbs_nb_classes('pair');

-- the words of the vocabulary that share their first 8 bytes and length with another
SELECT count(*) AS vocabulary,
       count(*) FILTER (WHERE EXISTS (SELECT FROM gibbs_nb.theta u
                                      WHERE u.model_name = 'pair' AND u.class = 'a'
                                        AND u.token <> t.token AND length(u.token) = length(t.token)
                                        AND left(u.token, 8) = left(t.token, 8))) AS sharing_prefix
FROM gibbs_nb.theta t WHERE model_name = 'pair' AND class = 'a';

-- each word alone, and every word in one document (more than a scoring
-- block), against the same computation over gibbs_nb.theta and gibbs_nb.pi
CREATE TABLE probe_docs AS
SELECT row_number() OVER (ORDER BY token) AS id, ARRAY[token] AS tokens
FROM gibbs_nb.theta WHERE model_name = 'pair' AND class = 'a';
INSERT INTO probe_docs
SELECT 100000, array_agg(token ORDER BY token) || array_agg(token ORDER BY token DESC) || '{unseen_word_xyz,prefix__a_99}'::text[]
FROM gibbs_nb.theta WHERE model_name = 'pair' AND class = 'a';
CREATE VIEW reference AS
WITH scores AS (
  SELECT d.id, p.class, ln(p.probability) + coalesce(sum(ln(t.probability)), 0) AS score
  FROM probe_docs d
  CROSS JOIN gibbs_nb.pi p
  LEFT JOIN LATERAL unnest(d.tokens) tok ON true
  LEFT JOIN gibbs_nb.theta t ON t.model_name = 'pair' AND t.version = p.version
                             AND t.class = p.class AND t.token = tok
  WHERE p.model_name = 'pair'
  GROUP BY d.id, p.class, p.probability),
shifted AS (SELECT id, class, exp(score - max(score) OVER (PARTITION BY id)) AS e FROM scores)
SELECT id, class, e / sum(e) OVER (PARTITION BY id) AS probability FROM shifted;
SELECT count(DISTINCT r.id) AS documents,
       max(abs(r.probability - (gibbs_nb_predict_proba('pair', d.tokens))[array_position(gibbs_nb_classes('pair'), r.class)])) < 1e-9 AS probabilities_match
FROM reference r JOIN probe_docs d USING (id);

-- gibbs_nb_explain looks each word up in the same index: a one-word
-- document's word term is log theta-hat(predicted) - log theta-hat(runner-up)
SELECT count(*) AS words,
       count(*) FILTER (WHERE abs(e.log_odds - (ln(tp.probability) - ln(tr.probability))) > 1e-9) AS differing
FROM probe_docs d
CROSS JOIN LATERAL gibbs_nb_explain('pair', d.tokens, 1) e
JOIN gibbs_nb.theta tp ON tp.model_name = 'pair' AND tp.token = e.token AND tp.class = e.predicted
JOIN gibbs_nb.theta tr ON tr.model_name = 'pair' AND tr.token = e.token AND tr.class = e.runner_up
WHERE d.id < 100000 AND e.kind = 'word';
-- documents stored pglz-compressed, in line and out of line, are
-- decompressed by prediction's own decoder (detoast.c): repeated words,
-- runs of one short word (matches less than 8 bytes back), long and
-- incompressible words, sizes around the decoder's fast path.  The same
-- probabilities as from the arrays PostgreSQL decompresses (array_cat with
-- an empty array returns its argument detoasted).
CREATE TABLE packed_docs (id int, tokens text[]);
ALTER TABLE packed_docs ALTER tokens SET COMPRESSION pglz;
INSERT INTO packed_docs
SELECT i, CASE i % 4
  WHEN 0 THEN array_fill('w1'::text, ARRAY[20 * i])
  WHEN 1 THEN (SELECT array_agg(CASE WHEN k % 3 = 0 THEN 'prefix__a_' || (k % 40 + 10) ELSE 'w' || (k % 9) END)
               FROM generate_series(1, 30 * i) k)
  WHEN 2 THEN (SELECT array_agg(CASE WHEN k % 5 = 0 THEN md5(k::text) ELSE '12345678' END)
               FROM generate_series(1, 25 * i) k)
  ELSE (SELECT array_agg(t.tokens[1 + k % cardinality(t.tokens)]) FROM two t, generate_series(1, i) k
        WHERE t.id = 1 + i % 200)
  END
FROM generate_series(1, 120) i;
SELECT count(*) AS documents,
       count(*) FILTER (WHERE pg_column_compression(tokens) = 'pglz') > 80 AS most_compressed,
       count(*) FILTER (WHERE pg_column_size(tokens) > 2000) > 10 AS some_out_of_line,
       count(*) FILTER (WHERE gibbs_nb_predict_proba('pair', tokens)
                              <> gibbs_nb_predict_proba('pair', tokens || '{}'::text[])) AS differing
FROM packed_docs;
SELECT gibbs_nb_drop('pair');
DROP VIEW reference;
DROP TABLE two, probe_docs, packed_docs;

-- The index is laid out from the vocabulary sorted by home entry, the words
-- placed as if inserted by bucket of theta-hat (vocab_index.c), not word by
-- word.  Models imported with chosen vocabularies, each word of each one
-- looked up: 400 vocabularies of 5 to 22 words (tables of 16 and 32
-- entries, some with a cluster running round the table's end); words of
-- theta-hat from 1 down to e^-90 (every bucket); long words, and words
-- sharing their first 8 bytes; three classes (the general path); a
-- vocabulary of 3,000 words (its arrays stored out of line and fetched
-- together), and the same again with the arrays compressed.  Each one-word
-- document gets softmax(log pi-hat + log theta-hat of the word), as
-- computed here from the same numbers; an unknown word the prior.
CREATE FUNCTION pg_temp.le32(n bigint) RETURNS bytea LANGUAGE sql AS
$$ SELECT set_byte(set_byte(set_byte(set_byte('\x00000000'::bytea, 0, (n & 255)::int),
          1, ((n >> 8) & 255)::int), 2, ((n >> 16) & 255)::int), 3, ((n >> 24) & 255)::int) $$;
CREATE FUNCTION pg_temp.f64(x float8) RETURNS bytea LANGUAGE sql AS
$$ SELECT string_agg(substr(float8send(x), i, 1), ''::bytea ORDER BY i DESC) FROM generate_series(1, 8) i $$;
CREATE FUNCTION pg_temp.str(s text) RETURNS bytea LANGUAGE sql AS
$$ SELECT pg_temp.le32(octet_length(s)) || convert_to(s, 'UTF8') $$;
-- a value as gibbs_nb_export writes it (model_format.c): tokens in byte order,
-- the CRC-32C last
CREATE FUNCTION pg_temp.model_value(classes text[], log_pi float8[], tokens text[], log_theta float8[])
RETURNS bytea LANGUAGE sql AS $$
SELECT public.seal('GNBMODEL'::bytea || pg_temp.le32(2) || pg_temp.le32(cardinality(classes))
       || pg_temp.le32(cardinality(tokens)) || pg_temp.le32(0)
       || pg_temp.str('paper') || pg_temp.le32(10) || pg_temp.le32(5) || pg_temp.le32(1) || pg_temp.le32(1)
       || pg_temp.f64(1) || pg_temp.f64(1) || pg_temp.f64(1) || pg_temp.le32(0) || pg_temp.le32(0)
       || pg_temp.le32(1) || pg_temp.le32(1) || pg_temp.le32(0) || pg_temp.le32(1) || pg_temp.le32(0)
       || pg_temp.f64(0) || pg_temp.f64('NaN') || pg_temp.le32(0)
       || pg_temp.str('imported') || pg_temp.le32(1) || pg_temp.str('src') || pg_temp.str('tokens')
       || pg_temp.str('') || pg_temp.str('id') || pg_temp.str('') || pg_temp.str('labels') || pg_temp.le32(0)
       || (SELECT string_agg(pg_temp.str(c), ''::bytea ORDER BY o) FROM unnest(classes) WITH ORDINALITY u(c, o))
       || (SELECT string_agg(pg_temp.f64(x), ''::bytea ORDER BY o) FROM unnest(log_pi) WITH ORDINALITY u(x, o))
       || (SELECT string_agg(pg_temp.str(t), ''::bytea ORDER BY o) FROM unnest(tokens) WITH ORDINALITY u(t, o))
       || coalesce((SELECT string_agg(pg_temp.f64(x), ''::bytea ORDER BY o)
                    FROM unnest(log_theta) WITH ORDINALITY u(x, o)), ''::bytea)
       || '\x00000000'::bytea)  -- the CRC-32C, written by seal
$$;
-- the vocabularies: (model, word number, word, K log theta-hat)
SELECT setseed(0.25);
CREATE TABLE vocab (model text, w int, token text, log_theta float8[]);
INSERT INTO vocab
SELECT 's' || m, w, token, ARRAY[-random() * 90, -random() * 90]
FROM generate_series(1, 400) m,
     LATERAL (SELECT row_number() OVER (ORDER BY t COLLATE "C") AS w, t AS token
              FROM (SELECT DISTINCT CASE WHEN random() < 0.2 THEN 'a_long_word_' ELSE '' END
                                    || substr(md5(m || '/' || k), 1, 1 + (k % 9)) AS t
                    FROM generate_series(1, 5 + m % 18) k) d) v;
INSERT INTO vocab
SELECT 'k3', row_number() OVER (ORDER BY t COLLATE "C"), t,
       ARRAY[-random() * 20, -random() * 20, -random() * 20]
FROM (SELECT DISTINCT 'w' || (k * 7919 % 500) AS t FROM generate_series(1, 300) k) d;
INSERT INTO vocab
SELECT 'big', row_number() OVER (ORDER BY t COLLATE "C"), t, ARRAY[-random() * 40, -random() * 40]
FROM (SELECT DISTINCT CASE k % 3 WHEN 0 THEN md5(k::text) WHEN 1 THEN 'prefix__' || k ELSE 'w' || k END AS t
      FROM generate_series(1, 3000) k) d;
-- each class's word probabilities made to sum to one, as a trained model's
-- do (gibbs_nb_import refuses a value whose do not): less the log of the sum
WITH cell AS (
  SELECT v.model, u.k, u.x FROM vocab v, unnest(v.log_theta) WITH ORDINALITY u(x, k)),
top AS (SELECT model, k, max(x) AS m FROM cell GROUP BY 1, 2),
lse AS (
  SELECT c.model, array_agg(t.m + ln(c.s) ORDER BY c.k) AS lse
  FROM (SELECT cell.model, cell.k, sum(exp(cell.x - top.m)) AS s
        FROM cell JOIN top USING (model, k) GROUP BY 1, 2) c
  JOIN top t USING (model, k) GROUP BY 1)
UPDATE vocab v SET log_theta = ARRAY(SELECT v.log_theta[k] - l.lse[k]
                                     FROM generate_series(1, cardinality(v.log_theta)) k)
FROM lse l WHERE l.model = v.model;
CREATE TABLE models AS
SELECT model, CASE WHEN model = 'k3' THEN '{a,b,c}'::text[] ELSE '{a,b}'::text[] END AS classes,
       CASE WHEN model = 'k3' THEN ARRAY[ln(0.5), ln(0.3), ln(0.2)] ELSE ARRAY[ln(0.6), ln(0.4)] END AS log_pi
FROM (SELECT DISTINCT model FROM vocab) d;
SELECT count(*) AS models, sum(gibbs_nb_import(m.model, pg_temp.model_value(m.classes, m.log_pi,
         (SELECT array_agg(token ORDER BY w) FROM vocab v WHERE v.model = m.model),
         (SELECT array_agg(x ORDER BY w, o) FROM vocab v, unnest(v.log_theta) WITH ORDINALITY u(x, o)
          WHERE v.model = m.model)))) AS versions
FROM models m;
SELECT count(*) FILTER (WHERE pg_column_size(tokens) > 2000) AS stored_out_of_line,
       count(*) FILTER (WHERE cardinality(tokens) BETWEEN 5 AND 11) AS in_16_entries,
       count(*) FILTER (WHERE cardinality(tokens) BETWEEN 12 AND 22) AS in_32_entries
FROM gibbs_nb.packed;
-- (exp of less than -700 taken as exp(-700): PostgreSQL's exp reports underflow)
CREATE FUNCTION pg_temp.softmax(s float8[]) RETURNS float8[] LANGUAGE sql AS
$$ SELECT array_agg(exp(greatest(x - (SELECT max(y) FROM unnest(s) y), -700))
                    / (SELECT sum(exp(greatest(y - (SELECT max(z) FROM unnest(s) z), -700)))
                       FROM unnest(s) y) ORDER BY o)
   FROM unnest(s) WITH ORDINALITY u(x, o) $$;
CREATE FUNCTION pg_temp.max_diff(a float8[], b float8[]) RETURNS float8 LANGUAGE sql AS
$$ SELECT max(abs(x - y)) FROM unnest(a, b) u(x, y) $$;
CREATE VIEW word_check AS
SELECT v.model, v.w,
       pg_temp.max_diff(gibbs_nb_predict_proba(v.model, ARRAY[v.token]),
                        pg_temp.softmax(ARRAY(SELECT p + t FROM unnest(m.log_pi, v.log_theta) u(p, t)))) AS diff
FROM vocab v JOIN models m USING (model);
SELECT count(*) AS words, count(DISTINCT model) AS models, max(diff) < 1e-12 AS all_found
FROM word_check;
-- an unknown word: the prior; every word of a model in one document
SELECT count(*) FILTER (WHERE pg_temp.max_diff(gibbs_nb_predict_proba(m.model, '{not_a_word}'::text[]),
                                               pg_temp.softmax(m.log_pi)) > 1e-12) AS unknown_wrong,
       count(*) FILTER (WHERE pg_temp.max_diff(
           gibbs_nb_predict_proba(m.model, (SELECT array_agg(token ORDER BY w DESC) FROM vocab v
                                            WHERE v.model = m.model)),
           pg_temp.softmax(ARRAY(SELECT m.log_pi[k] + (SELECT sum(v.log_theta[k]) FROM vocab v
                                                       WHERE v.model = m.model)
                                 FROM generate_series(1, cardinality(m.log_pi)) k))) > 1e-9) AS document_wrong
FROM models m;
-- documents around the scoring blocks (32 tokens, two in flight): 0 to 97
-- tokens, with two classes and with three
SELECT count(*) AS documents,
       count(*) FILTER (WHERE pg_temp.max_diff(
           gibbs_nb_predict_proba(m.model, d.tokens),
           pg_temp.softmax(ARRAY(SELECT m.log_pi[k] + coalesce((SELECT sum(v.log_theta[k])
                                                                FROM unnest(d.tokens) t JOIN vocab v
                                                                  ON v.model = m.model AND v.token = t), 0)
                                 FROM generate_series(1, cardinality(m.log_pi)) k))) > 1e-9) AS wrong
FROM models m,
     LATERAL (SELECT n, coalesce((SELECT array_agg(CASE WHEN j % 7 = 3 THEN 'unknown_' || j ELSE v.token END
                                                    ORDER BY j)
                                  FROM generate_series(1, n) j
                                  JOIN vocab v ON v.model = m.model AND v.w = 1 + j * 13 % 200), '{}') AS tokens
              FROM generate_series(0, 97) n) d
WHERE m.model IN ('big', 'k3');
-- the arrays of a large vocabulary compressed, in line or out of line: the same
ALTER TABLE gibbs_nb.packed ALTER COLUMN tokens SET STORAGE EXTENDED,
                            ALTER COLUMN log_theta SET STORAGE EXTENDED;
SELECT gibbs_nb_import('big_pglz', pg_temp.model_value(m.classes, m.log_pi,
         (SELECT array_agg(token ORDER BY w) FROM vocab v WHERE v.model = 'big'),
         (SELECT array_agg(x ORDER BY w, o) FROM vocab v, unnest(v.log_theta) WITH ORDINALITY u(x, o)
          WHERE v.model = 'big'))) AS version
FROM models m WHERE m.model = 'big';
ALTER TABLE gibbs_nb.packed ALTER COLUMN tokens SET STORAGE EXTERNAL,
                            ALTER COLUMN log_theta SET STORAGE EXTERNAL;
SELECT pg_column_compression(tokens) IS NOT NULL AS tokens_compressed
FROM gibbs_nb.packed WHERE model_name = 'big_pglz';
SELECT count(*) AS words,
       count(*) FILTER (WHERE gibbs_nb_predict_proba('big_pglz', ARRAY[v.token])
                              <> gibbs_nb_predict_proba('big', ARRAY[v.token])) AS differing
FROM vocab v WHERE v.model = 'big';
-- a value whose thetas each sum to one but hold -1e308 (exp of it is 0):
-- a document of both words scored -inf in both classes, and its
-- probabilities came out NaN.  Refused: below any log probability
SELECT try(format('SELECT gibbs_nb_import(%L, %L::bytea)', 'minus_inf',
                  pg_temp.model_value('{a,b}', ARRAY[ln(0.5), ln(0.5)], '{x,y}',
                                      ARRAY[0, -1e308, -1e308, 0])));
SELECT try($$SELECT gibbs_nb_predict_proba('minus_inf', '{x,x,y,y}'::text[])$$);
DROP VIEW word_check;
DROP TABLE vocab, models;
DROP EXTENSION gibbs_nb;
