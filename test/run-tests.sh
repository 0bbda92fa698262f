#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls it).
# Installs what is missing, builds with -Werror, installs the extension,
# starts a throwaway server, and runs the Makefile's test targets against
# it: the sampler core's unit tests (plain and under ASan/UBSan), `make
# installcheck` (pg_regress and the isolation specs), `make
# prove_installcheck` (the TAP tests), `make upgradecheck` (the upgrade from
# the released 0.1.0) and `make fuzz` for 10 s a target; before the TAP
# tests, Citus from ../shared/citus/build.sh when ../shared is there.  Ends with "N
# passed, N failed" over the suites.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

scripts/install-deps.sh || exit 1
make -s clean >/dev/null
make -s EXTRA_CFLAGS=-Werror >/dev/null || { echo "build failed"; exit 1; }
make -s install >/dev/null || { echo "install failed"; exit 1; }

work=$(mktemp -d /tmp/gibbs_nb_test.XXXXXX)
chown postgres "$work"
chmod 755 "$work"

# the server installcheck runs against: test/regress.conf's settings
. test/cluster.sh
mapfile -t conf < <(grep -v '^#' test/regress.conf)
cluster_start "$work/server" "${conf[@]}"

passed=0
failed=0
suite() {
  local name=$1; shift
  echo "=== $name"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1)); echo "--- $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1)); echo "--- $name: FAILED ($((SECONDS - start)) s)"
  fi
}

installcheck() {
  make -s installcheck
  local rc=$?
  if [ $rc -ne 0 ]; then
    for f in regression.diffs output_iso/regression.diffs; do [ -f "$f" ] && cat "$f"; done
  fi
  return $rc
}

tap() {
  # TAP tests start their own clusters: not as root
  runuser -u postgres -- make -s prove_installcheck TAP_OUTPUT="$work/tap"
  local rc=$?
  if [ $rc -ne 0 ]; then
    for f in "$work"/tap/tmp_check/log/*; do echo "----- $f"; tail -n 60 "$f"; done
  fi
  return $rc
}

# Citus, for test/t/008_citus.pl: built from ../shared (beside the
# repository, as CI has it) into the PostgreSQL these tests run on (about
# 90 s the first time; nothing once it is installed).  Without ../shared the
# Citus test runs only if Citus is installed, and says it was skipped if not.
citus_build=$repo/../shared/citus/build.sh
if [ -x "$citus_build" ]; then
  suite "Citus: build and install ($citus_build)" \
    env PG_CONFIG="$(command -v pg_config)" CITUS_SRC="$work/citus-src" CITUS_LOG="$work/citus-build.log" \
    "$citus_build"
else
  echo "=== Citus: no $citus_build: the Citus TAP test runs only if Citus is installed (else it is skipped)"
fi

suite "sampler core: unit tests" make -s unit
suite "sampler core: unit tests under AddressSanitizer and UBSan" make -s unit-asan
suite "SQL: pg_regress and isolation specs (make installcheck)" installcheck
suite "server: TAP tests (make prove_installcheck)" tap
suite "upgrade from 0.1.0 (make upgradecheck)" make -s upgradecheck
suite "fuzz: short run" make -s fuzz FUZZ_SECONDS=10

cluster_stop
rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
