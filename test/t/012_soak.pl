# A soak: prediction load while three roles train, retrain, cancel, deploy,
# drop, export and import, and a fault injector terminates job, chain and
# sweep workers and restarts the server while a version publishes; then
# nothing may be lost or left behind.
#
# GIBBS_NB_SOAK_SECONDS (default 20; `make soak` runs 300) is the length of
# the busy phase; the quiet phase before it is a quarter of that (at least
# 5 s), and the server is restarted mid-publish max(1, seconds / 60) times.
# Prediction runs in pgbench (custom script, two clients, each transaction's
# latency logged) in the quiet and in the busy phase.  Afterwards:
#   - every job has ended, with a status, and a failed or cancelled one
#     with its SQLSTATE and message;
#   - every published version is whole: its packed row has K log pi-hat and
#     V x K log theta-hat, and the labels table of a model holds rows of
#     the version it serves only;
#   - no labels table made by training is left unregistered;
#   - no gibbs_nb worker runs and no lock of gibbs_nb's is held;
#   - no assertion failure, PANIC or crash in the server's log.
# The figures (predictions per second and p99 latency quiet and busy, jobs
# and their outcomes, faults injected) are printed as diagnostics.
use strict;
use warnings;
use IPC::Run;
use List::Util qw(shuffle);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use GibbsNbTest;

my $seconds = $ENV{GIBBS_NB_SOAK_SECONDS} || 20;
my $quiet_seconds = $seconds / 4 < 5 ? 5 : int($seconds / 4);
my $restarts = $seconds / 60 < 1 ? 1 : int($seconds / 60);
srand(20261129);

my $node = PostgreSQL::Test::Cluster->new('soak');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 24
max_connections = 40
gibbs_nb.max_jobs = 6
gibbs_nb.max_jobs_per_role = 3
gibbs_nb.max_chain_workers = 2
gibbs_nb.progress_interval = 0
gibbs_nb.lock_timeout = '5s'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gibbs_nb');
create_docs($node, 'public.docs');
# a larger corpus of short documents: its publish (labels rows) takes long
# enough to be caught by the restart
$node->safe_psql('postgres', q{
  CREATE TABLE public.big_docs (id int PRIMARY KEY, tokens text[], label text);
  INSERT INTO public.big_docs
  SELECT i, ARRAY['w' || i % 97, 'w' || i % 89, 'w' || i % 83],
         CASE WHEN i % 10 = 0 THEN (ARRAY['a', 'b'])[1 + (i / 10) % 2] END
  FROM generate_series(1, 60000) i;
  GRANT SELECT ON public.docs, public.big_docs TO PUBLIC;
});
my @roles = ('soak1', 'soak2', 'soak3');
for my $r (@roles)
{
	$node->safe_psql('postgres', "CREATE ROLE $r LOGIN; CREATE SCHEMA $r AUTHORIZATION $r");
}
my @models = ('a', 'b', 'c');

# psql as a role; returns (exit code, stdout, stderr)
sub as_role
{
	my ($role, $sql) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') . " user=$role",
			'-c', "SET gibbs_nb.progress_interval = 0; $sql" ],
		'>', \$out, '2>', \$err);
	chomp $out;
	return ($ok ? 0 : 1, $out, $err);
}

sub train_sql
{
	my ($r, $m, $wait) = @_;
	my $sampler = (qw(paper collapsed blocked))[ int(rand(3)) ];
	my $chains = 1 + int(rand(2));
	my $workers = $sampler eq 'blocked' ? 1 + int(rand(2)) : 1;
	my $sweeps = 100 + int(rand(400));
	my $seed = int(rand(1000000));
	return "SELECT job_id FROM gibbs_nb_train('$m', 'public.docs', 'tokens', 'label', "
	  . "sweeps => $sweeps, chains => $chains, sampler => '$sampler', sweep_workers => $workers, "
	  . "seed => $seed, labels_table => '$r.${m}_labels', wait => $wait)";
}

