# Backups carry models: pg_dump of a database with trained models (two roles,
# several versions, labels tables), pg_restore into a new database on another
# cluster where the roles were created in another order (so they have other
# OIDs) gives the same models: the same probabilities, labels tables linked
# to their models, retraining that works, and job ids and version ids that
# go on from where they were.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename qw(dirname);

my $old = PostgreSQL::Test::Cluster->new('dump_source');
$old->init;
$old->append_conf('postgresql.conf', "max_worker_processes = 16\ngibbs_nb.progress_interval = 0\n");
$old->start;
$old->safe_psql('postgres', q{
  CREATE ROLE alice; CREATE ROLE bob;
  CREATE DATABASE shop;
});
$old->safe_psql('shop', q{
  CREATE EXTENSION gibbs_nb;
  CREATE SCHEMA alice AUTHORIZATION alice;
  CREATE SCHEMA bob AUTHORIZATION bob;
});
$old->safe_psql('shop', slurp_file(dirname(__FILE__) . '/../alice_spam.sql'));
$old->safe_psql('shop', q{
  SET ROLE bob;
  CREATE TABLE bob.notes (id int PRIMARY KEY, tokens text[]);
  INSERT INTO bob.notes SELECT i, ARRAY['n' || i % 5, 'm' || i % 3] FROM generate_series(1, 50) i;
  SELECT status FROM gibbs_nb_train('spam', 'bob.notes', 'tokens', n_classes => 3, sweeps => 20, seed => 2);
  RESET ROLE;
});

my $probe = q{SELECT string_agg(gibbs_nb_predict_proba('spam', tokens)::text, ';' ORDER BY id)
              FROM (VALUES (1, '{cheap,w3}'::text[]), (2, '{agenda,w5}'), (3, '{n1,m2}')) d(id, tokens)};
my %before;
for my $role ('alice', 'bob')
{
	$before{$role} = $old->safe_psql('shop', "SET ROLE $role; $probe");
}
my $state = q{SELECT string_agg(format('%s/%s v%s id%s %s', owner, model_name, version, version_id,
                                      gibbs_nb.model_relation(labels_relid, labels_table, catalog, owner)::regclass),
                               ', ' ORDER BY owner, version)
              FROM gibbs_nb.models};
my $models_before = $old->safe_psql('shop', $state);
# theta-hat, as gibbs_nb.theta shows it (a view of gibbs_nb.packed, whose
# rows the dump carries)
my $theta = q{SELECT count(*) || ' ' || md5(string_agg(format('%s/%s v%s %s %s %s', owner, model_name,
                                                             version, class, token, probability),
                                                      ';' ORDER BY owner, model_name, version, token, class))
              FROM gibbs_nb.theta};
my $theta_before = $old->safe_psql('shop', $theta);
# the documents' labels each version keeps (what gibbs_nb_deploy restores)
my $doc_labels = q{SELECT count(*) || ' ' || md5(string_agg(format('%s v%s %s %s', owner, version, id,
                                                                  probabilities),
                                                           ';' ORDER BY owner, version, id))
                   FROM gibbs_nb.document_labels JOIN gibbs_nb.models USING (version_id, owner)};
my $doc_labels_before = $old->safe_psql('shop', $doc_labels);
my $max_job = $old->safe_psql('shop', 'SELECT max(job_id) FROM gibbs_nb.jobs');
my $max_version_id = $old->safe_psql('shop', 'SELECT max(version_id) FROM gibbs_nb.models');

like($models_before, qr{^alice/spam v1 id\d+ alice\.spam_labels, alice/spam v2 id\d+ alice\.spam_labels, bob/spam v1 },
	'before: two versions of alice\'s model, one of bob\'s');
like($before{alice}, qr/^\{[0-9.e-]+,[0-9.e-]+\};/, 'before: alice\'s probabilities');

my $dump = $old->basedir . '/shop.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('shop') ], 'pg_dump runs');

