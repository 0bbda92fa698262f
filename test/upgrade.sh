#!/usr/bin/env bash
# The upgrade test: a database that trained a model under the released 0.1.0
# (built from its git commit) is upgraded with ALTER EXTENSION gibbs_nb UPDATE
# to this build, and the model must still predict the same probabilities,
# belong to the same role, retrain, and keep its labels table.
#
# 0.1.0 was released for PostgreSQL 15 alone.  On 15 the database is updated
# where 0.1.0 made it.  On a newer server (PG_CONFIG) it gets there as a
# user's would: made by 0.1.0 on PostgreSQL 15 (OLD_PG_CONFIG, default
# Debian's), moved by the newer server's pg_upgrade (which recreates 0.1.0's
# functions against this build's library), then updated.  (One step is not
# a user's: see pg_attver below.)
#
# Neither version touches a PostgreSQL installation: each server is copied
# privately (PostgreSQL finds its library and extension directories relative
# to its binaries), on throwaway clusters.  Run as root (make upgradecheck,
# from test/run-tests.sh), after `make` has built this version for PG_CONFIG.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
release=11a2f3f   # gibbs_nb 0.1.0

PG_CONFIG=${PG_CONFIG:-pg_config}   # the server to test on (make upgradecheck passes its own)
OLD_PG_CONFIG=${OLD_PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
major() { "$1" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/'; }
if [ "$(major "$PG_CONFIG")" -le 15 ]; then
  OLD_PG_CONFIG=$PG_CONFIG
elif [ "$(major "$OLD_PG_CONFIG")" != 15 ]; then
  echo "upgrade test: OLD_PG_CONFIG must name a PostgreSQL 15 (0.1.0's only server)" >&2; exit 1
fi

work=$(mktemp -d /tmp/gibbs_nb_upgrade.XXXXXX)
# each private copy keeps its installation's layout under its own root
bin=$work/root$("$PG_CONFIG" --bindir)              # the server under test
old_bin=$work/old-root$("$OLD_PG_CONFIG" --bindir)  # 0.1.0's PostgreSQL 15
[ "$OLD_PG_CONFIG" != "$PG_CONFIG" ] || old_bin=$bin
server_bin=$old_bin   # the server start_cluster and stop_cluster run
log=$work/server.log
stop_cluster() {
  [ -f "$work/data/postmaster.pid" ] &&
    runuser -u postgres -- "$server_bin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null || true
}
# the servers' logs are kept in UPGRADE_LOGS when it is set (the test command
# reads them for assertion failures)
keep_logs() {
  [ -n "${UPGRADE_LOGS:-}" ] || return 0
  mkdir -p "$UPGRADE_LOGS"
  for f in "$work"/server*.log; do [ ! -f "$f" ] || cp "$f" "$UPGRADE_LOGS/upgrade-$(basename "$f")"; done
}
trap 'stop_cluster; keep_logs; rm -rf "$work"' EXIT

if ! git -C "$repo" cat-file -e "$release^{commit}" 2>/dev/null; then
  echo "upgrade test: commit $release (0.1.0) is not in this clone's history" >&2
  exit 1
fi

# 0.1.0, built with PostgreSQL 15's PGXS
mkdir -p "$work/old"
git -C "$repo" archive "$release" | tar -x -C "$work/old"
make -C "$work/old" -s PG_CONFIG="$OLD_PG_CONFIG" >/dev/null

# copy_server PG_CONFIG ROOT: a private copy of a server's binaries,
# libraries and share folder, each where it is (Debian's layout or a source
# build's prefix alike), without gibbs_nb
copy_server() {
  local dir copy
  for dir in "$("$1" --bindir)" "$("$1" --pkglibdir)" "$("$1" --sharedir)"; do
    mkdir -p "$2$(dirname "$dir")"
    cp -a "$dir" "$2$(dirname "$dir")/"
  done
  copy=$2$("$1" --bindir)/pg_config
  [ "$("$copy" --pkglibdir)" != "$("$1" --pkglibdir)" ] ||
    { echo "upgrade test: the copy of $1 is not relocatable" >&2; exit 1; }
  rm -f "$("$copy" --sharedir)"/extension/gibbs_nb* "$("$copy" --pkglibdir)"/gibbs_nb.so
}
install_version() {   # $1: a built tree, $2: the bin folder of a copy
  cp "$1/gibbs_nb.so" "$("$2/pg_config" --pkglibdir)/"
  cp "$1/gibbs_nb.control" "$1"/sql/gibbs_nb--*.sql "$("$2/pg_config" --sharedir)/extension/"
}
copy_server "$PG_CONFIG" "$work/root"
[ "$old_bin" = "$bin" ] || copy_server "$OLD_PG_CONFIG" "$work/old-root"

chown -R postgres "$work"
# new_cluster BIN DATA [postgresql.conf lines...]: a cluster in DATA made by
# the copy's initdb (with initdb_opts), listening in $work only
initdb_opts=()
new_cluster() {
  local initdb_bin=$1 data=$2; shift 2
  runuser -u postgres -- "$initdb_bin/initdb" -D "$data" -A trust -U postgres "${initdb_opts[@]}" >/dev/null
  printf '%s\n' "listen_addresses = ''" "unix_socket_directories = '$work'" \
    "max_worker_processes = 16" "gibbs_nb.progress_interval = 0" "$@" >> "$data/postgresql.conf"
}
new_cluster "$old_bin" "$work/data"
start_cluster() {
  runuser -u postgres -- "$server_bin/pg_ctl" -D "$work/data" -l "$log" -w start >/dev/null
}
q() { "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -U postgres -d postgres "$@"; }
qd() { local db=$1; shift; "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -U postgres -d "$db" "$@"; }

# --- under 0.1.0: a model trained by a non-superuser, two versions ---
install_version "$work/old" "$old_bin"
start_cluster
q <<'SQL'
CREATE EXTENSION gibbs_nb;
CREATE ROLE alice;
CREATE SCHEMA alice AUTHORIZATION alice;
SQL
q -f "$repo/test/alice_spam.sql" >/dev/null
probe="SET ROLE alice; SELECT string_agg(gibbs_nb_predict_proba('spam', tokens)::text, ';' ORDER BY id)
       FROM (VALUES (1, '{cheap,w3}'::text[]), (2, '{agenda,w5}')) d(id, tokens)"
before=$(q -c "$probe")
versions_before=$(q -c "SELECT string_agg(version::text, ',' ORDER BY version) FROM gibbs_nb.models")
# 0.1.0's theta rows, kept beside the extension to compare with the view
q -c "CREATE TABLE public.theta_before AS
        SELECT model_name, version, class, token, probability, pg_get_userbyid(owner) AS owner
          FROM gibbs_nb.theta"
theta_rows_before=$(q -c "SELECT count(*) FROM public.theta_before")
# another database whose theta has a row its packed table lacks (a hand
# edit: 0.1.0 itself writes and deletes both together): its update must stop
q -c "CREATE DATABASE orphan"
qd orphan <<'SQL'
CREATE EXTENSION gibbs_nb;
INSERT INTO gibbs_nb.theta VALUES ('ghost', 1, 'a', 'x', 0.5, 10);
SQL
[ "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'gibbs_nb'")" = 0.1.0 ]
if [ "$old_bin" != "$bin" ]; then
  # A workaround, not what a user does: this machine's PostgreSQL 15
  # (Debian's 15.20) gives every new column an attribute option, pg_attver,
  # that PostgreSQL 18.6 does not know (and that ALTER TABLE ... RESET does
  # not remove), so 18's pg_upgrade stops at the first table of any database.
  # It has nothing to do with gibbs_nb: where it is, it is taken out of the
  # catalog so that the upgrade can be tested, and the test says so.
  for db in postgres orphan; do
    n=$(qd "$db" -c "WITH cleared AS (
                       UPDATE pg_catalog.pg_attribute a
                          SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(a.attoptions) o
                                                         WHERE o NOT LIKE 'pg_attver=%'), '{}')
                        WHERE a.attrelid >= 16384 AND a.attoptions::text LIKE '%pg_attver=%'
                       RETURNING 1)
                     SELECT count(*) FROM cleared")
    [ "$n" -eq 0 ] || echo "# $db: pg_attver taken out of $n columns' options (this PostgreSQL 15's, unknown to $(major "$PG_CONFIG"))"
  done
fi
stop_cluster

# --- this build, then ALTER EXTENSION ... UPDATE ---
install_version "$repo" "$bin"
if [ "$old_bin" != "$bin" ]; then
  # PostgreSQL 15 to the newer server by its pg_upgrade, this build installed there
  mv "$work/data" "$work/data15"
  # (18 checksums new clusters by default; pg_upgrade wants the old cluster's setting)
  initdb_help=$("$bin/initdb" --help)
  if grep -q -- --no-data-checksums <<<"$initdb_help"; then initdb_opts+=(--no-data-checksums); fi
  new_cluster "$bin" "$work/data"
  if ! (cd "$work" && runuser -u postgres -- "$bin/pg_upgrade" -b "$old_bin" -B "$bin" \
          -d "$work/data15" -D "$work/data" -U postgres -s "$work" >"$work/pg_upgrade.out" 2>&1); then
    tail -n 30 "$work/pg_upgrade.out"
    grep -rh -B2 -A6 'ERROR\|error:\|FATAL' "$work/data/pg_upgrade_output.d" | head -n 60
    [ -z "${UPGRADE_LOGS:-}" ] ||
      { mkdir -p "$UPGRADE_LOGS" && cp -r "$work/data/pg_upgrade_output.d" "$UPGRADE_LOGS/"; }
    exit 1
  fi
  echo "ok - pg_upgrade from PostgreSQL 15 to $(major "$PG_CONFIG"): 0.1.0's objects on this build's library"
  server_bin=$bin
  log=$work/server-new.log
fi
start_cluster
fail=0
check() {   # $1: what, $2: expected, $3: got
  if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1: expected '$2', got '$3'"; fail=1; fi
}
# before ALTER EXTENSION: the new library under 0.1.0's declarations says
# what to do (it must not read arguments the old declaration does not pass)
check "the new library asks for the update" "0A000 Run ALTER EXTENSION gibbs_nb UPDATE." \
  "$(q -c "DO \$\$ DECLARE h text; BEGIN
             PERFORM gibbs_nb_train('x', 'alice.mail', 'tokens', 'label', sweeps => 1);
           EXCEPTION WHEN OTHERS THEN
             GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT; RAISE NOTICE '% %', SQLSTATE, h;
           END \$\$" 2>&1 >/dev/null | sed -n 's/^NOTICE:  //p')"
q -c "ALTER EXTENSION gibbs_nb UPDATE"
check "the extension is at the new version" \
  "$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$repo/gibbs_nb.control")" \
  "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'gibbs_nb'")"
check "the versions are kept" "$versions_before" \
  "$(q -c "SELECT string_agg(version::text, ',' ORDER BY version) FROM gibbs_nb.models")"
check "the model belongs to alice, by name" "alice" \
  "$(q -c "SELECT DISTINCT owner FROM gibbs_nb.models")"
check "the model predicts the same probabilities" "$before" "$(q -c "$probe")"
check "the source is known by OID, in these catalogs" "alice.mail" \
  "$(q -c "SELECT DISTINCT source_relid::regclass FROM gibbs_nb.models
           WHERE catalog = gibbs_nb.catalog_identity()")"
check "alice retrains it" "3 succeeded" \
  "$(q -c "SET ROLE alice; SELECT version || ' ' || status FROM gibbs_nb_retrain('spam')")"
check "into the labels table 0.1.0 created" "3 200" \
  "$(q -c "SELECT max(version) || ' ' || count(*) FROM alice.spam_labels")"
# theta: the table's rows are the view's, exp(log theta) of the packed rows
check "theta has as many rows, all of them found" "$theta_rows_before $theta_rows_before" \
  "$(q -c "SELECT count(*) || ' ' || count(t.probability) FROM public.theta_before b
             LEFT JOIN gibbs_nb.theta t USING (model_name, version, class, token, owner)")"
theta_diff=$(q -F ' ' -c "SELECT count(*) FILTER (WHERE t.probability = b.probability),
                                  coalesce(max(abs(t.probability - b.probability) / b.probability), 0)
                             FROM public.theta_before b
                             JOIN gibbs_nb.theta t USING (model_name, version, class, token, owner)")
read -r theta_same theta_rel <<<"$theta_diff"
echo "# theta after the update: $theta_same of $theta_rows_before probabilities bit for bit the same;" \
     "largest relative difference $theta_rel (0.1.0 stored theta, 0.2.0 shows exp(log theta))"
check "theta's probabilities are 0.1.0's within 1e-14 (relative)" "t" \
  "$(awk -v r="$theta_rel" 'BEGIN { print (r <= 1e-14) ? "t" : "f" }')"
check "theta is a view; pg_dump's table list names no table that is gone" "v 0" \
  "$(q -c "SELECT (SELECT relkind::text FROM pg_class WHERE oid = 'gibbs_nb.theta'::regclass) || ' ' ||
                  (SELECT count(*) FROM pg_extension e, unnest(e.extconfig) x(oid)
                    WHERE e.extname = 'gibbs_nb'
                      AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = x.oid AND c.relname <> 'theta'))")"
# the database with a theta row that packed lacks is not updated, and says why
check "an update that would lose theta rows stops, naming them" \
  "55000 gibbs_nb.theta has rows that gibbs_nb.packed does not hold: ghost version 1 (owner postgres)" \
  "$(qd orphan -c "DO \$\$ BEGIN ALTER EXTENSION gibbs_nb UPDATE;
                   EXCEPTION WHEN OTHERS THEN RAISE NOTICE '% %', SQLSTATE, SQLERRM; END \$\$" 2>&1 >/dev/null |
     sed -n 's/^NOTICE:  //p')"
