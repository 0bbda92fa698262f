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
like(
	$node->safe_psql('postgres', q{
	  SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
	  SET min_parallel_table_scan_size = 0;
	  EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM public.docs}),
	qr/Workers Launched: [12]/, 'parallel query still gets workers');

$node->safe_psql('postgres',
	q{SELECT gibbs_nb_cancel(job_id) FROM gibbs_nb_jobs WHERE status = 'running'});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'}),
	'all stopped');
$node->stop;
done_testing();
