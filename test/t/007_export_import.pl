# A model moved between databases: gibbs_nb_export in one database (the
# value written out through psql, as a user would move it), gibbs_nb_import
# into another database of another cluster, as another role there, gives a
# model that predicts exactly the same probabilities, explains and ranks
# words the same, and exports to the same bytes but for its version number.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $a = PostgreSQL::Test::Cluster->new('export_source');
$a->init;
$a->append_conf('postgresql.conf', "max_worker_processes = 16\ngibbs_nb.progress_interval = 0\n");
$a->start;
my $b = PostgreSQL::Test::Cluster->new('import_target');
$b->init;
$b->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$b->start;

$a->safe_psql('postgres', q{
  CREATE EXTENSION gibbs_nb;
  CREATE TABLE mail (id int PRIMARY KEY, tokens text[], label text);
  INSERT INTO mail
  SELECT i, array(SELECT (CASE WHEN i % 2 = 0 THEN 's' ELSE 'h' END) || ((i * k) % 40)
                  FROM generate_series(1, 20) k) || ARRAY['w' || i % 7, 'grüße'],
         CASE WHEN i % 3 = 0 THEN (ARRAY['ham', 'spam'])[1 + i % 2] END
  FROM generate_series(1, 400) i;
  SELECT status FROM gibbs_nb_train('spam', 'mail', 'tokens', 'label', sweeps => 40, seed => 9);
});
$b->safe_psql('postgres', q{
  CREATE ROLE carol;
  CREATE DATABASE other OWNER carol;
});
$b->safe_psql('other', 'CREATE EXTENSION gibbs_nb');

my $hex = $a->safe_psql('postgres', "SELECT encode(gibbs_nb_export('spam'), 'hex')");
ok(length($hex) > 1000, 'exported');

my $docs = q{(SELECT i AS id, array(SELECT (CASE WHEN i % 3 = 0 THEN 's' ELSE 'h' END) || ((i * k) % 45)
                                    FROM generate_series(1, 15) k) || ARRAY['w' || i % 9, 'new'] AS tokens
              FROM generate_series(1, 300) i) d};
my $probe = qq{SELECT string_agg(gibbs_nb_predict_proba('spam', tokens)::text, ';' ORDER BY id) FROM $docs};
my $explain = qq{SELECT string_agg(e.kind || ':' || coalesce(e.token, '') || ':' || e.log_odds::text, ';')
                 FROM $docs, gibbs_nb_explain('spam', d.tokens, 3) e WHERE d.id <= 20};
my $top = q{SELECT string_agg(token || ':' || log_ratio::text || ':' || count, ';' ORDER BY rank)
            FROM gibbs_nb_top_words('spam', 'spam', 10, 3)};
my %before = map { $_ => $a->safe_psql('postgres', $_) } ($probe, $explain, $top);

is($b->safe_psql('other', "SET ROLE carol; SELECT gibbs_nb_import('spam', decode('$hex', 'hex'))"),
	'1', 'imported into another cluster, by another role, as version 1');
for my $q ($probe, $explain, $top)
{
	is($b->safe_psql('other', "SET ROLE carol; $q"), $before{$q},
		'the same, to the last digit: ' . substr($q, 7, 40));
}
is($b->safe_psql('other', q{SET ROLE carol;
  SELECT owner || ' ' || trained_by || ' ' || n_documents || ' ' || vocabulary_size || ' ' || seed
  FROM gibbs_nb_models}),
	$a->safe_psql('postgres', q{SELECT 'carol carol ' || n_documents || ' ' || vocabulary_size || ' ' || seed
	                             FROM gibbs_nb_models}),
	'the imported version is carol\'s, with the exported figures');
is($b->safe_psql('other', "SET ROLE carol; SELECT encode(gibbs_nb_export('spam'), 'hex')"), $hex,
	'exported again, the same bytes');
is($b->safe_psql('other', "SELECT count(*) FROM gibbs_nb_models WHERE owner = 'postgres'"), '0',
	'nothing else was made');
is($b->safe_psql('other', "SELECT count(*) FROM gibbs_nb.theta WHERE owner = 'carol'"),
	$a->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.theta"), 'theta rows written');

$a->stop;
$b->stop;
done_testing();
