-- Issue 11: sampled gammas (gamma => NULL), the diagnostics columns, the
-- warnings and their NOTICE, retrain keeping "sampled".
CREATE EXTENSION gibbs_nb;
CREATE TABLE stats_mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO stats_mail
SELECT i,
       CASE WHEN i % 2 = 0
            THEN ARRAY['cheap', 'pills', 'buy', 'now', 'offer', 'word' || (i % 7)]
            ELSE ARRAY['meeting', 'agenda', 'notes', 'tomorrow', 'team', 'word' || (i % 5)] END,
       CASE WHEN i <= 20 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 40) i;
INSERT INTO stats_mail VALUES (41, '{cheap,meeting}', NULL), (42, '{pills,agenda}', NULL);

-- gamma_theta => NULL and gamma_pi => NULL: both sampled, for both samplers
SELECT status, sweeps_done FROM gibbs_nb_train('st_collapsed', 'stats_mail', 'tokens', 'label',
    sweeps => 400, seed => 11, gamma_theta => NULL, gamma_pi => NULL, unlabeled_weight => 1);
SELECT status, sweeps_done FROM gibbs_nb_train('st_paper', 'stats_mail', 'tokens', 'label',
    sampler => 'paper', sweeps => 400, seed => 11, gamma_theta => NULL, unlabeled_weight => 1);
SELECT model_name, gamma_theta_sampled, gamma_pi_sampled,
       gamma_theta BETWEEN 0.001 AND 1000 AND gamma_theta <> 1 AS gamma_theta_is_a_mean,
       CASE WHEN gamma_pi_sampled THEN gamma_pi BETWEEN 0.001 AND 1000 AND gamma_pi <> 1
            ELSE gamma_pi = 1 END AS gamma_pi_ok
FROM gibbs_nb.models WHERE model_name LIKE 'st\_%' ORDER BY model_name;
-- the model row's gamma is the mean of the kept sweeps' (burn_in 200 of 400)
SELECT m.model_name, abs(m.gamma_theta - avg(t.gamma_theta)) < 1e-9 * m.gamma_theta AS mean_of_trace
FROM gibbs_nb.models m JOIN gibbs_nb.trace t USING (job_id)
WHERE m.model_name LIKE 'st\_%' AND t.sweep > m.burn_in
GROUP BY m.model_name, m.gamma_theta ORDER BY 1;
-- the trace: a gamma per sweep where it was sampled, NULL where not
SELECT m.model_name, count(*) AS sweeps, count(t.gamma_theta) AS gamma_theta_values,
       count(t.gamma_pi) AS gamma_pi_values, count(DISTINCT t.gamma_theta) > 100 AS it_moves
FROM gibbs_nb.models m JOIN gibbs_nb.trace t USING (job_id)
WHERE m.model_name LIKE 'st\_%' GROUP BY m.model_name ORDER BY 1;
-- the sampled gammas' labels are still right
SELECT bool_and(label = CASE WHEN id % 2 = 0 THEN 'spam' ELSE 'ham' END) AS hidden_right
FROM st_collapsed_labels WHERE id BETWEEN 21 AND 40;

-- retrain samples again what was sampled
SELECT status FROM gibbs_nb_retrain('st_paper');
SELECT version, gamma_theta_sampled, gamma_pi_sampled, gamma_pi
FROM gibbs_nb.models WHERE model_name = 'st_paper' ORDER BY version;
SELECT count(t.gamma_theta) AS gamma_theta_values, count(t.gamma_pi) AS gamma_pi_values
FROM gibbs_nb.models m JOIN gibbs_nb.trace t USING (job_id)
WHERE m.model_name = 'st_paper' AND m.version = 2;

-- a NULL gamma is no longer an error; a bad one still is
SELECT try($$SELECT * FROM gibbs_nb_train('st_bad', 'stats_mail', 'tokens', 'label',
                                          gamma_theta => 0)$$);
