#!/usr/bin/env bash
# `make bench-versions`: the same figures on two PostgreSQL servers in one
# run, so that a regression between releases shows (not part of the tests).
#
# Servers: BENCH_PG_CONFIGS (pg_config paths, separated by spaces), or else
# the system's PostgreSQL 15 and a release build of PostgreSQL 18 made by
# test/bench/build-release-server.sh (from ../shared/vendor, once per
# machine; the test command's 18 has assertions on and is not for timing).
#
# Corpus: SpamAssassin as `make bench` loads it (6,046 e-mails, the labels of
# the even ids hidden).  Each server gets its own build of the extension and
# its own throwaway cluster (shared_buffers 256MB), both running; every round
# measures each server in turn, so that both see the same machine:
#   - gibbs_nb_train, paper and collapsed, SWEEPS sweeps (default 1000), one
#     chain: ms per sweep, the read and the publish (seconds, from the job's
#     row), accuracy on the hidden labels;
#   - gibbs_nb_predict over the 6,046 rows (model cached): ms;
#   - gibbs_nb_class_counts over the labelled rows, serial plan: ms.
# Prints each round, then the medians of REPEAT rounds (default 3) per server
# and their ratio to the first server's.
set -euo pipefail
shopt -s inherit_errexit   # a failed psql inside $(...) stops the run, not a blank figure
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SWEEPS=${SWEEPS:-1000}
REPEAT=${REPEAT:-3}

scripts/install-deps.sh
if [ -n "${BENCH_PG_CONFIGS:-}" ]; then
  read -r -a servers <<< "$BENCH_PG_CONFIGS"
else
  servers=("$(command -v pg_config)" "$(test/bench/build-release-server.sh | tail -n 1)")
fi
corpus=$(test/bench/fetch-corpus.sh)

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# shellcheck source=../cluster.sh
source test/cluster.sh
work=$(mktemp -d /tmp/gibbs_nb_bench_versions.XXXXXX)
chown postgres "$work"

# one server: build and install the extension for it, start a cluster, load
# the corpus; psql for server i is "q i ..."
names=()
bindirs=()
for i in "${!servers[@]}"; do
  pgc=${servers[$i]}
  bindir=$("$pgc" --bindir)
  names+=("$("$pgc" --version | sed 's/^PostgreSQL //; s/ .*//')")
  make -s PG_CONFIG="$pgc" clean >/dev/null
  make -s PG_CONFIG="$pgc" >/dev/null
  make -s PG_CONFIG="$pgc" install >/dev/null
  bindirs+=("$bindir")
  PG_BINDIR=$bindir cluster_start "$work/$i" "shared_buffers = 256MB" "gibbs_nb.progress_interval = 0"
done
trap 'cluster_stop; rm -rf "$work"' EXIT
make -s clean >/dev/null
q() { local i=$1; shift; "${bindirs[$i]}/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work/$i" -U postgres -d postgres "$@"; }
for i in "${!servers[@]}"; do
  q "$i" -c "SET client_min_messages = warning" -c "CREATE EXTENSION gibbs_nb"
  q "$i" -c "CREATE TABLE mail (id int PRIMARY KEY, truth text, folder text, body text, tokens text[], label text)"
  zcat "$corpus" | q "$i" -c "\\copy mail (id, truth, folder, body) FROM STDIN"
  q "$i" -c "UPDATE mail SET tokens = array(SELECT m[1] FROM regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m),
                             label = CASE WHEN id % 2 = 1 THEN truth END" -c "VACUUM ANALYZE mail"
done

# ms of one statement in a session that ran it once before (cached model, warm buffers)
time_ms() {
  local i=$1 sql=$2
  local out
  out=$("${bindirs[$i]}/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work/$i" -U postgres -d postgres \
    -c "SET max_parallel_workers_per_gather = 0" -c "$sql" -c '\timing on' -c "$sql")
  sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out"
}
# ms/sweep read_s publish_s accuracy of one training of server $1 with sampler $2
train() {
  local i=$1 sampler=$2 seed=$3 job
  job=$(q "$i" -c "SET client_min_messages = warning" -c "
    SELECT job_id FROM gibbs_nb_train('bench_$sampler', 'mail', 'tokens', 'label',
                                      sampler => '$sampler', sweeps => $SWEEPS, seed => $seed)")
  q "$i" -F ' ' -c "
    SELECT 1000 * j.sample_seconds / j.sweeps, j.read_seconds, j.publish_seconds,
           (SELECT avg((l.label = m.truth)::int) FROM bench_${sampler}_labels l
              JOIN mail m USING (id) WHERE m.label IS NULL AND l.version = j.version)
    FROM gibbs_nb.jobs j WHERE j.job_id = $job"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "corpus: $corpus, $(q 0 -c "SELECT count(*) || ' documents, ' || count(label) || ' labelled' FROM mail")"
for i in "${!servers[@]}"; do echo "server $i: PostgreSQL ${names[$i]} (${servers[$i]})"; done
echo
cols="paper_ms/sweep collapsed_ms/sweep read_s publish_s predict_ms counts_ms paper_acc collapsed_acc"
printf '%-6s %-8s' round server; for c in $cols; do printf ' %17s' "$c"; done; echo
declare -A rows
for round in $(seq 1 "$REPEAT"); do
  for i in "${!servers[@]}"; do
    read -r p_ms p_read p_pub p_acc <<<"$(train "$i" paper $((41 + round)))"
    read -r c_ms _ _ c_acc <<<"$(train "$i" collapsed $((41 + round)))"
    pred=$(time_ms "$i" "SELECT count(gibbs_nb_predict('bench_paper', tokens)) FROM mail")
    counts=$(time_ms "$i" "SELECT length(gibbs_nb_class_counts(label, tokens)) FROM mail")
    row="$p_ms $c_ms $p_read $p_pub $pred $counts $p_acc $c_acc"
    [ "$(wc -w <<<"$row")" -eq 8 ] || { echo "round $round, server $i: a figure is missing: $row" >&2; exit 1; }
    rows[$i]+="$row"$'\n'
    printf '%-6s %-8s' "$round" "${names[$i]}"; for v in $row; do printf ' %17.4g' "$v"; done; echo
  done
done
echo
echo "medians of $REPEAT rounds, and the ratio to PostgreSQL ${names[0]} (below 1: faster)"
declare -A med
for i in "${!servers[@]}"; do
  printf '%-6s %-8s' median "${names[$i]}"
  for col in $(seq 1 8); do
    med[$i,$col]=$(printf '%s' "${rows[$i]}" | cut -d' ' -f"$col" | median)
    printf ' %17.4g' "${med[$i,$col]}"
  done
  echo
done
for i in "${!servers[@]}"; do
  [ "$i" -gt 0 ] || continue
  printf '%-6s %-8s' ratio "${names[$i]}"
  for col in $(seq 1 6); do
    printf ' %16.2fx' "$(awk -v a="${med[$i,$col]}" -v b="${med[0,$col]}" 'BEGIN { print (b > 0) ? a / b : 0 }')"
  done
  echo
done
