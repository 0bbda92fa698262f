# test/cluster.sh: start and stop a throwaway PostgreSQL cluster.
# Source it, then: cluster_start DIR [extra postgresql.conf lines...]; ...; cluster_stop.
# With CLUSTER_STOCK set, the server keeps PostgreSQL's defaults (but for
# where it listens), as someone else's server would.
# PostgreSQL refuses to run as root: the cluster belongs to the postgres user,
# lives in DIR and listens only on a unix socket there.  cluster_start
# registers cluster_stop to run on exit, success or failure.  Several may run
# at once, each started with the PG_BINDIR of its server (PGHOST names the
# last); cluster_stop stops every one started.

PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}

cluster_start() {
  CLUSTER_DIR=$1; shift
  mkdir -p "$CLUSTER_DIR"
  chown postgres "$CLUSTER_DIR"
  runuser -u postgres -- "$PG_BINDIR/initdb" -D "$CLUSTER_DIR/data" -A trust -U postgres >/dev/null
  {
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$CLUSTER_DIR'"
    [ -n "${CLUSTER_STOCK:-}" ] || echo "max_worker_processes = 16"
    for line in "$@"; do echo "$line"; done
  } >> "$CLUSTER_DIR/data/postgresql.conf"
  trap cluster_stop EXIT
  CLUSTERS_STARTED+=("$PG_BINDIR|$CLUSTER_DIR")
  runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w start >/dev/null
  export PGHOST=$CLUSTER_DIR PGUSER=postgres PGDATABASE=postgres
}

CLUSTERS_STARTED=()
cluster_stop() {
  local c
  for c in "${CLUSTERS_STARTED[@]}"; do
    if [ -f "${c#*|}/data/postmaster.pid" ]; then
      runuser -u postgres -- "${c%%|*}/pg_ctl" -D "${c#*|}/data" -m fast -w stop >/dev/null || true
    fi
  done
  CLUSTERS_STARTED=()
}

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
