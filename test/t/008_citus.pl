# gibbs_nb on a Citus cluster: a coordinator and two workers on this machine
# (unix sockets), each with shared_preload_libraries = 'citus'.
#
# - gibbs_nb_class_counts is pushed down: partial aggregation on the shards
#   (worker_partial_agg), a combine on the coordinator (coord_combine_agg),
#   and the result equals GROUP BY and the same rows on one node;
# - gibbs_nb_citus_distribute() (superuser, once) makes gibbs_nb.packed a
#   reference table; a non-superuser's gibbs_nb_predict over a distributed
#   table runs on the workers and gives the labels of a local copy; another
#   role sees nothing of the model there; a label trigger on a distributed
#   table works;
# - training from a distributed source reads its labelled counts through the
#   pushed-down aggregate and gives the model a local copy gives; its labels
#   table is distributed, co-located with the source; gibbs_nb_retrain and a
#   pg_cron job on the coordinator retrain it;
# - gibbs_nb_deploy and gibbs_nb_drop on the coordinator: the workers follow
#   from the next statement.
#
# Citus is not in Debian: ../shared/citus/build.sh builds it (the test
# command runs it when ../shared is there).  Without Citus installed the
# test is skipped, saying so.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GibbsNbTest;

my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "Citus is not installed in $pkglibdir (build it with ../shared/citus/build.sh)"
  unless -f "$pkglibdir/citus.so";

my $data = abs_path(dirname(__FILE__) . '/../data/spamassassin-sample.tsv.gz');

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("worker$_") } (1, 2);
foreach my $node ($coord, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'citus@{[ $node == $coord ? ',pg_cron' : '' ]}'
max_worker_processes = 16
max_prepared_transactions = 20
gibbs_nb.progress_interval = 0
citus.max_cached_conns_per_worker = 2
track_functions = all
});
	$node->append_conf('postgresql.conf', qq{
cron.database_name = 'postgres'
cron.host = '@{[ $node->host ]}'
}) if $node == $coord;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
}
$coord->safe_psql('postgres', qq{
  SELECT citus_set_coordinator_host('@{[ $coord->host ]}', @{[ $coord->port ]});
  @{[ join '', map { "SELECT citus_add_node('" . $_->host . "', " . $_->port . ");\n" } @workers ]}
});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM citus_get_active_worker_nodes()'),
	'2', 'a coordinator and two workers');

# gibbs_nb on the coordinator (Citus creates it on the workers); roles too
$coord->safe_psql('postgres', q{
  CREATE EXTENSION gibbs_nb;
  CREATE ROLE alice LOGIN;
  CREATE ROLE bob LOGIN;
  GRANT CREATE ON SCHEMA public TO alice;
});
is($workers[0]->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'gibbs_nb'"),
	$coord->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'gibbs_nb'"),
	'the extension is on the workers');

# `table`, alice's, distributed by id over 8 shards; `table_local` the same
# rows on the coordinator alone
sub distribute_with_local_copy
{
	my ($table) = @_;
	$coord->safe_psql('postgres', qq{
  SET client_min_messages = warning;
  CREATE TABLE ${table}_local AS SELECT * FROM $table;
  ALTER TABLE ${table}_local ADD PRIMARY KEY (id);
  ALTER TABLE $table OWNER TO alice;
  ALTER TABLE ${table}_local OWNER TO alice;
  SELECT create_distributed_table('$table', 'id', shard_count => 8);
  SELECT truncate_local_data_after_distributing_table('$table');
});
	return;
}

# 403 e-mails, half of them labelled
$coord->safe_psql('postgres', qq{
  SET client_min_messages = warning;
  CREATE TABLE raw (id int, label text, folder text, body text);
  COPY raw FROM PROGRAM 'gzip -dc $data';
  CREATE TABLE mail (id int PRIMARY KEY, label text, truth text, tokens text[]);
  INSERT INTO mail
  SELECT id, CASE WHEN id % 2 = 0 THEN label END, label,
         tsvector_to_array(to_tsvector('english', body)) FROM raw;
});
distribute_with_local_copy('mail');

# --- the count aggregate is pushed down ---
my $plan = $coord->safe_psql('postgres',
	'EXPLAIN (VERBOSE, COSTS OFF) SELECT gibbs_nb_class_counts(label, tokens) FROM mail');
like($plan, qr/Task Count: 8/, 'the aggregate runs on the 8 shards');
# (Citus 14 moves the states in their binary form, through the aggregate's
# send and receive functions: worker_binary_partial_agg, coord_binary_combine_agg)
like($plan, qr/Query: SELECT pg_catalog\.worker_(binary_)?partial_agg\('public\.gibbs_nb_class_counts\(text,text\[\]\)'::regprocedure/,
	'each shard computes a partial state (worker_partial_agg)');
like($plan, qr/^Aggregate\n\s+Output: coord_(binary_)?combine_agg\(/m,
	'the coordinator combines the states (coord_combine_agg)');
# the same as GROUP BY over the distributed table, and as the local copy
my $differ = q{
  SELECT count(*) FROM (
    (SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM %1$s))
     EXCEPT SELECT * FROM (%2$s) g)
    UNION ALL
    (SELECT * FROM (%2$s) g
     EXCEPT SELECT * FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM %1$s)))) d};
