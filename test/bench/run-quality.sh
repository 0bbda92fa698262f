#!/usr/bin/env bash
# Quality benchmark on the SpamAssassin corpus (`make bench-quality`; not in
# the test command).  What it measures, on a throwaway cluster:
#
# 1. Semi-supervised accuracy: 50%, 5% and 1% of the labels kept (ids with
#    id % 2 = 1, id % 20 = 1, id % 100 = 1), for both samplers, lambda
#    (unlabeled_weight) in {1, 0.1, 0}, gamma_theta fixed (1, the default)
#    and sampled (gamma_theta => NULL: only where the installed build accepts
#    it, else "n/a").  Accuracy on the hidden labels two ways: the labels
#    table (the chain's P(L | W), "transductive") and gibbs_nb_evaluate on
#    the hidden rows (theta-hat and pi-hat applied to them, "inductive").
# 2. Unsupervised: no labels, n_classes => 2; the normalised mutual
#    information between the labels table's classes and the true labels,
#    computed in SQL: I(X; Y) / ((H(X) + H(Y)) / 2), the arithmetic-mean
#    normalisation of scikit-learn's normalized_mutual_info_score.
# 3. Closed form: every odd id labelled, no unlabelled row; gibbs_nb_predict
#    on the even ids must equal multinomial Naive Bayes computed here in SQL
#    from GROUP BY counts with the same smoothing: theta_kw = (N_kw + g) /
#    (N_k + V g), pi_k = (C_k + gp) / (N + K gp).
#
# SWEEPS (default 120; burn_in half) and SEED (default 1) for every run;
# SECTIONS (default "semi unsup closed") chooses the parts.  On the 2-core
# development machine, shared with other jobs, the run took 600 s with the
# sampled-gamma rows n/a (24 trainings, about 20 s each, mostly waiting for a
# core); with them (42 trainings) expect about 15 minutes there, far less on
# an idle machine.  200 sweeps gave every accuracy within 0.002 of 120.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SWEEPS=${SWEEPS:-120}
SECTIONS=${SECTIONS:-"semi unsup closed"}
SEED=${SEED:-1}
start=$(date +%s)

scripts/install-deps.sh >/dev/null
make -s >/dev/null && make -s install >/dev/null
corpus=$(test/bench/fetch-corpus.sh)

# shellcheck source=../cluster.sh
source test/cluster.sh
export PGOPTIONS="-c client_min_messages=warning"
cluster_start "$(mktemp -d /tmp/gibbs_nb_quality.XXXXXX)" "shared_buffers = 256MB" \
  "gibbs_nb.progress_interval = 0"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "corpus: $corpus; sweeps $SWEEPS (burn-in $((SWEEPS / 2))), seed $SEED"
psql_q -c "CREATE EXTENSION gibbs_nb" \
       -c "CREATE TABLE mail (id int PRIMARY KEY, truth text, folder text, body text,
                              tokens text[], label text)"
zcat "$corpus" | psql_q -c "\\copy mail (id, truth, folder, body) FROM STDIN"
psql_q <<'SQL'
UPDATE mail SET tokens = array(SELECT m[1] FROM regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m);
ALTER TABLE mail DROP COLUMN body;
VACUUM FULL ANALYZE mail;
CREATE VIEW hidden AS SELECT id, tokens, truth FROM mail WHERE label IS NULL;
SQL

# Does this build sample gamma_theta (gamma_theta => NULL)?
psql_q -c "CREATE TABLE probe (id int, tokens text[], label text)" \
       -c "INSERT INTO probe VALUES (1, '{a,b}', 'x'), (2, '{c,d}', 'y'), (3, '{a}', NULL), (4, '{d}', NULL)"
if [ "$(psql -X -q -At -c "SELECT status FROM gibbs_nb_train('probe', 'probe', 'tokens', 'label',
          gamma_theta => NULL, sweeps => 4, seed => 1)" 2>/dev/null)" = succeeded ]; then
  gammas="1 NULL"
else
  gammas="1"
  echo "this build does not accept gamma_theta => NULL: sampled-gamma rows are n/a"
fi

