#!/usr/bin/env bash
# test/bench/build-release-server.sh: a release build (no assertions) of the
# newer PostgreSQL the test command also runs on, for `make bench-versions`.
# The test command's PostgreSQL 18 is built with assertions, which slow it
# (often about 2x) and make its timings meaningless.
#
# Builds from the PostgreSQL source tarball in ../shared/vendor (beside the
# repository) or the one named by PG_RELEASE_TARBALL, into
# PG_RELEASE_PREFIX (default /opt/gibbs_nb-deps/pg18-release), once: a stamp
# names the tarball, and later calls only print the pg_config path (the
# last line, as always).  About 8 minutes on 2 cores.  Run as root.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tarball=${PG_RELEASE_TARBALL:-}
if [ -z "$tarball" ]; then   # the newest in ../shared/vendor, by version
  shopt -s nullglob
  found=("$repo"/../shared/vendor/postgresql-*.tar.bz2)
  shopt -u nullglob
  [ ${#found[@]} -eq 0 ] || tarball=$(printf '%s\n' "${found[@]}" | sort -V | tail -n 1)
fi
prefix=${PG_RELEASE_PREFIX:-/opt/gibbs_nb-deps/pg18-release}
[ -n "$tarball" ] && [ -f "$tarball" ] ||
  { echo "no PostgreSQL source tarball: set PG_RELEASE_TARBALL" >&2; exit 1; }
want="release build of $(sha256sum "$tarball" | cut -c1-16)"
if [ -x "$prefix/bin/pg_config" ] && [ "$(cat "$prefix/.build-stamp" 2>/dev/null)" = "$want" ]; then
  echo "$prefix/bin/pg_config"; exit 0
fi

deps="build-essential bison flex pkg-config libreadline-dev zlib1g-dev libicu-dev"
missing=""
for p in $deps; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

src=$(mktemp -d /tmp/gibbs_nb_pgsrc.XXXXXX)
log=$src.log
trap 'rm -rf "$src"' EXIT
tar -xjf "$tarball" -C "$src" --strip-components=1
cd "$src"
if ! { ./configure --prefix="$prefix" && make -j"$(nproc)" -s && rm -rf "$prefix" && make -s install; } >"$log" 2>&1; then
  tail -n 25 "$log" >&2; echo "build failed (log $log)" >&2; exit 1
fi
echo "$want" > "$prefix/.build-stamp"
rm -f "$log"
echo "$prefix/bin/pg_config"
