#!/usr/bin/env bash
# A job's fixed cost on the SpamAssassin corpus (`make bench-fixed`): what
# every training pays whatever its sweeps.  The corpus of run-bench.sh (6,046
# e-mails, the labels of the even ids hidden) on a throwaway cluster; JOBS
# jobs (default 7) of gibbs_nb_train('fixed', 'mail', 'tokens', 'label',
# sweeps => 2, seed => 7), each timed by gibbs_nb.jobs (read_seconds,
# sample_seconds, publish_seconds) and end to end; prints every job and the
# medians, read + publish among them.  With BASE=<commit>, that commit's
# build is installed and timed the same way in the same run, alternating
# with this tree's job by job, so that the machine's load weighs on both
# alike; the ratios are this tree's over BASE's.  The extension is created
# once, from this tree's scripts: BASE's library runs against them (said when
# BASE's sql/ differs).  This tree's build is installed again at the end,
# whatever happens.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
JOBS=${JOBS:-7}
BASE=${BASE:-}

scripts/install-deps.sh
work=$(mktemp -d /tmp/gibbs_nb_fixed.XXXXXX)
chmod 755 "$work"
make -s >/dev/null
if [ -n "$BASE" ]; then
  git archive "$BASE" | tar -x -C "$work"
  make -s -C "$work" >/dev/null
  git diff --quiet "$BASE" -- sql/ ||
    echo "note: $BASE's sql/ differs from this tree's; its library runs against this tree's catalog"
fi
corpus=$(test/bench/fetch-corpus.sh)
# shellcheck source=../cluster.sh
source test/cluster.sh
# shellcheck source=corpus.sh
source test/bench/corpus.sh
export PGOPTIONS="-c client_min_messages=warning"
make -s install >/dev/null
cluster_start "$work/cluster" "shared_buffers = 256MB"
trap 'cluster_stop; make -s install >/dev/null; rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
psql_q -c "CREATE EXTENSION gibbs_nb"
load_mail "$corpus"

# one job with the build now installed: "read sample publish call" in seconds
job() {
  local start end id
  psql_q -c "SELECT gibbs_nb_drop('fixed') FROM gibbs_nb.models WHERE model_name = 'fixed' LIMIT 1" >/dev/null
  start=$(date +%s.%N)
  id=$(psql_q -At -c "SELECT job_id FROM gibbs_nb_train('fixed', 'mail', 'tokens', 'label', sweeps => 2, seed => 7)")
  end=$(date +%s.%N)
  psql_q -At -F ' ' -c "SELECT read_seconds, sample_seconds, publish_seconds, $end - $start
                        FROM gibbs_nb.jobs WHERE job_id = $id AND status = 'succeeded'"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A col
builds=(this)
[ -n "$BASE" ] && builds+=(base)
for round in $(seq 1 "$JOBS"); do
  for b in "${builds[@]}"; do
    # each build installed before its job; a new session loads it
    if [ "$b" = base ]; then make -s -C "$work" install >/dev/null; else make -s install >/dev/null; fi
    read -r r s p c <<<"$(job)"
    [ -n "$c" ] || { echo "a job of the $b build did not succeed" >&2; exit 1; }
    printf '%-5s job %d: read %.3f s, sample %.3f s, publish %.3f s, call %.3f s\n' "$b" "$round" "$r" "$s" "$p" "$c"
    col[$b,r]+="$r "; col[$b,s]+="$s "; col[$b,p]+="$p "; col[$b,c]+="$c "
    col[$b,rp]+="$(awk -v r="$r" -v p="$p" 'BEGIN { print r + p }') "
  done
done
[ -n "$BASE" ] && make -s install >/dev/null
for b in "${builds[@]}"; do
  m() { tr ' ' '\n' <<<"${col[$b,$1]}" | grep . | median; }
  printf '%-5s medians of %d: read %.3f s, sample %.3f s, publish %.3f s, read + publish %.3f s, call %.3f s\n' \
    "$b" "$JOBS" "$(m r)" "$(m s)" "$(m p)" "$(m rp)" "$(m c)"
  eval "med_$b=$(m rp)"
done
if [ -n "$BASE" ]; then
  awk -v t="$med_this" -v b="$med_base" 'BEGIN { printf "read + publish, this tree / %s: %.3f\n", ENVIRON["BASE"], t / b }'
fi