train() { # model label_column extra-args -> "seconds"
  psql_q -At -c "SELECT round(seconds::numeric, 1) FROM gibbs_nb_train('$1', 'mail', 'tokens', $2,
                   sweeps => $SWEEPS, seed => $SEED $3)"
}

if [[ " $SECTIONS " == *" semi "* ]]; then
echo
echo "## Semi-supervised: accuracy on the hidden labels"
echo
echo "| labels kept | sampler | λ | γθ | accuracy (labels table) | accuracy (θ̂, gibbs_nb_evaluate) | macro-F1 (θ̂) | seconds |"
echo "|---|---|---|---|---|---|---|---|"
for keep in "50%:id % 2 = 1" "5%:id % 20 = 1" "1%:id % 100 = 1"; do
  share=${keep%%:*}
  psql_q -c "UPDATE mail SET label = CASE WHEN ${keep#*:} THEN truth END"
  for sampler in paper collapsed; do
    for lambda in 1 0.1 0; do
      for gamma in 1 NULL; do
        shown_gamma=$([ "$gamma" = NULL ] && echo sampled || echo "$gamma")
        if [[ " $gammas " != *" $gamma "* ]]; then
          echo "| $share | $sampler | $lambda | $shown_gamma | n/a | n/a | n/a | |"
          continue
        fi
        secs=$(train q "'label'" ", sampler => '$sampler', unlabeled_weight => $lambda, gamma_theta => $gamma")
        read -r acc acc_theta f1 <<<"$(psql_q -At -F ' ' -c "
          SELECT round(avg((l.label = m.truth)::int), 4),
                 (SELECT round(accuracy::numeric, 4) || ' ' || round(macro_f1::numeric, 4)
                  FROM gibbs_nb_evaluate('q', 'hidden', 'tokens', 'truth'))
          FROM q_labels l JOIN mail m USING (id) WHERE m.label IS NULL")"
        echo "| $share | $sampler | $lambda | $shown_gamma | $acc | $acc_theta | $f1 | $secs |"
        psql_q -At -c "SELECT gibbs_nb_drop('q')" >/dev/null
      done
    done
  done
done

fi

if [[ " $SECTIONS " == *" unsup "* ]]; then
echo
echo "## Unsupervised (no labels, n_classes => 2): NMI with the true labels"
echo
echo "| sampler | γθ | NMI | accuracy of the best matching | seconds |"
echo "|---|---|---|---|---|"
psql_q -c "UPDATE mail SET label = NULL"
for sampler in paper collapsed; do
  for gamma in 1 NULL; do
    shown_gamma=$([ "$gamma" = NULL ] && echo sampled || echo "$gamma")
    if [[ " $gammas " != *" $gamma "* ]]; then
      echo "| $sampler | $shown_gamma | n/a | n/a | |"
      continue
    fi
    secs=$(train u NULL ", n_classes => 2, sampler => '$sampler', gamma_theta => $gamma")
    read -r nmi acc <<<"$(psql_q -At -F ' ' <<'SQL'
WITH j AS (SELECT l.label AS c, m.truth AS t FROM u_labels l JOIN mail m USING (id)),
n AS (SELECT count(*)::float8 AS n FROM j),
joint AS (SELECT c, t, count(*) / n.n AS p FROM j, n GROUP BY c, t, n.n),
pc AS (SELECT c, sum(p) AS p FROM joint GROUP BY c),
pt AS (SELECT t, sum(p) AS p FROM joint GROUP BY t),
mi AS (SELECT sum(joint.p * ln(joint.p / (pc.p * pt.p))) AS i
       FROM joint JOIN pc USING (c) JOIN pt USING (t)),
h AS (SELECT (SELECT -sum(p * ln(p)) FROM pc) AS hc, (SELECT -sum(p * ln(p)) FROM pt) AS ht),
-- two classes: the better of the two ways to name them
acc AS (SELECT greatest(avg((c = '1' AND t = 'ham' OR c = '2' AND t = 'spam')::int),
                        avg((c = '2' AND t = 'ham' OR c = '1' AND t = 'spam')::int)) AS a FROM j)
SELECT round((mi.i / ((h.hc + h.ht) / 2))::numeric, 4), round(acc.a, 4) FROM mi, h, acc;
SQL
)"
    echo "| $sampler | $shown_gamma | $nmi | $acc | $secs |"
    psql_q -At -c "SELECT gibbs_nb_drop('u')" >/dev/null
  done
