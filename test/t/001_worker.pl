# The training worker: runs as the calling role, shows its progress, and
# ends as cancelled, leaving nothing published, when it is cancelled,
# terminated, or the call waiting for it is cancelled.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GibbsNbTest;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

$node->safe_psql('postgres', q{
  CREATE EXTENSION gibbs_nb;
  CREATE ROLE alice LOGIN;
  CREATE SCHEMA alice AUTHORIZATION alice;
});
create_docs($node, 'alice.docs', extra_params => [ '-U', 'alice' ]);

# Start a long job as alice without waiting; returns its job id.
sub start_long_job
{
	my ($model) = @_;
	return $node->safe_psql('postgres', qq{
	  SELECT job_id FROM gibbs_nb_train('$model', 'alice.docs', 'tokens', 'label',
	                                    sweeps => 1000000, seed => 1, wait => false);
	}, extra_params => [ '-U', 'alice' ]);
}

sub worker_pid
{
	my ($job) = @_;
	return $node->safe_psql('postgres',
		"SELECT worker_pid FROM gibbs_nb.jobs WHERE job_id = $job");
}

# --- the worker runs as alice, and its progress is visible to others ---
my $job = start_long_job('long');
like($job, qr/^\d+$/, 'wait => false returns the job id at once');
is($node->safe_psql('postgres', "SELECT status FROM gibbs_nb.jobs WHERE job_id = $job"),
	'running', 'the job row is visible to another session as running');
ok( $node->poll_query_until('postgres', qq{
	  SELECT count(*) = 1 FROM pg_stat_activity
	  WHERE backend_type = 'gibbs_nb worker' AND query LIKE 'gibbs_nb job $job: chain 1/1, sweep %'}),
	'the worker shows its job and sweep in pg_stat_activity');
is( $node->safe_psql('postgres',
		"SELECT usename FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'"),
	'alice', 'the worker is connected as alice, not as a superuser');
is($node->safe_psql('postgres', "SELECT worker_user FROM gibbs_nb.jobs WHERE job_id = $job"),
	'alice', 'the worker acts as alice');
ok($node->poll_query_until('postgres', "SELECT sweep > 0 FROM gibbs_nb.jobs WHERE job_id = $job"),
	'progress reaches the job row while the job runs');
# a second training of the same model while this one runs is refused
my ($rc, $out, $err) = $node->psql('postgres', q{
  SELECT gibbs_nb_train('long', 'alice.docs', 'tokens', 'label', sweeps => 10)},
	extra_params => [ '-U', 'alice' ]);
like($err, qr/model "long" is being trained by job $job/, 'the running job is named');

# --- pg_cancel_backend on the worker: the job ends as cancelled ---
my $pid = worker_pid($job);
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok($node->poll_query_until('postgres', "SELECT status FROM gibbs_nb.jobs WHERE job_id = $job",
		'cancelled'), 'pg_cancel_backend ends the job as cancelled');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'the worker exits');
is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'long'"),
	'0', 'nothing of the cancelled job is published');
is($node->safe_psql('postgres', "SELECT to_regclass('alice.long_labels') IS NULL"),
	't', 'no labels table either');

# --- pg_terminate_backend on the worker: cancelled too ---
$job = start_long_job('long');
$node->poll_query_until('postgres', "SELECT worker_pid IS NOT NULL FROM gibbs_nb.jobs WHERE job_id = $job");
$pid = worker_pid($job);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok($node->poll_query_until('postgres', "SELECT status FROM gibbs_nb.jobs WHERE job_id = $job",
		'cancelled'), 'pg_terminate_backend ends the job as cancelled');
like(
	$node->safe_psql('postgres', "SELECT message FROM gibbs_nb.jobs WHERE job_id = $job"),
	qr/terminate/, 'the job says it was terminated');

# --- a waiting call that is cancelled takes its job down with it; while it
# waits it reports progress as NOTICEs ---
($rc, $out, $err) = $node->psql('postgres', q{
  SET gibbs_nb.progress_interval = '100ms';
  SET statement_timeout = '3s';
  SELECT * FROM gibbs_nb_train('waited', 'alice.docs', 'tokens', 'label', sweeps => 1000000);
}, extra_params => [ '-U', 'alice' ]);
like($err, qr/canceling statement due to statement timeout/, 'the waiting call is cancelled');
like($err, qr/NOTICE:  gibbs_nb job \d+: chain 1\/1, sweep \d+\/1000000, log joint -\d+/,
	'a waiting call reports progress');
