#!/usr/bin/env bash
# Does the work tree's sql/gibbs_nb--0.1.0--0.2.0.sql make the same extension
# as the one at a git revision (REV, default HEAD)?  For a rewrite of the
# script that must change nothing:   test/schema-same.sh 956e219
#
# Each script in turn is installed in a private copy of the PostgreSQL
# installation (as test/upgrade.sh does), with this build's library, and
#   - CREATE EXTENSION gibbs_nb in a new database,
#   - ALTER EXTENSION gibbs_nb UPDATE in a copy of a 0.1.0 database that
#     holds rows (made by hand: several owners, one a dropped role's OID,
#     jobs in every status),
#   - ALTER EXTENSION gibbs_nb UPDATE in a copy of one whose theta has rows
#     that packed lacks (the update must stop, saying the same);
# then the two descriptions of the extension's members (test/describe-extension.sql),
# the updated rows and the errors are compared: no diff, no failure.
# Run as root, after `make`.  PG_CONFIG: the PostgreSQL 15 to use;
# SCHEMA_SAME_OUT: a directory to keep the descriptions, rows and errors in.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=${1:-HEAD}
script=gibbs_nb--0.1.0--0.2.0.sql
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

work=$(mktemp -d /tmp/gibbs_nb_schema.XXXXXX)
bin=$work/root$("$PG_CONFIG" --bindir)
stop() { [ ! -f "$work/data/postmaster.pid" ] ||
           runuser -u postgres -- "$bin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null; }
trap 'stop; rm -rf "$work"' EXIT

git -C "$repo" show "$rev:sql/$script" >"$work/a.sql"   # a: the script at REV
cp "$repo/sql/$script" "$work/b.sql"                     # b: the work tree's
for dir in "$("$PG_CONFIG" --bindir)" "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)"; do
  mkdir -p "$work/root$(dirname "$dir")"
  cp -a "$dir" "$work/root$(dirname "$dir")/"
done
ext=$("$bin/pg_config" --sharedir)/extension
[ "$ext" != "$("$PG_CONFIG" --sharedir)/extension" ] || { echo "the copy is not relocatable" >&2; exit 1; }
rm -f "$ext"/gibbs_nb*
cp "$repo/gibbs_nb.so" "$("$bin/pg_config" --pkglibdir)/"
cp "$repo/gibbs_nb.control" "$repo/sql/gibbs_nb--0.1.0.sql" "$ext/"
use() { cp "$work/$1.sql" "$ext/$script"; }   # the update script the server reads next

chown -R postgres "$work"
runuser -u postgres -- "$bin/initdb" -D "$work/data" -A trust -U postgres >/dev/null
printf '%s\n' "listen_addresses = ''" "unix_socket_directories = '$work'" \
  "gibbs_nb.progress_interval = 0" >>"$work/data/postgresql.conf"
runuser -u postgres -- nice -n 10 "$bin/pg_ctl" -D "$work/data" -l "$work/server.log" -w start >/dev/null
q() { local db=$1; shift; "$bin/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -U postgres -d "$db" "$@"; }

# a 0.1.0 database with rows in every table: theta's rows are exp(log_theta)
# of packed's, so that the update may proceed
q postgres -c "CREATE ROLE bob" -c "CREATE ROLE alice" -c "CREATE DATABASE v010"
q v010 >/dev/null <<'SQL'
CREATE EXTENSION gibbs_nb VERSION '0.1.0';
CREATE TABLE public.mail (id int PRIMARY KEY, tokens text[], label text);
CREATE TEMP TABLE v (model_name text, version int, owner oid, job_id bigint, source text);
INSERT INTO v VALUES ('spam', 1, 'alice'::regrole, 1, 'public.mail'), ('spam', 2, 'alice'::regrole, 2, 'public.mail'),
                     ('news', 1, 'bob'::regrole, 4, 'public.gone'), ('old', 1, 99999, 6, 'public.mail');
INSERT INTO gibbs_nb.models (model_name, version, owner, created_at, job_id, classes, n_documents,
    n_labeled, n_skipped, n_tokens, vocabulary_size, source, tokens_column, label_column, id_column,
    sweeps, burn_in, lag, chains, sampler, gamma_pi, gamma_theta, unlabeled_weight, seed,
    labels_table, labels_relid, log_likelihood)
SELECT model_name, version, owner, ('2024-01-0' || version || ' 10:00+00')::timestamptz, job_id, '{ham,spam}', 10, 4, 0,
       60, 3, source, 'tokens', 'label', 'id', 50, 25, 1, 1, 'paper', 1, 1, 1, 42,
       'public.' || model_name || '_labels', 0, -123.5 FROM v;
INSERT INTO gibbs_nb.packed
SELECT model_name, version, owner, '{ham,spam}', ARRAY[ln(0.4), ln(0.6)], '{a,b,c}',
       ARRAY[ln(0.5), ln(0.2), ln(0.3), ln(0.3), ln(0.2), ln(0.5)] FROM v;
INSERT INTO gibbs_nb.theta
SELECT p.model_name, p.version, p.classes[k], p.tokens[i], exp(p.log_theta[(i - 1) * 2 + k]), p.owner
  FROM gibbs_nb.packed p, generate_series(1, 3) i, generate_series(1, 2) k;
INSERT INTO gibbs_nb.pi SELECT model_name, version, c, 0.5, owner FROM v, unnest('{ham,spam}'::text[]) c;
INSERT INTO gibbs_nb.trace SELECT job_id, 1, s, -100 - s, 0.1, owner FROM v, generate_series(1, 3) s;
INSERT INTO gibbs_nb.jobs (job_id, model_name, owner, status, sweep, sweeps, chains, chain, source,
                           worker_pid, version)
VALUES (1, 'spam', 'alice'::regrole, 'succeeded', 50, 50, 1, 0, 'public.mail', NULL, 1),
       (2, 'spam', 'alice'::regrole, 'succeeded', 50, 50, 2, 1, 'public.mail', NULL, 2),
       (3, 'spam', 'alice'::regrole, 'queued', 0, 50, 1, 0, 'public.mail', NULL, NULL),
       (4, 'news', 'bob'::regrole, 'succeeded', 0, 0, 1, 0, 'public.gone', NULL, 1),
       (5, 'news', 'bob'::regrole, 'running', 3, 50, 2, 1, 'public.gone', 999999, NULL),
       (6, 'old', 99999, 'failed', 0, 50, 1, 0, 'public.mail', NULL, NULL),
       (7, 'old', 99999, 'cancelled', 7, 50, 1, 0, 'public.mail', NULL, NULL);
SELECT setval('gibbs_nb.job_id_seq', 7);
SQL
# and a copy whose theta has rows packed lacks, or holds otherwise
q postgres -c "CREATE DATABASE orphan TEMPLATE v010"
q orphan <<'SQL'
INSERT INTO gibbs_nb.theta VALUES ('ghost', 1, 'a', 'x', 0.5, 'bob'::regrole),
                                  ('ghost', 1, 'a', 'y', 0.5, 'alice'::regrole),
                                  ('spam', 2, 'ham', 'z', 0.5, 'alice'::regrole);
UPDATE gibbs_nb.theta SET probability = probability * 1.001 WHERE model_name = 'news' AND token = 'b';
SQL

# each script: a new database, an update of v010, the refused update
for s in a b; do
  use $s
  q postgres -c "CREATE DATABASE new_$s" -c "CREATE DATABASE up_$s TEMPLATE v010"
  q "new_$s" -c "CREATE EXTENSION gibbs_nb"
  q "up_$s" -c "ALTER EXTENSION gibbs_nb UPDATE"
  q orphan -c "\set VERBOSITY verbose" -c "ALTER EXTENSION gibbs_nb UPDATE" >"$work/orphan_$s" 2>&1 || true
  for db in "new_$s" "up_$s"; do q "$db" -f "$repo/test/describe-extension.sql" >"$work/$db"; done
  # the rows of every table and view of the extension, and the sequences'
  # positions (`catalog` names the database: whether it is this one)
  q "up_$s" <<'SQL' | LC_ALL=C sort >"$work/rows_$s"
SELECT format('SELECT %L || '' '' || (to_jsonb(gibbs_nb_row) - ''catalog'')::text || coalesce(
                  '' catalog here: '' || (to_jsonb(gibbs_nb_row)->>''catalog'' = gibbs_nb.catalog_identity()), '''')
                FROM (SELECT * FROM %s) gibbs_nb_row', c.oid::regclass, c.oid::regclass)
  FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gibbs_nb')
   AND d.deptype = 'e' AND c.relkind IN ('r', 'v', 'S') \gexec
SQL
done

[ -z "${SCHEMA_SAME_OUT:-}" ] ||
  { mkdir -p "$SCHEMA_SAME_OUT" && cp "$work"/{new,up,rows,orphan}_[ab] "$SCHEMA_SAME_OUT/"; }
fail=0
same() {   # $1: what, $2 $3: files
  if diff -u "$2" "$3" >"$work/diff"; then echo "ok - $1 ($(wc -l <"$2") lines)"
  else echo "not ok - $1:"; cat "$work/diff"; fail=1; fi
}
same "CREATE EXTENSION: the same members" "$work/new_a" "$work/new_b"
same "ALTER EXTENSION UPDATE from 0.1.0: the same members" "$work/up_a" "$work/up_b"
same "ALTER EXTENSION UPDATE from 0.1.0: the same rows" "$work/rows_a" "$work/rows_b"
same "an update that would lose theta rows: the same error" "$work/orphan_a" "$work/orphan_b"
grep -q '^ERROR:  55000: gibbs_nb.theta has rows' "$work/orphan_b" ||
  { echo "not ok - the update of orphan was not refused: $(cat "$work/orphan_b")"; fail=1; }
exit $fail
