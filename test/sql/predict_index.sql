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
DROP EXTENSION gibbs_nb;
