# test/bench/citus-cluster.sh: a throwaway Citus cluster on this machine for
# the Citus benchmarks (citus-bench.sh, citus-probe.sh).  Source it, then:
#   citus_cluster_start NAME PORT1 PORT2 PORT3 [postgresql.conf lines...]
# A coordinator (PORT1) and two workers (PORT2, PORT3), listening only on
# unix sockets in a new directory /tmp/gibbs_nb_NAME.*, each with Citus
# preloaded and created and the given lines in its postgresql.conf; the
# workers added to the coordinator.  Sets bin, dir, ports and PGHOST,
# PGPORT (the coordinator), PGUSER, PGDATABASE, PGOPTIONS; q runs psql there.
# The cluster is stopped and removed on exit.  Needs pg_config on PATH, the
# superuser shell the tests use, and Citus installed.
citus_cluster_start() {
  local name=$1 p line
  ports=("$2" "$3" "$4")
  shift 4
  bin=$(pg_config --bindir)
  dir=$(mktemp -d "/tmp/gibbs_nb_$name.XXXXXX")
  chown postgres "$dir"
  chmod 755 "$dir"
  trap citus_cluster_stop EXIT
  for p in "${ports[@]}"; do
    runuser -u postgres -- "$bin/initdb" -D "$dir/n$p" -A trust -U postgres >/dev/null
    {
      echo "listen_addresses = ''"
      echo "unix_socket_directories = '$dir'"
      echo "port = $p"
      echo "shared_preload_libraries = 'citus'"
      echo "max_worker_processes = 16"
      echo "max_prepared_transactions = 20"
      for line in "$@"; do echo "$line"; done
    } >> "$dir/n$p/postgresql.conf"
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/n$p" -l "$dir/n$p.log" -w start >/dev/null
    "$bin/psql" -X -q -h "$dir" -p "$p" -U postgres -c "CREATE EXTENSION citus"
  done
  export PGHOST=$dir PGPORT=${ports[0]} PGUSER=postgres PGDATABASE=postgres
  export PGOPTIONS="-c client_min_messages=warning"
  q -c "SELECT citus_set_coordinator_host('$dir', ${ports[0]})" \
    -c "SELECT citus_add_node('$dir', ${ports[1]})" -c "SELECT citus_add_node('$dir', ${ports[2]})" >/dev/null
}
citus_cluster_stop() {
  local p
  for p in "${ports[@]}"; do
    [ -f "$dir/n$p/postmaster.pid" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$dir/n$p" -m fast -w stop >/dev/null
  done
  rm -rf "$dir"
}
q() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
