#!/usr/bin/env bash
# test/check-logs.sh FILE|DIR...: fail if a server log shows what the tests'
# exit codes do not: an assertion failure (an assertion-enabled server's
# TRAP), a PANIC, a process that died by a signal (no test kills one: they
# end processes with pg_terminate_backend or an immediate shutdown, which log
# no signal), a leaked buffer pin or other resource (PostgreSQL 15-16 say
# "... leak", 17 and later "resource was not closed"), an SPI stack, lock or
# snapshot left behind, or a memory-context check's warning (alloc set,
# Generation, Slab, Bump).  Prints each offending line with its file; exits 1
# if there is one, or if a path holds no log at all (a check that read
# nothing has shown nothing).  In a directory, the *.log files (TAP tests
# name their servers' logs so).
set -uo pipefail

pattern='TRAP: |PANIC: |terminated by signal [0-9]+|WARNING:  .*(refcount leak|reference leak| leak: |resource was not closed|non-empty SPI stack|you don.t own a lock|still active)|problem in ([Aa]lloc set|[Gg]eneration|[Ss]lab|[Bb]ump)|detected write past chunk end'

found=0
for path in "$@"; do
  logs=0
  while IFS= read -r -d '' f; do
    logs=$((logs + 1))
    if grep -Ea "$pattern" "$f" >/dev/null; then
      found=1
      echo "server log $f:"
      grep -Ea "$pattern" "$f" | head -n 20 | sed 's/^/  /'
    fi
  done < <(find "$path" -type f \( -name '*.log' \) -print0 2>/dev/null)
  if [ "$logs" -eq 0 ]; then
    found=1
    echo "no server log in $path: nothing to check"
  fi
done
[ "$found" -eq 0 ]