ok( $node->poll_query_until('postgres',
		"SELECT status FROM gibbs_nb.jobs WHERE model_name = 'waited'", 'cancelled'),
	'its job ends as cancelled');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'"),
	'no worker is left running');
is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models"),
	'0', 'nothing was published');

# --- and a job that is left alone finishes and publishes ---
my $row = $node->safe_psql('postgres', q{
  SELECT status, version, sweeps_done FROM gibbs_nb_train('short', 'alice.docs', 'tokens',
                                                 'label', sweeps => 20, seed => 2)},
	extra_params => [ '-U', 'alice' ]);
is($row, 'succeeded|1|20', 'a short job succeeds');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM alice.short_labels"),
	'3000', 'its labels table has every document');

# --- a job stopped while it writes its documents' labels leaves version 1 as
# it was: nothing of version 2 in any table, the labels table unchanged ---
# A superuser session holds SHARE on gibbs_nb.document_labels, so the job's
# publishing transaction waits at its first write there: after the labels
# table's rows, the version's pi and its packed row (its models row comes
# after).  The worker is then cancelled, or the server shut down immediately
# (as 002 does: no process dies by a signal the logs would show).  The job
# waits that lock up to the gibbs_nb.lock_timeout of the call, here long
# enough for the test: a role's setting (the setting is a superuser's; a
# SET by alice would be refused with a warning).
$node->safe_psql('postgres', "ALTER ROLE alice SET gibbs_nb.lock_timeout = '10min'");
my $labels_digest = q{
  SELECT md5(string_agg(id || ':' || label || ':' || probabilities::text || ':' || version, ',' ORDER BY id))
  FROM alice.short_labels};
my $before = $node->safe_psql('postgres', $labels_digest);
my $v1_rows = q{
  SELECT count(*) FROM gibbs_nb.document_labels d JOIN gibbs_nb.models m USING (version_id)
  WHERE m.model_name = 'short' AND m.version = 1};
is($node->safe_psql('postgres', $v1_rows), '3000', 'version 1 has a row per document');
my $blocked_worker = q{
  SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)
  WHERE l.relation = 'gibbs_nb.document_labels'::regclass AND NOT l.granted
    AND a.backend_type = 'gibbs_nb worker' AND a.query LIKE '%: publishing'};
for my $how ('cancel', 'immediate shutdown')
{
	my $holder = $node->background_psql('postgres', on_error_stop => 0);
	$holder->query_safe('BEGIN; LOCK TABLE gibbs_nb.document_labels IN SHARE MODE;');
	my ($rc, $out, $err) = $node->psql('postgres', q{
	  SELECT job_id FROM gibbs_nb_train('short', 'alice.docs', 'tokens', 'label',
	                                    sweeps => 20, seed => 3, wait => false)},
		extra_params => [ '-U', 'alice' ]);
	is($err, '', "$how: the training starts without a warning (the role's lock_timeout taken)");
	$job = $out;
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($blocked_worker) w"),
		"$how: the job waits to write its documents' labels");
	if ($how eq 'cancel')
	{
		$pid = $node->safe_psql('postgres', $blocked_worker);
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
		ok( $node->poll_query_until('postgres',
				"SELECT status FROM gibbs_nb.jobs WHERE job_id = $job", 'cancelled'),
			'cancel: the job ends as cancelled');
		$holder->quit;
	}
	else
	{
		$node->stop('immediate');
		eval { $holder->quit };
		$node->start;
		is( $node->safe_psql('postgres',
				"SELECT status || ': ' || message FROM gibbs_nb_jobs WHERE job_id = $job"),
			"failed: the job's worker exited without finishing it (server restart or crash)",
			'immediate shutdown: after the restart the job shows as failed');
	}
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM gibbs_nb.pi WHERE model_name = 'short' AND version > 1"),
		'0', "$how: no version 2 in gibbs_nb.pi");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM gibbs_nb.packed WHERE model_name = 'short' AND version > 1"),
		'0', "$how: nor in gibbs_nb.packed");
	is($node->safe_psql('postgres', $labels_digest), $before,
		"$how: the labels table holds version 1's labels, as before");
}
is( $node->safe_psql('postgres', q{
	  SELECT version FROM gibbs_nb_train('short', 'alice.docs', 'tokens', 'label',
	                                     sweeps => 20, seed => 3)},
		extra_params => [ '-U', 'alice' ]),
	'2', 'the next training publishes version 2');
is($node->safe_psql('postgres', "SELECT DISTINCT version FROM alice.short_labels"),
	'2', 'and its labels replace version 1\'s');

$node->stop;
done_testing();
