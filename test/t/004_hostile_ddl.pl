# Concurrent DDL between gibbs_nb_train's checks and its worker's read
# (threats.md: "what the caller saw of a relation, handed to the worker, is a
# claim to re-verify under a lock").  0.1.0's worker found the source again
# by name and took its columns' types on trust: a view replaced, or a column
# altered, in between made it read a value of one type as another and
# segfault, which restarts every session of the server.
#
# The interleaving is forced, not hoped for: the caller's session holds a lock
# on the source while the attacker's DDL queues behind it; the caller starts
# the job (its checks pass on the relation as it still is); the worker's read
# queues behind the DDL; then the caller commits, the DDL runs, and the worker
# reads.  Every wait is bounded polling of pg_locks or the job's row.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('hostile_ddl');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\ngibbs_nb.progress_interval = 0\n");
$node->start;
$node->safe_psql('postgres', q{
  CREATE EXTENSION gibbs_nb;
  CREATE TABLE docs (id int PRIMARY KEY, tokens text[]);
  INSERT INTO docs SELECT i, ARRAY['w' || i % 7, 'w' || i % 3] FROM generate_series(1, 60) i;
  CREATE TABLE docs2 AS SELECT * FROM docs;
  CREATE TABLE docs3 AS SELECT * FROM docs;
  CREATE VIEW v AS SELECT id, tokens FROM docs2;
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# Train unsupervised on $relation while $ddl replaces it under the worker;
# return the job's status and SQLSTATE.
sub attack
{
	my ($relation, $ddl, $model) = @_;
	my $oid = $node->safe_psql('postgres', "SELECT '$relation'::regclass::oid");
	my $waiting = sub {
		return "SELECT count(*) >= $_[0] FROM pg_locks WHERE relation = $oid AND NOT granted";
	};
	my $caller = $node->background_psql('postgres');
	my $attacker = $node->background_psql('postgres', on_error_stop => 0);

	$caller->query_safe("BEGIN; SELECT count(*) FROM $relation;");
	$attacker->query_until(qr/queued/, "\\echo queued\n$ddl\n");
	ok($node->poll_query_until('postgres', $waiting->(1)), "$model: the DDL queues behind the caller");
	my $job = $caller->query_safe(
		"SELECT job_id FROM gibbs_nb_train('$model', '$relation', 'tokens', n_classes => 2, "
		  . "sweeps => 10, seed => 1, wait => false);");
	ok($node->poll_query_until('postgres', $waiting->(2)), "$model: the worker's read queues behind the DDL");
	$caller->query_safe('COMMIT;');
	$caller->quit;
	$attacker->quit;
	ok( $node->poll_query_until(
			'postgres', "SELECT status <> 'running' FROM gibbs_nb_jobs WHERE job_id = $job"),
		"$model: the job ends");
	return $node->safe_psql('postgres',
		"SELECT status || ' ' || coalesce(sqlstate, '') FROM gibbs_nb_jobs WHERE job_id = $job");
}

# A column altered to another accepted type: the worker's re-check sees it.
is( attack(
		'docs',
		'ALTER TABLE docs ALTER COLUMN tokens TYPE tsvector USING array_to_tsvector(tokens);',
		'altered'),
	'failed 55000',
	'a column altered under the worker fails the job with 55000');
like($node->safe_psql('postgres', q{SELECT message FROM gibbs_nb_jobs WHERE model_name = 'altered'}),
	qr/changed before it was read/, 'and says why');

# A view dropped and recreated, same name, other column types: the worker
# follows the OID it was given, which is gone.
is( attack(
		'v',
		'BEGIN; DROP VIEW v; CREATE VIEW v AS SELECT id, 42 AS tokens FROM docs2; COMMIT;',
		'replaced'),
	'failed 42P01',
	'a view replaced under the worker fails the job with 42P01');

# A table rewritten (same columns) while the worker waits for its lock: the
# worker takes its snapshot after the lock, so it reads the rewritten rows.
# 0.1.0 took the snapshot first, saw none of them, and published an empty
# model as a success.
is( attack(
		'docs3', 'ALTER TABLE docs3 ADD COLUMN noise float8 DEFAULT random();', 'rewritten'),
	'succeeded ',
	'a table rewritten under the worker trains');
is($node->safe_psql('postgres', q{SELECT n_documents FROM gibbs_nb.models WHERE model_name = 'rewritten'}),
	'60', 'on every row of it');

# The server never went down, and nothing else was published.
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'the server did not restart');
is($node->safe_psql('postgres', q{SELECT count(*) FROM gibbs_nb.models WHERE model_name <> 'rewritten'}),
	'0', 'nothing else was published');
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no process crashed');

# And with nothing in the way, the same sources train.
is( $node->safe_psql('postgres',
		q{SELECT status FROM gibbs_nb_train('altered', 'docs', 'tokens', n_classes => 2, sweeps => 10, seed => 1)}),
	'succeeded', 'the altered table trains as what it now is');

$node->stop;
done_testing();
