#!/usr/bin/env bash
# Quick start, on a fresh Debian 12 with PostgreSQL 15 (run as root):
# installs what is missing, builds and installs gibbs_nb, starts a throwaway
# cluster, loads the bundled sample of the SpamAssassin corpus (403 e-mails),
# hides half of the labels, trains a spam model, and shows the labels the
# model gave the e-mails whose labels were hidden.  The cluster is removed at
# the end.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

scripts/install-deps.sh
make -s >/dev/null
make -s install >/dev/null

# shellcheck source=../test/cluster.sh
source test/cluster.sh
dir=$(mktemp -d /tmp/gibbs_nb_quickstart.XXXXXX)
cluster_start "$dir"
trap 'cluster_stop; rm -rf "$dir"' EXIT

psql_q -c "CREATE EXTENSION gibbs_nb" \
       -c "CREATE TABLE mail (id int PRIMARY KEY, truth text, folder text, body text,
                              tokens text[], label text)"
zcat test/data/spamassassin-sample.tsv.gz | psql_q -c "\\copy mail (id, truth, folder, body) FROM STDIN"
psql -X -v ON_ERROR_STOP=1 <<'SQL'
-- tokens: lower-case words; the label of every other e-mail hidden
UPDATE mail SET tokens = array(SELECT m[1] FROM regexp_matches(lower(body), '([a-z0-9'']+)', 'g') m),
                label = CASE WHEN id % 2 = 1 THEN truth END;
SELECT count(*) AS emails, count(label) AS labelled, count(*) - count(label) AS hidden FROM mail;

\echo Training (the sweeps run in a background worker; progress comes as NOTICEs) ...
SET gibbs_nb.progress_interval = '1s';
SELECT * FROM gibbs_nb_train('spam', 'mail', 'tokens', label_column => 'label',
                             sweeps => 500, seed => 42);

\echo The chain, drawn (log joint per sweep):
SELECT gibbs_nb_trace_plot(job_id, 50) FROM gibbs_nb_jobs WHERE model_name = 'spam';

\echo The model (unlabeled_weight: 1 if the unlabelled e-mails made the model agree with its
\echo labels clearly better than the labels alone do, else 0, the labels-only model):
SELECT model_name, version, classes, n_documents, n_labeled, vocabulary_size, sampler,
       unlabeled_weight, round(labels_agreement::numeric, 3) AS labels_agreement,
       round(labels_only_agreement::numeric, 3) AS labels_only_agreement, seconds
FROM gibbs_nb.models WHERE model_name = 'spam';
SELECT class, round(probability::numeric, 3) AS pi FROM gibbs_nb.pi WHERE model_name = 'spam';

\echo The words that say spam most (gibbs_nb_top_words):
SELECT rank, token, round(log_ratio::numeric, 2) AS log_ratio, count
FROM gibbs_nb_top_words('spam', 'spam', 10);

\echo Labels given to e-mails whose label was hidden (spam_labels, joinable on id):
(SELECT l.id, m.truth, l.label, round(l.probability::numeric, 3) AS probability,
        left(regexp_replace(m.body, '^.*?Subject: ', ''), 50) AS subject
 FROM spam_labels l JOIN mail m USING (id)
 WHERE m.label IS NULL AND m.truth = 'ham' ORDER BY l.id LIMIT 5)
UNION ALL
(SELECT l.id, m.truth, l.label, round(l.probability::numeric, 3),
        left(regexp_replace(m.body, '^.*?Subject: ', ''), 50)
 FROM spam_labels l JOIN mail m USING (id)
 WHERE m.label IS NULL AND m.truth = 'spam' ORDER BY l.id LIMIT 5);
SELECT count(*) AS hidden, sum((l.label = m.truth)::int) AS right,
       round(avg((l.label = m.truth)::int), 3) AS accuracy
FROM spam_labels l JOIN mail m USING (id) WHERE m.label IS NULL;

\echo Labelling new mail as it arrives, with gibbs_nb_predict in a trigger:
CREATE TABLE inbox (id serial PRIMARY KEY, body text, tokens text[], predicted text);
CREATE TRIGGER label_inbox BEFORE INSERT ON inbox
  FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('spam', 'tokens', 'predicted');
INSERT INTO inbox (body, tokens)
SELECT b, array(SELECT m[1] FROM regexp_matches(lower(b), '([a-z0-9'']+)', 'g') m)
FROM (VALUES ('Hi team, the meeting notes from Tuesday are attached; see you at the review.'),
             ('FREE money!!! Click here to claim your prize, limited offer, act now'),
             ('Re: patch for the kernel build, works on my machine with gcc 12')) v(b);
SELECT id, predicted, round((gibbs_nb_predict_proba('spam', tokens))[2]::numeric, 3) AS p_spam,
       left(body, 60) AS body
FROM inbox ORDER BY id;

\echo Why the second one is spam (gibbs_nb_explain: the part of the prior and of each word in the log-odds):
SELECT kind, token, count, round(log_odds::numeric, 2) AS log_odds, round(share::numeric, 3) AS share
FROM inbox, gibbs_nb_explain('spam', tokens, 5) WHERE id = 2;
SQL
