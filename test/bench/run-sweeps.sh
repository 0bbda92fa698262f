#!/usr/bin/env bash
# Sweep workers benchmark on the SpamAssassin corpus (`make bench-sweeps`).
#
# The corpus of test/bench/run-bench.sh (6,046 e-mails, the labels of the
# even ids hidden).  Each round trains, in this order, sampler => 'paper',
# sampler => 'blocked' with sweep_workers => 1, and 'blocked' with
# sweep_workers => 2 (gibbs_nb.max_chain_workers = 4), one chain of SWEEPS
# sweeps each (default 400), seed 7, unlabeled_weight LAMBDA (default 1), for
# ROUNDS rounds (default 3): they run
# side by side in time, so that the load of the machine weighs on each alike.
# Each is also trained for a single sweep: its sampling seconds are the
# setup (the chain's, and with two processes the corpus copied into shared
# memory and the sweep worker's own), and the ms per sweep printed are the
# steady state, (seconds of SWEEPS - seconds of 1) / (SWEEPS - 1), so that
# the setup of a short job does not weigh on the ratios.
# Prints per round the sampling seconds, steady ms per sweep and the ESS of
# the log joint per sampling second (setup included: what a job gets), and
# the ratios of the same round: blocked (1) / paper and blocked (2) /
# blocked (1) per sweep, ESS/s of blocked (2) / paper; then their medians.
# Also checks that the 1- and 2-process blocked models are the same bit for
# bit.  Runs on a throwaway cluster.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SWEEPS=${SWEEPS:-400}
ROUNDS=${ROUNDS:-3}
# unlabeled_weight: at 1 the labels of this corpus barely move once burnt in
# (the ESS of a chain that never moves cannot be estimated: "-"); LAMBDA=0.3
# gives chains that mix
LAMBDA=${LAMBDA:-1}
[ "$SWEEPS" -ge 2 ] || { echo "SWEEPS must be at least 2 (the steady state is measured against 1)" >&2; exit 2; }

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

# train: name sampler sweep_workers [sweeps] -> "sample_seconds ess"
train() {
  psql_q -At -F ' ' <<SQL
SET gibbs_nb.max_chain_workers = 4;
SELECT t.job_id FROM gibbs_nb_train('$1', 'mail', 'tokens', 'label', sampler => '$2',
                                    sweeps => ${4:-$SWEEPS}, seed => 7, unlabeled_weight => $LAMBDA
                                    $( [ "$2" = blocked ] && echo ", sweep_workers => $3" )) t \gset
SELECT j.sample_seconds, m.ess FROM gibbs_nb.jobs j
JOIN gibbs_nb.models m ON m.job_id = j.job_id WHERE j.job_id = :job_id;
SQL
}
median() { { grep -v '^-$' || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '\n%5s %9s %9s %9s %9s %9s %9s %9s %9s %9s %12s %12s %12s\n' round paper_s bl1_s bl2_s \
  paper_ms bl1_ms bl2_ms paper_e/s bl1_e/s bl2_e/s bl1/paper bl2/bl1 bl2/paper_ess
rows=()
for round in $(seq 1 "$ROUNDS"); do
  read -r sp ep <<<"$(train paper paper 1)"
  read -r s1 e1 <<<"$(train blocked1 blocked 1)"
  read -r s2 e2 <<<"$(train blocked2 blocked 2)"
  read -r up _ <<<"$(train paper_setup paper 1 1)"
  read -r u1 _ <<<"$(train blocked1_setup blocked 1 1)"
  read -r u2 _ <<<"$(train blocked2_setup blocked 2 1)"
  # an ESS that could not be estimated (NULL: the log joint did not move after burn-in) is "-"
  row=$(awk -v sp="$sp" -v s1="$s1" -v s2="$s2" -v up="$up" -v u1="$u1" -v u2="$u2" \
            -v ep="$ep" -v e1="$e1" -v e2="$e2" -v n="$SWEEPS" \
    'function per_s(e, s) { return e == "" ? "-" : sprintf("%.1f", e / s) }
     BEGIN { mp = 1000 * (sp - up) / (n - 1); m1 = 1000 * (s1 - u1) / (n - 1); m2 = 1000 * (s2 - u2) / (n - 1)
             printf "%.3f %.3f %.3f %.3f %.3f %.3f %s %s %s %.3f %.3f %s", sp, s1, s2,
             mp, m1, m2, per_s(ep, sp), per_s(e1, s1), per_s(e2, s2),
             m1 / mp, m2 / m1, (e2 == "" || ep == "") ? "-" : sprintf("%.3f", (e2 / s2) / (ep / sp)) }')
  rows+=("$row")
  printf '%5d %9s %9s %9s %9s %9s %9s %9s %9s %9s %12s %12s %12s\n' "$round" $row
done
meds=()
for col in $(seq 1 12); do
  meds+=("$(printf '%s\n' "${rows[@]}" | cut -d' ' -f"$col" | median)")
done
printf '%5s %9s %9s %9s %9s %9s %9s %9s %9s %9s %12s %12s %12s\n' med "${meds[@]}"
same=$(psql_q -At -c "SELECT count(*) FROM gibbs_nb.packed p JOIN gibbs_nb.packed s
         ON s.model_name = 'blocked1' AND s.version = p.version
        WHERE p.model_name = 'blocked2' AND p.log_theta = s.log_theta AND p.log_pi = s.log_pi
          AND (SELECT array_agg(d.id || '=' || d.probabilities::text ORDER BY d.id COLLATE \"C\") FROM gibbs_nb.document_labels d WHERE d.version_id = p.version_id)
            = (SELECT array_agg(d.id || '=' || d.probabilities::text ORDER BY d.id COLLATE \"C\") FROM gibbs_nb.document_labels d WHERE d.version_id = s.version_id)")
echo "blocked models with 1 and 2 processes equal bit for bit: $same of $ROUNDS rounds"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
