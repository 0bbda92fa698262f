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
export PGOPTIONS="-c client_min_messages=warning"
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

# ---- prediction: gibbs_nb_predict against the same classification as a SQL join ----
model=bench_$(echo "$SAMPLERS" | awk '{print $1}')
# ms of each run of a statement, one per line, all in one session
time_runs() {
  local sql=$1 runs=$2 args=()
  for _ in $(seq 1 "$runs"); do args+=(-c "$sql"); done
  psql -X -q -At -c '\timing on' "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The baselines, as MADlib's Naive Bayes classifies: the documents' tokens
# joined with the class-conditional probabilities, summed in logs per
# document and class, the best class kept.  "theta join" is that over
# gibbs_nb.theta itself (its primary key indexes the token); "log-table join"
# is a stronger variant over a table of precomputed logs indexed on token.
# Both after ANALYZE: without it the planner expects 10 tokens per document
# and the theta join ran for over ten minutes.
psql_q <<SQL
ANALYZE mail; ANALYZE gibbs_nb.theta; ANALYZE gibbs_nb.pi;
CREATE VIEW join_theta_labels AS
  SELECT DISTINCT ON (id) id, class AS label FROM (
    SELECT m.id, t.class, sum(ln(t.probability)) + max(ln(p.probability)) AS score
    FROM mail m CROSS JOIN LATERAL unnest(m.tokens) tok
    JOIN gibbs_nb.theta t ON t.model_name = '$model' AND t.token = tok
     AND t.version = (SELECT max(version) FROM gibbs_nb.models WHERE model_name = '$model')
    JOIN gibbs_nb.pi p ON p.model_name = t.model_name AND p.version = t.version AND p.class = t.class
    GROUP BY m.id, t.class) s
  ORDER BY id, score DESC;
CREATE TABLE base_logtheta AS
  SELECT token, class, ln(probability) AS logp FROM gibbs_nb.theta
  WHERE model_name = '$model' AND version = (SELECT max(version) FROM gibbs_nb.models WHERE model_name = '$model');
CREATE INDEX ON base_logtheta (token);
CREATE TABLE base_logpi AS
  SELECT class, ln(probability) AS logp FROM gibbs_nb.pi
  WHERE model_name = '$model' AND version = (SELECT max(version) FROM gibbs_nb.models WHERE model_name = '$model');
ANALYZE base_logtheta, base_logpi;
CREATE VIEW join_logtable_labels AS
  SELECT DISTINCT ON (id) id, class AS label FROM (
    SELECT m.id, t.class, sum(t.logp) + max(p.logp) AS score
    FROM mail m CROSS JOIN LATERAL unnest(m.tokens) tok
    JOIN base_logtheta t ON t.token = tok
    JOIN base_logpi p ON p.class = t.class
    GROUP BY m.id, t.class) s
  ORDER BY id, score DESC;
SQL
rows=$(psql_q -At -c "SELECT count(*) FROM mail")
differing=$(psql_q -At -c "SELECT count(*) FROM join_theta_labels b JOIN mail m USING (id)
                           WHERE gibbs_nb_predict('$model', m.tokens) <> b.label")
first_call=$(for _ in 1 2 3 4 5; do time_runs "SELECT gibbs_nb_classes('$model')" 1; done | median)
warm_call=$(time_runs "SELECT gibbs_nb_classes('$model')" 6 | tail -n 5 | median)
predict_ms=$(time_runs "SELECT count(gibbs_nb_predict('$model', tokens)) FROM mail" 4 | tail -n 3 | median)
join_ms=$(time_runs "SELECT count(label) FROM join_theta_labels" 3 | median)
logjoin_ms=$(time_runs "SELECT count(label) FROM join_logtable_labels" 3 | median)
plans=$(for v in "SELECT count(gibbs_nb_predict('$model', tokens)) FROM mail" "SELECT count(label) FROM join_theta_labels"; do
          psql_q -At -c "EXPLAIN $v" | grep -o 'Workers Planned: [0-9]*' | head -1 || true; done | tr '\n' ';')
echo
echo "prediction with model $model ($rows e-mails; labels differing between the two methods: $differing)"
echo "  parallel workers planned (predict; theta join): ${plans:-none}"
awk -v r="$rows" -v p="$predict_ms" -v j="$join_ms" -v l="$logjoin_ms" -v f="$first_call" -v w="$warm_call" 'BEGIN {
  printf "  gibbs_nb_predict:  %8.1f ms  %9.0f rows/s   (median of 3, model cached)\n", p, r / p * 1000
  printf "  theta join:        %8.1f ms  %9.0f rows/s   (median of 3)  ratio %5.1f x\n", j, r / j * 1000, j / p
  printf "  log-table join:    %8.1f ms  %9.0f rows/s   (median of 3)  ratio %5.1f x\n", l, r / l * 1000, l / p
  printf "  first call in a fresh backend: %.1f ms (median of 5; library and model load); cached call: %.2f ms\n", f, w
}'

# ---- class word counts: gibbs_nb_class_counts against GROUP BY ----
# The labelled half's class x word counts, serially and with 2 parallel
# workers (the table is small enough that the planner would pick 1).
psql_q -c "ALTER TABLE mail SET (parallel_workers = 2)"
agg="SELECT length(gibbs_nb_class_counts(label, tokens)) FROM mail"
grp="SELECT count(*) FROM (SELECT label, tok, count(*) FROM mail, unnest(tokens) tok
     WHERE label IS NOT NULL GROUP BY 1, 2) s"
same=$(psql_q -At -c "SELECT count(*) FROM (
         (SELECT label, tok, count(*) FROM mail, unnest(tokens) tok WHERE label IS NOT NULL GROUP BY 1, 2)
         EXCEPT SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail))) d")
echo
echo "class word counts of the labelled half (rows differing from GROUP BY: $same)"
for workers in 0 2; do
  agg_ms=$(PGOPTIONS="$PGOPTIONS -c max_parallel_workers_per_gather=$workers" time_runs "$agg" 4 | tail -n 3 | median)
  grp_ms=$(PGOPTIONS="$PGOPTIONS -c max_parallel_workers_per_gather=$workers" time_runs "$grp" 3 | median)
  awk -v w="$workers" -v a="$agg_ms" -v g="$grp_ms" 'BEGIN {
    printf "  %d parallel workers: gibbs_nb_class_counts %7.1f ms, GROUP BY %7.1f ms, ratio %4.1f x   (medians of 3)\n", w, a, g, g / a }'
done
