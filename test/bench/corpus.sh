# test/bench/corpus.sh: the SpamAssassin corpus as the benchmarks load it.
# Source it (after test/cluster.sh), then: load_mail CORPUS_FILE.
#
# load_mail makes the table mail (id, truth, folder, body, tokens, label):
# tokens by the corpus README's tokenizer (lower-case runs of [a-z0-9']),
# label the truth for odd ids and NULL (hidden) for even ones; analysed.
load_mail() {
  psql_q -c "CREATE TABLE mail (id int PRIMARY KEY, truth text, folder text, body text,
                                tokens text[], label text)"
  zcat "$1" | psql_q -c "\\copy mail (id, truth, folder, body) FROM STDIN"
  psql_q <<'SQL'
UPDATE mail SET tokens = array(SELECT m[1] FROM regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m),
                label = CASE WHEN id % 2 = 1 THEN truth END;
VACUUM ANALYZE mail;
SQL
}