done

fi

if [[ " $SECTIONS " == *" closed "* ]]; then
echo
echo "## All training labels given: gibbs_nb_predict against closed-form multinomial Naive Bayes"
echo
psql_q -c "UPDATE mail SET label = CASE WHEN id % 2 = 1 THEN truth END" \
       -c "CREATE TABLE train_half AS SELECT id, tokens, label FROM mail WHERE label IS NOT NULL" \
       -c "CREATE TABLE test_half AS SELECT id, tokens, truth FROM mail WHERE label IS NULL"
# closed form, from the training rows alone: theta_kw = (N_kw + 1) / (N_k + V),
# pi_k = (C_k + 1) / (N + 2) (gamma_theta = gamma_pi = 1)
psql_q <<'SQL'
CREATE TABLE nkw AS
  SELECT label AS k, tok AS w, count(*)::float8 AS n FROM train_half, unnest(tokens) tok GROUP BY 1, 2;
CREATE TABLE nk AS SELECT k, sum(n) AS n FROM nkw GROUP BY k;
CREATE TABLE ck AS SELECT label AS k, count(*)::float8 AS c FROM train_half GROUP BY label;
CREATE TABLE logtheta AS
  WITH v AS (SELECT count(DISTINCT w)::float8 AS v FROM nkw)
  SELECT w.w, nk.k, ln((coalesce(nkw.n, 0) + 1) / (nk.n + v.v)) AS lt
  FROM (SELECT DISTINCT w FROM nkw) w CROSS JOIN nk CROSS JOIN v
  LEFT JOIN nkw ON nkw.w = w.w AND nkw.k = nk.k;
ANALYZE logtheta;
CREATE TABLE closed AS
  WITH prior AS (SELECT k, ln((c + 1) / ((SELECT sum(c) FROM ck) + 2)) AS lp FROM ck),
  words AS (  -- sum over the document's known words, repeats counted (one hash join)
    SELECT d.id, lt.k, sum(lt.lt) AS s
    FROM test_half d CROSS JOIN LATERAL unnest(d.tokens) tok JOIN logtheta lt ON lt.w = tok
    GROUP BY d.id, lt.k),
  s AS (
    SELECT d.id, prior.k, prior.lp + coalesce(words.s, 0) AS score
    FROM test_half d CROSS JOIN prior LEFT JOIN words ON words.id = d.id AND words.k = prior.k)
  SELECT id, (array_agg(k ORDER BY score DESC, k))[1] AS label,
         -- exp below e^-700 is 0 here (PostgreSQL's exp raises underflow)
         exp(greatest(max(score) FILTER (WHERE k = 'spam') - max(score), -700))
         / (exp(greatest(max(score) FILTER (WHERE k = 'ham') - max(score), -700))
            + exp(greatest(max(score) FILTER (WHERE k = 'spam') - max(score), -700))) AS p_spam
  FROM s GROUP BY id;
SQL
echo "| sampler | test documents | same label as closed form | max abs difference of P(spam) | accuracy |"
echo "|---|---|---|---|---|"
for sampler in paper collapsed; do
  psql_q -At -c "SELECT 1 FROM gibbs_nb_train('c', 'train_half', 'tokens', 'label', sampler => '$sampler',
                   sweeps => 20, seed => $SEED, gamma_theta => 1, gamma_pi => 1)" >/dev/null
  read -r n same diff acc <<<"$(psql_q -At -F ' ' -c "
    SELECT count(*), count(*) FILTER (WHERE gibbs_nb_predict('c', t.tokens) = c.label),
           to_char(max(abs((gibbs_nb_predict_proba('c', t.tokens))[array_position(gibbs_nb_classes('c'), 'spam')]
                           - c.p_spam)), '9.9EEEE'),
           round(avg((c.label = t.truth)::int), 4)
    FROM test_half t JOIN closed c USING (id)")"
  echo "| $sampler | $n | $same | $diff | $acc |"
  psql_q -At -c "SELECT gibbs_nb_drop('c')" >/dev/null
done
fi
echo
echo "total: $(( $(date +%s) - start )) s"