check "... and leaves the extension at 0.1.0" "0.1.0" \
  "$(qd orphan -c "SELECT extversion FROM pg_extension WHERE extname = 'gibbs_nb'")"
check "... which updates once the row is gone" "1" \
  "$(qd orphan -c "DELETE FROM gibbs_nb.theta" -c "ALTER EXTENSION gibbs_nb UPDATE" \
                 -c "SELECT count(*) FROM pg_class WHERE oid = 'gibbs_nb.theta'::regclass AND relkind = 'v'")"
fresh_members=$(q -c "CREATE DATABASE fresh" >/dev/null; "$bin/psql" -X -At -h "$work" -U postgres -d fresh \
       -c "CREATE EXTENSION gibbs_nb" -c "SELECT count(*) FROM pg_depend d
    JOIN pg_extension e ON d.refobjid = e.oid WHERE e.extname = 'gibbs_nb' AND d.deptype = 'e'" | tail -1)
check "a new database gets the same objects" "$(q -c "SELECT count(*) FROM pg_depend d
    JOIN pg_extension e ON d.refobjid = e.oid WHERE e.extname = 'gibbs_nb' AND d.deptype = 'e'")" \
  "$fresh_members"
stop_cluster

# --- on Citus: the update run on a coordinator propagates to its workers ---
# A coordinator and two workers of the server under test, with Citus (when
# it is installed there); 0.1.0's objects made with CREATE EXTENSION ...
# VERSION '0.1.0' on the coordinator (Citus creates them on the workers),
# then ALTER EXTENSION gibbs_nb UPDATE there.  (The data a 0.1.0 model leaves
# is the single node's part above.)
citus_nodes=(coord worker1 worker2)
stop_citus() {
  local n
  for n in "${citus_nodes[@]}"; do
    [ ! -f "$work/citus-$n/postmaster.pid" ] ||
      runuser -u postgres -- "$bin/pg_ctl" -D "$work/citus-$n" -m fast -w stop >/dev/null || true
  done
}
trap 'stop_citus; stop_cluster; keep_logs; rm -rf "$work"' EXIT
if [ ! -f "$("$bin/pg_config" --pkglibdir)/citus.so" ]; then
  # (the test command builds Citus where it can, and then says it is required)
  if [ -n "${UPGRADE_REQUIRE_CITUS:-}" ]; then
    check "Citus is installed in $("$PG_CONFIG" --pkglibdir)" "yes" "no"
  else
    echo "ok - # skip the Citus update: Citus is not installed in $("$PG_CONFIG" --pkglibdir)"
  fi
else
  port=5440
  for n in "${citus_nodes[@]}"; do
    new_cluster "$bin" "$work/citus-$n" "port = $port" \
      "shared_preload_libraries = 'citus'" "max_prepared_transactions = 20"
    runuser -u postgres -- "$bin/pg_ctl" -D "$work/citus-$n" -l "$work/server-citus-$n.log" -w start >/dev/null
    "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p $port -U postgres -d postgres \
      -c "SET client_min_messages = warning" -c "CREATE EXTENSION citus"
    port=$((port + 1))
  done
  cq() { "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p "$1" -U postgres -d postgres "${@:2}"; }
  cq 5440 -c "SELECT citus_set_coordinator_host('$work', 5440)" \
    -c "SELECT citus_add_node('$work', 5441)" -c "SELECT citus_add_node('$work', 5442)" >/dev/null
  cq 5440 -c "CREATE EXTENSION gibbs_nb VERSION '0.1.0'"
  extversions() { local p; for p in 5440 5441 5442; do
      cq $p -c "SELECT extversion FROM pg_extension WHERE extname = 'gibbs_nb'"; done | paste -sd ' '; }
  check "Citus: 0.1.0 on the coordinator and both workers" "0.1.0 0.1.0 0.1.0" "$(extversions)"
  cq 5440 -c "SET client_min_messages = warning" -c "ALTER EXTENSION gibbs_nb UPDATE"
  new_version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$repo/gibbs_nb.control")
  check "Citus: ALTER EXTENSION UPDATE on the coordinator updates the workers" \
    "$new_version $new_version $new_version" "$(extversions)"
  members="SELECT count(*) FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
           WHERE e.extname = 'gibbs_nb' AND d.deptype = 'e'"
  check "Citus: every node has the objects of a new installation" "$fresh_members $fresh_members $fresh_members" \
    "$(for p in 5440 5441 5442; do cq $p -c "$members"; done | paste -sd ' ')"
  check "Citus: gibbs_nb_citus_distribute() after the update" "t" \
    "$(cq 5440 -c "SET client_min_messages = warning" -c "SELECT gibbs_nb_citus_distribute()" >/dev/null &&
       cq 5440 -c "SELECT count(*) = 1 FROM pg_dist_partition WHERE logicalrelid = 'gibbs_nb.packed'::regclass AND partmethod = 'n'")"
  stop_citus
fi

if [ "$fail" -ne 0 ]; then
  tail -n 30 "$log"
  exit 1
fi
