# Chains in parallel workers (issue 11 item 1): a job's chain workers stop
# with it however it is stopped (gibbs_nb_cancel, a query cancel of its
# worker, its waiting caller's statement_timeout); a chain worker that is
# terminated fails the job with its own error, whole, instead of hanging it; chain
# workers take only job slots that are free, and do not count against jobs;
# and with too few worker slots the remaining chains run in the job's
# worker, to the same model.  Polls are
# bounded (poll_query_until); no fixed sleeps.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GibbsNbTest;

my $node = PostgreSQL::Test::Cluster->new('chains');
$node->init;
$node->append_conf('postgresql.conf',
	"max_worker_processes = 8\ngibbs_nb.progress_interval = 0\n"
	  # one role runs every job here: its bound would leave one chain worker
	  . "gibbs_nb.max_jobs_per_role = 0\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gibbs_nb');
create_doc_labels($node);
create_docs($node, 'public.docs');

my $no_workers = q{SELECT count(*) = 0 FROM pg_stat_activity
                   WHERE backend_type IN ('gibbs_nb worker', 'gibbs_nb chain worker')};

# A job of many sweeps and $chains chains, not waited for; returns its id
# once all its chain workers say in pg_stat_activity which chain they run.
sub start_chains_job
{
	my ($model, $chains) = @_;
	my $job = $node->safe_psql('postgres', qq{
	  SELECT job_id FROM gibbs_nb_train('$model', 'docs', 'tokens', 'label', sweeps => 10000000,
	                                    chains => $chains, seed => 3, wait => false)});
	ok( $node->poll_query_until('postgres', qq{
	      SELECT count(*) = $chains - 1 FROM pg_stat_activity
	      WHERE backend_type = 'gibbs_nb chain worker'
	        AND query ~ '^gibbs_nb job $job: chain [2-$chains]/$chains, sweep [0-9]+/10000000\$'}),
		"$model: $chains - 1 chain workers run, pg_stat_activity shows their chain");
	return $job;
}

# --- gibbs_nb_cancel stops every chain ---
my $job = start_chains_job('cancel', 2);
ok( $node->poll_query_until('postgres', qq{
      SELECT query ~ '^gibbs_nb job $job: chain [12]/2, sweep [0-9]+/10000000\$' FROM pg_stat_activity
      WHERE backend_type = 'gibbs_nb worker'}),
	'the job worker shows the least advanced chain');
ok( $node->poll_query_until('postgres', qq{
      SELECT chain BETWEEN 1 AND 2 AND sweep > 0 FROM gibbs_nb_jobs WHERE job_id = $job}),
	'gibbs_nb_jobs shows its chain and sweep');
is($node->safe_psql('postgres', "SELECT gibbs_nb_cancel($job)"), 't', 'gibbs_nb_cancel');
ok( $node->poll_query_until('postgres',
		"SELECT status FROM gibbs_nb_jobs WHERE job_id = $job", 'cancelled'),
	'cancel: the job is cancelled');
# the job's worker stops its chain workers and waits for them before it
# records the outcome: none is left once the job shows as cancelled
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gibbs_nb chain worker'}),
	'0', 'cancel: no chain worker outlives the job');
ok($node->poll_query_until('postgres', $no_workers), 'cancel: the job worker is gone too');

# --- a query cancel of the job's worker ---
$job = start_chains_job('sigint', 2);
$node->safe_psql('postgres',
	q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE backend_type = 'gibbs_nb worker'});
ok($node->poll_query_until('postgres', $no_workers), 'pg_cancel_backend: all workers are gone');
is($node->safe_psql('postgres', "SELECT status FROM gibbs_nb_jobs WHERE job_id = $job"),
	'cancelled', 'pg_cancel_backend: the job is cancelled');

