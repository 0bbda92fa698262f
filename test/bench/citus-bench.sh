#!/usr/bin/env bash
# gibbs_nb on Citus against one node (`make bench-citus`): a coordinator and
# two workers on this machine (unix sockets, throwaway clusters), the
# SpamAssassin corpus (6,046 e-mails, the bench's tokenizer, the labels of
# the even ids hidden) as `mail`, distributed by id over SHARDS shards
# (default 32), and the same rows as `mail_local` on the coordinator alone.
# In the same run, medians of REPEAT (default 3) timings each:
# - the labelled half's class x word counts (gibbs_nb_class_counts: pushed
#   down on `mail`, one node's parallel plan on `mail_local`);
# - gibbs_nb_predict over every e-mail (on the workers for `mail`; warm
#   caches: one untimed run first);
# - gibbs_nb_train end to end, SWEEPS (default 200) sweeps of `paper`;
# - the blocked sampler's time per sweep, its sweeps on the shards' nodes
#   against one node's, and their difference (the nodes' overhead); its
#   job's read and publish; what its job's worker holds once it has read.
# Needs Citus (../shared/citus/build.sh) and the superuser shell the tests use.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SHARDS=${SHARDS:-32}
REPEAT=${REPEAT:-3}
SWEEPS=${SWEEPS:-200}
# SCALE=n: the e-mails n times over (copies under other ids), and only the
# blocked sampler's timings (the others would take n times as long)
SCALE=${SCALE:-1}

[ -f "$(pg_config --pkglibdir)/citus.so" ] || { echo "Citus is not installed: run ../shared/citus/build.sh" >&2; exit 1; }
make -s >/dev/null && make -s install >/dev/null
corpus=$(test/bench/fetch-corpus.sh)
# shellcheck source=citus-cluster.sh
source test/bench/citus-cluster.sh
citus_cluster_start citus_bench 55201 55202 55203 "shared_buffers = 256MB" \
  "citus.max_cached_conns_per_worker = 4" "gibbs_nb.progress_interval = 0"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Citus $(q -At -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), a coordinator and 2 workers on this machine, $SHARDS shards"
q -c "CREATE EXTENSION gibbs_nb" -c "SELECT gibbs_nb_citus_distribute()" >/dev/null
q -c "CREATE TABLE raw (id int, truth text, folder text, body text)"
zcat "$corpus" | q -c "\\copy raw FROM STDIN"
q >/dev/null <<SQL
CREATE TABLE mail_local (id int PRIMARY KEY, truth text, tokens text[], label text);
INSERT INTO mail_local
SELECT id, truth, array(SELECT m[1] FROM regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m),
       CASE WHEN id % 2 = 1 THEN truth END FROM raw;
INSERT INTO mail_local
SELECT id + k * 10000000, truth, tokens, label FROM mail_local, generate_series(1, $SCALE - 1) k;
CREATE TABLE mail (LIKE mail_local INCLUDING ALL);
INSERT INTO mail SELECT * FROM mail_local;
SELECT create_distributed_table('mail', 'id', shard_count => $SHARDS);
SELECT truncate_local_data_after_distributing_table('mail');
VACUUM ANALYZE mail_local;
VACUUM ANALYZE mail;
SQL
q -At -F ' ' -c "SELECT 'documents', count(*), 'tokens', sum(cardinality(tokens)), 'labelled', count(label) FROM mail"

time_runs() {   # sql runs: the times of each run, in ms
  local sql=$1 runs=$2 args=()
  for _ in $(seq 1 "$runs"); do args+=(-c "$sql"); done
  q -At -c '\timing on' "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
row() {   # what distributed_ms local_ms
  awk -v w="$1" -v d="$2" -v l="$3" 'BEGIN {
    printf "  %-44s distributed %9.1f ms   one node %9.1f ms   one node / distributed %5.2f\n", w, d, l, l / d }'
}

echo
if [ "$SCALE" -eq 1 ]; then
same=$(q -At -c "SELECT count(*) FROM (
  (SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail))
   EXCEPT SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail_local)))
  UNION ALL
  (SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail_local))
   EXCEPT SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail)))) d")
echo "medians of $REPEAT (cells differing between the two counts: $same)"
d=$(time_runs "SELECT length(gibbs_nb_class_counts(label, tokens)) FROM mail" $((REPEAT + 1)) | tail -n "$REPEAT" | median)
l=$(time_runs "SELECT length(gibbs_nb_class_counts(label, tokens)) FROM mail_local" $((REPEAT + 1)) | tail -n "$REPEAT" | median)
row "gibbs_nb_class_counts (labelled half)" "$d" "$l"

dt=() lt=()
for r in $(seq 1 "$REPEAT"); do
  dt+=("$(q -At -c "SELECT seconds * 1000 FROM gibbs_nb_train('dist', 'mail', 'tokens', 'label', sweeps => $SWEEPS, seed => $r)")")
  lt+=("$(q -At -c "SELECT seconds * 1000 FROM gibbs_nb_train('local', 'mail_local', 'tokens', 'label', sweeps => $SWEEPS, seed => $r)")")
done
row "gibbs_nb_train, $SWEEPS sweeps, end to end" \
  "$(printf '%s\n' "${dt[@]}" | median)" "$(printf '%s\n' "${lt[@]}" | median)"