my $group_by = 'SELECT label, tok, count(*) FROM %s, unnest(tokens) tok WHERE label IS NOT NULL GROUP BY 1, 2';
is($coord->safe_psql('postgres', sprintf($differ, 'mail', sprintf($group_by, 'mail'))),
	'0', 'the pushed-down aggregate equals GROUP BY on the distributed table');
is($coord->safe_psql('postgres', sprintf($differ, 'mail', sprintf($group_by, 'mail_local'))),
	'0', 'and the same rows counted on one node');
cmp_ok($coord->safe_psql('postgres',
		"SELECT count(*) FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail))"),
	'>', 5000, 'over many cells');
# no rows on some shards, none at all
is($coord->safe_psql('postgres', q{
  SELECT count(*) FROM gibbs_nb_class_counts_rows((SELECT gibbs_nb_class_counts(label, tokens) FROM mail WHERE false))}),
	'0', 'no rows: an empty value');
# training's own statement (schema-qualified, exact types) is pushed down too
like($coord->safe_psql('postgres', q{
  EXPLAIN (VERBOSE, COSTS OFF)
  SELECT public.gibbs_nb_class_counts(label::pg_catalog.text, tokens::pg_catalog.text[])
  FROM public.mail WHERE label IS NOT NULL}),
	qr/worker_(binary_)?partial_agg/, "training's labelled counts are pushed down");

# --- the models on every node ---
my ($ret, $out, $err) = $coord->psql('postgres', 'SELECT gibbs_nb_citus_distribute()',
	extra_params => [ '-U', 'alice' ]);
like($err, qr/permission denied for function gibbs_nb_citus_distribute/,
	'gibbs_nb_citus_distribute is for superusers');
($ret, $out, $err) = $workers[0]->psql('postgres', 'SELECT gibbs_nb_citus_distribute()');
like($err, qr/runs on the Citus coordinator/, 'and for the coordinator');
# a user's table distributed by text, of the shard count gibbs_nb's would have
$coord->safe_psql('postgres', q{
  CREATE TABLE public.text_keyed (k text PRIMARY KEY);
  SELECT create_distributed_table('public.text_keyed', 'k');
});
is($coord->safe_psql('postgres', 'SELECT * FROM gibbs_nb_citus_distribute()'),
	"gibbs_nb.packed\ngibbs_nb.document_labels",
	'it makes gibbs_nb.packed a reference table and distributes gibbs_nb.document_labels');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gibbs_nb_citus_distribute()'),
	'0', 'once');
is($coord->safe_psql('postgres',
		"SELECT partmethod FROM pg_dist_partition WHERE logicalrelid = 'gibbs_nb.packed'::regclass"),
	'n', 'gibbs_nb.packed is a reference table');
is($coord->safe_psql('postgres', q{
  SELECT partmethod::text || ' ' || column_to_column_name(logicalrelid, partkey)
  FROM pg_dist_partition WHERE logicalrelid = 'gibbs_nb.document_labels'::regclass}),
	'h id', 'gibbs_nb.document_labels is distributed by the documents\' ids');
is($coord->safe_psql('postgres', q{
  SELECT string_agg(logicalrelid::text, ',') FROM pg_dist_partition
  WHERE colocationid = (SELECT colocationid FROM pg_dist_partition
                        WHERE logicalrelid = 'gibbs_nb.document_labels'::regclass)}),
	'gibbs_nb.document_labels', 'in a colocation group of its own (not the user\'s text-keyed table\'s)');
is($coord->safe_psql('postgres',
		"SELECT relreplident FROM pg_class WHERE oid = 'gibbs_nb.document_labels'::regclass"),
	'f', 'its rows identified by all their columns, for a shard move');
$coord->safe_psql('postgres', 'DROP TABLE public.text_keyed');
create_doc_labels($coord);

# --- training from the distributed source, as alice ---
sub alice
{
	my ($sql) = @_;
	return $coord->safe_psql('postgres', $sql, extra_params => [ '-U', 'alice' ]);
}
is(alice(q{SELECT status FROM gibbs_nb_train('spam', 'mail', 'tokens', label_column => 'label',
                                             sweeps => 60, seed => 7)}),
	'succeeded', 'alice trains on the distributed table');
is(alice(q{SELECT status FROM gibbs_nb_train('spam_local', 'mail_local', 'tokens', label_column => 'label',
                                             sweeps => 60, seed => 7, labels_table => 'spam_local_labels')}),
	'succeeded', 'and on the local copy');
is(alice(q{
  SELECT (SELECT row(classes, log_pi, tokens, log_theta) FROM gibbs_nb.packed WHERE model_name = 'spam')
       = (SELECT row(classes, log_pi, tokens, log_theta) FROM gibbs_nb.packed WHERE model_name = 'spam_local')}),
	't', 'the same model from both');
# the blocked sampler on the distributed source: its sweeps run on the
# workers (a node on each, holding the shards it owns, reached through one
# row of one of them, keeping its documents in its backend between the
# calls); the model is the local copy's bit for bit
$coord->safe_psql('postgres', q{
  ALTER ROLE alice SET citus.log_remote_commands = on;
  ALTER ROLE alice SET citus.grep_remote_commands = '%spam_blocked_labels%';
  ALTER ROLE alice SET log_min_messages = notice;});
