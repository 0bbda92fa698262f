#!/usr/bin/env bash
# Training benchmark on the SpamAssassin corpus (`make bench`).
#
# 6,046 e-mails, K = 2, the labels of the even ids hidden (3,023 documents),
# tokens from the corpus README's tokenizer
#   array(select m[1] from regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m)
# For each sampler, REPEAT runs (default 3) of SWEEPS sweeps (default 1000),
# seed 42 + run: prints per run the seconds spent reading, sampling and
# publishing, ms per sweep, seconds end to end, and the accuracy on the
# hidden labels; then the median of each.  Runs on a throwaway cluster.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SWEEPS=${SWEEPS:-1000}
REPEAT=${REPEAT:-3}
SAMPLERS=${SAMPLERS:-"paper collapsed"}

scripts/install-deps.sh
make -s >/dev/null && make -s install >/dev/null
corpus=$(test/bench/fetch-corpus.sh)

# shellcheck source=../cluster.sh
source test/cluster.sh
cluster_start "$(mktemp -d /tmp/gibbs_nb_bench.XXXXXX)" "shared_buffers = 256MB"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "corpus: $corpus"
psql_q -c "CREATE EXTENSION gibbs_nb" \
       -c "CREATE TABLE mail (id int PRIMARY KEY, truth text, folder text, body text,
                              tokens text[], label text)"
zcat "$corpus" | psql_q -c "\\copy mail (id, truth, folder, body) FROM STDIN"
psql_q <<'SQL'
UPDATE mail SET tokens = array(SELECT m[1] FROM regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m),
                label = CASE WHEN id % 2 = 1 THEN truth END;
VACUUM ANALYZE mail;
SQL
psql_q -At -F ' ' -c "SELECT 'documents', count(*), 'tokens', sum(cardinality(tokens)),
                             'labelled', count(label) FROM mail"

printf '\n%-10s %3s %8s %9s %9s %11s %11s %9s\n' sampler run read_s sample_s publish_s ms/sweep end2end_s accuracy
for sampler in $SAMPLERS; do
  results=()
  for run in $(seq 1 "$REPEAT"); do
    line=$(psql_q -At -F ' ' <<SQL
SELECT t.job_id FROM gibbs_nb_train('bench_$sampler', 'mail', 'tokens', 'label',
                                    sampler => '$sampler', sweeps => $SWEEPS,
                                    seed => $((41 + run))) t \gset
SELECT j.read_seconds, j.sample_seconds, j.publish_seconds,
       1000 * j.sample_seconds / j.sweeps,
       extract(epoch FROM j.finished_at - j.started_at),
       (SELECT avg((l.label = m.truth)::int) FROM bench_${sampler}_labels l
          JOIN mail m USING (id) WHERE m.id % 2 = 0)
FROM gibbs_nb.jobs j WHERE j.job_id = :job_id;
SQL
)
    read -r read_s sample_s publish_s ms end2end acc <<<"$line"
    printf '%-10s %3d %8.2f %9.2f %9.2f %11.2f %11.2f %9.4f\n' "$sampler" "$run" \
      "$read_s" "$sample_s" "$publish_s" "$ms" "$end2end" "$acc"
    results+=("$line")
  done
  medians=()
  for col in 1 2 3 4 5 6; do
    medians+=("$(printf '%s\n' "${results[@]}" | cut -d' ' -f"$col" | sort -g |
                 awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')")
  done
  printf '%-10s %3s %8.2f %9.2f %9.2f %11.2f %11.2f %9.4f\n' "$sampler" med "${medians[@]}"
done
psql_q -At -c "SELECT 'vocabulary ' || vocabulary_size || ', tokens ' || n_tokens
               FROM gibbs_nb.models ORDER BY created_at DESC LIMIT 1"
