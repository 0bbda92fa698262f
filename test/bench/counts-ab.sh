#!/usr/bin/env bash
# A/B of gibbs_nb_class_counts against GROUP BY (run-bench.sh's section 6),
# two builds of gibbs_nb.so swapped in by rename between sessions, rounds
# interleaved, in one cluster with the same corpus.
# Usage, from the repository root, with PATH at the PostgreSQL the builds are
# for and PGHOST/PGUSER at a running cluster of it (test/cluster.sh):
#   test/bench/counts-ab.sh A.so B.so ROUNDS
# The first run creates the database cbench: the corpus as run-bench.sh loads
# it, with parallel_workers = 2 on mail.  The installed gibbs_nb.so is left
# as B.  Each round, per build (which goes first alternates), one session per
# setting of max_parallel_workers_per_gather (0, then 2): a warm-up call,
# then the aggregate and the GROUP BY alternately, 3 times each; a setting's
# figure is the median of its 3, its ratio GROUP BY / aggregate in that
# session.  At the end: medians over the rounds, per build, of the times, of
# the ratios against GROUP BY and of serial / 2 workers (same session pair).
set -euo pipefail
A=$1 B=$2 R=${3:-5}
# shellcheck source=ab-lib.sh
source test/bench/ab-lib.sh
export PGDATABASE=cbench
# shellcheck source=corpus.sh
source test/bench/corpus.sh
agg="SELECT length(gibbs_nb_class_counts(label, tokens)) FROM mail"
grp="SELECT count(*) FROM (SELECT label, tok, count(*) FROM mail, unnest(tokens) tok
     WHERE label IS NOT NULL GROUP BY 1, 2) s"
if ! psql -X -At -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'cbench'" | grep -q 1; then
  use "$B"
  psql -X -q -d postgres -c "CREATE DATABASE cbench"
  corpus=$(test/bench/fetch-corpus.sh)
  psql_q -c "CREATE EXTENSION gibbs_nb"
  load_mail "$corpus"
  psql_q -c "ALTER TABLE mail SET (parallel_workers = 2)"
fi
# One session with max_parallel_workers_per_gather = $1: prints "agg_ms grp_ms".
session() {
  psql -X -q -At -c "SET max_parallel_workers_per_gather = $1" -c "$agg" -c '\timing on' \
    -c "$agg" -c "$grp" -c "$agg" -c "$grp" -c "$agg" -c "$grp" |
    sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' |
    awk 'function med3(x, y, z) { return x + y + z - (x > y ? (x > z ? x : z) : (y > z ? y : z)) \
                                   - (x < y ? (x < z ? x : z) : (y < z ? y : z)) }
         { v[NR] = $1 } END { print med3(v[1], v[3], v[5]), med3(v[2], v[4], v[6]) }'
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A s0 s2 r0 r2 sp
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for w in $order; do
    if [ "$w" = A ]; then use "$A"; else use "$B"; fi
    read -r a0 g0 <<<"$(session 0)"
    read -r a2 g2 <<<"$(session 2)"
    line=$(awk -v a0="$a0" -v g0="$g0" -v a2="$a2" -v g2="$g2" 'BEGIN {
      printf "%.1f %.1f %.2f %.1f %.1f %.2f %.2f", a0, g0, g0 / a0, a2, g2, g2 / a2, a0 / a2 }')
    read -r x0 y0 q0 x2 y2 q2 p <<<"$line"
    echo "round $r $w: serial agg $x0 ms, GROUP BY $y0 ms, ratio $q0 x | 2 workers agg $x2 ms, GROUP BY $y2 ms, ratio $q2 x | agg serial/2 workers $p x"
    s0[$w]+="$x0 "; s2[$w]+="$x2 "; r0[$w]+="$q0 "; r2[$w]+="$q2 "; sp[$w]+="$p "
  done
done
use "$B"
for w in A B; do
  m() { tr ' ' '\n' <<<"$1" | grep . | median; }
  lo() { tr ' ' '\n' <<<"$1" | grep . | sort -g | head -1; }
  echo "$w: serial agg $(m "${s0[$w]}") ms, vs GROUP BY $(m "${r0[$w]}")x (lowest $(lo "${r0[$w]}")x);" \
       "2 workers agg $(m "${s2[$w]}") ms, vs GROUP BY $(m "${r2[$w]}")x;" \
       "serial/2 workers $(m "${sp[$w]}")x (lowest $(lo "${sp[$w]}")x)   (medians of $R rounds)"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
