#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls it).
#
# Runs every suite on the system's PostgreSQL (Debian's 15), then again on
# each further server it can have: those named in TEST_PG_CONFIGS (paths to
# their pg_config, separated by spaces), or else, when ../shared is beside
# the repository, the assertion-enabled PostgreSQL 18 (with pg_cron and
# Citus 14) that ../shared/postgresql/build.sh builds once per machine.
#
# Each pass installs what is missing, builds with -Werror against that
# server, installs the extension into it, starts a throwaway server, and
# runs the Makefile's test targets against it: `make installcheck`
# (pg_regress and the isolation specs), `make prove_installcheck` (the TAP
# tests: workers, jobs, pg_cron, crash and restart, dump and restore,
# limits, export, Citus, chains), `make upgradecheck` (the upgrade from the
# released 0.1.0, on Citus too) and `make fuzz` for 10 s a target.  The
# system's server has test/regress.conf's settings; the further servers keep
# PostgreSQL's defaults, as a packager's `make installcheck` would find them.
# The sampler core's unit tests (plain and under ASan/UBSan) run once: the
# core has no server headers.  After each pass the servers' logs are read (test/check-logs.sh):
# an assertion failure, a crash, a leaked pin or resource fails the pass
# even if every test said ok.  Ends with "N passed, N failed" over all.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

scripts/install-deps.sh || exit 1

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
  make -s PG_CONFIG="$pg_config" installcheck
  local rc=$?
  if [ $rc -ne 0 ]; then
    for f in regression.diffs output_iso/regression.diffs; do [ -f "$f" ] && cat "$f"; done
  fi
  return $rc
}

