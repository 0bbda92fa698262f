#!/usr/bin/env bash
# The upgrade test: a database that trained a model under the released 0.1.0
# (built from its git commit) is upgraded with ALTER EXTENSION gibbs_nb UPDATE
# to this build, and the model must still predict the same probabilities,
# belong to the same role, retrain, and keep its labels table.
#
# Neither version touches the system's PostgreSQL installation: both are
# installed into a private copy of it (PostgreSQL finds its library and
# extension directories relative to its binaries), on a throwaway cluster.
# Run as root from test/run-tests.sh, after `make` has built this version.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
release=11a2f3f   # gibbs_nb 0.1.0

PG_CONFIG=${PG_CONFIG:-pg_config}   # the server to test on (make upgradecheck passes its own)

work=$(mktemp -d /tmp/gibbs_nb_upgrade.XXXXXX)
bin=$work/root$("$PG_CONFIG" --bindir)   # the copy below keeps the installation's layout
stop_cluster() {
  [ -f "$work/data/postmaster.pid" ] &&
    runuser -u postgres -- "$bin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null || true
}
# the server's log is kept in UPGRADE_LOGS when it is set (the test command
# reads it for assertion failures)
keep_log() {
  if [ -n "${UPGRADE_LOGS:-}" ] && [ -f "$work/server.log" ]; then
    mkdir -p "$UPGRADE_LOGS" && cp "$work/server.log" "$UPGRADE_LOGS/upgrade-server.log"
  fi
}
trap 'stop_cluster; keep_log; rm -rf "$work"' EXIT

if ! git -C "$repo" cat-file -e "$release^{commit}" 2>/dev/null; then
  echo "upgrade test: commit $release (0.1.0) is not in this clone's history" >&2
  exit 1
fi

# 0.1.0, built with the PGXS of the server under test
mkdir -p "$work/old"
git -C "$repo" archive "$release" | tar -x -C "$work/old"
# 0.1.0 was released for PostgreSQL 15 alone: a 0.1.0 database reaches a
# newer server through pg_upgrade, its objects and rows as they were.  To make
# such a database here, 0.1.0 is built with the API changes of 16 and 17 that
# src/compat.h covers patched in (nothing else of it changes).
server_num=$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
if [ "$server_num" -ge 16 ]; then
  sed -i -e 's|^#include "catalog/namespace.h"$|&\n#include "catalog/pg_namespace.h"|' \
    -e 's/stringToQualifiedNameList(\(text_to_cstring(PG_GETARG_TEXT_PP(ARG_LABELS_TABLE))\))/stringToQualifiedNameList(\1, NULL)/' \
    -e 's/pg_namespace_aclcheck(nspid, /object_aclcheck(NamespaceRelationId, nspid, /' "$work/old/src/train.c"
fi
if [ "$server_num" -ge 17 ]; then
  sed -i 's/MyProc->lxid/MyProc->vxid.lxid/g' "$work/old/src/predict.c"
fi
make -C "$work/old" -s PG_CONFIG="$PG_CONFIG" >/dev/null

# a private copy of the server: its binaries, libraries and share folder,
# each where it is (Debian's layout or a source build's prefix alike)
libdir=$("$PG_CONFIG" --pkglibdir)
for dir in "$("$PG_CONFIG" --bindir)" "$libdir" "$("$PG_CONFIG" --sharedir)"; do
  mkdir -p "$work/root$(dirname "$dir")"
  cp -a "$dir" "$work/root$(dirname "$dir")/"
done
pkglib=$("$bin/pg_config" --pkglibdir)
extdir=$("$bin/pg_config" --sharedir)/extension
[ "$pkglib" != "$libdir" ] || { echo "upgrade test: the copy is not relocatable" >&2; exit 1; }
rm -f "$extdir"/gibbs_nb*

install_version() {   # $1: a built tree
  cp "$1/gibbs_nb.so" "$pkglib/"
  cp "$1/gibbs_nb.control" "$1"/sql/gibbs_nb--*.sql "$extdir/"
}

chown -R postgres "$work"
runuser -u postgres -- "$bin/initdb" -D "$work/data" -A trust -U postgres >/dev/null
cat >> "$work/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$work'
max_worker_processes = 16
gibbs_nb.progress_interval = 0
EOF
start_cluster() {
  runuser -u postgres -- "$bin/pg_ctl" -D "$work/data" -l "$work/server.log" -w start >/dev/null
}
q() { "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -U postgres -d postgres "$@"; }
qd() { local db=$1; shift; "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -U postgres -d "$db" "$@"; }

# --- under 0.1.0: a model trained by a non-superuser, two versions ---
install_version "$work/old"
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
stop_cluster

# --- this build, then ALTER EXTENSION ... UPDATE ---
install_version "$repo"
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
check "a new database gets the same objects" "$(q -c "SELECT count(*) FROM pg_depend d
    JOIN pg_extension e ON d.refobjid = e.oid WHERE e.extname = 'gibbs_nb' AND d.deptype = 'e'")" \
  "$(q -c "CREATE DATABASE fresh" >/dev/null; "$bin/psql" -X -At -h "$work" -U postgres -d fresh \
       -c "CREATE EXTENSION gibbs_nb" -c "SELECT count(*) FROM pg_depend d
    JOIN pg_extension e ON d.refobjid = e.oid WHERE e.extname = 'gibbs_nb' AND d.deptype = 'e'" | tail -1)"
if [ "$fail" -ne 0 ]; then
  tail -n 30 "$work/server.log"
  exit 1
fi
