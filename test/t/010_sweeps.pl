# Sweep workers (issue 27 item 2): one chain of the blocked sampler shared
# by the job's worker and its sweep workers.  They take part (the log says
# how many processes share the sweeps, pg_stat_activity shows them under the
# caller's name); they stop with the job however it is stopped
# (gibbs_nb_cancel, the waiting caller's statement_timeout); a sweep worker
# that is terminated fails the job with its own error, whole, and nothing is
# published; and with fewer free slots than asked for the others share the
# sweeps, to the same model, as they do when gibbs_nb.max_job_memory leaves
# no room for sweep workers.  Polls are bounded (poll_query_until,
# wait_for_log); no fixed sleeps.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GibbsNbTest;

my $node = PostgreSQL::Test::Cluster->new('sweeps');
$node->init;
$node->append_conf('postgresql.conf',
	"max_worker_processes = 8\ngibbs_nb.progress_interval = 0\n"
	  # one role runs every job here: its bound would leave one sweep worker
	  . "gibbs_nb.max_jobs_per_role = 0\ngibbs_nb.max_jobs_per_login = 0\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gibbs_nb');
create_doc_labels($node);
create_docs($node, 'public.docs');

my $no_workers = q{SELECT count(*) = 0 FROM pg_stat_activity
                   WHERE backend_type IN ('gibbs_nb worker', 'gibbs_nb sweep worker')};

# A blocked job of many sweeps shared by $n processes, not waited for;
# returns its id once its n - 1 sweep workers show in pg_stat_activity and
# the log says the sweeps are shared by n.
sub start_sweeps_job
{
	my ($model, $n) = @_;
	my $offset = -s $node->logfile;
	my $job = $node->safe_psql('postgres', qq{
	  SELECT job_id FROM gibbs_nb_train('$model', 'docs', 'tokens', 'label', sampler => 'blocked',
	                                    sweeps => 10000000, seed => 3, sweep_workers => $n,
	                                    wait => false)});
	$node->wait_for_log(qr/gibbs_nb job $job: its sweeps are shared by $n processes/, $offset);
	ok( $node->poll_query_until('postgres', qq{
	      SELECT count(*) = $n - 1 FROM pg_stat_activity
	      WHERE backend_type = 'gibbs_nb sweep worker' AND usename = current_user
	        AND query ~ '^gibbs_nb job $job: sweep worker [1-9]\$'}),
		"$model: $n - 1 sweep workers run as the caller, pg_stat_activity shows them");
	ok( $node->poll_query_until('postgres', qq{
	      SELECT sweep > 0 FROM gibbs_nb_jobs WHERE job_id = $job}),
		"$model: the job sweeps");
	return $job;
}

# Whether two models' packed rows are the same, bit for bit
sub same_model
{
	my ($first, $second) = @_;
	return $node->safe_psql('postgres', qq{
	  SELECT p.log_theta = s.log_theta AND p.log_pi = s.log_pi
	         AND public.doc_labels(p.version_id) = public.doc_labels(s.version_id)
	  FROM gibbs_nb.packed p, gibbs_nb.packed s
	  WHERE p.model_name = '$first' AND s.model_name = '$second'});
}

# --- gibbs_nb_cancel stops the sweep workers ---
my $job = start_sweeps_job('cancel', 3);
is($node->safe_psql('postgres', "SELECT gibbs_nb_cancel($job)"), 't', 'gibbs_nb_cancel');
ok( $node->poll_query_until('postgres',
		"SELECT status FROM gibbs_nb_jobs WHERE job_id = $job", 'cancelled'),
	'cancel: the job is cancelled');
ok($node->poll_query_until('postgres', $no_workers), 'cancel: no worker outlives the job');

# --- a sweep worker terminated: the job fails with its error, nothing hangs ---
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $node->connstr('postgres'), '-c',
		  "SELECT gibbs_nb_train('killsweep', 'docs', 'tokens', 'label', sampler => 'blocked', sweeps => 10000000, seed => 3, sweep_workers => 3)" ],
		'>', \$out, '2>', \$err);
	ok( $node->poll_query_until('postgres', q{
	      SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb sweep worker'}),
		'killsweep: 2 sweep workers run');
	$job = $node->safe_psql('postgres',
		"SELECT job_id FROM gibbs_nb_jobs WHERE model_name = 'killsweep' AND status = 'running'");
	my $w = $node->safe_psql('postgres', q{
	  SELECT substring(query from 'sweep worker ([0-9]+)') FROM pg_stat_activity
	  WHERE backend_type = 'gibbs_nb sweep worker' ORDER BY pid LIMIT 1});
	$node->safe_psql('postgres', qq{
	  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	  WHERE backend_type = 'gibbs_nb sweep worker' AND query ~ 'sweep worker $w\$'});
	eval { $h->finish };
	like($err,
		qr/ERROR:  57P01: terminating background worker "gibbs_nb sweep worker" due to administrator command\n/,
		'the caller gets the sweep worker\'s own error and SQLSTATE');
	like($err, qr/CONTEXT:  sweep worker $w of gibbs_nb job $job\n/,
		'with a context line that names the sweep worker');
	is($node->safe_psql('postgres', "SELECT status, message FROM gibbs_nb_jobs WHERE job_id = $job"),
		qq{failed|terminating background worker "gibbs_nb sweep worker" due to administrator command},
		'the job failed with that message');
}
ok($node->poll_query_until('postgres', $no_workers), 'the other sweep worker is gone too');
is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'killsweep'"),
	'0', 'nothing was published');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname = 'killsweep_labels'}),
	'0', 'no labels table is left');

