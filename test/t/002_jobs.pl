# Jobs a DBA can trust: gibbs_nb_cancel, an immediate shutdown in the middle
# of a job, different models at once, the bound on concurrent jobs.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GibbsNbTest;

my $node = PostgreSQL::Test::Cluster->new('jobs');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gibbs_nb');
create_docs($node, 'docs');
$node->safe_psql('postgres', q{
  SET gibbs_nb.progress_interval = 0;
  SELECT status FROM gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 10, seed => 1);
});

sub start_long_job
{
	my ($model) = @_;
	return $node->safe_psql('postgres', qq{
	  SELECT job_id FROM gibbs_nb_train('$model', 'docs', 'tokens', 'label',
	                                    sweeps => 1000000, seed => 1, wait => false)});
}

sub wait_for_sweeps
{
	my ($job) = @_;
	return $node->poll_query_until('postgres',
		"SELECT sweep > 0 FROM gibbs_nb_jobs WHERE job_id = $job");
}

# --- gibbs_nb_cancel ---
my $job = start_long_job('m');
ok(wait_for_sweeps($job), 'the long job runs');
is($node->safe_psql('postgres', "SELECT gibbs_nb_cancel($job)"), 't', 'gibbs_nb_cancel says it stopped the job');
ok($node->poll_query_until('postgres', "SELECT status FROM gibbs_nb_jobs WHERE job_id = $job", 'cancelled'),
	'the job ends as cancelled');
is($node->safe_psql('postgres', "SELECT max(version) FROM gibbs_nb.models WHERE model_name = 'm'"),
	'1', 'nothing of it was published');
is($node->safe_psql('postgres', "SELECT gibbs_nb_cancel($job)"), 'f', 'cancelling it again does nothing');
is($node->safe_psql('postgres', "SELECT gibbs_nb_predict('m', '{w1}'::text[]) IS NOT NULL"),
	't', 'the previous version keeps serving predictions');

# --- an immediate shutdown in the middle of a job ---
$job = start_long_job('m');
ok(wait_for_sweeps($job), 'another long job runs');
$node->stop('immediate');
$node->start;
is( $node->safe_psql('postgres', "SELECT status || ': ' || message FROM gibbs_nb_jobs WHERE job_id = $job"),
	"failed: the job's worker exited without finishing it (server restart or crash)",
	'after the restart the job shows as failed, not running');
is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'm'"),
	'1', 'the previous version is intact');
is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.theta WHERE model_name = 'm' AND version > 1"),
	'0', 'no leftover theta rows');
is($node->safe_psql('postgres', "SELECT DISTINCT version FROM m_labels"),
	'1', 'the labels table still holds version 1');
my $row = $node->safe_psql('postgres', q{
  SET gibbs_nb.progress_interval = 0;
  SELECT version FROM gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 10, seed => 2)});
is($row, '2', 'the model can be trained again (the stale job does not block it)');
is($node->safe_psql('postgres', "SELECT status, sqlstate FROM gibbs_nb.jobs WHERE job_id = $job"),
	'failed|57P01', 'and the stale job row has been put right');

# --- an immediate shutdown in a model's first training (issue 29 item 5) ---
# The job created its labels table before it read; lost, it leaves it empty
# and reserved in its row.  The model's next training is not refused for it
# and its worker drops it first (before, that training failed: 42P07, the
# table "was not created for model"); another model's job drops one too.
$job = start_long_job('first');
ok(wait_for_sweeps($job), 'a first training runs');
is($node->safe_psql('postgres', qq{
     SELECT labels_reserved = 'public.first_labels'::regclass FROM gibbs_nb.jobs WHERE job_id = $job}),
	't', 'its row holds the labels table it reserved');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', q{SELECT count(*) FROM first_labels}), '0',
	'the lost job left its labels table, empty');
my $old_relid = $node->safe_psql('postgres', q{SELECT 'public.first_labels'::regclass::oid});
$row = $node->safe_psql('postgres', q{
  SET gibbs_nb.progress_interval = 0;
  SELECT status FROM gibbs_nb_train('first', 'docs', 'tokens', 'label', sweeps => 5, seed => 2)});
