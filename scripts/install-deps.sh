#!/usr/bin/env bash
# Install what gibbs_nb needs to build and test, on Debian 12 with the
# PostgreSQL 15 server already there.  Run as root; installs only what is
# missing, so it is cheap to run every time.
set -euo pipefail

packages=(
  build-essential          # gcc, make
  postgresql-server-dev-15 # PGXS, server headers, pg_regress, isolation tester, TAP modules
  libipc-run-perl          # needed by PostgreSQL::Test::Cluster (TAP tests)
  postgresql-15-cron       # pg_cron, for scheduled retraining and its tests
  clang                    # the fuzz targets (make fuzz): libFuzzer ...
  libclang-rt-14-dev       # ... and its runtime, with ASan and UBSan
  python3                  # test/check-layers.py: the sources' groups call down only
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
