#!/usr/bin/env bash
# A/B of the model load and of run-bench.sh's section 5 as it times it, two
# builds of gibbs_nb.so swapped in by rename, rounds interleaved (the order
# alternating), in one cluster with the same model and corpus.
# Usage, from the repository root, with PATH at the PostgreSQL the builds are
# for and PGHOST/PGUSER at a running cluster of it (test/cluster.sh), after
# test/bench/predict-ab.sh has created the database pbench:
#   test/bench/predict-load-ab.sh A.so B.so ROUNDS
# Each round, per build: the first call in a fresh backend (gibbs_nb_classes,
# the median of 3 backends: library and model load), then the second
# gibbs_nb_predict over the 6,046 e-mails of a session (its parallel worker
# loads the model) and the theta join right after it.
set -euo pipefail
A=$1 B=$2 R=${3:-10}
# shellcheck source=ab-lib.sh
source test/bench/ab-lib.sh
export PGDATABASE=pbench
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A P J F
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for w in $order; do
    if [ "$w" = A ]; then use "$A"; else use "$B"; fi
    f=$(for _ in 1 2 3; do time_runs "SELECT gibbs_nb_classes('bench_paper')" 1; done | median)
    p=$(time_runs "SELECT count(gibbs_nb_predict('bench_paper', tokens)) FROM mail" 2 | tail -n 1)
    j=$(time_runs "SELECT count(label) FROM join_theta_labels" 1)
    F[$w]+="$f "; P[$w]+="$p "; J[$w]+="$j "
    echo "round $r $w: first call $f ms, predict $p ms, join $j ms, ratio $(awk -v p="$p" -v j="$j" 'BEGIN { printf "%.1f", j / p }')"
  done
done
use "$B"
for w in A B; do
  ratios=$(paste <(tr ' ' '\n' <<<"${P[$w]}") <(tr ' ' '\n' <<<"${J[$w]}") | awk 'NF == 2 { printf "%.1f\n", $2 / $1 }')
  echo "$w: first call median $(tr ' ' '\n' <<<"${F[$w]}" | grep . | median) ms; predict median $(tr ' ' '\n' <<<"${P[$w]}" | grep . | median) ms; join median $(tr ' ' '\n' <<<"${J[$w]}" | grep . | median) ms; ratio median $(median <<<"$ratios")x, lowest $(sort -g <<<"$ratios" | head -1)x"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