is($row, 'succeeded', 'the model whose first training was lost trains');
is($node->safe_psql('postgres', q{
     SELECT count(*) > 0 AND bool_and(version = 1) FROM first_labels}), 't',
	'into a labels table of its own');
isnt($node->safe_psql('postgres', q{SELECT 'public.first_labels'::regclass::oid}), $old_relid,
	'made again: its worker dropped the one the lost job left');
my $first_job = $job;
# another model's job drops a lost job's table too
$job = start_long_job('second');
ok(wait_for_sweeps($job), 'another first training runs');
$node->stop('immediate');
$node->start;
$row = $node->safe_psql('postgres', q{
  SET gibbs_nb.progress_interval = 0;
  SELECT status FROM gibbs_nb_train('other', 'docs', 'tokens', 'label', sweeps => 5, seed => 2)});
is($row, 'succeeded', 'another model trains');
is($node->safe_psql('postgres', q{SELECT to_regclass('public.second_labels') IS NULL}), 't',
	'its worker dropped the table the lost job left');
# a lost job's row is cleared by a later job than the one its caller waited
# for (that caller's launch locked the row when it marked the job failed)
is($node->safe_psql('postgres',
		"SELECT labels_reserved IS NULL FROM gibbs_nb.jobs WHERE job_id = $first_job"),
	't', 'the first lost job\'s row is cleared');
is($node->safe_psql('postgres', q{
     SELECT count(*) FROM gibbs_nb.jobs WHERE labels_reserved IS NOT NULL AND status = 'succeeded'}),
	'0', 'no job holds a reservation once its version is published');
# a lost job's table that someone wrote into is not dropped
$job = start_long_job('kept');
ok(wait_for_sweeps($job), 'a first training runs');
$node->stop('immediate');
$node->start;
$node->safe_psql('postgres', q{INSERT INTO kept_labels (id, version) VALUES (1, 0)});
$node->safe_psql('postgres', q{
  SET gibbs_nb.progress_interval = 0;
  SELECT status FROM gibbs_nb_train('other', 'docs', 'tokens', 'label', sweeps => 5, seed => 3)});
is($node->safe_psql('postgres', q{SELECT count(*) FROM kept_labels}), '1',
	'a lost job\'s table with a row in it is left');
$node->safe_psql('postgres', q{DROP TABLE kept_labels, other_labels, first_labels});

# --- different models at once; the bound on concurrent jobs ---
my $a = start_long_job('a');
my $b = start_long_job('b');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'"),
	'two models train at the same time');
my ($rc, $out, $err) = $node->psql('postgres', q{
  SET gibbs_nb.max_jobs = 2;
  SELECT gibbs_nb_train('c', 'docs', 'tokens', 'label', sweeps => 10)});
like($err, qr/2 gibbs_nb jobs are running, the most gibbs_nb.max_jobs allows/,
	'a job over gibbs_nb.max_jobs fails at once, with the reason');
($rc, $out, $err) = $node->psql('postgres', q{
  SELECT gibbs_nb_train('a', 'docs', 'tokens', 'label', sweeps => 10)});
like($err, qr/model "a" is being trained by job $a/, 'a second training of a running model names the job');
# chains count from 1 in gibbs_nb_jobs, as in pg_stat_activity and the trace
ok( $node->poll_query_until('postgres', "SELECT sweep > 0 FROM gibbs_nb_jobs WHERE job_id = $a"),
	'the job reports its progress');
# the worker's activity is set a moment after its sweep is shared (at most
# every PROGRESS_ROW_MS): waited for, not raced
$node->poll_query_until('postgres', qq{
  SELECT a.query ~ '^gibbs_nb job $a: chain '
  FROM gibbs_nb_jobs j, pg_stat_activity a WHERE j.job_id = $a AND a.pid = j.worker_pid});
