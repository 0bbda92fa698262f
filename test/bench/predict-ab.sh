#!/usr/bin/env bash
# A/B of gibbs_nb_predict against the theta join (run-bench.sh's section 5),
# two builds of gibbs_nb.so swapped in by rename between sessions, rounds
# interleaved, in one cluster with the same model and corpus.
# Usage, from the repository root, with PATH at the PostgreSQL the builds are
# for and PGHOST/PGUSER at a running cluster of it (test/cluster.sh):
#   test/bench/predict-ab.sh A.so B.so ROUNDS
# The first run creates the database pbench: the corpus as run-bench.sh
# loads it and a paper model trained with build B.  The installed
# gibbs_nb.so is left as B.  Each round: per build, a session's predict
# (median of calls 2-6) and the theta join run right after it.
set -euo pipefail
A=$1 B=$2 R=${3:-5}
# shellcheck source=ab-lib.sh
source test/bench/ab-lib.sh
export PGDATABASE=pbench
# shellcheck source=corpus.sh
source test/bench/corpus.sh
if ! psql -X -At -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'pbench'" | grep -q 1; then
  use "$B"
  psql -X -q -d postgres -c "CREATE DATABASE pbench"
  corpus=$(test/bench/fetch-corpus.sh)
  psql_q -c "CREATE EXTENSION gibbs_nb"
  load_mail "$corpus"
  psql_q <<'SQL'
SELECT t.job_id FROM gibbs_nb_train('bench_paper', 'mail', 'tokens', 'label', sampler => 'paper', sweeps => 200, seed => 1) t;
-- the version's theta rows in a table with the indexes gibbs_nb.theta had
-- before it became a view (run-bench.sh's section 5 says why)
CREATE TABLE base_theta AS
  SELECT * FROM gibbs_nb.theta WHERE model_name = 'bench_paper'
     AND version = (SELECT max(version) FROM gibbs_nb.models WHERE model_name = 'bench_paper');
CREATE INDEX ON base_theta (model_name, owner, version);
CREATE INDEX ON base_theta USING hash (token);
VACUUM ANALYZE base_theta; VACUUM ANALYZE gibbs_nb.pi; ANALYZE mail;
CREATE VIEW join_theta_labels AS
  SELECT DISTINCT ON (id) id, class AS label FROM (
    SELECT m.id, t.class, sum(ln(t.probability)) + max(ln(p.probability)) AS score
    FROM mail m CROSS JOIN LATERAL unnest(m.tokens) tok
    JOIN base_theta t ON t.model_name = 'bench_paper' AND t.token = tok
     AND t.version = (SELECT max(version) FROM gibbs_nb.models WHERE model_name = 'bench_paper')
    JOIN gibbs_nb.pi p ON p.model_name = t.model_name AND p.version = t.version AND p.class = t.class
    GROUP BY m.id, t.class) s
  ORDER BY id, score DESC;
SQL
fi
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
pa=(); pb=(); ra=(); rb=()
for r in $(seq 1 "$R"); do
  # alternate which build goes first
  if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for w in $order; do
    if [ "$w" = A ]; then use "$A"; else use "$B"; fi
    p=$(time_runs "SELECT count(gibbs_nb_predict('bench_paper', tokens)) FROM mail" 6 | tail -n 5 | median)
    j=$(time_runs "SELECT count(label) FROM join_theta_labels" 1)
    ratio=$(awk -v p="$p" -v j="$j" 'BEGIN { printf "%.1f", j / p }')
    echo "round $r $w: predict $p ms, join $j ms, ratio $ratio"
    if [ "$w" = A ]; then pa+=("$p"); ra+=("$ratio"); else pb+=("$p"); rb+=("$ratio"); fi
  done
done
use "$B"
echo "A predict median $(printf '%s\n' "${pa[@]}" | median) ms, ratio median $(printf '%s\n' "${ra[@]}" | median)x, lowest $(printf '%s\n' "${ra[@]}" | sort -g | head -1)x"
echo "B predict median $(printf '%s\n' "${pb[@]}" | median) ms, ratio median $(printf '%s\n' "${rb[@]}" | median)x, lowest $(printf '%s\n' "${rb[@]}" | sort -g | head -1)x"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
