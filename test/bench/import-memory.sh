#!/usr/bin/env bash
# The peak memory of gibbs_nb_import: a model value of 2.5 million tokens and
# 2 classes (70 MB, made by the Python below in the export format of
# src/models/model_format.c, its probabilities uniform), imported in a fresh backend
# of a throwaway cluster; VmHWM of that backend before and after, and the
# ratio to the value's size.  `make bench-import`; about a minute.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
make -s >/dev/null && make -s install >/dev/null
work=$(mktemp -d /tmp/gibbs_nb_import.XXXXXX)
chown postgres "$work"
python3 - "$work/model.bin" <<'PY'
import math, struct, sys
def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack('<I', len(b)) + b
V, K = 2500000, 2
parts = [b'GNBMODEL' + struct.pack('<IIII', 2, K, V, 0), s('paper'),
         struct.pack('<iiii', 10, 0, 1, 1), struct.pack('<ddd', 1.0, 1.0, 1.0), struct.pack('<q', 1),
         struct.pack('<iiiq', 10, 5, 0, 100), struct.pack('<dd', -100.0, float('nan')),
         struct.pack('<i', 0),
         s('x') + struct.pack('<i', 1) + s('src') + s('tokens') + s('label') + s('id') + s(''),
         s('a'), s('b'), struct.pack('<dd', math.log(0.5), math.log(0.5))]
parts += [s('t%07d' % i) for i in range(V)]
parts.append(struct.pack('<d', math.log(1.0 / V)) * (K * V))
body = b''.join(parts)
# the CRC-32C (Castagnoli, reflected 0x82F63B78) the value ends with
table = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
crc = 0xFFFFFFFF
for b in body:
    crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
open(sys.argv[1], 'wb').write(body + struct.pack('<I', crc ^ 0xFFFFFFFF))
PY
chmod 644 "$work/model.bin"
source test/cluster.sh
cluster_start "$work/server"
psql_q -c "CREATE EXTENSION gibbs_nb" \
       -c "CREATE TABLE payload AS SELECT pg_read_binary_file('$work/model.bin') AS v"
for run in 1 2 3; do
  psql -X -q -At -c "SELECT gibbs_nb_drop('big') FROM gibbs_nb.models WHERE model_name = 'big' LIMIT 1" >/dev/null
  psql -X -q -At <<'SQL'
SELECT pg_backend_pid() AS pid, length(v) AS bytes FROM payload \gset
SELECT regexp_replace(pg_read_file('/proc/' || :pid || '/status'), '.*VmHWM:\s*(\d+) kB.*', '\1', 's') AS before \gset
SELECT gibbs_nb_import('big', v) AS version FROM payload \gset
SELECT regexp_replace(pg_read_file('/proc/' || :pid || '/status'), '.*VmHWM:\s*(\d+) kB.*', '\1', 's') AS after \gset
SELECT format('value %s MB; backend peak %s MB before the import, %s MB after: %s times the value',
              round(:bytes / 1048576.0, 1), round(:before / 1024.0, 1), round(:after / 1024.0, 1),
              round(:after * 1024.0 / :bytes, 2));
SQL
done
rm -rf "$work"
