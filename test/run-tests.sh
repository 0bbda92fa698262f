#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls it).
# Installs what is missing, builds with -Werror, installs the extension,
# then runs: the sampler core's unit tests (plain and under ASan/UBSan),
# pg_regress and the isolation specs on throwaway instances, the TAP tests,
# and the upgrade from the released 0.1.0 (test/upgrade.sh).
# Ends with "N passed, N failed" over the suites.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

scripts/install-deps.sh || exit 1
make -s clean >/dev/null
make -s EXTRA_CFLAGS=-Werror >/dev/null || { echo "build failed"; exit 1; }
make -s install >/dev/null || { echo "install failed"; exit 1; }

bindir=$(pg_config --bindir)
pgxs_src=$(dirname "$(pg_config --pgxs)")/..
work=$(mktemp -d /tmp/gibbs_nb_test.XXXXXX)
chown postgres "$work"
chmod 755 "$work"
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

regress() {
  local tests
  tests=$(ls sql/*.sql | grep -v 'sql/gibbs_nb--' | sed 's|sql/||; s|\.sql$||' | sort)
  # shellcheck disable=SC2086
  runuser -u postgres -- "$pgxs_src/test/regress/pg_regress" \
    --temp-instance="$work/regress_instance" --temp-config="$repo/test/regress.conf" \
    --bindir="$bindir" --inputdir="$repo" --outputdir="$work/regress" \
    --dbname=gibbs_nb_regression $tests
  local rc=$?
  [ $rc -ne 0 ] && [ -f "$work/regress/regression.diffs" ] && cat "$work/regress/regression.diffs"
  return $rc
}

isolation() {
  local specs
  specs=$(ls test/isolation/specs/*.spec | sed 's|.*/||; s|\.spec$||' | sort)
  # shellcheck disable=SC2086
  runuser -u postgres -- "$pgxs_src/test/isolation/pg_isolation_regress" \
    --temp-instance="$work/isolation_instance" --temp-config="$repo/test/regress.conf" \
    --bindir="$bindir" --inputdir="$repo/test/isolation" --outputdir="$work/isolation" $specs
  local rc=$?
  [ $rc -ne 0 ] && [ -f "$work/isolation/regression.diffs" ] && cat "$work/isolation/regression.diffs"
  return $rc
}

tap() {
  mkdir -p "$work/tap" && chown postgres "$work/tap"
  runuser -u postgres -- env PATH="$bindir:$PATH" TESTDIR="$work/tap" \
    PG_REGRESS="$pgxs_src/test/regress/pg_regress" \
    prove -I "$pgxs_src/test/perl" -I "$repo/test" "$repo"/test/t/*.pl
  local rc=$?
  if [ $rc -ne 0 ]; then
    for f in "$work"/tap/tmp_check/log/*; do echo "----- $f"; tail -n 60 "$f"; done
  fi
  return $rc
}

suite "sampler core: unit tests" make -s unit
suite "sampler core: unit tests under AddressSanitizer and UBSan" make -s unit-asan
suite "SQL: pg_regress" regress
suite "SQL: isolation specs" isolation
suite "server: TAP tests" tap
suite "upgrade from 0.1.0 (ALTER EXTENSION UPDATE)" test/upgrade.sh

rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