# Another cluster: the roles exist, created in another order after others.
my $new = PostgreSQL::Test::Cluster->new('dump_target');
$new->init;
$new->append_conf('postgresql.conf', "max_worker_processes = 16\ngibbs_nb.progress_interval = 0\n");
$new->start;
$new->safe_psql('postgres', q{
  CREATE ROLE filler1; CREATE ROLE filler2; CREATE ROLE bob; CREATE ROLE filler3; CREATE ROLE alice;
  CREATE DATABASE shop;
});
isnt($new->safe_psql('postgres', q{SELECT 'alice'::regrole::oid}),
	$old->safe_psql('postgres', q{SELECT 'alice'::regrole::oid}), 'alice has another OID there');
$new->command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('shop'), $dump ],
	'pg_restore runs');

# The restored database has the dump's models, and each role's predicts as before.
sub same_models
{
	my ($db, $what) = @_;
	is($new->safe_psql($db, $state), $models_before, $what);
	for my $role ('alice', 'bob')
	{
		is($new->safe_psql($db, "SET ROLE $role; $probe"), $before{$role},
			"$role\'s model predicts the same probabilities");
	}
}

same_models('shop', 'the same models, versions and labels tables');
is($new->safe_psql('shop', q{SET ROLE bob; SELECT count(*) FROM gibbs_nb.models}), '1',
	'row security holds after the restore: bob sees only his model');
like($theta_before, qr/^[1-9]\d* /, 'before: theta has rows');
is($new->safe_psql('shop', $theta), $theta_before,
	'theta comes back through packed: the same rows, probabilities to the last digit');
is($new->safe_psql('shop', q{SET ROLE bob; SELECT string_agg(DISTINCT owner, ',') FROM gibbs_nb.theta}),
	'bob', 'bob sees only his model\'s theta');
is($new->safe_psql('shop', q{SELECT count(*) FROM alice.spam_labels}), '200',
	'the labels table came back');
like($doc_labels_before, qr/^450 /, 'before: each version keeps its documents\' labels (200 + 200 + 50)');
is($new->safe_psql('shop', $doc_labels), $doc_labels_before, 'they come back, to the last digit');
is($new->safe_psql('shop', q{SET ROLE alice; SELECT gibbs_nb_deploy('spam', 1);
                             SELECT DISTINCT version FROM alice.spam_labels}), "1\n1",
	'alice deploys version 1 from them: its labels table holds version 1');
is($new->safe_psql('shop', q{SET ROLE alice; SELECT gibbs_nb_deploy('spam', NULL)}), '2',
	'and goes back to the latest');

# Owner names came back registered in the old cluster: taken at their word
# until the role trains again, which registers its name with its OID here.
my $owner_registered = q{SELECT string_agg(owner || ':' || (cluster = gibbs_nb.cluster_identity()
                                                             AND role_oid = owner::regrole), ',' ORDER BY owner)
                         FROM gibbs_nb.owners};
is($new->safe_psql('shop', $owner_registered), 'alice:false,bob:false',
	'owner names restored, registered in the old cluster');

# Retraining works: the source and the labels table are found by their new OIDs.
my $retrain = $new->safe_psql('shop', q{
  SET ROLE alice; SELECT version || ' ' || status || ' ' || (job_id > } . $max_job . q{)
                  FROM gibbs_nb_retrain('spam')});
is($retrain, '3 succeeded true', 'alice retrains: version 3, a job id that goes on from the dump');
is($new->safe_psql('shop', q{SELECT DISTINCT version FROM alice.spam_labels}), '3',
	'the retrain wrote the restored labels table');
is($new->safe_psql('shop', $owner_registered), 'alice:true,bob:false',
	'the retrain registered alice\'s name in this cluster, with her OID here');
is($new->safe_psql('shop', qq{SELECT version_id > $max_version_id FROM gibbs_nb.models
                               WHERE owner = 'alice' AND version = 3}),
	't', 'version ids go on from the dump: none is reused');

