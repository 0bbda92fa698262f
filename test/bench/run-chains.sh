#!/usr/bin/env bash
# Parallel chains benchmark on the SpamAssassin corpus (`make bench-chains`).
#
# The corpus of test/bench/run-bench.sh (6,046 e-mails, the labels of the
# even ids hidden).  Each round trains, in this order, chains => 1, chains =>
# 2 in parallel (gibbs_nb.max_chain_workers = 4) and chains => 2 one after
# another (max_chain_workers = 0), SWEEPS sweeps each (default 300), seed 7,
# for ROUNDS rounds (default 5): the three run side by side in time, so that
# the load of the machine weighs on each alike.  Prints per round the
# sampling and end-to-end seconds and the ratios to chains => 1 of the same
# round, then the medians.  Also checks that the parallel and the sequential
# 2-chain models are the same bit for bit.  Runs on a throwaway cluster.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SWEEPS=${SWEEPS:-300}
ROUNDS=${ROUNDS:-5}
SAMPLER=${SAMPLER:-paper}

scripts/install-deps.sh
make -s >/dev/null && make -s install >/dev/null
corpus=$(test/bench/fetch-corpus.sh)

# shellcheck source=../cluster.sh
source test/cluster.sh
# shellcheck source=corpus.sh
source test/bench/corpus.sh
export PGOPTIONS="-c client_min_messages=warning"
cluster_start "$(mktemp -d /tmp/gibbs_nb_bench.XXXXXX)" "shared_buffers = 256MB"

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
psql_q -c "CREATE EXTENSION gibbs_nb"
load_mail "$corpus"

# train: name chains max_chain_workers -> "sample_seconds end2end_seconds"
train() {
  psql_q -At -F ' ' <<SQL
SET gibbs_nb.max_chain_workers = $3;
SELECT t.job_id FROM gibbs_nb_train('$1', 'mail', 'tokens', 'label', sampler => '$SAMPLER',
                                    sweeps => $SWEEPS, chains => $2, seed => 7) t \gset
SELECT j.sample_seconds, extract(epoch FROM j.finished_at - j.started_at)
FROM gibbs_nb.jobs j WHERE j.job_id = :job_id;
SQL
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '\n%5s %10s %10s %10s %12s %12s %12s %12s\n' round 1_sample 2par_sample 2seq_sample \
  2par/1_sample 2seq/1_sample 2par/1_e2e 2seq/1_e2e
rows=()
for round in $(seq 1 "$ROUNDS"); do
  read -r s1 e1 <<<"$(train one 1 4)"
  read -r sp ep <<<"$(train par 2 4)"
  read -r ss es <<<"$(train seq 2 0)"
  row=$(awk -v s1="$s1" -v sp="$sp" -v ss="$ss" -v e1="$e1" -v ep="$ep" -v es="$es" \
    'BEGIN { printf "%.2f %.2f %.2f %.3f %.3f %.3f %.3f", s1, sp, ss, sp / s1, ss / s1, ep / e1, es / e1 }')
  rows+=("$row")
  printf '%5d %10s %10s %10s %12s %12s %12s %12s\n' "$round" $row
done
meds=()
for col in 1 2 3 4 5 6 7; do
  meds+=("$(printf '%s\n' "${rows[@]}" | cut -d' ' -f"$col" | median)")
done
printf '%5s %10s %10s %10s %12s %12s %12s %12s\n' med "${meds[@]}"
same=$(psql_q -At -c "SELECT count(*) FROM (SELECT p.version FROM gibbs_nb.packed p JOIN gibbs_nb.packed s
         ON s.model_name = 'seq' AND s.version = p.version
        WHERE p.model_name = 'par' AND p.log_theta = s.log_theta AND p.log_pi = s.log_pi
          AND (SELECT array_agg(d.id || '=' || d.probabilities::text ORDER BY d.id COLLATE \"C\") FROM gibbs_nb.document_labels d WHERE d.version_id = p.version_id)
            = (SELECT array_agg(d.id || '=' || d.probabilities::text ORDER BY d.id COLLATE \"C\") FROM gibbs_nb.document_labels d WHERE d.version_id = s.version_id)) x")
echo "parallel and sequential 2-chain models equal bit for bit: $same of $ROUNDS rounds"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