# every role's models, and the one prediction reads, trained once
for my $r (@roles)
{
	for my $m (@models)
	{
		my ($rc, $out, $err) = as_role($r, train_sql($r, $m, 'true'));
		is($rc, 0, "$r trains $m") or diag($err);
	}
}
my ($rc0, $out0, $err0) = as_role('soak3', q{
  SELECT status FROM gibbs_nb_train('served', 'public.docs', 'tokens', 'label', sweeps => 100,
    seed => 1, labels_table => 'soak3.served_labels')});
is($out0, 'succeeded', 'the model prediction reads is trained') or diag($err0);

# Prediction load: pgbench, two clients, for $secs; returns (tps, p99 ms, failed)
my $bench_dir = PostgreSQL::Test::Utils::tempdir;
my $script = "$bench_dir/predict.sql";
PostgreSQL::Test::Utils::append_to_file($script, q{
\set k random(1, 3000)
SELECT gibbs_nb_predict('served', tokens) FROM public.docs WHERE id = :k;
});
my $bench_runs = 0;

sub start_bench
{
	my ($secs) = @_;
	$bench_runs++;
	my $prefix = "$bench_dir/run$bench_runs";
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '2', '-j', '2', '-T', $secs, '-P', '2', '-f', $script, '-l',
			"--log-prefix=$prefix", $node->connstr('postgres') . ' user=soak3' ],
		'>', \$out, '2>', \$err);
	return [ $h, \$out, \$err, $prefix ];
}

sub finish_bench
{
	my ($bench) = @_;
	$bench->[0]->finish;
	my ($out, $err, $prefix) = (${ $bench->[1] }, ${ $bench->[2] }, $bench->[3]);
	my @latencies;
	for my $f (glob("$prefix.*"))
	{
		open my $fh, '<', $f or die "$f: $!";
		while (<$fh>)
		{
			my @field = split ' ';
			push @latencies, $field[2] / 1000.0;
		}
		close $fh;
	}
	@latencies = sort { $a <=> $b } @latencies;
	my $p99 = @latencies ? $latencies[ int(0.99 * $#latencies) ] : -1;
	my ($tps) = $out =~ /tps = ([\d.]+)/;
	my ($failed) = $out =~ /number of failed transactions: (\d+)/;
	note($out);
	return ($tps // -1, $p99, $failed // 0, scalar(@latencies), $err);
}

# --- the quiet phase: prediction alone ---
my $quiet = start_bench($quiet_seconds);
my ($quiet_tps, $quiet_p99, $quiet_failed, $quiet_n, $quiet_err) = finish_bench($quiet);
ok($quiet_n > 0, 'prediction runs in the quiet phase') or diag($quiet_err);

# --- the busy phase: prediction while the roles work and workers are killed ---
my %did;
my $busy = start_bench($seconds);
my $end = time() + $seconds;
while (time() < $end)
{
	my $r = $roles[ int(rand(@roles)) ];
	my $m = $models[ int(rand(@models)) ];
	my $what = (qw(train train train retrain cancel deploy drop_version drop export_import kill kill
		  retrain_served))[ int(rand(12)) ];
	my ($rc, $out, $err);
	if ($what eq 'train')
	{
		($rc, $out, $err) = as_role($r, train_sql($r, $m, 'false'));
	}
	elsif ($what eq 'retrain')
	{
		($rc, $out, $err) = as_role($r, "SELECT job_id FROM gibbs_nb_retrain('$m', wait => false)");
	}
	elsif ($what eq 'retrain_served')
	{
		($rc, $out, $err) = as_role('soak3', "SELECT job_id FROM gibbs_nb_retrain('served', wait => false)");
	}
	elsif ($what eq 'cancel')
	{
		($rc, $out, $err) = as_role($r, q{
		  SELECT gibbs_nb_cancel(job_id) FROM gibbs_nb_jobs WHERE status = 'running'
		  ORDER BY random() LIMIT 1});
	}
	elsif ($what eq 'deploy')
	{
		($rc, $out, $err) = as_role($r, qq{
		  SELECT gibbs_nb_deploy('$m', (SELECT CASE WHEN random() < 0.3 THEN NULL ELSE version END
		    FROM gibbs_nb.models WHERE model_name = '$m' ORDER BY random() LIMIT 1))});
	}
	elsif ($what eq 'drop_version')
	{
		($rc, $out, $err) = as_role($r, qq{
		  SELECT gibbs_nb_drop('$m', (SELECT min(version) FROM gibbs_nb.models WHERE model_name = '$m'))});
	}
	elsif ($what eq 'drop')
	{
		# whole models go rarely: most actions need one
		next if rand() > 0.3;
		($rc, $out, $err) = as_role($r, "SELECT gibbs_nb_drop('$m')");
	}
	elsif ($what eq 'export_import')
	{
		($rc, $out, $err) = as_role($r, "SELECT gibbs_nb_import('${m}_copy', gibbs_nb_export('$m'))");
	}
	elsif ($what eq 'kill')
	{
		($rc, $out, $err) = (0, $node->safe_psql('postgres', q{
		  SELECT count(pg_terminate_backend(pid)) FROM (
		    SELECT pid FROM pg_stat_activity
		    WHERE backend_type IN ('gibbs_nb worker', 'gibbs_nb chain worker', 'gibbs_nb sweep worker')
		    ORDER BY random() LIMIT 1) w}), '');
		$what .= $out eq '1' ? ' (a worker)' : ' (none running)';
	}
	my $outcome = $rc == 0 ? 'ok' : ($err =~ /ERROR:  ([^\n]{0,60})/ ? $1 : 'error');
	$outcome =~ s/\d+/N/g;
	$did{"$what: $outcome"}++;
}
my ($busy_tps, $busy_p99, $busy_failed, $busy_n, $busy_err) = finish_bench($busy);
ok($busy_n > 0, 'prediction runs in the busy phase') or diag($busy_err);
is($busy_failed, 0, 'no prediction failed while the roles worked') or diag($busy_err);
unlike($busy_err, qr/aborted|error/i, 'no prediction client aborted') or diag($busy_err);

# --- restarts while a version publishes ---
# the busy phase's jobs still running hold the roles' job slots
# (gibbs_nb.max_jobs_per_login): cancelled and waited for, so that each
# restart's training starts whatever the busy phase left
$node->safe_psql('postgres',
	q{SELECT count(gibbs_nb_cancel(job_id)) FROM gibbs_nb_jobs WHERE status = 'running'});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM gibbs_nb_jobs WHERE status = 'running'}),
	'the busy phase\'s jobs have ended');