is($node->safe_psql('postgres', qq{
  SELECT j.chain || '|' || (a.query ~ '^gibbs_nb job $a: chain 1/1, ')::text
  FROM gibbs_nb_jobs j, pg_stat_activity a WHERE j.job_id = $a AND a.pid = j.worker_pid}),
	'1|true', 'gibbs_nb_jobs.chain is the chain pg_stat_activity shows, counted from 1');
$node->safe_psql('postgres', "SELECT gibbs_nb_cancel($b)");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'"),
	'one job is left');
($rc, $out, $err) = $node->psql('postgres', q{
  SET gibbs_nb.max_jobs = 1;
  SELECT gibbs_nb_train('c', 'docs', 'tokens', 'label', sweeps => 10)});
like($err, qr/1 gibbs_nb job is running, the most gibbs_nb.max_jobs allows/,
	'one running job is "1 gibbs_nb job is running"');
$node->safe_psql('postgres', "SELECT gibbs_nb_cancel($a)");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'"),
	'both are stopped');

# --- a waiting caller that goes away stops its job ---
# A client killed outright (no cancel request) while its wait => true call
# runs, and a waiting session terminated with pg_terminate_backend (a FATAL,
# which no PG_CATCH sees): in 0.1.0 both left the job running, to publish.
for my $how ('client killed', 'session terminated')
{
	my $model = $how eq 'client killed' ? 'gone' : 'term';
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
		  "SELECT gibbs_nb_train('$model', 'docs', 'tokens', 'label', sweeps => 10000000, seed => 1)" ],
		'>', \$out, '2>', \$err);
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM gibbs_nb_jobs WHERE model_name = '$model' AND status = 'running' AND sweep > 0"),
		"$how: the job runs");
	if ($how eq 'client killed')
	{
		$h->signal('KILL');
	}
	else
	{
		$node->safe_psql('postgres', qq{
		  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		  WHERE query LIKE '%gibbs_nb_train(''$model''%' AND backend_type = 'client backend'});
	}
	eval { $h->finish };
	ok( $node->poll_query_until('postgres',
			"SELECT status FROM gibbs_nb_jobs WHERE model_name = '$model'", 'cancelled'),
		"$how: the job is cancelled");
	is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models WHERE model_name = '$model'"),
		'0', "$how: nothing was published");
}

# --- gibbs_nb_wait with a timeout returns the job as it is ---
$job = start_long_job('a');
is($node->safe_psql('postgres', "SELECT status FROM gibbs_nb_wait($job, '200 milliseconds')"),
	'running', 'gibbs_nb_wait with a timeout returns a running job as running');
$node->safe_psql('postgres', "SELECT gibbs_nb_cancel($job)");
is($node->safe_psql('postgres', "SELECT status FROM gibbs_nb_wait($job)"),
	'cancelled', 'gibbs_nb_wait returns once the job has ended');

$node->stop;

# --- no background worker slot free: an error with a hint, never a hang ---
# max_worker_processes = 2: the logical replication launcher takes one, the
# first job the other.
my $small = PostgreSQL::Test::Cluster->new('small');
$small->init;
$small->append_conf('postgresql.conf', "max_worker_processes = 2\ngibbs_nb.max_jobs = 0\n");
$small->start;
$small->safe_psql('postgres', 'CREATE EXTENSION gibbs_nb');
create_docs($small, 'docs');
my $first = $small->safe_psql('postgres', q{
  SELECT job_id FROM gibbs_nb_train('one', 'docs', 'tokens', 'label', sweeps => 1000000, wait => false)});
($rc, $out, $err) = $small->psql('postgres', q{
  SELECT gibbs_nb_train('two', 'docs', 'tokens', 'label', sweeps => 10)},
	timeout => $PostgreSQL::Test::Utils::timeout_default);
like($err, qr/could not start a gibbs_nb worker: no background worker slot is free/,
	'with no worker slot free, training fails at once');
like($err, qr/HINT:  .*raise max_worker_processes \(currently 2\)/, 'with a hint');
is($small->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.jobs WHERE model_name = 'two'"),
	'0', 'and leaves no job behind');
$small->safe_psql('postgres', "SELECT gibbs_nb_cancel($first)");
$small->stop;

done_testing();