# --- the waiting caller's statement_timeout ---
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', 'SET statement_timeout = 3000',
		  '-c', "SELECT gibbs_nb_train('timeout', 'docs', 'tokens', 'label', sampler => 'blocked', sweeps => 10000000, seed => 1, sweep_workers => 2)" ],
		'>', \$out, '2>', \$err);
	eval { $h->finish };
	like($err, qr/canceling statement due to statement timeout/, 'statement_timeout ends the call');
	ok($node->poll_query_until('postgres', $no_workers), 'statement_timeout: all workers are gone');
	is($node->safe_psql('postgres', "SELECT status FROM gibbs_nb_jobs WHERE model_name = 'timeout'"),
		'cancelled', 'statement_timeout: the job is cancelled');
}

# --- fewer slots than asked for: the others share the sweeps, to the same model ---
# Under gibbs_nb.max_jobs = 2 a job asking for 3 processes gets one sweep
# worker (the other slot is its own).
$node->append_conf('postgresql.conf', "gibbs_nb.max_jobs = 2\n");
$node->reload;
my $offset = -s $node->logfile;
my $status = $node->safe_psql('postgres', q{
  SELECT status FROM gibbs_nb_train('limited', 'docs', 'tokens', 'label', sampler => 'blocked',
                                    sweeps => 30, seed => 5, sweep_workers => 3)});
is($status, 'succeeded', 'a job granted 1 of 2 sweep workers succeeds');
ok($node->log_contains(qr/1 of 2 sweep workers started/, $offset), 'the log says how many started');
ok($node->log_contains(qr/its sweeps are shared by 2 processes/, $offset), 'and that 2 processes shared them');
$node->safe_psql('postgres', q{
  SELECT status FROM gibbs_nb_train('alone', 'docs', 'tokens', 'label', sampler => 'blocked',
                                    sweeps => 30, seed => 5, sweep_workers => 1)});
is(same_model('limited', 'alone'), 't', 'the same model as one process alone');

# --- no room for sweep workers within gibbs_nb.max_job_memory: one process sweeps ---
# The smallest cap, in 100 kB steps, under which the job runs at all leaves
# no room for the segment and the sweep worker's memory (more than 100 kB
# here): the job's worker sweeps alone, says so, and makes the same model.
my ($cap, $cap_offset);
for (my $kb = 1024; $kb <= 32768 && !defined $cap; $kb += 100)
{
	$cap_offset = -s $node->logfile;
	my ($ret, $out) = $node->psql('postgres', qq{
	  SET gibbs_nb.max_job_memory = '${kb}kB';
	  SELECT status FROM gibbs_nb_train('capped', 'docs', 'tokens', 'label', sampler => 'blocked',
	                                    sweeps => 30, seed => 5, sweep_workers => 2)});
	$cap = $kb if $out eq 'succeeded';
}
ok(defined $cap, 'a cap under which the job runs');
ok($node->log_contains(qr/no sweep workers: they would need \d+ kB more than gibbs_nb.max_job_memory allows/,
		$cap_offset),
	'under the smallest cap the log says there is no room for sweep workers');
ok(!$node->log_contains(qr/its sweeps are shared by/, $cap_offset), 'and no process shares the sweeps');
is(same_model('capped', 'alone'), 't', 'the same model as one process alone');

$node->stop;
done_testing();