same=$(q -At -c "SELECT (SELECT log_theta FROM gibbs_nb.packed WHERE model_name = 'dist' ORDER BY version DESC LIMIT 1)
                      = (SELECT log_theta FROM gibbs_nb.packed WHERE model_name = 'local' ORDER BY version DESC LIMIT 1)")
echo "  (the same model from both: $same)"
else
  echo "medians of $REPEAT, the e-mails $SCALE times over: the blocked sampler alone"
fi

# the blocked sampler: its sweeps on the workers' nodes (the job's worker keeps
# the counts) against one node; per sweep from the job's sampling seconds
per_sweep() {   # model source seed: a blocked training's sampling ms per sweep, read ms, publish ms
  local job
  job=$(q -At -c "SELECT job_id FROM gibbs_nb_train('$1', '$2', 'tokens', 'label', sampler => 'blocked',
                    sweeps => $SWEEPS, seed => $3, unlabeled_weight => 0.5)")
  q -At -F ' ' -c "SELECT sample_seconds * 1000 / $SWEEPS, read_seconds * 1000, publish_seconds * 1000
                   FROM gibbs_nb_jobs WHERE job_id = $job"
}
bt=() bl=() brt=() brl=() bpt=() bpl=()
for r in $(seq 1 "$REPEAT"); do
  read -r s rd pb <<<"$(per_sweep bdist mail "$r")"; bt+=("$s") brt+=("$rd") bpt+=("$pb")
  read -r s rd pb <<<"$(per_sweep blocal mail_local "$r")"; bl+=("$s") brl+=("$rd") bpl+=("$pb")
done
bd=$(printf '%s\n' "${bt[@]}" | median)
bo=$(printf '%s\n' "${bl[@]}" | median)
row "blocked sampler, per sweep (sampling / sweeps)" "$bd" "$bo"
awk -v d="$bd" -v l="$bo" 'BEGIN { printf "  (per-sweep overhead of the nodes: %.1f ms)\n", d - l }'
# the job's reading (with nodes: the ids and the words' counts only) and its publishing
row "blocked sampler, the job's read" \
  "$(printf '%s\n' "${brt[@]}" | median)" "$(printf '%s\n' "${brl[@]}" | median)"
row "blocked sampler, the job's publish" \
  "$(printf '%s\n' "${bpt[@]}" | median)" "$(printf '%s\n' "${bpl[@]}" | median)"
# (the documents' labels by version id, one query each: Citus plans no subquery
# of the distributed table beside the reference table's)
newest="SELECT version_id FROM gibbs_nb.packed WHERE model_name = '%s' ORDER BY version DESC LIMIT 1"
bdist=$(q -At -c "$(printf "$newest" bdist)") blocal=$(q -At -c "$(printf "$newest" blocal)")
doc_labels="SELECT md5(string_agg(id || '=' || probabilities::text, ';' ORDER BY id COLLATE \"C\"))
            FROM gibbs_nb.document_labels WHERE version_id = %s"
same=$(q -At -c "SELECT (SELECT log_theta FROM gibbs_nb.packed WHERE version_id = $bdist)
                      = (SELECT log_theta FROM gibbs_nb.packed WHERE version_id = $blocal)
                    AND '$(q -At -c "$(printf "$doc_labels" "$bdist")")'
                      = '$(q -At -c "$(printf "$doc_labels" "$blocal")")'")
echo "  (the same blocked model from both: $same)"
# what the job's worker holds once it has read (its DEBUG1 line, one more
# short job each): with the documents on the nodes, the counts (V x K) and
# how many documents of each class, not the documents nor their ids
q -c "ALTER ROLE postgres SET log_min_messages = debug1"
for src in mail mail_local; do
  q -At -c "SELECT status FROM gibbs_nb_train('held_$src', '$src', 'tokens', 'label', sampler => 'blocked',
              sweeps => 2, seed => 1, unlabeled_weight => 0.5)" >/dev/null
done
q -c "ALTER ROLE postgres RESET log_min_messages"
grep -o "the corpus read holds [0-9]* bytes" "$dir/n${ports[0]}.log" | awk '{ b[NR] = $5 } END {
  printf "  %-44s distributed %9.2f MB   one node %9.2f MB\n", "blocked sampler, the job'"'"'s worker once read", b[1] / 1048576, b[2] / 1048576 }'

if [ "$SCALE" -eq 1 ]; then
d=$(time_runs "SELECT count(gibbs_nb_predict('dist', tokens)) FROM mail" $((REPEAT + 1)) | tail -n "$REPEAT" | median)
l=$(time_runs "SELECT count(gibbs_nb_predict('dist', tokens)) FROM mail_local" $((REPEAT + 1)) | tail -n "$REPEAT" | median)
row "gibbs_nb_predict over every e-mail" "$d" "$l"
same=$(q -At -c "SELECT count(*) FROM (SELECT id, gibbs_nb_predict('dist', tokens) p FROM mail) d
                 JOIN (SELECT id, gibbs_nb_predict('dist', tokens) p FROM mail_local) l USING (id) WHERE d.p = l.p")
echo "  (the same label from both for $same e-mails)"
fi