# --- a chain worker terminated: the job fails with its error, nothing hangs ---
# The chain worker's own error travels whole through its error queue (as a
# parallel worker's does): its message and SQLSTATE, and a context line that
# names the chain, up to the waiting caller.
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $node->connstr('postgres'), '-c',
		  "SELECT gibbs_nb_train('killchain', 'docs', 'tokens', 'label', sweeps => 10000000, chains => 3, seed => 3)" ],
		'>', \$out, '2>', \$err);
	ok( $node->poll_query_until('postgres', q{
	      SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb chain worker'
	        AND query ~ '^gibbs_nb job [0-9]+: chain [23]/3, sweep [0-9]+/10000000$'}),
		'killchain: 2 chain workers run');
	$job = $node->safe_psql('postgres',
		"SELECT job_id FROM gibbs_nb_jobs WHERE model_name = 'killchain' AND status = 'running'");
	my $chain = $node->safe_psql('postgres', q{
	  SELECT substring(query from 'chain ([23])/3') FROM pg_stat_activity
	  WHERE backend_type = 'gibbs_nb chain worker' ORDER BY pid LIMIT 1});
	$node->safe_psql('postgres', qq{
	  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	  WHERE backend_type = 'gibbs_nb chain worker' AND query ~ 'chain $chain/3'});
	eval { $h->finish };
	like($err,
		qr/ERROR:  57P01: terminating background worker "gibbs_nb chain worker" due to administrator command\n/,
		'the caller gets the chain worker\'s own error and SQLSTATE');
	like($err, qr/CONTEXT:  chain $chain\/3 of gibbs_nb job $job, in its own worker\ngibbs_nb job $job\n/,
		'with a context line that names the chain');
	is($node->safe_psql('postgres', "SELECT status, message FROM gibbs_nb_jobs WHERE job_id = $job"),
		qq{failed|terminating background worker "gibbs_nb chain worker" due to administrator command},
		'the job failed with that message');
}
ok($node->poll_query_until('postgres', $no_workers), 'the other chain worker is gone too');
is($node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'killchain'"),
	'0', 'nothing was published');

# --- the waiting caller's statement_timeout ---
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', 'SET statement_timeout = 3000',
		  '-c', "SELECT gibbs_nb_train('timeout', 'docs', 'tokens', 'label', sweeps => 10000000, chains => 2, seed => 1)" ],
		'>', \$out, '2>', \$err);
	eval { $h->finish };
	like($err, qr/canceling statement due to statement timeout/, 'statement_timeout ends the call');
	ok($node->poll_query_until('postgres', $no_workers), 'statement_timeout: all workers are gone');
	is($node->safe_psql('postgres', "SELECT status FROM gibbs_nb_jobs WHERE model_name = 'timeout'"),
		'cancelled', 'statement_timeout: the job is cancelled');
}

# --- chain workers take the job slots that are free, and jobs come first ---
# Under gibbs_nb.max_jobs = 2 a job of 3 chains gets one chain worker (the
# other slot is its own); a second job is admitted all the same (chain
# workers do not count against jobs) and a third is refused.
$node->append_conf('postgresql.conf', "gibbs_nb.max_jobs = 2\n");
$node->reload;
my $offset = -s $node->logfile;
$job = $node->safe_psql('postgres', q{
  SELECT job_id FROM gibbs_nb_train('limit', 'docs', 'tokens', 'label', sweeps => 10000000,
                                    chains => 3, seed => 3, wait => false)});
$node->wait_for_log(qr/gibbs_nb job $job: 1 of 2 chain workers granted; 2 chains run in the job's worker/,
	$offset);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'gibbs_nb chain worker'}),
	'a job of 3 chains under max_jobs = 2 runs one chain worker');
like($node->safe_psql('postgres', q{
  SELECT job_id FROM gibbs_nb_train('limit2', 'docs', 'tokens', 'label', sweeps => 10000000, wait => false)}),
	qr/^\d+$/, 'a second job is admitted: its chain worker does not count against jobs');
my (undef, undef, $refused) = $node->psql('postgres', q{
  SELECT gibbs_nb_train('limit3', 'docs', 'tokens', 'label', sweeps => 10, wait => false)});
like($refused, qr/gibbs_nb.max_jobs allows/, 'a third job is refused by max_jobs = 2');
$node->safe_psql('postgres', q{SELECT gibbs_nb_cancel(job_id) FROM gibbs_nb_jobs WHERE status = 'running'});
ok($node->poll_query_until('postgres', $no_workers), 'limit: all stopped');
$node->append_conf('postgresql.conf', "gibbs_nb.max_jobs = 4\n");
$node->reload;

# --- a chain worker that cannot start: its chain runs in the job's worker ---
# The role may no longer log in by the time the job's worker, still reading
# a slow view, starts its chain workers: they are refused at connection and
# exit before they take their chain, which then runs in the job's worker, to
# the same model.
$node->safe_psql('postgres', q{
  CREATE ROLE lim LOGIN;
  CREATE VIEW public.slow_docs AS SELECT * FROM public.docs WHERE pg_sleep(0.0005)::text = '';
  GRANT SELECT ON public.docs, public.slow_docs TO lim;
  GRANT CREATE ON SCHEMA public TO lim;
});
$offset = -s $node->logfile;
$job = $node->safe_psql('postgres', q{
     SELECT job_id FROM gibbs_nb_train('lim3', 'public.slow_docs', 'tokens', 'label', sweeps => 30,
                                       chains => 3, seed => 9, labels_table => 'public.lim3_labels',
                                       wait => false)},
		extra_params => [ '-U', 'lim' ]);
