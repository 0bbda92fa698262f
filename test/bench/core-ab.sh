#!/usr/bin/env bash
# A/B of the sampler core: bench_core built from BASE (a commit) against the
# working tree's, on the same SpamAssassin documents, runs interleaved (which
# build goes first alternates), so that both see the same machine.  For a
# change that should not move the core's speed (a restructure) or one that
# should.  Usage, from the repository root, as root (run-bench.sh's cluster):
#   test/bench/core-ab.sh BASE [ROUNDS] [SWEEPS]      (make bench-core-ab BASE=...)
# Prints each run's ms per sweep (steady state, bench_core's figure), then
# per sampler the medians of A (BASE) and B (this tree) and the median of
# the rounds' ratios B / A.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
base=${1:?usage: core-ab.sh BASE [ROUNDS] [SWEEPS]}
rounds=${2:-5}
sweeps=${3:-200}
SAMPLERS=${SAMPLERS:-"paper collapsed"}
out=test/bench/out
mkdir -p "$out"
work=$(mktemp -d /tmp/gibbs_nb_core_ab.XXXXXX)
chmod 755 "$work"   # the cluster below belongs to postgres
trap 'rm -rf "$work"' EXIT

# A: bench_core as BASE builds it (its own Makefile rule)
git archive "$base" | tar -x -C "$work"
make -s -C "$work" test/bench/bench_core >/dev/null
make -s test/bench/bench_core >/dev/null
cp "$work/test/bench/bench_core" "$work/bench_a"
cp test/bench/bench_core "$work/bench_b"

# the documents, exported as run-bench.sh exports them
if [ ! -s "$out/corpus.txt" ]; then
  scripts/install-deps.sh
  make -s >/dev/null && make -s install >/dev/null
  corpus=$(test/bench/fetch-corpus.sh)
  # shellcheck source=../cluster.sh
  source test/cluster.sh
  psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
  # shellcheck source=corpus.sh
  source test/bench/corpus.sh
  cluster_start "$work/cluster"
  load_mail "$corpus"
  psql -X -v ON_ERROR_STOP=1 -f test/bench/export-corpus.sql >"$out/corpus.txt"
  cluster_stop
fi

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
run() { field "$("$work/bench_$1" real "$out/corpus.txt" "$2" "$sweeps" 1)" ms_per_sweep; }

echo "bench_core, $sweeps sweeps, SpamAssassin: A = $base, B = this tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src/core || echo '+changes'))"
printf '%-10s %5s %10s %10s %8s\n' sampler round A_ms B_ms B/A
for sampler in $SAMPLERS; do
  a=(); b=(); r=()
  for i in $(seq 1 "$rounds"); do
    if [ $((i % 2)) -eq 1 ]; then x=$(run a "$sampler"); y=$(run b "$sampler")
    else y=$(run b "$sampler"); x=$(run a "$sampler"); fi
    a+=("$x"); b+=("$y"); r+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.4f", y / x }')")
    printf '%-10s %5d %10.3f %10.3f %8s\n' "$sampler" "$i" "$x" "$y" "${r[-1]}"
  done
  printf '%-10s %5s %10.3f %10.3f %8s\n' "$sampler" med "$(printf '%s\n' "${a[@]}" | median)" \
    "$(printf '%s\n' "${b[@]}" | median)" "$(printf '%s\n' "${r[@]}" | median)"
done