# A dump that leaves a source out restores every model all the same, and
# the model whose source is missing says so when retrained.  The rows name
# their relations as text: as regclass, the restore's COPY of gibbs_nb.models
# failed on the missing name (as on a relation renamed while pg_dump ran,
# which writes a regclass under its name at COPY time), every role's models
# lost with it.
my $partial = $old->basedir . '/shop-partial.dump';
$old->command_ok([ 'pg_dump', '-Fc', '--exclude-table=bob.notes', '-f', $partial,
		'-d', $old->connstr('shop') ], 'pg_dump leaving out bob\'s source');
$new->safe_psql('postgres', 'CREATE DATABASE shop2');
$new->command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('shop2'), $partial ],
	'pg_restore of that dump runs');
same_models('shop2', 'every model came back');
my ($rc, $out, $err) = $new->psql('shop2', q{SET ROLE bob; SELECT gibbs_nb_retrain('spam')},
	on_error_stop => 1);
like($err, qr/the source of model "spam" no longer exists/,
	'bob\'s retrain says his source is gone');
# A relation another role makes under that name is not taken for it: its
# view or trigger functions would run as whoever retrains.
$new->safe_psql('shop2', q{
  GRANT USAGE, CREATE ON SCHEMA bob TO alice;
  SET ROLE alice;
  CREATE TABLE bob.notes (id int PRIMARY KEY, tokens text[]);
  INSERT INTO bob.notes SELECT i, ARRAY['n' || i % 5] FROM generate_series(1, 50) i;
  GRANT SELECT ON bob.notes TO bob;
});
($rc, $out, $err) = $new->psql('shop2', q{SET ROLE bob; SELECT gibbs_nb_retrain('spam')},
	on_error_stop => 1);
like($err, qr/the source of model "spam" no longer exists/,
	'nor is a table of another role\'s under its name taken for it');
$new->safe_psql('shop2', q{DROP TABLE bob.notes; REVOKE USAGE, CREATE ON SCHEMA bob FROM alice});
is($new->safe_psql('shop2', q{SET ROLE alice; SELECT version || ' ' || status FROM gibbs_nb_retrain('spam')}),
	'3 succeeded', 'alice retrains from her restored source');

# pg_restore --clean into the database it came from: the extension and the
# relations are made again, with new OIDs; the rows find them by name.
$new->command_ok([ 'pg_restore', '--clean', '--if-exists', '--exit-on-error', '-d',
		$new->connstr('shop2'), $partial ], 'pg_restore --clean over it runs');
is($new->safe_psql('shop2', $state), $models_before, 'the models are the dump\'s again');
is($new->safe_psql('shop2', q{SET ROLE alice; SELECT version || ' ' || status FROM gibbs_nb_retrain('spam')}),
	'3 succeeded', 'alice retrains: her source and labels table found by name');
is($new->safe_psql('shop2', q{SELECT DISTINCT version FROM alice.spam_labels}), '3',
	'the retrain wrote the restored labels table');

# A dump restored in the cluster it was taken from (pg_restore --clean: the
# extension made again) keeps what the owner names were registered to: role
# OIDs are the cluster's.  Alice is renamed; she keeps her model, and a
# new role named alice gets none of it.
my $same = $new->basedir . '/shop2.dump';
$new->safe_psql('shop2', q{ALTER ROLE alice RENAME TO alice2});
$new->command_ok([ 'pg_dump', '-Fc', '-f', $same, '-d', $new->connstr('shop2') ],
	'pg_dump of a database of this cluster');
$new->command_ok([ 'pg_restore', '--clean', '--if-exists', '--exit-on-error', '-d',
		$new->connstr('shop2'), $same ], 'pg_restore --clean of it runs');
is($new->safe_psql('shop2', q{SET ROLE alice2; SELECT string_agg(owner || '/' || model_name, ',') FROM gibbs_nb_models}),
	'alice/spam', 'the renamed role keeps its model through the restore');
$new->safe_psql('shop2', q{CREATE ROLE alice});
is($new->safe_psql('shop2', q{SET ROLE alice; SELECT count(*) FROM gibbs_nb_models}),
	'0', 'a new role under the old name gets none of it');

$old->stop;
$new->stop;
done_testing();
