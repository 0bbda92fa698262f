#!/usr/bin/env bash
# What the blocked sampler's sweeps would cost on Citus (issue 27 item 3,
# `make bench-citus-probe`): a coordinator and two workers on this machine
# (unix sockets, throwaway clusters), a table `d` of 6,046 rows distributed
# by id over SHARDS shards (default 32), and three probes:
# E1 which worker backends serve a distributed query's shard tasks, four
#    queries in one transaction (E1) and in four (E1b): a node can keep a
#    shard's documents in a backend's memory between sweeps only if the same
#    backend serves it again;
# E2 a distributed query's time with a bytea parameter of n bytes (theta
#    going out to every shard task each sweep), median of 15;
# E3 run_command_on_shards with a literal of n bytes, and its backends;
# E4 a table co-located with d holding one row a shard ("anchor"): where a
#    function in its target list runs, and a query's time over it (a call
#    per shard without scanning the documents).
# EXTRA_CONF adds postgresql.conf lines on every node, e.g.
#   EXTRA_CONF="citus.max_adaptive_executor_pool_size = 1"
# Needs Citus (../shared/citus/build.sh) and the superuser shell the tests use.
#
# Measured 2026-12-01 (Citus 13.2, PostgreSQL 15, this 2-core machine): with
# Citus's defaults the shard tasks of one transaction's queries go to the
# same 5 or 6 backends, but a shard to any of them, and other transactions
# keep one backend a worker and open new ones; with max_adaptive_executor_pool_size = 1 one backend a worker
# serves every shard task of every query, in one transaction or several
# (the cached connection).  A query over 32 shards: 3.8-4.3 ms, +0.5-1 ms
# with a 100 kB parameter, +1.5-2.3 ms with 1 MB; over 4 shards 0.75 ms,
# +0.8 ms with 1 MB.  run_command_on_shards: 165-210 ms a call (a new
# connection a shard, 32 backends), 1.0 s with a 1 MB literal.  The anchor
# table's 32 rows are read on the workers (16 a worker, the function in the
# target list evaluated there), 4.4 ms a query, 7.6 ms with 1 MB (while the
# test suite ran).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
SHARDS=${SHARDS:-32}
[ -f "$(pg_config --pkglibdir)/citus.so" ] || { echo "Citus is not installed: run ../shared/citus/build.sh" >&2; exit 1; }
# shellcheck source=citus-cluster.sh
source test/bench/citus-cluster.sh
if [ -n "${EXTRA_CONF:-}" ]; then
  citus_cluster_start citus_probe 55301 55302 55303 "$EXTRA_CONF"
else
  citus_cluster_start citus_probe 55301 55302 55303
fi
q -c "CREATE TABLE d (id int PRIMARY KEY, x int)" -c "SELECT create_distributed_table('d', 'id', shard_count => $SHARDS)" -c "INSERT INTO d SELECT i, i FROM generate_series(1, 6046) i" >/dev/null
q -c "CREATE FUNCTION blen(b bytea) RETURNS bigint LANGUAGE sql IMMUTABLE AS 'SELECT pg_catalog.length(b)'" >/dev/null
echo "Citus $(q -At -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), 2 workers, $SHARDS shards; ${EXTRA_CONF:-defaults}"
pids="SELECT count(DISTINCT p) || ' backends: ' || string_agg(DISTINCT p::text, ',' ORDER BY p::text) FROM (SELECT pg_backend_pid() p FROM d GROUP BY id) s"
echo "E1 worker backends serving the shard tasks, 4 statements in one transaction:"
q -At -c "BEGIN" -c "$pids" -c "$pids" -c "$pids" -c "$pids" -c "COMMIT"
echo "E1b the same, 4 transactions in one session:"
q -At -c "$pids" -c "$pids" -c "$pids" -c "$pids"
# timed(sql, b, reps): the median ms of reps runs of sql with $1 = b, in one transaction
q -c "CREATE FUNCTION timed(sql text, b bytea, reps int) RETURNS numeric LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; ts float8[] := '{}'; r bigint;
BEGIN
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    EXECUTE sql INTO r USING b;
    ts := ts || extract(epoch FROM clock_timestamp() - t0) * 1000;
  END LOOP;
  RETURN (SELECT round(percentile_disc(0.5) WITHIN GROUP (ORDER BY x)::numeric, 2) FROM unnest(ts) x);
END \$\$" >/dev/null
param() { echo "pg_catalog.decode(repeat('ab', $1), 'hex')"; }
echo "E2 ms per statement (median of 15, in one transaction), a bytea parameter of n bytes in a query over every shard:"
for n in 0 1000 10000 100000 1000000; do
  echo "  $n bytes: $(q -At -c "SELECT timed('SELECT sum(blen(\$1)) FROM d', $(param $n), 15)")"
done
echo "E3 run_command_on_shards, a hex literal of n bytes in each shard's command (median of 9):"
for n in 0 1000 100000 1000000; do
  echo "  $n bytes: $(q -At -c "SELECT timed(format('SELECT sum(result::bigint) FROM run_command_on_shards(''d'', %L)',
    format('SELECT pg_catalog.length(pg_catalog.decode(%L, ''hex'')) FROM %%s LIMIT 1', repeat('ab', $n))), NULL, 9)") ms"
done
echo "E3b backends serving run_command_on_shards, 3 calls in one transaction:"
rp="SELECT count(DISTINCT result) || ' backends' FROM run_command_on_shards('d', 'SELECT pg_backend_pid() FROM %s LIMIT 1')"
q -At -c "BEGIN" -c "$rp" -c "$rp" -c "$rp" -c "COMMIT"
q -c "CREATE TABLE anchor (k int PRIMARY KEY)" -c "SELECT create_distributed_table('anchor', 'k', colocate_with => 'd')" \
  -c "INSERT INTO anchor SELECT DISTINCT ON (get_shard_id_for_distribution_column('d', i)) i
      FROM generate_series(1, 100000) i ORDER BY get_shard_id_for_distribution_column('d', i), i" >/dev/null
echo "E4 an anchor table co-located with d, one row a shard: where a function in its target list runs, and a query's time over it"
q -At -c "SELECT sum(n) || ' rows, by port ' || string_agg(p || ': ' || n, ', ' ORDER BY p) FROM (SELECT p, count(*) n FROM (SELECT current_setting('port') p FROM anchor) x GROUP BY p) y"
for n in 0 1000000; do
  echo "  $n bytes: $(q -At -c "SELECT timed('SELECT sum(blen(\$1)) FROM anchor', $(param $n), 15)") ms"
done