my $log_from = -s $coord->logfile;
is(alice(q{SELECT status FROM gibbs_nb_train('spam_blocked', 'mail', 'tokens', label_column => 'label',
                                             sampler => 'blocked', sweeps => 40, chains => 2,
                                             seed => 7, unlabeled_weight => 0.5, gamma_theta => NULL)}),
	'succeeded', 'the blocked sampler on the distributed table');
$coord->safe_psql('postgres', 'ALTER ROLE alice RESET ALL');
# no labels table row passes through the coordinator: the labelled
# documents' rows are one INSERT ... SELECT a shard, pushed down to it from
# its co-located shard of the source; the nodes' rows are Citus's
# repartitioned INSERT ... SELECT (gibbs_nb.blocked_node_label is volatile),
# each shard's results read where they were made, co-located; none copied
my @commands = map { /issuing (.*)/ ? $1 : () } split /\n/,
  substr(slurp_file($coord->logfile), $log_from);
is(scalar(grep { /^INSERT INTO public\.spam_blocked_labels_\d+ AS citus_table_alias .*array_position.* FROM public\.mail_\d+ s WHERE/ } @commands),
	8, 'the labelled documents\' rows: one INSERT ... SELECT pushed down to each of the 8 shards');
is(scalar(grep { /^INSERT INTO public\.spam_blocked_labels_\d+ AS citus_table_alias .* FROM read_intermediate_results\('\{repartitioned_results_\d+_from_\d+_to_\d+\}'/ } @commands),
	8, 'the nodes\' rows: a shard\'s from its repartitioned results');
is(scalar(grep { /COPY public\.spam_blocked_labels|read_intermediate_result\(/ } @commands),
	0, 'none through the coordinator');
is(alice(q{SELECT status FROM gibbs_nb_train('spam_blocked_local', 'mail_local', 'tokens',
                                             label_column => 'label', sampler => 'blocked', sweeps => 40,
                                             chains => 2, seed => 7, unlabeled_weight => 0.5,
                                             gamma_theta => NULL)}),
	'succeeded', 'and on the local copy');
is(alice(q{
  SELECT (SELECT row(classes, log_pi, tokens, log_theta, public.doc_labels(version_id)) FROM gibbs_nb.packed
          WHERE model_name = 'spam_blocked')
       = (SELECT row(classes, log_pi, tokens, log_theta, public.doc_labels(version_id)) FROM gibbs_nb.packed
          WHERE model_name = 'spam_blocked_local')
     AND (SELECT row(log_likelihood, ess, gamma_theta, chain_agreement, labels_agreement,
                     labels_only_agreement, warnings)
          FROM gibbs_nb.models WHERE model_name = 'spam_blocked')
       = (SELECT row(log_likelihood, ess, gamma_theta, chain_agreement, labels_agreement,
                     labels_only_agreement, warnings)
          FROM gibbs_nb.models WHERE model_name = 'spam_blocked_local')}),
	't', 'the same blocked model from both, bit for bit, its chains combined on the workers alike');
# every call of the chains reached the node of each of the 2 workers: 2
# chains x (the first labels, 40 sweeps, the end), and a release
my $calls = q{SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'blocked_node'};
# the calls of a node function on both workers, once they reach want
# (the workers' backends report their calls when they end or every second)
sub worker_calls
{
	my ($function, $want) = @_;
	my $total;
	foreach my $try (1 .. 300)
	{
		$total = 0;
		$total += $_->safe_psql('postgres',
			"SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = '$function'")
		  foreach @workers;
		last if $total >= $want;
		select(undef, undef, undef, 0.1);
	}
	return $total;
}
my $total = worker_calls('blocked_node', 170);
is($total, 170, 'the nodes answered on the workers: 2 workers x 2 chains x 42 calls, and 2 releases');
# the chains combined on the workers: each chain folded, the means made once
is(worker_calls('blocked_node_fold', 4) . ' ' . worker_calls('blocked_node_combined', 2), '4 2',
	'each worker folded the 2 chains and combined them once');
is(join(' ', map { $_->safe_psql('postgres', $calls) > 0 ? 'some' : 'none' } @workers), 'some some',
	'on both workers');
# the final pass where the documents are: the labels table (co-located with
# the source) got its unlabelled documents' rows from the nodes, one call of
# gibbs_nb.blocked_node_label a row of the source, none of their estimates
# came to the coordinator; the rows are the local copy's
is(alice(q{
  SELECT count(*) FROM spam_blocked_labels c FULL JOIN spam_blocked_local_labels l USING (id)
  WHERE c.id IS NULL OR l.id IS NULL
     OR (c.label, c.probability, c.probabilities) IS DISTINCT FROM (l.label, l.probability, l.probabilities)}),
	'0', 'the cluster\'s labels table is the local copy\'s, row for row');
is(alice(q{SELECT (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'spam_blocked_labels'::regclass)
                = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'mail'::regclass)}),
	't', 'co-located with the source');
my $source_rows = alice('SELECT count(*) FROM mail');
is(worker_calls('blocked_node_label', $source_rows), $source_rows,
	'the nodes wrote the labels where they are, one call a row of the source');
# a member of the owner's role retrains: its nodes live in its own backends
# on the workers, and the labels table is written as the owner, so the
# labels come to the coordinator, read as the member a batch at a time into
# the version's documents' labels (gibbs_nb.document_labels, distributed),
# and the labels table is written from those: no placement the owner wrote
# is read as the member.  The same rows, and one more call a source row.
$coord->safe_psql('postgres', 'CREATE ROLE carol LOGIN IN ROLE alice');
is($coord->safe_psql('postgres', q{SELECT version || ' ' || status FROM gibbs_nb_retrain('spam_blocked')},
		extra_params => [ '-U', 'carol' ]),
	'2 succeeded', 'a member of the owner\'s role retrains the blocked model through the nodes');
is(alice(q{
  SELECT count(*) FROM spam_blocked_labels c FULL JOIN spam_blocked_local_labels l USING (id)
  WHERE c.version IS DISTINCT FROM 2
     OR (c.label, c.probability, c.probabilities) IS DISTINCT FROM (l.label, l.probability, l.probabilities)}),
	'0', 'the labels table of its version is the local copy\'s, row for row');
is(alice(q{
  SELECT (SELECT public.doc_labels(version_id) FROM gibbs_nb.packed
          WHERE model_name = 'spam_blocked' AND version = 2)
       = (SELECT public.doc_labels(version_id) FROM gibbs_nb.packed
          WHERE model_name = 'spam_blocked_local')}),
	't', 'and so are its documents\' labels');
is(worker_calls('blocked_node_label', 2 * $source_rows), 2 * $source_rows,
	'its nodes gave the labels, one call a row of the source');
# held-out rows through the nodes: read when the job publishes, scored and
# written a batch at a time; the model, the labels table and the metrics
# are the local copy's
for my $source ('mail', 'mail_local')
{
	is(alice("SELECT status FROM gibbs_nb_train('held_$source', '$source', 'tokens', label_column => 'label',
	                                            sampler => 'blocked', sweeps => 10, seed => 7, holdout => 0.3,
	                                            unlabeled_weight => 0.5)"),
		'succeeded', "held-out rows from $source");
}
is(alice(q{
  SELECT (SELECT log_theta FROM gibbs_nb.packed WHERE model_name = 'held_mail')
       = (SELECT log_theta FROM gibbs_nb.packed WHERE model_name = 'held_mail_local')
     AND (SELECT public.doc_labels(version_id) FROM gibbs_nb.packed WHERE model_name = 'held_mail')
       = (SELECT public.doc_labels(version_id) FROM gibbs_nb.packed WHERE model_name = 'held_mail_local')
     AND (SELECT holdout_metrics FROM gibbs_nb.models WHERE model_name = 'held_mail')
       = (SELECT holdout_metrics FROM gibbs_nb.models WHERE model_name = 'held_mail_local')
     AND (SELECT count(*) FROM held_mail_labels c FULL JOIN held_mail_local_labels l USING (id)
          WHERE (c.label, c.probability, c.probabilities) IS DISTINCT FROM (l.label, l.probability, l.probabilities)) = 0}),
	't', 'the same model, documents\' labels, labels table and held-out metrics from both');

# ids whose 64-bit keys collide share their draws, so a blocked job stops
# (0A000). Each node checks its own documents' keys; Citus puts two such ids
# on one server when it places the rows by the id. A source distributed by
# another column can put them on two, so the job's worker checks the keys
# itself: here (a,0) and (a,4294967297) (a row hashes as 31 x its first
# field's hash + its second's, an int8 as its halves' XOR), on two workers
alice(q{
  CREATE TYPE pair AS (tag text, n bigint);
  CREATE TABLE pairs (id pair, shard_key int, tokens text[], label text);
  SELECT create_distributed_table('pairs', 'shard_key');});
my ($key1, $key2) = split / /, $coord->safe_psql('postgres', q{
  SELECT min(k) || ' ' || max(k) FROM (
    SELECT DISTINCT ON (n.nodeport) k
    FROM generate_series(1, 100) k,
         LATERAL (SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
                  WHERE p.shardid = get_shard_id_for_distribution_column('pairs', k)) n
    ORDER BY n.nodeport, k) x});
alice(qq{
  INSERT INTO pairs VALUES ('(a,0)', $key1, '{cheap,win}', NULL), ('(a,4294967297)', $key2, '{team,meeting}', NULL),
                           ('(a,1)', $key1, '{cheap,cash}', 'spam'), ('(a,2)', $key2, '{team,notes}', 'ham');});
($ret, $out, $err) = $coord->psql('postgres',
	q{SELECT status FROM gibbs_nb_train('pairs', 'pairs', 'tokens', 'label', sampler => 'blocked',
	                                    sweeps => 5, seed => 1)},
	extra_params => [ '-U', 'alice' ]);
isnt($key1, $key2, 'the two ids\' rows are on two workers');
like($err, qr/two ids of the source have the same 64-bit hash/,
	'two ids of one key on two workers stop the job: the job\'s worker checks the keys');
is(alice(q{SELECT sqlstate FROM gibbs_nb_jobs WHERE model_name = 'pairs'}), '0A000', 'with 0A000');
# a node lost mid-job (the worker backend that holds a worker's nodes
# terminated): the job fails, publishes nothing, and leaves no backend of
# its own on the workers
my $lost = alice(q{SELECT job_id FROM gibbs_nb_train('spam_lost', 'mail', 'tokens', label_column => 'label',
                                                     sampler => 'blocked', sweeps => 1000000, seed => 7,
                                                     wait => false)});
ok($coord->poll_query_until('postgres', "SELECT sweep > 1 FROM gibbs_nb.jobs WHERE job_id = $lost"),
	'a long blocked job sweeps on the nodes');
my $nodes_backend = q{SELECT pid FROM pg_stat_activity
                      WHERE usename = 'alice' AND backend_type = 'client backend'
                        AND application_name LIKE 'citus_internal%'};
ok($workers[0]->poll_query_until('postgres', "SELECT count(*) > 0 FROM ($nodes_backend) b"),
	'a backend of the job on a worker holds its nodes');
$workers[0]->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM ($nodes_backend) b");
# (the connection's loss reaches the job's worker as an error, which it
# records, or as the remote FATAL, which ends it: gibbs_nb_jobs then shows
# the job failed, its worker gone)
ok($coord->poll_query_until('postgres', "SELECT status FROM gibbs_nb_jobs WHERE job_id = $lost", 'failed'),
	'the job fails');
like($coord->safe_psql('postgres', "SELECT message FROM gibbs_nb_jobs WHERE job_id = $lost"),
	qr/connection|no node|exited/, 'saying what was lost');
is(alice(q{SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'spam_lost'}), '0',
	'nothing of it is published');
ok($_->poll_query_until('postgres', "SELECT count(*) = 0 FROM ($nodes_backend) b"),
	'no backend of the job is left on ' . $_->name) foreach @workers;

# a blocked job cancelled while its nodes sweep: cancelled, nothing
# published, no backend of it left on the workers
my $cancelled = alice(q{SELECT job_id FROM gibbs_nb_train('spam_cancelled', 'mail', 'tokens', label_column => 'label',
                                                          sampler => 'blocked', sweeps => 1000000, seed => 7,
                                                          wait => false)});
ok($coord->poll_query_until('postgres', "SELECT sweep > 1 FROM gibbs_nb.jobs WHERE job_id = $cancelled"),
	'a long blocked job sweeps on the nodes again');
is(alice("SELECT gibbs_nb_cancel($cancelled)"), 't', 'alice cancels it');
ok($coord->poll_query_until('postgres', "SELECT status FROM gibbs_nb_jobs WHERE job_id = $cancelled",
		'cancelled'), 'the job is cancelled');
is(alice(q{SELECT count(*) FROM gibbs_nb.models WHERE model_name = 'spam_cancelled'}), '0',
	'nothing of it is published');
ok($_->poll_query_until('postgres', "SELECT count(*) = 0 FROM ($nodes_backend) b"),
	'no backend of the cancelled job is left on ' . $_->name) foreach @workers;

# a corpus larger than the coordinator's gibbs_nb.max_job_memory: the job's
# worker reads only the ids and the words' counts (the pushed-down
# aggregate), each worker's node holds its own documents; the local copy
# is refused (53200), and with room the same model as the cluster's
$coord->safe_psql('postgres', q{
  SET client_min_messages = warning;
  CREATE TABLE bulk (id int PRIMARY KEY, tokens text[], label text);
  INSERT INTO bulk
  SELECT i, ARRAY(SELECT 'w' || ((i * 7 + j * 13) % 600) FROM generate_series(1, 300) j),
         CASE WHEN i % 10 = 0 THEN CASE WHEN i % 20 = 0 THEN 'a' ELSE 'b' END END
  FROM generate_series(1, 3000) i;
  ALTER ROLE alice SET gibbs_nb.max_job_memory = '8MB';
});
distribute_with_local_copy('bulk');
my $bulk_train = q{sampler => 'blocked', sweeps => 10, seed => 1, unlabeled_weight => 0.5};
is(alice("SELECT status FROM gibbs_nb_train('bulk', 'bulk', 'tokens', 'label', $bulk_train)"),
	'succeeded', 'a corpus larger than max_job_memory trains on the cluster');
my $refused = alice("SELECT job_id FROM gibbs_nb_train('bulk_refused', 'bulk_local', 'tokens', 'label',
                                                       $bulk_train, wait => false)");
ok($coord->poll_query_until('postgres', "SELECT status FROM gibbs_nb_jobs WHERE job_id = $refused", 'failed'),
	'on one node it does not');
is($coord->safe_psql('postgres', "SELECT sqlstate FROM gibbs_nb_jobs WHERE job_id = $refused"), '53200',
	'refused for its memory');
$coord->safe_psql('postgres', 'ALTER ROLE alice RESET gibbs_nb.max_job_memory');
is(alice("SELECT status FROM gibbs_nb_train('bulk_local', 'bulk_local', 'tokens', 'label', $bulk_train)"),
	'succeeded', 'with room, on one node');
is(alice(q{
  SELECT (SELECT row(log_pi, tokens, log_theta, public.doc_labels(version_id), word_counts)
          FROM gibbs_nb.packed WHERE model_name = 'bulk')
       = (SELECT row(log_pi, tokens, log_theta, public.doc_labels(version_id), word_counts)
          FROM gibbs_nb.packed WHERE model_name = 'bulk_local')}),
	't', 'the same model from the cluster');

# a warm retrain on the cluster: each worker's node takes its documents'
# first labels from the job's worker, which found them in the version by id;
# under the cap that refuses the local job (8 MB), and few sweeps, so that
# the start shows
$coord->safe_psql('postgres', "ALTER ROLE alice SET gibbs_nb.max_job_memory = '8MB'");
foreach my $source ('bulk', 'bulk_local')
{
	$coord->safe_psql('postgres', 'ALTER ROLE alice RESET gibbs_nb.max_job_memory')
	  if $source eq 'bulk_local';
	is(alice("SELECT status FROM gibbs_nb_train('warm_$source', '$source', 'tokens', 'label',
                                                sampler => 'blocked', sweeps => 3, burn_in => 0, seed => 3,
                                                unlabeled_weight => 0.5)"),
		'succeeded', "a short blocked training on $source");
	is(alice("SELECT status FROM gibbs_nb_retrain('warm_$source', warm => true)"), 'succeeded',
		"its warm retrain");
}
is(alice(q{
  SELECT string_agg((p.log_theta = s.log_theta AND public.doc_labels(p.version_id) = public.doc_labels(s.version_id))::text,
                    ' ' ORDER BY p.version)
  FROM gibbs_nb.packed p JOIN gibbs_nb.packed s USING (version)
  WHERE p.model_name = 'warm_bulk' AND s.model_name = 'warm_bulk_local'}),
	'true true', 'the cluster\'s versions, cold and warm, are the local ones');
is(alice(q{
  SELECT (SELECT public.doc_labels(version_id) FROM gibbs_nb.packed WHERE model_name = 'warm_bulk' AND version = 1)
       = (SELECT public.doc_labels(version_id) FROM gibbs_nb.packed WHERE model_name = 'warm_bulk' AND version = 2)}),
	'f', 'and the warm start made a difference');

# retention in the transaction that writes the version's row by COPY to the
# reference table: keeping 1, a retrain leaves only its own version
is(alice("SELECT gibbs_nb_set_retention('warm_bulk', 1) >= 0"), 't', 'keep one version');
is(alice("SELECT status FROM gibbs_nb_retrain('warm_bulk', warm => true)"), 'succeeded',
	'a retrain with retention');
is(alice("SELECT string_agg(version::text, ' ') FROM gibbs_nb.packed WHERE model_name = 'warm_bulk'"),
	'3', 'only the newest version is left');
is($workers[0]->safe_psql('postgres',
		"SELECT string_agg(version::text, ' ') FROM gibbs_nb.packed WHERE model_name = 'warm_bulk'"),
	'3', 'on the workers too');

# the label check's fallback on the cluster: by default, on few labels that
# do not fit the unlabelled documents, the version is the labels-only model,
# its probabilities of the documents given by the nodes that hold them
$coord->safe_psql('postgres', q{
  SET client_min_messages = warning;
  CREATE TABLE misfit (id int PRIMARY KEY, tokens text[], label text);
  INSERT INTO misfit
  SELECT i, ARRAY[t || '1', t || '2', t || '3', t || '4', t || '5', l], CASE WHEN i <= 20 THEN l END
  FROM generate_series(1, 800) i,
       LATERAL (SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END,
                       CASE WHEN i % 4 < 2 THEN 'x' ELSE 'y' END) s(t, l);
});
distribute_with_local_copy('misfit');
foreach my $source ('misfit', 'misfit_local')
{
	is(alice("SELECT status FROM gibbs_nb_train('$source', '$source', 'tokens', 'label',
                                                sampler => 'blocked', sweeps => 40, seed => 1)"),
		'succeeded', "the blocked sampler by default on $source");
}
is(alice(q{
  SELECT string_agg(unlabeled_weight || ' ' || unlabeled_weight_chosen, ', ' ORDER BY model_name)
  FROM gibbs_nb.models WHERE model_name IN ('misfit', 'misfit_local')}),
	'0 true, 0 true', 'both are the labels-only model');
is(alice(q{
  SELECT (SELECT row(log_pi, log_theta, public.doc_labels(version_id)) FROM gibbs_nb.packed
          WHERE model_name = 'misfit')
       = (SELECT row(log_pi, log_theta, public.doc_labels(version_id)) FROM gibbs_nb.packed
          WHERE model_name = 'misfit_local')}),
	't', 'the same labels-only model and probabilities from the cluster');

# more labelled documents than the label check scores (2,000): chosen by
# their ids, read by id from the shards; the same figures and model as the
# local copy
$coord->safe_psql('postgres', q{
  SET client_min_messages = warning;
  CREATE TABLE many (id int PRIMARY KEY, tokens text[], label text);
  INSERT INTO many
  SELECT i, ARRAY['w' || (i % 50), CASE WHEN (i % 3 = 0) = (i % 5 < 3) THEN 'ay' ELSE 'bee' END],
         CASE WHEN i <= 2100 THEN CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END END
  FROM generate_series(1, 2400) i;
});
distribute_with_local_copy('many');
foreach my $source ('many', 'many_local')
{
	is(alice("SELECT status FROM gibbs_nb_train('$source', '$source', 'tokens', 'label', sweeps => 10,
                                                seed => 1, unlabeled_weight => 1)"),
		'succeeded', "training on $source, 2,100 labelled");
}
is(alice(q{
  SELECT string_agg(labels_agreement || ' ' || labels_only_agreement, ', ' ORDER BY model_name)
  FROM gibbs_nb.models WHERE model_name IN ('many', 'many_local')}),
	'0.6635 0.6635, 0.6635 0.6635', 'the label check scores the same 2,000 documents');
is(alice(q{
  SELECT (SELECT row(log_theta, public.doc_labels(version_id)) FROM gibbs_nb.packed WHERE model_name = 'many')
       = (SELECT row(log_theta, public.doc_labels(version_id)) FROM gibbs_nb.packed WHERE model_name = 'many_local')}),
	't', 'and the same model');

# gibbs_nb.theta, a view of the reference table, on the coordinator and on a
# worker: the model's rows, as many as the packed row holds, the same as the
# local model's; bob sees none of them
my $theta_q = q{SELECT count(*) || ' ' || md5(string_agg(class || ' ' || token || ' ' || probability, ';'
                                                        ORDER BY token, class))
                FROM gibbs_nb.theta WHERE model_name = '%s' AND version = 1};
my $theta_spam = alice(sprintf($theta_q, 'spam'));
is($theta_spam, alice(sprintf($theta_q, 'spam_local')),
	'gibbs_nb.theta over the reference table: the same rows as the local model');
is((split / /, $theta_spam)[0],
	alice(q{SELECT cardinality(tokens) * cardinality(classes) FROM gibbs_nb.packed WHERE model_name = 'spam'}),
	'one row per token and class');
is($workers[0]->safe_psql('postgres', sprintf($theta_q, 'spam'), extra_params => [ '-U', 'alice' ]),
	$theta_spam, 'and the same on a worker');
is($coord->safe_psql('postgres', q{SELECT count(*) FROM gibbs_nb.theta}, extra_params => [ '-U', 'bob' ]),
	'0', 'bob sees no theta rows of alice\'s');
# the documents' labels are on the workers' shards; their row security holds
# there as on one node
is(alice(q{SELECT (SELECT count(*) FROM gibbs_nb.document_labels d JOIN gibbs_nb.packed p USING (version_id)
                   WHERE p.model_name = 'spam' AND p.version = 1)
                = (SELECT n_documents FROM gibbs_nb.models WHERE model_name = 'spam' AND version = 1)}),
	't', "alice sees her version's documents' labels, one row a document");
is($coord->safe_psql('postgres', q{SELECT count(*) FROM gibbs_nb.document_labels},
		extra_params => [ '-U', 'bob' ]),
	'0', 'bob sees none of them');
is($coord->safe_psql('postgres', q{
  SELECT count(DISTINCT nodeport) FROM pg_dist_shard_placement p JOIN pg_dist_shard s USING (shardid)
  WHERE s.logicalrelid = 'gibbs_nb.document_labels'::regclass}),
	'2', 'their shards are on both workers');
is($coord->safe_psql('postgres', q{
  SELECT l.partmethod::text || ' ' || (l.colocationid = s.colocationid)::text
  FROM pg_dist_partition l, pg_dist_partition s
  WHERE l.logicalrelid = 'public.spam_labels'::regclass AND s.logicalrelid = 'public.mail'::regclass}),
	'h true', 'the labels table is distributed, co-located with the source');
is($coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'public.spam_local_labels'::regclass"),
	'0', "a local source's labels table stays local");
is(alice(q{
  EXPLAIN (COSTS OFF) SELECT count(*) FROM mail JOIN spam_labels USING (id)}) =~ /Task Count: 8/ ? 1 : 0,
	1, 'a join of the source and its labels runs on the shards');
is(alice(q{
  SELECT count(*) FROM mail m JOIN spam_labels l USING (id)
  JOIN spam_local_labels ll USING (id) WHERE l.label = ll.label}),
	'403', 'every document labelled as on one node');

# --- prediction on the workers, as alice ---
like(alice("EXPLAIN (VERBOSE, COSTS OFF) SELECT id, gibbs_nb_predict('spam', tokens) FROM mail"),
	qr/Task Count: 8.*Query: SELECT id, public\.gibbs_nb_predict\('spam'::text, tokens\)/s,
	'gibbs_nb_predict runs in the shard queries, on the workers');
is(alice(q{
  CREATE TABLE on_workers AS SELECT id, gibbs_nb_predict('spam', tokens) AS label FROM mail;
  CREATE TABLE on_one AS SELECT id, gibbs_nb_predict('spam', tokens) AS label FROM mail_local;
  SELECT count(*) || ' ' || count(*) FILTER (WHERE w.label = o.label)
  FROM on_workers w JOIN on_one o USING (id)}),
	'403 403', "a non-superuser's prediction over the distributed table gives the labels of one node");
is(alice(q{
  SELECT count(*) FROM mail WHERE (gibbs_nb_predict_proba('spam', tokens))[1] BETWEEN 0 AND 1}),
	'403', 'gibbs_nb_predict_proba too');

# bob may not see alice's model: not on the coordinator, not on a worker
($ret, $out, $err) = $coord->psql('postgres',
	"SELECT count(gibbs_nb_predict('spam', tokens)) FROM mail_local",
	extra_params => [ '-U', 'bob' ]);
like($err, qr/permission denied for table mail_local/, 'bob cannot read the local copy');
$coord->safe_psql('postgres', 'GRANT SELECT ON mail, mail_local TO bob');
($ret, $out, $err) = $coord->psql('postgres',
	"SELECT count(gibbs_nb_predict('spam', tokens)) FROM mail",
	extra_params => [ '-U', 'bob' ]);
like($err, qr/model "spam" does not exist/, "on the workers, bob does not see alice's model");
is($workers[0]->safe_psql('postgres', q{
  SET citus.show_shards_for_app_name_prefixes = '*';
  SELECT count(*) FROM pg_class WHERE relname ~ '^packed_[0-9]+$'}),
	'1', 'a worker holds a placement of gibbs_nb.packed');

# a label trigger on a distributed table, firing on the workers
alice(q{
  CREATE TABLE inbox (id int PRIMARY KEY, tokens text[], predicted text);
  SELECT create_distributed_table('inbox', 'id', colocate_with => 'mail');
  SET citus.enable_unsafe_triggers = on;
  CREATE TRIGGER label BEFORE INSERT OR UPDATE ON inbox
    FOR EACH ROW EXECUTE FUNCTION gibbs_nb_label_trigger('spam', 'tokens', 'predicted');
  INSERT INTO inbox SELECT id, tokens FROM mail;});
is(alice(q{
  SELECT count(*) || ' ' || count(*) FILTER (WHERE i.predicted = o.label)
  FROM inbox i JOIN on_one o USING (id)}),
	'403 403', 'a label trigger on a distributed table labels as on one node');

# --- retraining on the coordinator, by hand and by pg_cron ---
is(alice(q{SELECT version FROM gibbs_nb_retrain('spam')}), '2', 'gibbs_nb_retrain');
is(alice(q{SELECT version || ' ' || count(*) FROM spam_labels GROUP BY version}),
	'2 403', 'into the distributed labels table');
# pg_cron lives on the coordinator only: not propagated to the workers
$coord->safe_psql('postgres', 'SET citus.enable_ddl_propagation = off; CREATE EXTENSION pg_cron');
my $jobid = $coord->safe_psql('postgres', q{
  SELECT cron.schedule_in_database('retrain-spam', '* * * * *', $$SELECT gibbs_nb_retrain('spam')$$,
                                   'postgres', 'alice')});
ok($coord->poll_query_until('postgres', qq{
  SELECT count(*) > 0 FROM cron.job_run_details WHERE jobid = $jobid AND status = 'succeeded'}),
	'a pg_cron job on the coordinator retrains the model');
$coord->safe_psql('postgres', "SELECT cron.unschedule($jobid)");
cmp_ok(alice(q{SELECT max(version) FROM gibbs_nb.packed WHERE model_name = 'spam'}), '>=', 3,
	'and publishes a new version, on every node');
is($workers[1]->safe_psql('postgres', q{
  SET citus.show_shards_for_app_name_prefixes = '*';
  SELECT count(*) > 0 FROM pg_class WHERE relname ~ '^packed_[0-9]+$'}), 't',
	'(the second worker too)');
is(alice(q{SELECT count(*) FROM mail WHERE gibbs_nb_predict('spam', tokens) IS NOT NULL}),
	'403', 'which the workers then predict with');

# --- deploying and dropping: every node follows ---
# a version from another seed (of the chain's model: unlabeled_weight 1, not
# the labels-only model the default may choose, which no seed changes), then
# version 1 deployed (an UPDATE of the reference table): the workers predict
# with the deployed version, as the coordinator does, from the next
# statement on
is(alice(q{SELECT status FROM gibbs_nb_train('spam', 'mail', 'tokens', label_column => 'label',
                                             sweeps => 40, seed => 99, unlabeled_weight => 1)}),
	'succeeded', 'a version from another seed');
alice(q{CREATE TABLE proba_latest AS
        SELECT id, gibbs_nb_predict_proba('spam', tokens) AS p FROM mail});
alice(q{SELECT gibbs_nb_deploy('spam', 1)});
is(alice(q{
  CREATE TABLE proba_workers AS SELECT id, gibbs_nb_predict_proba('spam', tokens) AS p FROM mail;
  CREATE TABLE proba_one AS SELECT id, gibbs_nb_predict_proba('spam', tokens) AS p FROM mail_local;
  SELECT count(*) FILTER (WHERE w.p = o.p) || ' ' || count(*) FILTER (WHERE w.p <> l.p)
  FROM proba_workers w JOIN proba_one o USING (id) JOIN proba_latest l USING (id)}) =~ /^403 [1-9]/ ? 1 : 0,
	1, 'after gibbs_nb_deploy the workers predict with the deployed version');
is(alice(q{SELECT version || ' ' || count(*) FROM spam_labels GROUP BY version}),
	'1 403', 'and the distributed labels table follows');
my $dropped_version = alice(q{SELECT version_id FROM gibbs_nb.models WHERE model_name = 'spam_local'});
is(alice(qq{SELECT count(*) > 0 FROM gibbs_nb.document_labels WHERE version_id = $dropped_version}),
	't', 'the version keeps its documents\' labels on the shards');
is(alice(q{SELECT gibbs_nb_drop('spam_local')}), '1', 'gibbs_nb_drop (one version)');
is($coord->safe_psql('postgres',
		qq{SELECT count(*) FROM gibbs_nb.document_labels WHERE version_id = $dropped_version}),
	'0', 'its documents\' labels are deleted from the shards');
is($coord->safe_psql('postgres', "SELECT to_regclass('public.spam_local_labels') IS NULL"), 't',
	'with its labels table');
($ret, $out, $err) = $coord->psql('postgres',
	"SELECT count(gibbs_nb_predict('spam_local', tokens)) FROM mail", extra_params => [ '-U', 'alice' ]);
like($err, qr/model "spam_local" does not exist/, 'a dropped model is gone on the workers');

$_->stop foreach (@workers, $coord);
done_testing();
