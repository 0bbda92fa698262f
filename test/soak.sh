#!/usr/bin/env bash
# test/soak.sh [SECONDS]: the soak (test/t/012_soak.pl) for SECONDS of busy
# phase (default 300), against the installed build of the server pg_config
# names (PG_CONFIG, default the one on PATH).  It starts its own throwaway
# server, on a unix socket only, and stops it.  Prints the figures (predict
# transactions per second and p99 latency quiet and busy, jobs and their
# outcomes, faults injected) and exits non-zero on any violation.  The test
# command runs the same test for 20 s.  As root, runs the test as postgres.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-300}
pg_config=${PG_CONFIG:-pg_config}
bindir=$("$pg_config" --bindir)
pgxs=$(cd "$(dirname "$("$pg_config" --pgxs)")/../.." && pwd)
out=$(mktemp -d /tmp/gibbs_nb_soak.XXXXXX)
run=(env GIBBS_NB_SOAK_SECONDS="$seconds" TESTDIR="$out" PATH="$bindir:$PATH"
     TESTDATADIR="$out/tmp_check" TESTLOGDIR="$out/tmp_check/log"
     PG_REGRESS="$pgxs/src/test/regress/pg_regress"
     prove -v -I "$pgxs/src/test/perl" -I test test/t/012_soak.pl)
cd "$repo"
if [ "$(id -u)" = 0 ]; then
  chown postgres "$out"
  runuser -u postgres -- "${run[@]}" && rc=0 || rc=$?
else
  "${run[@]}" && rc=0 || rc=$?
fi
if [ "$rc" -ne 0 ]; then
  for f in "$out"/tmp_check/log/*; do echo "----- $f"; tail -n 60 "$f"; done
else
  rm -rf "$out"
fi
exit "$rc"
