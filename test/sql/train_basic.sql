-- Training publishes a model version: labels table, models, theta, pi, trace.
CREATE EXTENSION gibbs_nb;

-- Clear-cut toy mail: spam words and ham words; half the labels hidden.
CREATE TABLE mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO mail
SELECT i,
       CASE WHEN i % 2 = 0
            THEN ARRAY['cheap', 'pills', 'buy', 'now', 'offer', 'word' || (i % 7)]
            ELSE ARRAY['meeting', 'agenda', 'notes', 'tomorrow', 'team', 'word' || (i % 5)] END,
       CASE WHEN i <= 20 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 40) i;
-- one ambiguous document, whose label the chain keeps changing
INSERT INTO mail VALUES (41, '{cheap,meeting}', NULL);

SELECT job_id > 0 AS has_job, model_name, version, status, sweeps_done,
       seconds > 0 AS timed, log_likelihood < 0 AS log_likelihood_negative
FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                    sweeps => 200, seed => 7, unlabeled_weight => 1);

-- one labels row per document, clamped ones certain, hidden ones right
SELECT count(*) AS rows, count(DISTINCT id) AS ids, min(version), max(version) FROM toy_labels;
SELECT bool_and(l.label = m.label AND l.probability = 1) AS clamped_kept
FROM toy_labels l JOIN mail m USING (id) WHERE m.label IS NOT NULL;
SELECT bool_and(l.label = CASE WHEN id % 2 = 0 THEN 'spam' ELSE 'ham' END) AS hidden_right,
       bool_and(l.probability > 0.9) AS confident
FROM toy_labels l JOIN mail m USING (id) WHERE m.label IS NULL AND id <= 40;
SELECT probability < 0.9 AS unsure FROM toy_labels WHERE id = 41;
SELECT bool_and(abs(probabilities[1] + probabilities[2] - 1) < 1e-12) AS probabilities_sum_to_1,
       bool_and(probability = greatest(probabilities[1], probabilities[2])) AS label_is_argmax
FROM toy_labels;
-- the labels table's id has the source's type and is its key
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'toy_labels'::regclass AND attname = 'id';
SELECT obj_description('toy_labels'::regclass);

-- the model row
SELECT model_name, version, classes, n_documents, n_labeled, n_skipped, vocabulary_size,
       source, tokens_column, label_column, id_column, sweeps, burn_in, lag, chains, sampler,
       gamma_pi, gamma_theta, unlabeled_weight, seed, labels_table, r_hat,
       owner = 'postgres' AS owned, status
FROM gibbs_nb.models;

-- theta-hat: a distribution over the vocabulary per class; pi-hat sums to 1
SELECT class, count(*) AS tokens, round(sum(probability)::numeric, 12) AS total
FROM gibbs_nb.theta WHERE model_name = 'toy' GROUP BY class ORDER BY class;
SELECT class, token FROM gibbs_nb.theta t
WHERE model_name = 'toy' AND probability = (SELECT max(probability) FROM gibbs_nb.theta
                                            WHERE model_name = 'toy' AND class = t.class)
ORDER BY class, token;
SELECT round(sum(probability)::numeric, 12) AS pi_total, bool_and(probability > 0.3) AS balanced
FROM gibbs_nb.pi WHERE model_name = 'toy';

-- the trace: one row per chain and sweep
SELECT count(*), min(sweep), max(sweep), bool_and(changed BETWEEN 0 AND 1)
FROM gibbs_nb.trace t JOIN gibbs_nb.models m USING (job_id) WHERE m.model_name = 'toy';

-- the job
SELECT model_name, status, sweep, sweeps, chains, version, message, worker_user, owner
FROM gibbs_nb_jobs ORDER BY job_id;

-- same seed, same data: the same model
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                                   sweeps => 200, seed => 7, unlabeled_weight => 1);
SELECT count(*) AS differing_theta FROM gibbs_nb.theta a JOIN gibbs_nb.theta b
  USING (model_name, class, token)
WHERE a.model_name = 'toy' AND a.version = 1 AND b.version = 2 AND a.probability <> b.probability;
-- another seed: another chain
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                                   sweeps => 200, seed => 8, unlabeled_weight => 1);
SELECT count(*) > 0 AS some_theta_differs FROM gibbs_nb.theta a JOIN gibbs_nb.theta b
  USING (model_name, class, token)
WHERE a.model_name = 'toy' AND a.version = 1 AND b.version = 3 AND a.probability <> b.probability;

-- the labels table holds the latest version only; older versions stay queryable
SELECT DISTINCT version FROM toy_labels;
SELECT version, count(*) FROM gibbs_nb.theta WHERE model_name = 'toy' GROUP BY 1 ORDER BY 1;

-- a random seed is drawn and recorded when none is given
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label', sweeps => 50);
SELECT seed IS NOT NULL AS seed_recorded FROM gibbs_nb.models WHERE model_name = 'toy' AND version = 4;

-- dropping a version
SELECT gibbs_nb_drop('toy', 1);
SELECT version FROM gibbs_nb.models WHERE model_name = 'toy' ORDER BY 1;
SELECT count(*) FROM gibbs_nb.theta WHERE model_name = 'toy' AND version = 1;
SELECT gibbs_nb_drop('toy', 1);
SELECT count(*) AS trace_rows_of_version_1 FROM gibbs_nb.trace
WHERE job_id = (SELECT job_id FROM gibbs_nb_jobs WHERE version = 1 AND model_name = 'toy');
-- dropping the model drops the labels table training created
SELECT gibbs_nb_drop('toy');
SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'toy';
SELECT count(*) FROM gibbs_nb.theta WHERE model_name = 'toy';
SELECT count(*) FROM gibbs_nb.pi WHERE model_name = 'toy';
SELECT to_regclass('toy_labels');
SELECT gibbs_nb_drop('toy');
SELECT gibbs_nb_drop(NULL);

-- dropping the last version one by one drops the model and its labels table,
-- so that the name can be trained again.  Version numbers go on: the model
-- had versions 1 to 4, so these are 5 and 6 (0.1.0 started again at 1, and
-- reissued the number of a dropped newest version)
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                                   sweeps => 20, seed => 1);
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                                   sweeps => 20, seed => 1);
-- the newest dropped, the next training is 7, not 6 again
SELECT gibbs_nb_drop('toy', 6);
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                                   sweeps => 20, seed => 1);
SELECT gibbs_nb_drop('toy', 5);
SELECT to_regclass('toy_labels') IS NOT NULL AS labels_table_kept;
SELECT gibbs_nb_drop('toy', 7);
SELECT to_regclass('toy_labels') IS NULL AS labels_table_dropped;
SELECT count(*) AS trace_rows FROM gibbs_nb.trace;
SELECT version FROM gibbs_nb_train('toy', 'mail', 'tokens', label_column => 'label',
                                   sweeps => 20, seed => 1);
SELECT gibbs_nb_drop('toy');

DROP TABLE mail;
DROP EXTENSION gibbs_nb;
