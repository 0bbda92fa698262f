-- gibbs_nb_train(..., tokenizer => ...): how the tokens were made, as the
-- caller states it when the catalogs cannot tell (a plain column, a view).
CREATE EXTENSION gibbs_nb;
SET client_min_messages = warning;   -- the training's NOTICEs are not what this checks
CREATE TABLE tk_mail (id int PRIMARY KEY, label text, tokens text[]);
INSERT INTO tk_mail
SELECT i, CASE WHEN i % 4 = 0 THEN NULL WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END,
       CASE WHEN i % 2 = 0 THEN '{free,offer,click}'::text[] ELSE '{meeting,notes,agenda}' END
FROM generate_series(1, 40) i;

-- not said: the column's type
SELECT version FROM gibbs_nb_train('tk', 'tk_mail', 'tokens', 'label', sweeps => 10, seed => 1);
SELECT version, tokenizer, tokenizer_stated FROM gibbs_nb.models WHERE model_name = 'tk';

-- said: recorded, shown by the view, said again by retrain
SELECT version FROM gibbs_nb_train('tk', 'tk_mail', 'tokens', 'label', sweeps => 10, seed => 1,
                                   tokenizer => 'regexp_matches(lower(body), ''[a-z]+'')');
SELECT version FROM gibbs_nb_retrain('tk');
SELECT version, tokenizer, tokenizer_stated FROM gibbs_nb.models WHERE model_name = 'tk'
ORDER BY version;
SELECT serving_version, tokenizer FROM gibbs_nb_models WHERE model_name = 'tk';

-- bad values, each with nothing written
SELECT try($$SELECT * FROM gibbs_nb_train('tk', 'tk_mail', 'tokens', 'label', sweeps => 10,
                                          tokenizer => '')$$);
SELECT try($$SELECT * FROM gibbs_nb_train('tk', 'tk_mail', 'tokens', 'label', sweeps => 10,
                                          tokenizer => repeat('x', 1001))$$);
SELECT count(*) AS versions FROM gibbs_nb.models WHERE model_name = 'tk';

SELECT gibbs_nb_drop('tk');
DROP TABLE tk_mail;
RESET client_min_messages;
DROP EXTENSION gibbs_nb;