$node->safe_psql('postgres', 'ALTER ROLE lim NOLOGIN');
ok( $node->poll_query_until('postgres',
		"SELECT status FROM gibbs_nb_jobs WHERE job_id = $job", 'succeeded'),
	'a job whose chain workers cannot connect succeeds');
$node->safe_psql('postgres', 'ALTER ROLE lim LOGIN');
ok($node->log_contains(qr/role "lim" is not permitted to log in/, $offset),
	'its chain workers were refused');
ok($node->log_contains(qr/the chain worker of chain [23]\/3 exited before it started; the chain runs in the job's worker/, $offset),
	'the log says the chains ran in the job worker');
$node->safe_psql('postgres', q{
  SET gibbs_nb.max_chain_workers = 0;
  SELECT status FROM gibbs_nb_train('lim3_seq', 'slow_docs', 'tokens', 'label', sweeps => 30, chains => 3, seed => 9)});
is($node->safe_psql('postgres', q{
     SELECT p.log_theta = s.log_theta AND p.log_pi = s.log_pi
            AND public.doc_labels(p.version_id) = public.doc_labels(s.version_id)
     FROM gibbs_nb.packed p, gibbs_nb.packed s
     WHERE p.model_name = 'lim3' AND s.model_name = 'lim3_seq'}),
	't', 'the same model as the chains one after another');

# --- the memory cap counts every chain ---
# 500 documents of 100 words of their own (V = 50,000, K = 2): with 3
# chains the job needs about 14 MB one chain after another and about 14 MB
# more in parallel (the segment and 2 chain workers' samplers).  Under a
# 20 MB cap the chains run one after another, to the same model.
$node->safe_psql('postgres', q{
  CREATE TABLE wide AS SELECT i AS id, array(SELECT 'w' || (i * 100 + k) FROM generate_series(1, 100) k) AS tokens
  FROM generate_series(1, 500) i;
  ALTER TABLE wide ADD PRIMARY KEY (id);
});
$offset = -s $node->logfile;
is($node->safe_psql('postgres', q{
     SET gibbs_nb.max_job_memory = '20MB';
     SELECT status FROM gibbs_nb_train('wide20', 'wide', 'tokens', NULL, n_classes => 2, sweeps => 5,
                                       chains => 3, seed => 1)}),
	'succeeded', 'a 3-chain job over the cap in parallel but not one after another succeeds');
ok($node->log_contains(qr/chains run one after another: in parallel they would need \d+ MB more than gibbs_nb.max_job_memory allows/, $offset),
	'the log says its chains ran one after another');
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{
  SET gibbs_nb.max_job_memory = '64MB';
  SELECT status FROM gibbs_nb_train('wide64', 'wide', 'tokens', NULL, n_classes => 2, sweeps => 5,
                                    chains => 3, seed => 1)});
ok(!$node->log_contains(qr/chains run one after another/, $offset), 'under 64 MB they run in parallel');
is($node->safe_psql('postgres', q{
     SELECT p.log_theta = s.log_theta AND p.log_pi = s.log_pi
            AND public.doc_labels(p.version_id) = public.doc_labels(s.version_id)
     FROM gibbs_nb.packed p, gibbs_nb.packed s
     WHERE p.model_name = 'wide20' AND s.model_name = 'wide64'}),
	't', 'memory cap: the same model');

# --- too few worker slots: the remaining chains run in the job's worker ---
# max_worker_processes = 4: the logical replication launcher and the job's
# worker leave at most 2 of the 3 chain workers a 4-chain job asks for.
$node->append_conf('postgresql.conf', "gibbs_nb.max_jobs = 4\nmax_worker_processes = 4\n");
$node->restart;
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{
  SET gibbs_nb.max_chain_workers = 0;
  SELECT status FROM gibbs_nb_train('few_seq', 'docs', 'tokens', 'label', sweeps => 30, chains => 4, seed => 9);
  SET gibbs_nb.max_chain_workers = 4;
  SELECT status FROM gibbs_nb_train('few_par', 'docs', 'tokens', 'label', sweeps => 30, chains => 4, seed => 9);
});
ok($node->log_contains(qr/: [0-2] of 3 chain workers started; [2-4] chains run in the job's worker/, $offset),
	'the log says some chains ran in the job worker');
is($node->safe_psql('postgres', q{
     SELECT p.log_theta = s.log_theta AND p.log_pi = s.log_pi
            AND public.doc_labels(p.version_id) = public.doc_labels(s.version_id)
     FROM gibbs_nb.packed p, gibbs_nb.packed s
     WHERE p.model_name = 'few_par' AND s.model_name = 'few_seq'}),
	't', 'the same model as the chains one after another');

$node->stop;
done_testing();
