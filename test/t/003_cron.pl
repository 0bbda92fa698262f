# Retraining on a schedule with pg_cron: a scheduled gibbs_nb_retrain
# publishes a new version and cron.job_run_details says succeeded; one whose
# source is gone is recorded as failed with the error.  Both of pg_cron's
# modes: libpq connections (cron.host = the socket directory) and
# cron.use_background_workers, where the cron job itself runs in a
# background worker that starts ours.  pg_cron runs jobs at minute
# boundaries, so each wait can take a minute.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_worker_processes = 16
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.host = '@{[ $node->host ]}'
});
$node->start;
$node->safe_psql('postgres', q{
  CREATE EXTENSION pg_cron;
  CREATE EXTENSION gibbs_nb;
  CREATE TABLE docs (id int PRIMARY KEY, tokens text[], label text);
  INSERT INTO docs
  SELECT i, CASE WHEN i % 2 = 0 THEN '{cheap,pills}'::text[] ELSE '{meeting,notes}' END,
         CASE WHEN i <= 10 THEN (CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END) END
  FROM generate_series(1, 30) i;
  SET gibbs_nb.progress_interval = 0;
  SELECT status FROM gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 20, seed => 1);
});

# Schedule a retrain every minute; wait for a run of it with the given status.
sub scheduled_run
{
	my ($name, $status) = @_;
	my $jobid = $node->safe_psql('postgres',
		"SELECT cron.schedule('$name', '* * * * *', \$\$SELECT gibbs_nb_retrain('m')\$\$)");
	my $ok = $node->poll_query_until('postgres', qq{
		SELECT count(*) > 0 FROM cron.job_run_details
		WHERE jobid = $jobid AND status = '$status'});
	$node->safe_psql('postgres', "SELECT cron.unschedule($jobid)");
	return ($ok, $jobid);
}

sub versions
{
	return $node->safe_psql('postgres', "SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'm'");
}

# --- libpq mode ---
my ($ok, $jobid) = scheduled_run('retrain-m', 'succeeded');
ok($ok, 'a scheduled retrain succeeds (cron.job_run_details)');
cmp_ok(versions(), '>=', 2, 'and publishes a new version');

# The source is followed by OID: dropped (and replaced under its name), it is
# gone for the retrain, which fails with the reason.
$node->safe_psql('postgres',
	'CREATE TABLE docs_copy AS SELECT * FROM docs; DROP TABLE docs; ALTER TABLE docs_copy RENAME TO docs');
($ok, $jobid) = scheduled_run('retrain-m-broken', 'failed');
ok($ok, 'a scheduled retrain whose source is gone is recorded as failed');
like(
	$node->safe_psql('postgres',
		"SELECT return_message FROM cron.job_run_details WHERE jobid = $jobid AND status = 'failed' LIMIT 1"),
	qr/the source of model "m" no longer exists/, 'with the error');
# trained again on the new table, the model retrains from it
$node->safe_psql('postgres', q{
  ALTER TABLE docs ADD PRIMARY KEY (id);
  SET gibbs_nb.progress_interval = 0;
  SELECT gibbs_nb_train('m', 'docs', 'tokens', 'label', sweeps => 10, seed => 1)});

# --- background worker mode: the cron job's worker starts ours ---
$node->append_conf('postgresql.conf', "cron.use_background_workers = on\n");
$node->restart;
my $before = versions();
($ok, $jobid) = scheduled_run('retrain-m-bgw', 'succeeded');
ok($ok, 'a scheduled retrain succeeds with cron.use_background_workers');
cmp_ok(versions(), '>', $before, 'and publishes a new version');

$node->stop;
done_testing();