my ($restarted, $mid_publish) = (0, 0);
for my $i (1 .. $restarts)
{
	my ($rc, $job, $err) = as_role('soak1', q{
	  SELECT job_id FROM gibbs_nb_train('big', 'public.big_docs', 'tokens', 'label', sweeps => 20,
	    seed => 7, labels_table => 'soak1.big_labels', wait => false)});
	if ($rc != 0)
	{
		diag("the restart's training did not start: $err");
		next;
	}
	# the job's worker says it publishes: restart at once
	my $seen = $node->safe_psql('postgres', qq{
	  DO \$\$
	  BEGIN
	    FOR i IN 1 .. 6000 LOOP
	      -- pg_stat_activity is read once per transaction unless cleared
	      PERFORM pg_stat_clear_snapshot();
	      EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
	                        WHERE query = 'gibbs_nb job $job: publishing')
	             OR (SELECT status FROM gibbs_nb.jobs WHERE job_id = $job) <> 'running';
	      PERFORM pg_sleep(0.005);
	    END LOOP;
	  END \$\$;
	  SELECT count(*) FROM pg_stat_activity WHERE query = 'gibbs_nb job $job: publishing'});
	$node->stop('immediate');
	$node->start;
	$restarted++;
	my $status = $node->safe_psql('postgres', qq{SELECT status FROM gibbs_nb_jobs WHERE job_id = $job});
	$mid_publish++ if $seen eq '1' && $status eq 'failed';
}
ok($restarted == $restarts, "the server restarted $restarts time(s)");

