#!/usr/bin/env bash
# Few-label benchmark (`make bench-few-labels`; not in the test command):
# semi-supervised training with default settings against multinomial Naive
# Bayes trained on the labelled rows alone, on the hidden rows.
#
# Corpora: SpamAssassin (6,046 mails, 2 classes; test/bench/fetch-corpus.sh),
# Debian's fortunes (1,860 fortunes of 4 categories;
# test/bench/fetch-fortunes.sh), and a synthetic one made here where the
# classes are the clusters (4,000 documents of three words, each from its
# class's 1,000 words): the case unlabelled documents are meant for.  Labels kept: 1%, 5%, 10%, 20% (ids with
# id % 100, 20, 10, 5 = 1).  For each: the labelled-only model (trained on a
# view of the labelled rows: gibbs_nb's supervised model is exactly
# multinomial NB with add-one smoothing, see bench-quality's closed form),
# then gibbs_nb_train with default settings (sweeps 1000, burn-in 500, one
# chain, unlabeled_weight chosen, the start from the labels) for SEEDS seeds
# and both samplers; and, as the old default did, unlabeled_weight => 1.
# Accuracy: the labels table's label against the truth on the hidden rows
# (the labelled-only model: gibbs_nb_predict on them).  The default's runs
# show the unlabeled_weight the version chose; "unwarned" counts runs more
# than 0.10 below the labels-only model with no warning at all; for
# unlabeled_weight => 1, "label check" counts runs whose warnings include
# the label check's, "any" runs with any warning.
#
# SEEDS (default "1 2 3"), SWEEPS (default 1000), CORPORA (default "spam
# fortunes synthetic"), FRACTIONS (default "100 20 10 5").
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SEEDS=${SEEDS:-"1 2 3"}
SWEEPS=${SWEEPS:-1000}
CORPORA=${CORPORA:-"spam fortunes synthetic"}
FRACTIONS=${FRACTIONS:-"100 20 10 5"}
start=$(date +%s)

scripts/install-deps.sh >/dev/null
make -s >/dev/null && make -s install >/dev/null

# shellcheck source=../cluster.sh
source test/cluster.sh
export PGOPTIONS="-c client_min_messages=warning"
cluster_start "$(mktemp -d /tmp/gibbs_nb_few.XXXXXX)" "shared_buffers = 256MB" \
  "gibbs_nb.progress_interval = 0"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "sweeps $SWEEPS (burn-in $((SWEEPS / 2))), seeds $SEEDS"
psql_q -c "CREATE EXTENSION gibbs_nb"

# shellcheck source=corpus.sh
source test/bench/corpus.sh
load() { # tsv.gz: the table mail (test/bench/corpus.sh), the view of its labelled rows
  psql_q -c "DROP TABLE IF EXISTS mail CASCADE"
  load_mail "$1"
  psql_q -c "CREATE VIEW labelled AS SELECT id, tokens, label FROM mail WHERE label IS NOT NULL"
}
load_synthetic() { # the same table, made here
  psql_q -c "DROP TABLE IF EXISTS mail CASCADE" \
         -c "CREATE TABLE mail (id int PRIMARY KEY, truth text, folder text, tokens text[], label text)" \
         -c "INSERT INTO mail (id, truth, folder, tokens)
             SELECT i, t, t, ARRAY[t || abs(hashint4(i) % 1000), t || abs(hashint4(-i) % 1000),
                                   t || abs(hashint4(i + 1000000) % 1000)]
             FROM generate_series(1, 4000) i,
                  LATERAL (SELECT (ARRAY['a', 'b'])[1 + abs(hashint4(i + 7)) % 2]) s(t)" \
         -c "CREATE VIEW labelled AS SELECT id, tokens, label FROM mail WHERE label IS NOT NULL" \
         -c "ANALYZE mail"
}

# one training: prints "accuracy warned unlabeled_weight", warned being
# "check" (the label check's warning), "other" (other warnings) or "-"
run() { # model extra-args
  psql_q -At -c "SELECT status FROM gibbs_nb_train('$1', 'mail', 'tokens', 'label',
                   sweeps => $SWEEPS $2)" >/dev/null
  psql_q -At -F ' ' -c "
    SELECT round(avg((l.label = d.truth)::int), 4),
           (SELECT CASE WHEN EXISTS (SELECT FROM unnest(warnings) w
                                     WHERE w LIKE 'the labelled documents, each left out%')
                        THEN 'check' WHEN cardinality(warnings) > 0 THEN 'other' ELSE '-' END
                   || ' ' || unlabeled_weight
              FROM gibbs_nb.models WHERE model_name = '$1')
    FROM $1_labels l JOIN mail d USING (id) WHERE d.label IS NULL"
  psql_q -At -c "SELECT gibbs_nb_drop('$1')" >/dev/null
}

echo
echo "| corpus | labels | labels-only NB | sampler | default: accuracy per seed (chosen λ) | median | unwarned > 0.10 below | unlabeled_weight => 1: accuracy per seed | warned: label check / any |"
echo "|---|---|---|---|---|---|---|---|---|"
for corpus in $CORPORA; do
  case $corpus in
    spam) file=$(test/bench/fetch-corpus.sh) ;;
    fortunes) file=$(test/bench/fetch-fortunes.sh) ;;
    synthetic) file= ;;
  esac
  if [ -n "$file" ]; then load "$file"; else load_synthetic; fi
  for mod in $FRACTIONS; do
    psql_q -c "UPDATE mail SET label = CASE WHEN id % $mod = 1 THEN truth END"
    psql_q -At -c "SELECT status FROM gibbs_nb_train('base', 'labelled', 'tokens', 'label',
                     sweeps => 2)" >/dev/null
    base=$(psql_q -At -c "SELECT round(avg((gibbs_nb_predict('base', tokens) = truth)::int), 4)
                          FROM mail WHERE label IS NULL")
    psql_q -At -c "SELECT gibbs_nb_drop('base')" >/dev/null
    for sampler in paper collapsed; do
      accs=() silent=0 w1=() checked=0 warned=0
      for seed in $SEEDS; do
        read -r acc flag weight <<<"$(run semi ", seed => $seed, sampler => '$sampler'")"
        accs+=("$acc${weight:+ (λ $weight)}")
        if [ "$flag" = - ] && awk -v a="$acc" -v b="$base" 'BEGIN { exit !(a < b - 0.10) }'; then
          silent=$((silent + 1))
        fi
        read -r acc flag weight <<<"$(run semi ", seed => $seed, sampler => '$sampler', unlabeled_weight => 1")"
        w1+=("$acc")
        [ "$flag" = check ] && checked=$((checked + 1))
        [ "$flag" != - ] && warned=$((warned + 1))
      done
      median=$(printf '%s\n' "${accs[@]}" | awk '{print $1}' | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
      echo "| $corpus | $((100 / mod))% | $base | $sampler | ${accs[*]} | $median | $silent | ${w1[*]} | $checked / $warned of ${#w1[@]} |"
    done
  done
done
echo
echo "total $(( $(date +%s) - start )) s"