SELECT try($$SELECT * FROM gibbs_nb_train('st_bad', 'stats_mail', 'tokens', 'label',
                                          gamma_pi => 'infinity')$$);

-- diagnostics: ESS and split R-hat of a mixing run, and no warning
SELECT status FROM gibbs_nb_train('st_mixing', 'stats_mail', 'tokens', 'label',
    sweeps => 2000, chains => 2, seed => 5, unlabeled_weight => 0.5);
SELECT ess > 100 AS ess_ok, split_r_hat BETWEEN 0.9 AND 1.05 AS split_r_hat_ok, warnings
FROM gibbs_nb.models WHERE model_name = 'st_mixing';

-- a chain whose labels are certain (unlabelled copies of long clamped
-- documents) changes none of them after burn-in: it is not stuck, and no
-- warning says it is
CREATE TABLE stuck_mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO stuck_mail
SELECT i, array_fill(CASE WHEN i % 2 = 0 THEN 'cheap' ELSE 'meeting' END, ARRAY[300]),
       CASE WHEN i <= 4 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 8) i;
SELECT status FROM gibbs_nb_train('st_stuck', 'stuck_mail', 'tokens', 'label',
    sweeps => 200, seed => 3, unlabeled_weight => 1);
SELECT warnings, ess, split_r_hat FROM gibbs_nb.models WHERE model_name = 'st_stuck';
SELECT status FROM gibbs_nb_retrain('st_stuck');

-- a document the paper sampler's theta holds: ten words no other document
-- has, five times each, say nothing of its class once theta is integrated
-- out (it should change class about every other sweep), but theta drawn
-- from its own counts keeps it where it is: stuck, and said so
CREATE TABLE held_mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO held_mail VALUES
  (1, array_fill('meeting'::text, ARRAY[20]), 'ham'),
  (2, array_fill('cheap'::text, ARRAY[20]), 'spam'),
  (3, (SELECT array_agg('w' || w) FROM generate_series(1, 10) w, generate_series(1, 5)), NULL);
SELECT status FROM gibbs_nb_train('st_held', 'held_mail', 'tokens', 'label',
    sweeps => 200, seed => 3, unlabeled_weight => 1);
SELECT warnings FROM gibbs_nb.models WHERE model_name = 'st_held';
-- the collapsed sampler moves it: nothing to say
SELECT status FROM gibbs_nb_train('st_held_collapsed', 'held_mail', 'tokens', 'label',
    sweeps => 200, seed => 3, unlabeled_weight => 1, sampler => 'collapsed');
SELECT warnings FROM gibbs_nb.models WHERE model_name = 'st_held_collapsed';

-- too few sweeps: the effective sample size warning (no NOTICE here: its
-- wording is in the warnings column)
SET client_min_messages = warning;
SELECT status FROM gibbs_nb_train('st_short', 'stats_mail', 'tokens', 'label',
    sweeps => 30, seed => 3, unlabeled_weight => 1);
RESET client_min_messages;
SELECT ess < 100 AS ess_low,
       'effective sample size of the log joint is below 100: the log joint is strongly autocorrelated: run more sweeps'
         = ANY (warnings) AS warned
FROM gibbs_nb.models WHERE model_name = 'st_short';

-- supervised, fixed gammas: nothing sampled, nothing judged
UPDATE stats_mail SET label = CASE WHEN id % 2 = 0 THEN 'spam' ELSE 'ham' END WHERE id <= 40;
DELETE FROM stats_mail WHERE id > 40;
SELECT status FROM gibbs_nb_train('st_supervised', 'stats_mail', 'tokens', 'label',
    sweeps => 20, seed => 3);
SELECT warnings, ess, split_r_hat FROM gibbs_nb.models WHERE model_name = 'st_supervised';

DROP TABLE stats_mail, stuck_mail, held_mail;
DROP EXTENSION gibbs_nb CASCADE;
