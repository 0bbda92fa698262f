#!/usr/bin/env bash
# test/check-logs.sh FILE|DIR...: fail if a server log shows what the tests'
# exit codes do not: an assertion failure (an assertion-enabled server's
# TRAP), a PANIC, a backend that crashed (signal 6 or 11), a leaked buffer
# pin or other resource (PostgreSQL 15-16 say "... leak", 17 and later
# "resource was not closed"), or a memory-context check's warning.  Prints
# each offending line with its file; exits 1 if there is one.  In a
# directory, the *.log files (TAP tests name their servers' logs so).
set -uo pipefail

pattern='TRAP: |PANIC: |terminated by signal (6|11)|WARNING:  .*(refcount leak|reference leak| leak: |resource was not closed)|problem in (alloc set|generation|slab|bump)|detected write past chunk end'

found=0
for path in "$@"; do
  [ -e "$path" ] || continue
  while IFS= read -r -d '' f; do
    if grep -Ea "$pattern" "$f" >/dev/null; then
      found=1
      echo "server log $f:"
      grep -Ea "$pattern" "$f" | head -n 20 | sed 's/^/  /'
    fi
  done < <(find "$path" -type f \( -name '*.log' \) -print0)
done
[ "$found" -eq 0 ]
