-- The worker's reading of a source (src/corpus.c): a vocabulary large
-- enough that its word table grows (from 4,096 slots); tokens that share
-- their first 8 bytes (most of them: a lookup and the vocabulary's sort
-- compare the rest only then); multibyte tokens; a token of 300,000 bytes
-- (longer than a block of the tokens' text); in labelled rows (counted by
-- gibbs_nb_class_counts) and unlabelled ones (read one by one).
CREATE EXTENSION gibbs_nb;
CREATE TABLE rv (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO rv
SELECT d,
       array(SELECT 'wordword' || ((d * 37 + j * j * 101) % 9973) FROM generate_series(1, 40) j) ||
       CASE d % 4 WHEN 0 THEN '{abcdefg,abcdefgh,abcdefgha,abcdefghb,ab}'::text[]
                  WHEN 1 THEN '{abcdefghb,abcdefgh,abcdefgh,é,ée,e}'::text[]
                  ELSE '{}'::text[] END,
       CASE WHEN d % 3 = 0 THEN (ARRAY['a', 'b'])[d % 2 + 1] END
FROM generate_series(1, 400) d;
UPDATE rv SET tokens = tokens || repeat('z', 300000) || repeat('z', 299999) WHERE id IN (5, 6);
SELECT count(DISTINCT t) AS distinct_tokens, count(*) AS tokens,
       count(DISTINCT t) FILTER (WHERE rv.label IS NULL) AS distinct_unlabelled
FROM rv, unnest(tokens) t;
SET client_min_messages = warning;
SELECT status FROM gibbs_nb_train('rv', 'rv', 'tokens', 'label', sweeps => 5, seed => 3);
RESET client_min_messages;

-- the vocabulary: every distinct token once, each counted as often as it occurs
SELECT m.vocabulary_size = (SELECT count(DISTINCT t) FROM rv, unnest(tokens) t) AS all_words,
       m.n_tokens = (SELECT count(*) FROM rv, unnest(tokens) t) AS all_tokens
FROM gibbs_nb.models m WHERE m.model_name = 'rv';
SELECT count(*) AS wrong_counts
FROM (SELECT u.t, u.n FROM gibbs_nb.packed p, unnest(p.tokens, p.word_counts) AS u(t, n)
      WHERE p.model_name = 'rv') u
FULL JOIN (SELECT t, count(*) AS n FROM rv, unnest(tokens) t GROUP BY t) s USING (t)
WHERE u.n IS DISTINCT FROM s.n;

-- word ids in byte order of the tokens, whatever the database's collation
SELECT p.tokens = array(SELECT t FROM unnest(p.tokens) t ORDER BY t COLLATE "C") AS byte_order
FROM gibbs_nb.packed p WHERE p.model_name = 'rv';
SELECT left(t, 12) AS token, octet_length(t) AS bytes
FROM gibbs_nb.packed p, unnest(p.tokens) WITH ORDINALITY AS u(t, i)
WHERE p.model_name = 'rv' AND t !~ '^wordword[0-9]+$'
ORDER BY i;

SELECT gibbs_nb_drop('rv');
DROP TABLE rv;

-- a word more than 65,535 times in one document: reading holds counts in
-- 16 bits while they fit and widens them the moment one does not (here in
-- document 3, the 65,536th "spam"; labelled documents come as counts)
CREATE TABLE rv_big (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO rv_big VALUES
  (1, array_fill('spam'::text, ARRAY[70000]) || ARRAY['a', 'b'], 'x'),
  (2, ARRAY['a', 'c'], 'y'),
  (3, array_fill('spam'::text, ARRAY[65535]) || ARRAY['c'] || array_fill('spam'::text, ARRAY[3]) || ARRAY['eggs'], NULL),
  (4, ARRAY['a', 'a', 'c'], NULL),
  (5, ARRAY['eggs'] || array_fill('ham'::text, ARRAY[80000]), NULL);
SET client_min_messages = warning;
SELECT status FROM gibbs_nb_train('rv_big', 'rv_big', 'tokens', 'label', sweeps => 5, seed => 3);
RESET client_min_messages;
SELECT m.n_tokens, p.tokens, p.word_counts
FROM gibbs_nb.models m JOIN gibbs_nb.packed p USING (model_name, owner, version)
WHERE m.model_name = 'rv_big';
SELECT gibbs_nb_drop('rv_big');
DROP TABLE rv_big;
DROP EXTENSION gibbs_nb;
