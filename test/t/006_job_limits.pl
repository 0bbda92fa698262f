# Job limits that hold: twenty gibbs_nb_train calls at the same instant, from
# three roles, against gibbs_nb.max_jobs = 4 and gibbs_nb.max_jobs_per_role =
# 2.  0.1.0 checked its bound before its slow checks and started 14 jobs of
# 14 calls, taking every worker slot.  Now the check and the launch are one
# step: exactly 4 jobs run, no role has more than 2, the other calls fail at
# once with 53400, and parallel query still gets its workers.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GibbsNbTest;

my $node = PostgreSQL::Test::Cluster->new('limits');
$node->init;
# max_worker_processes stays at its default, 8
$node->append_conf('postgresql.conf',
	"gibbs_nb.max_jobs = 4\ngibbs_nb.max_jobs_per_role = 2\ngibbs_nb.progress_interval = 0\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gibbs_nb');
create_docs($node, 'public.docs');
$node->safe_psql('postgres', q{
  GRANT SELECT ON public.docs TO PUBLIC;
  CREATE ROLE r1; CREATE ROLE r2; CREATE ROLE r3;
  CREATE SCHEMA s1 AUTHORIZATION r1; CREATE SCHEMA s2 AUTHORIZATION r2; CREATE SCHEMA s3 AUTHORIZATION r3;
});

# Parallel query still gets its workers while jobs run.
sub parallel_query_gets_workers
{
	like(
		$node->safe_psql('postgres', q{
		  SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
		  SET min_parallel_table_scan_size = 0;
		  EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM public.docs}),
		qr/Workers Launched: [12]/, 'parallel query still gets workers');
}

# Cancel every running job and wait until no worker of ours is left.
sub stop_all_jobs
{
	my ($what) = @_;
	$node->safe_psql('postgres',
		q{SELECT gibbs_nb_cancel(job_id) FROM gibbs_nb_jobs WHERE status = 'running'});
	ok( $node->poll_query_until('postgres',
			q{SELECT count(*) = 0 FROM pg_stat_activity
			  WHERE backend_type IN ('gibbs_nb worker', 'gibbs_nb chain worker')}),
		$what);
}

my @calls;
for my $i (1 .. 20)
{
	my $r = 1 + $i % 3;
	my ($out, $err) = ('', '');
	my $sql = "SET ROLE r$r; SELECT job_id FROM gibbs_nb_train('m$i', 'public.docs', 'tokens', 'label', "
	  . "sweeps => 10000000, seed => $i, labels_table => 's$r.m${i}_labels', wait => false)";
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	push @calls, [ $h, \$out, \$err ];
}
my ($started, $refused, $other) = (0, 0, '');
for my $c (@calls)
{
	$c->[0]->finish;
	if (${ $c->[1] } =~ /^\d+$/m) { $started++ }
	elsif (${ $c->[2] } =~ /gibbs_nb.max_jobs(_per_role)? allows/) { $refused++ }
	else { $other .= ${ $c->[2] } }
}
is($started, 4, '4 of 20 concurrent calls started a job');
is($refused, 16, 'the 16 others were refused at once by a job limit');
is($other, '', 'no other error');
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM gibbs_nb_jobs WHERE status = 'running'}),
	'4', 'exactly 4 jobs run');
is( $node->safe_psql('postgres', q{
      SELECT max(n) FROM (SELECT count(*) n FROM gibbs_nb_jobs WHERE status = 'running'
                          GROUP BY owner) x}),
	'2', 'no role runs more than 2');
parallel_query_gets_workers();

stop_all_jobs('all stopped');
# Chain workers take job slots that are free.  One role's two jobs of five
# chains took every background worker slot (2 jobs and 6 chain workers of
# max_worker_processes = 8), and another role's training then failed.  Now a
# role's workers, its jobs' and their chains', stay within
# gibbs_nb.max_jobs_per_role (2): its first job gets one chain worker, its
# second none (it runs its chains itself), and another role still trains.
my $chain_job = sub {
	my ($role, $name, $chains) = @_;
	my $schema = 's' . substr($role, 1);
	return $node->safe_psql('postgres',
		"SET ROLE $role; SELECT job_id FROM gibbs_nb_train('$name', 'public.docs', 'tokens', 'label', "
		  . "sweeps => 10000000, chains => $chains, seed => 1, labels_table => '$schema.${name}_labels', "
		  . "wait => false)");
};
my $chain_workers = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gibbs_nb chain worker'};
my $log_at = -s $node->logfile;
my $c1 = $chain_job->('r1', 'c1', 5);
$node->wait_for_log(qr/gibbs_nb job $c1: 1 of 4 chain workers granted/, $log_at);
ok($node->poll_query_until('postgres', "SELECT ($chain_workers) = 1"),
	'a role\'s first job of five chains gets one chain worker');
my $c2 = $chain_job->('r1', 'c2', 5);
$node->wait_for_log(qr/gibbs_nb job $c2: 0 of 4 chain workers granted/, $log_at);
is($node->safe_psql('postgres', $chain_workers), '1', 'its second job gets none');
like($chain_job->('r2', 'c3', 1), qr/^\d+$/, 'another role\'s training starts');
parallel_query_gets_workers();
stop_all_jobs('all stopped again');

# A memory cap: 1,000 classes over a 300,000-word vocabulary asks for about
# 24 GB (0.1.0 allocated 10-14 GB and the OOM killer ended the worker, and
# with it every session).  The worker estimates it from the corpus it read
# and fails at once with 53200; no process dies.
$node->safe_psql('postgres', q{
  CREATE TABLE wide AS
  SELECT i AS id, array(SELECT 'w' || (i * 100 + k) FROM generate_series(1, 100) k) AS tokens
  FROM generate_series(1, 3000) i;
  ALTER TABLE wide ADD PRIMARY KEY (id);
});
my $postmaster_started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my ($rc, $out, $err) = $node->psql('postgres',
	q{SELECT gibbs_nb_train('wide', 'wide', 'tokens', n_classes => 1000, sweeps => 10)});
like($err, qr/ERROR:  gibbs_nb job \d+ would need (\d+) MB, more than gibbs_nb.max_job_memory \(1024 MB\)/,
	'a job that needs more than gibbs_nb.max_job_memory fails with the reason');
note("asked for: $1 MB, cap 1024 MB") if $err =~ /would need (\d+) MB/;
like($err, qr/HINT:  .*gibbs_nb.max_job_memory/, 'the hint names the setting');
is($node->safe_psql('postgres', q{SELECT sqlstate FROM gibbs_nb_jobs WHERE model_name = 'wide'}),
	'53200', 'the job is recorded as failed with 53200');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $postmaster_started,
	'no process was killed: the server did not restart');
unlike(slurp_file($node->logfile), qr/terminated by signal|out of memory/i, 'nothing crashed');

$node->stop;
done_testing();