# --- afterwards ---
# every job ends: the running ones are waited for (or were lost in a restart)
ok( $node->poll_query_until('postgres', q{
      SELECT count(*) = 0 FROM gibbs_nb_jobs WHERE status = 'running'}),
	'every job has ended');
# one more training per role: each job's worker drops what lost jobs left
for my $r (@roles)
{
	my ($rc, $out, $err) = as_role($r, train_sql($r, 'final', 'true'));
	is($rc, 0, "$r trains once more after the soak") or diag($err);
}
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM gibbs_nb.jobs
      WHERE status NOT IN ('succeeded', 'failed', 'cancelled')
         OR (status <> 'succeeded' AND (sqlstate IS NULL OR message IS NULL OR finished_at IS NULL))}),
	'0', 'every job ended with a status, and a failed or cancelled one with its SQLSTATE and message');
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM gibbs_nb.models m
      WHERE NOT EXISTS (
        SELECT FROM gibbs_nb.packed p
        WHERE p.owner = m.owner AND p.model_name = m.model_name AND p.version = m.version
          AND cardinality(p.log_pi) = cardinality(p.classes)
          AND cardinality(p.log_theta) = cardinality(p.tokens) * cardinality(p.classes))}),
	'0', 'every version has its whole packed row');
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM gibbs_nb.packed p
      WHERE NOT EXISTS (SELECT FROM gibbs_nb.models m
                        WHERE p.owner = m.owner AND p.model_name = m.model_name
                          AND p.version = m.version)}),
	'0', 'no packed row without its version');
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM gibbs_nb.document_labels d
      WHERE NOT EXISTS (SELECT FROM gibbs_nb.models m WHERE m.version_id = d.version_id)}),
	'0', 'no document labels without their version');
my $labels_problems = 0;
for my $row (split /\n/, $node->safe_psql('postgres', q{
      SELECT labels_table::oid || ' ' || serving_version FROM gibbs_nb_models
      WHERE labels_table IS NOT NULL}))
{
	my ($relid, $serving) = split ' ', $row;
	my $name = $node->safe_psql('postgres', "SELECT ${relid}::regclass");
	my $bad = $node->safe_psql('postgres', qq{
	  SELECT count(*) = 0 OR count(*) FILTER (WHERE version <> $serving) > 0 FROM $name});
	if ($bad eq 't') { $labels_problems++; diag("labels table $name holds rows of another version, or none") }
}
is($labels_problems, 0, "every model's labels table holds the serving version's labels");
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM pg_class c JOIN pg_description d ON d.objoid = c.oid
      WHERE d.description = 'labels of a gibbs_nb model' AND c.relkind = 'r'
        AND NOT EXISTS (SELECT FROM gibbs_nb.models m WHERE m.labels_relid = c.oid)}),
	'0', 'no labels table is left that no version registers');
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'gibbs_nb%'}),
	'0', 'no gibbs_nb worker runs');
is( $node->safe_psql('postgres', q{
      SELECT count(*) FROM pg_locks
      WHERE locktype = 'advisory' AND objsubid BETWEEN x'474E'::int AND x'4755'::int}),
	'0', "no lock of gibbs_nb's is held");
my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
unlike($log, qr/TRAP: |PANIC: |terminated by signal/, 'no assertion failure, PANIC or crash in the log');

my $jobs = $node->safe_psql('postgres', q{
  SELECT string_agg(status || ' ' || n, ', ' ORDER BY status)
  FROM (SELECT status, count(*) n FROM gibbs_nb.jobs GROUP BY status) s});
diag(sprintf('soak: %d s busy, %d s quiet', $seconds, $quiet_seconds));
diag(sprintf('soak: predictions quiet %.0f/s, p99 %.2f ms; busy %.0f/s, p99 %.2f ms (%d and %d transactions)',
		$quiet_tps, $quiet_p99, $busy_tps, $busy_p99, $quiet_n, $busy_n));
diag("soak: jobs $jobs");
diag("soak: restarts $restarted, caught mid-publish $mid_publish");
diag("soak: $_ x$did{$_}") for sort keys %did;

done_testing();
