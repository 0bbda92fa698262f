-- Issue 11 item 1: chains in parallel workers give the model of the same
-- seed's chains run one after another, bit for bit: theta, pi, the
-- documents' label probabilities, the diagnostics and the trace.
-- gibbs_nb.max_chain_workers = 0 runs the chains one after another; 1 runs
-- chain 2 in a worker and chain 3 after chain 1 in the job's worker.
CREATE EXTENSION gibbs_nb;
CREATE TABLE chain_mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO chain_mail
SELECT i,
       CASE WHEN i % 2 = 0
            THEN ARRAY['cheap', 'pills', 'buy', 'now', 'w' || (i % 7), 'x' || (i % 13)]
            ELSE ARRAY['meeting', 'agenda', 'notes', 'team', 'w' || (i % 5), 'x' || (i % 11)] END,
       CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 300) i;
INSERT INTO chain_mail VALUES (301, '{cheap,meeting}', NULL), (302, '{pills,agenda,w1}', NULL);

SHOW gibbs_nb.max_chain_workers;
-- chain workers take the job slots that are free, within the role's bound
-- too: none here, so that 3 chains run in 3 workers
SET gibbs_nb.max_jobs_per_role = 0;
-- name, sampler, chains, max_chain_workers: one model per combination
CREATE FUNCTION pg_temp.train(name text, sampler text, chains int, workers int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
  PERFORM set_config('gibbs_nb.max_chain_workers', workers::text, true);
  SELECT status INTO s FROM gibbs_nb_train(name, 'chain_mail', 'tokens', 'label',
      sampler => sampler, sweeps => 120, burn_in => 40, chains => chains, seed => 17,
      gamma_theta => NULL);
  RETURN s;
END $$;
SELECT pg_temp.train('ch_seq2', 'paper', 2, 0), pg_temp.train('ch_par2', 'paper', 2, 4),
       pg_temp.train('ch_seq3', 'collapsed', 3, 0), pg_temp.train('ch_par3', 'collapsed', 3, 4),
       pg_temp.train('ch_mix3', 'collapsed', 3, 1);

-- the same model: packed arrays, model row figures, trace, labels table
SELECT p.model_name, s.model_name AS like_model,
       p.log_theta = s.log_theta AS theta, p.log_pi = s.log_pi AS pi,
       doc_labels(p.version_id) = doc_labels(s.version_id) AS labels
FROM gibbs_nb.packed p
JOIN gibbs_nb.packed s ON s.model_name = CASE p.model_name WHEN 'ch_par2' THEN 'ch_seq2' ELSE 'ch_seq3' END
WHERE p.model_name IN ('ch_par2', 'ch_par3', 'ch_mix3') ORDER BY 1;
SELECT p.model_name,
       p.log_likelihood = s.log_likelihood AND p.r_hat = s.r_hat AND p.split_r_hat = s.split_r_hat
         AND p.ess = s.ess AND p.gamma_theta = s.gamma_theta AND p.warnings = s.warnings AS figures
FROM gibbs_nb.models p
JOIN gibbs_nb.models s ON s.model_name = CASE p.model_name WHEN 'ch_par2' THEN 'ch_seq2' ELSE 'ch_seq3' END
WHERE p.model_name IN ('ch_par2', 'ch_par3', 'ch_mix3') ORDER BY 1;
-- the trace: every chain's every sweep (120 x chains rows), the same values
SELECT m.model_name, count(*) AS trace_rows, count(DISTINCT t.chain) AS chains,
       (SELECT count(*) FROM (
          SELECT t2.chain, t2.sweep, t2.log_likelihood, t2.changed, t2.gamma_theta
          FROM gibbs_nb.trace t2 WHERE t2.job_id = m.job_id
          EXCEPT
          SELECT t3.chain, t3.sweep, t3.log_likelihood, t3.changed, t3.gamma_theta
          FROM gibbs_nb.trace t3 JOIN gibbs_nb.models s ON t3.job_id = s.job_id
          WHERE s.model_name = CASE m.model_name WHEN 'ch_par2' THEN 'ch_seq2' ELSE 'ch_seq3' END) d
       ) AS differing
FROM gibbs_nb.models m JOIN gibbs_nb.trace t USING (job_id)
WHERE m.model_name IN ('ch_par2', 'ch_par3', 'ch_mix3') GROUP BY m.model_name, m.job_id ORDER BY 1;
SELECT count(*) AS differing_labels FROM ch_par3_labels p JOIN ch_seq3_labels s USING (id)
WHERE p.label <> s.label OR p.probability <> s.probability;
-- the finished job's row: the last sweep of the last chain
SELECT model_name, status, chain, sweep FROM gibbs_nb_jobs
WHERE model_name IN ('ch_par2', 'ch_par3') ORDER BY 1;

-- a warm start (retrain): the chains start from the last labels, in parallel alike
SET gibbs_nb.max_chain_workers = 0;
SELECT status FROM gibbs_nb_retrain('ch_seq3');
SET gibbs_nb.max_chain_workers = 4;
SELECT status FROM gibbs_nb_retrain('ch_par3');
SELECT p.log_theta = s.log_theta AND p.log_pi = s.log_pi
       AND doc_labels(p.version_id) = doc_labels(s.version_id) AS warm_same
FROM gibbs_nb.packed p, gibbs_nb.packed s
WHERE p.model_name = 'ch_par3' AND p.version = 2 AND s.model_name = 'ch_seq3' AND s.version = 2;
RESET gibbs_nb.max_chain_workers;

-- only a superuser sets it (it takes background worker slots)
CREATE ROLE chain_user;
SET ROLE chain_user;
SELECT try($$SET gibbs_nb.max_chain_workers = 8$$);
RESET ROLE;
SELECT try($$SET gibbs_nb.max_chain_workers = 64$$);
DROP ROLE chain_user;
DROP TABLE ch_seq2_labels, ch_par2_labels, ch_seq3_labels, ch_par3_labels, ch_mix3_labels;
DROP EXTENSION gibbs_nb CASCADE;
DROP TABLE chain_mail;
