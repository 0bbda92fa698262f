#!/usr/bin/env bash
# CPU time (the backend's time on a CPU, from /proc/PID/schedstat, in ns;
# serial plan) per gibbs_nb_predict over the 6,046 e-mails, two builds
# swapped by rename, rounds interleaved.  Less sensitive to a loaded machine
# than wall time.  Usage as predict-ab.sh, after it has created pbench:
#   test/bench/predict-cpu.sh A.so B.so ROUNDS CALLS
set -euo pipefail
A=$1 B=$2 R=${3:-5} N=${4:-5}
# shellcheck source=ab-lib.sh
source test/bench/ab-lib.sh
export PGDATABASE=pbench
tmp=$(mktemp -d)
chmod 777 "$tmp"
trap 'rm -rf "$tmp"' EXIT
one() {
  local calls="" 
  for _ in $(seq 1 "$N"); do calls+="SELECT count(gibbs_nb_predict('bench_paper', tokens)) FROM mail;"$'\n'; done
  psql -X -q -At <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT count(gibbs_nb_predict('bench_paper', tokens)) FROM mail \\g /dev/null
SELECT pg_backend_pid() AS pid \\gset
\\setenv BPID :pid
\\! cut -d' ' -f1 /proc/\$BPID/schedstat > $tmp/t0
\\o /dev/null
$calls
\\o
\\! cut -d' ' -f1 /proc/\$BPID/schedstat > $tmp/t1
SQL
  awk -v a="$(cat $tmp/t0)" -v b="$(cat $tmp/t1)" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / 1e6 / n }'
}
ca=(); cb=()
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for w in $order; do
    if [ "$w" = A ]; then use "$A"; ca+=("$(one)"); echo "round $r A: ${ca[-1]} CPU ms/call"
    else use "$B"; cb+=("$(one)"); echo "round $r B: ${cb[-1]} CPU ms/call"; fi
  done
done
use "$B"
echo "A median $(printf '%s\n' "${ca[@]}" | median) CPU ms/call; B median $(printf '%s\n' "${cb[@]}" | median)"
