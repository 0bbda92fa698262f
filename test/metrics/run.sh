#!/bin/bash
# make check-sklearn: gibbs_nb_evaluate against scikit-learn (Debian's
# python3-sklearn, installed here if missing; not part of the test command,
# which has no scikit-learn).  Needs the extension installed for the
# pg_config on PATH; starts a throwaway server, loads the fixture of test/sql/evaluate.sql,
# runs check_sklearn.py.  Run as root (the server runs as postgres).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import sklearn' 2>/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-sklearn >/dev/null
fi
. test/cluster.sh
dir=$(mktemp -d /tmp/gibbs_nb_metrics.XXXXXX)
chmod 755 "$dir"
cluster_start "$dir" "gibbs_nb.progress_interval = 0"
psql_q -c 'CREATE EXTENSION gibbs_nb' >/dev/null
# the fixture of the regression test test/sql/evaluate.sql
sed -n '/^-- fixture begin/,/^-- fixture end/p' test/sql/evaluate.sql | psql_q >/dev/null
/usr/bin/python3 test/metrics/check_sklearn.py "$@"
