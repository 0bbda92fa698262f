-- A fixture the dump/restore and upgrade tests share: role alice (which must
-- exist, with a schema alice) trains a spam model on 200 mails, 60 of them
-- labelled, and retrains it: two versions and a labels table.
SET ROLE alice;
CREATE TABLE alice.mail (id int PRIMARY KEY, tokens text[], label text);
INSERT INTO alice.mail
SELECT i, array(SELECT 'w' || ((i * 7 + k * 13) % 40) FROM generate_series(1, 12) k)
            || CASE WHEN i % 2 = 0 THEN '{cheap,pills}'::text[] ELSE '{agenda}' END,
       CASE WHEN i <= 60 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
FROM generate_series(1, 200) i;
SELECT status FROM gibbs_nb_train('spam', 'alice.mail', 'tokens', 'label', sweeps => 50, seed => 1);
SELECT status FROM gibbs_nb_retrain('spam');
RESET ROLE;
