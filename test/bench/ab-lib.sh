# test/bench/ab-lib.sh: what the A/B scripts (counts-ab.sh, predict-ab.sh,
# predict-cpu.sh) share.  Source it from the repository root with PATH at the
# PostgreSQL the builds are for; it sets lib to that install's library folder.
#
#   median          the median of the numbers on stdin, one a line
#   psql_q ARGS     psql that stops at the first error, quietly
#   use FILE.so     install FILE.so as gibbs_nb.so: copied beside it, then
#                   renamed over it, so that a backend starting meanwhile
#                   loads one build or the other, never half of one; each new
#                   session then runs FILE.so (a running one keeps its build)
#   time_runs SQL N psql's \timing of N runs of SQL in one session, one a line
lib=$(pg_config --pkglibdir)
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
use() { cp "$1" "$lib/.gibbs_nb.so.new"; mv "$lib/.gibbs_nb.so.new" "$lib/gibbs_nb.so"; }
time_runs() {
  local sql=$1 runs=$2 args=()
  for _ in $(seq 1 "$runs"); do args+=(-c "$sql"); done
  psql -X -q -At -c '\timing on' "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}
