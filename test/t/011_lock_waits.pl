# A lock one role queues stalls no other database's training.
#
# PostgreSQL takes a table's lock before it checks privileges: a role holds a
# weak lock on gibbs_nb.jobs in an open transaction and queues CREATE RULE
# on it behind that; every later statement on the table waits behind the
# queue.  A training call used to run its statements on gibbs_nb.jobs while
# it held the cluster-wide launch lock, so the next training of every
# database waited for the launch lock as long as the hostile transaction
# stayed open.  Now no statement runs under the launch lock: the waiting
# training holds nothing another database needs, and another database
# trains at once.  Every wait is bounded polling of pg_locks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('lock_waits');
$node->init;
$node->append_conf('postgresql.conf', "gibbs_nb.progress_interval = 0\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE other; CREATE ROLE mallory');
for my $db ('postgres', 'other')
{
	$node->safe_psql($db, q{
	  CREATE EXTENSION gibbs_nb;
	  CREATE TABLE docs (id int PRIMARY KEY, tokens text[], label text);
	  INSERT INTO docs
	  SELECT i, CASE WHEN i % 2 = 0 THEN ARRAY['cheap', 'pills'] ELSE ARRAY['meeting', 'notes'] END,
	         CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
	  FROM generate_series(1, 30) i;
	});
}

# How many lock requests on postgres's gibbs_nb.jobs wait
my $jobs_waiters = q{
  (SELECT count(*) FROM pg_locks
   WHERE database = (SELECT oid FROM pg_database WHERE datname = 'postgres')
     AND relation = 'gibbs_nb.jobs'::regclass AND NOT granted)};

# mallory, in postgres: a lock held, a rule queued behind it
my $holder = $node->background_psql('postgres');
$holder->query_safe('SET ROLE mallory; BEGIN; SELECT count(*) FROM gibbs_nb.jobs;');
my $queuer = $node->background_psql('postgres', on_error_stop => 0);
$queuer->query_until(qr/queued/,
	"\\echo queued\nSET ROLE mallory;\nCREATE RULE r AS ON INSERT TO gibbs_nb.jobs DO INSTEAD NOTHING;\n");
ok($node->poll_query_until('postgres', "SELECT $jobs_waiters >= 1"), 'the rule queues behind the open transaction');

# a training in postgres waits behind the queue (for up to two minutes here)
my $victim = $node->background_psql('postgres', on_error_stop => 0);
$victim->query_until(qr/started/,
	"\\echo started\nSET gibbs_nb.lock_timeout = '120s';\n"
	  . "SELECT status FROM gibbs_nb_train('victim', 'docs', 'tokens', 'label', sweeps => 5, seed => 1);\n");
ok($node->poll_query_until('postgres', "SELECT $jobs_waiters >= 2"), 'a training in postgres waits behind the rule');

# another database trains meanwhile (before: it waited for the launch lock
# the waiting training held, and here hit its statement timeout)
is( $node->safe_psql('other', q{
      SET statement_timeout = '60s';
      SELECT status FROM gibbs_nb_train('other', 'docs', 'tokens', 'label', sweeps => 5, seed => 1)}),
	'succeeded', 'another database trains while the training in postgres waits');
is($node->safe_psql('postgres', "SELECT $jobs_waiters"), '2', 'and that training still waits');

# the holder lets go: the rule is refused, the waiting training goes on
$holder->query_safe('ROLLBACK;');
$holder->quit;
$queuer->quit;
ok($node->poll_query_until('postgres', q{
      SELECT count(*) = 1 FROM gibbs_nb_jobs WHERE model_name = 'victim' AND status = 'succeeded'}),
	'the waiting training succeeds once the holder has gone');
$victim->quit;

done_testing();