tap() {
  # TAP tests start their own clusters: not as root
  runuser -u postgres -- make -s PG_CONFIG="$pg_config" prove_installcheck TAP_OUTPUT="$work/tap"
  local rc=$?
  if [ $rc -ne 0 ]; then
    for f in "$work"/tap/tmp_check/log/*; do echo "----- $f"; tail -n 60 "$f"; done
  fi
  return $rc
}

# test/check-logs.sh must pass a clean log and fail each kind of trouble it
# is there to see (and a path with no log): otherwise a pass's log check
# could say ok having seen nothing
check_logs_selftest() {
  local d rc=0 line
  d=$(mktemp -d /tmp/gibbs_nb_logcheck.XXXXXX)
  printf 'LOG:  database system is ready to accept connections\n' > "$d/clean.log"
  test/check-logs.sh "$d/clean.log" >/dev/null || { echo "a clean log was refused"; rc=1; }
  for line in 'TRAP: failed Assert("x"), File: "a.c", Line: 1, PID: 2' \
      'LOG:  client backend (PID 3) was terminated by signal 11: Segmentation fault' \
      'WARNING:  resource was not closed: buffer 1' 'WARNING:  buffer refcount leak: [1]' \
      'WARNING:  problem in Generation x: y' 'WARNING:  transaction left non-empty SPI stack'; do
    printf '%s\n' "$line" > "$d/bad.log"
    if test/check-logs.sh "$d/bad.log" >/dev/null; then echo "not caught: $line"; rc=1; fi
  done
  if test/check-logs.sh "$d/no-such-dir" >/dev/null; then echo "a path with no log passed"; rc=1; fi
  rm -rf "$d"
  return $rc
}

build() {
  make -s PG_CONFIG="$pg_config" clean >/dev/null &&
    make -s PG_CONFIG="$pg_config" EXTRA_CFLAGS=-Werror >/dev/null &&
    make -s PG_CONFIG="$pg_config" install >/dev/null
}

# the server the tests run against: test/regress.conf's settings
. test/cluster.sh
mapfile -t conf < <(grep -v '^#' test/regress.conf)

# run_pass LABEL PG_CONFIG STOCK CITUS: every suite but the core's against
# one server; with STOCK set, installcheck's server keeps PostgreSQL's
# default settings (as a packager's would), not test/regress.conf's; with
# CITUS set, the upgrade test fails rather than skips if Citus is missing
run_pass() {
  local label=$1 stock=$3 citus=$4
  pg_config=$2
  echo "##### $label: $("$pg_config" --version) ($pg_config)"
  local pass_start=$SECONDS
  if ! build; then
    failed=$((failed + 1)); echo "--- $label: build failed"; return
  fi
  work=$(mktemp -d /tmp/gibbs_nb_test.XXXXXX)
  chown postgres "$work"
  chmod 755 "$work"
  PG_BINDIR=$("$pg_config" --bindir)
  if [ -n "$stock" ]; then
    CLUSTER_STOCK=1 cluster_start "$work/server"
  else
    cluster_start "$work/server" "${conf[@]}"
  fi

  suite "$label: sources: groups call down only, no cycle among files (test/check-layers.py)" \
    python3 test/check-layers.py
  suite "$label: SQL: pg_regress and isolation specs (make installcheck)" installcheck
  suite "$label: server: TAP tests (make prove_installcheck)" tap
  suite "$label: upgrade from 0.1.0 (make upgradecheck)" \
    env UPGRADE_REQUIRE_CITUS="$citus" \
    make -s PG_CONFIG="$pg_config" upgradecheck UPGRADE_LOGS="$work/upgrade"
  suite "$label: fuzz: short run" make -s PG_CONFIG="$pg_config" fuzz FUZZ_SECONDS=10

  cluster_stop
  suite "$label: server logs: no assertion failure, crash or leak" \
    test/check-logs.sh "$work/server/server.log" "$work/tap" "$work/upgrade"
  rm -rf "$work"
  echo "##### $label: $((SECONDS - pass_start)) s"
}

system_pg_config=$(command -v pg_config)

# Citus 13 for the system's PostgreSQL 15, for test/t/008_citus.pl: built
# from ../shared (beside the repository, as CI has it) into that server
# (about 90 s the first time; nothing once it is installed).  Without
# ../shared the Citus test runs only if Citus is installed, and says it was
# skipped if not.
citus_build=$repo/../shared/citus/build.sh
require_citus=""   # set when Citus is built here: the upgrade test must not skip it
if [ -x "$citus_build" ]; then
  require_citus=1
  citus_tmp=$(mktemp -d /tmp/gibbs_nb_citus.XXXXXX)
  suite "Citus 13: build and install ($citus_build)" \
    env PG_CONFIG="$system_pg_config" CITUS_SRC="$citus_tmp/src" CITUS_LOG="$citus_tmp/build.log" \
    "$citus_build"
  rm -rf "$citus_tmp"
else
  echo "=== Citus: no $citus_build: the Citus TAP test runs only if Citus is installed (else it is skipped)"
fi

# The further servers: TEST_PG_CONFIGS, or PostgreSQL 18 from ../shared.
# Built before the first pass, so that a failed build shows at once.
others=()
if [ -n "${TEST_PG_CONFIGS:-}" ]; then
  read -r -a others <<< "$TEST_PG_CONFIGS"
elif [ -x "$repo/../shared/postgresql/build.sh" ]; then
  pg18_out=$(mktemp /tmp/gibbs_nb_pg18.XXXXXX)
  suite "PostgreSQL 18 with assertions, pg_cron, Citus 14: build once per machine" \
    bash -c "'$repo/../shared/postgresql/build.sh' > '$pg18_out'"
  pg18=$(tail -n 1 "$pg18_out")
  rm -f "$pg18_out"
  if [ -x "$pg18" ]; then
    others=("$pg18")
  else
    failed=$((failed + 1))
    echo "--- PostgreSQL 18: no pg_config from the build (its last line: '$pg18'): not tested"
  fi
else
  echo "=== no second server: set TEST_PG_CONFIGS to test against more than $system_pg_config"
fi

suite "server log check: sees what it is for (test/check-logs.sh)" check_logs_selftest
suite "sampler core: unit tests" make -s unit
suite "sampler core: unit tests under AddressSanitizer and UBSan" make -s unit-asan

run_pass "PostgreSQL $("$system_pg_config" --version | sed 's/^PostgreSQL //; s/\..*//')" \
  "$system_pg_config" "" "$require_citus"
# (the further servers' installcheck runs with stock settings: it must pass
# on a server the tests did not configure; ../shared's 18 comes with Citus,
# servers named in TEST_PG_CONFIGS may not)
for other in "${others[@]}"; do
  run_pass "PostgreSQL $("$other" --version | sed 's/^PostgreSQL //; s/\..*//')" "$other" stock \
    "$([ -n "${TEST_PG_CONFIGS:-}" ] || echo 1)"
done

# leave no objects built for another server in the tree (a later `make
# install` for the system's server would install them)
make -s clean >/dev/null
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
