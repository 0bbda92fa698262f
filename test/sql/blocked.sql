-- The blocked sampler (issue 27): sampler => 'blocked' trains, records its
-- name, and gives the same model whether its chains run in parallel
-- workers or one after another; a blocked model exports, imports and
-- retrains like any other.
CREATE EXTENSION gibbs_nb;
CREATE TABLE blocked_mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO blocked_mail
SELECT i,
       CASE WHEN i % 2 = 0
            THEN ARRAY['cheap', 'pills', 'buy', 'now', 'w' || (i % 7), 'x' || (i % 13)]
            ELSE ARRAY['meeting', 'agenda', 'notes', 'team', 'w' || (i % 5), 'x' || (i % 11)] END,
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 600) i;
-- chain workers take the job slots that are free: none bounds them here
SET gibbs_nb.max_jobs_per_role = 0;

SET gibbs_nb.max_chain_workers = 0;
SELECT status, sweeps_done FROM gibbs_nb_train('bl_seq', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 80, burn_in => 20, chains => 3, seed => 21,
    gamma_theta => NULL, unlabeled_weight => 0.7);
SET gibbs_nb.max_chain_workers = 4;
SELECT status FROM gibbs_nb_train('bl_par', 'blocked_mail', 'tokens', 'label',
    sampler => 'blocked', sweeps => 80, burn_in => 20, chains => 3, seed => 21,
    gamma_theta => NULL, unlabeled_weight => 0.7);
RESET gibbs_nb.max_chain_workers;
SELECT model_name, sampler, chains, gamma_theta_sampled, unlabeled_weight
FROM gibbs_nb.models WHERE model_name LIKE 'bl_%' ORDER BY 1;
-- every unlabelled document in its kind's class, surely
SELECT count(*) FILTER (WHERE label = CASE WHEN id % 2 = 0 THEN 'spam' ELSE 'ham' END) AS right_labels,
       count(*) AS documents, bool_and(probability > 0.99) AS sure
FROM bl_seq_labels;
-- parallel chains: the same model bit for bit
SELECT p.log_theta = s.log_theta AS theta, p.log_pi = s.log_pi AS pi,
       p.label_probabilities = s.label_probabilities AS labels
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_par' AND s.model_name = 'bl_seq';
SELECT p.log_likelihood = s.log_likelihood AND p.ess = s.ess AND p.gamma_theta = s.gamma_theta
       AND p.split_r_hat = s.split_r_hat AS figures
FROM gibbs_nb.models p, gibbs_nb.models s
WHERE p.model_name = 'bl_par' AND s.model_name = 'bl_seq';
-- the same seed and data on another sampler: another model
SELECT status FROM gibbs_nb_train('bl_paper', 'blocked_mail', 'tokens', 'label',
    sampler => 'paper', sweeps => 80, burn_in => 20, chains => 3, seed => 21,
    gamma_theta => NULL, unlabeled_weight => 0.7);
SELECT p.log_theta = s.log_theta AS same_theta
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'bl_paper' AND s.model_name = 'bl_seq';

-- retrain keeps the sampler; export and import carry its name
SELECT status FROM gibbs_nb_retrain('bl_seq');
SELECT version, sampler FROM gibbs_nb.models WHERE model_name = 'bl_seq' ORDER BY version;
SELECT gibbs_nb_import('bl_copy', gibbs_nb_export('bl_seq')) IS NOT NULL AS imported;
SELECT sampler FROM gibbs_nb.models WHERE model_name = 'bl_copy';
SELECT gibbs_nb_predict_proba('bl_seq', '{cheap,team}'::text[]) =
       gibbs_nb_predict_proba('bl_copy', '{cheap,team}'::text[]) AS same_prediction;

DROP TABLE bl_seq_labels, bl_par_labels, bl_paper_labels;
DROP EXTENSION gibbs_nb CASCADE;
DROP TABLE blocked_mail;
