-- Few labels (docs/model.md, "Few labels"): the start from the labels, the
-- label check, the default unlabeled_weight that keeps the unlabelled
-- documents only when they clearly help, chains compared.
CREATE EXTENSION gibbs_nb;

-- Two corpora: aligned (1000 documents, 40 labelled) and misfit (400, 20).
-- aligned: two topics of 400 words each, three words a document; the label
-- is the topic (ids 1..40 labelled of 1000).  The labelled documents alone
-- see a quarter of the words; the unlabelled ones show which go together.
CREATE TABLE aligned (id int PRIMARY KEY, tokens text[], label text, topic text);
INSERT INTO aligned
SELECT i, ARRAY['w' || (o + abs(hashint4(i)) % 400), 'w' || (o + abs(hashint4(-i)) % 400),
                'w' || (o + abs(hashint4(i + 100000)) % 400)],
       CASE WHEN i <= 40 THEN t END, t
FROM generate_series(1, 1000) i,
     LATERAL (SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END,
                     CASE WHEN i % 2 = 0 THEN 0 ELSE 400 END) s(t, o);
-- misfit: every document has five words of one of two strong topics (a, b)
-- and one word that carries its label (x or y), across the topics: the
-- unlabelled documents pull the classes towards the topics
CREATE TABLE misfit (id int PRIMARY KEY, tokens text[], label text, truth text);
INSERT INTO misfit
SELECT i, ARRAY[t || '1', t || '2', t || '3', t || '4', t || '5', l],
       CASE WHEN i <= 20 THEN l END, l
FROM generate_series(1, 800) i,
     LATERAL (SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END,
                     CASE WHEN i % 4 < 2 THEN 'x' ELSE 'y' END) s(t, l);

-- the start: 'labels' by default, 'random' on request, nothing else
SELECT gibbs_nb_train('bad', 'aligned', 'tokens', 'label', init => 'uniform');
SELECT gibbs_nb_train('bad', 'aligned', 'tokens', 'label', init => NULL);
SELECT status FROM gibbs_nb_train('start_random', 'aligned', 'tokens', 'label', sweeps => 40,
                                  seed => 1, init => 'random', unlabeled_weight => 1);
SELECT status FROM gibbs_nb_train('aligned', 'aligned', 'tokens', 'label', sweeps => 300,
                                  seed => 1, sampler => 'collapsed');
SELECT model_name, init FROM gibbs_nb.models
WHERE model_name IN ('start_random', 'aligned') ORDER BY model_name;

-- aligned, by default: the unlabelled documents make the model clearly
-- better on its own labels (each left out) than the labels alone: kept,
-- unlabeled_weight 1, no warning
SELECT unlabeled_weight, unlabeled_weight_chosen, labels_agreement, labels_only_agreement,
       warnings
FROM gibbs_nb.models WHERE model_name = 'aligned';
SELECT avg((l.label = a.topic)::int) > 0.95 AS accurate
FROM aligned_labels l JOIN aligned a USING (id) WHERE a.label IS NULL;

-- misfit, with unlabeled_weight => 1: the model drifts from its labels to
-- the topics, and says so
SELECT status FROM gibbs_nb_train('misfit_w1', 'misfit', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'collapsed', unlabeled_weight => 1);
SELECT unlabeled_weight, unlabeled_weight_chosen, labels_agreement < labels_only_agreement - 0.2
       AS worse, array_length(warnings, 1) AS n_warnings
FROM gibbs_nb.models WHERE model_name = 'misfit_w1';
SELECT avg((l.label = m.truth)::int) < 0.8 AS poor
FROM misfit_w1_labels l JOIN misfit m USING (id) WHERE m.label IS NULL;

-- misfit, by default: the version is the labels-only model (unlabeled_weight
-- 0, chosen), as good as the labels allow, and nothing to warn of
SELECT status FROM gibbs_nb_train('misfit', 'misfit', 'tokens', 'label', sweeps => 40,
                                  seed => 1, sampler => 'collapsed');
SELECT unlabeled_weight, unlabeled_weight_chosen, labels_only_agreement, warnings
FROM gibbs_nb.models WHERE model_name = 'misfit';
SELECT avg((l.label = m.truth)::int) AS accuracy
FROM misfit_labels l JOIN misfit m USING (id) WHERE m.label IS NULL;
-- the labels-only model exactly: theta-hat (N + 1) / (N_k + V), each of
-- the 10 labelled documents of a class 6 words, one its label's; a
-- vocabulary of 12
SELECT class, token, round(probability::numeric, 9) AS probability,
       round(CASE WHEN class = token THEN 10 + 1.0 ELSE 1.0 END / (60 + 12), 9) AS expected
FROM gibbs_nb.theta WHERE model_name = 'misfit' AND token IN ('x', 'y') ORDER BY class, token;
-- retrain chooses again (the NULL is kept, not the 0 it chose)
SELECT status FROM gibbs_nb_retrain('misfit');
SELECT version, unlabeled_weight, unlabeled_weight_chosen FROM gibbs_nb.models
WHERE model_name = 'misfit' ORDER BY version;

-- chains compared: two chains in one mode agree
SELECT status FROM gibbs_nb_train('two_chains', 'aligned', 'tokens', 'label', sweeps => 40,
                                  seed => 2, chains => 2, unlabeled_weight => 1);
SELECT chain_agreement > 0.9 AS agree, warnings FROM gibbs_nb.models WHERE model_name = 'two_chains';

-- more labelled documents than the check scores (2,000): those first by a
-- hash of their id (chosen by their ids, then read by id), the same
-- whatever order the rows are stored in; a word tells the label apart in
-- two thirds of the documents, the other third carry the other class's
CREATE TABLE many (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO many
SELECT i, ARRAY['w' || (i % 50), CASE WHEN (i % 3 = 0) = (i % 5 < 3) THEN 'ay' ELSE 'bee' END],
       CASE WHEN i <= 2100 THEN CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END END
FROM generate_series(1, 2400) i;
CREATE TABLE many_shuffled AS SELECT * FROM many ORDER BY md5(id::text);
ALTER TABLE many_shuffled ADD PRIMARY KEY (id);
SELECT t, (SELECT status FROM gibbs_nb_train(t, t::regclass, 'tokens', 'label', sweeps => 10,
                                             seed => 1, unlabeled_weight => 1))
FROM (VALUES ('many'), ('many_shuffled')) v(t) ORDER BY 1;
SELECT model_name, labels_agreement, labels_only_agreement FROM gibbs_nb.models
WHERE model_name IN ('many', 'many_shuffled') ORDER BY 1;

-- gibbs_nb_models shows the figures
SELECT model_name, init, unlabeled_weight, unlabeled_weight_chosen,
       labels_agreement IS NOT NULL AS checked, chain_agreement IS NOT NULL AS chains_compared
FROM gibbs_nb_models WHERE model_name IN ('misfit', 'two_chains') ORDER BY model_name;

SELECT count(gibbs_nb_drop(m)) FROM unnest(ARRAY['start_random', 'aligned', 'misfit_w1',
                                                'misfit', 'two_chains', 'many', 'many_shuffled']) m;
DROP TABLE aligned, misfit, many, many_shuffled;
DROP EXTENSION gibbs_nb CASCADE;
