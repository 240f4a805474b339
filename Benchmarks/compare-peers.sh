#!/usr/bin/env bash
# Measures CareGate's FHIR reading and writing side by side with orjson and Python's json on the
# same files in one run, and (with --ndjson-1gb) streams a 1 GB NDJSON file reporting peak memory.
#
#   Benchmarks/compare-peers.sh [--ndjson-1gb]
#
# Needs ../shared/synthea beside the project, python3 and pip (orjson goes into Benchmarks/.venv).
set -euo pipefail
cd "$(dirname "$0")"
shared=../../shared/synthea
[ -d "$shared" ] || { echo "SKIPPED: $shared not found"; exit 0; }

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q orjson
fi
swift build -c release --product fhir-throughput >/dev/null
tool=.build/release/fhir-throughput

echo "== Parsing all of synthea/ ($(du -sh $shared | cut -f1)), best of 3, one process each"
.venv/bin/python - "$shared" <<'PY'
import glob, json, sys, time, orjson
files = [open(f, "rb").read() for f in sorted(glob.glob(sys.argv[1] + "/*.json"))]
total = sum(map(len, files))
def best(label, fn):
    times = []
    for _ in range(3):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    print(f"{label} {total / min(times) / 1e6:.1f} MB/s")
best("orjson-parse", lambda: [orjson.loads(f) for f in files])
best("python-json-parse", lambda: [json.loads(f) for f in files])
trees = [orjson.loads(f) for f in files]
best("orjson-write", lambda: [orjson.dumps(t) for t in trees])
PY
$tool "$shared"/*.json

if [ "${1:-}" = "--ndjson-1gb" ]; then
  big=${TMPDIR:-/tmp}/caregate-1gb.ndjson
  if [ ! -s "$big" ] || [ "$(stat -c %s "$big")" -lt 1000000000 ]; then
    echo "== Building a 1 GB NDJSON file from the Synthea resources at $big"
    caregate=$(cd .. && swift build -c release --product caregate >/dev/null && swift build -c release --show-bin-path)/caregate
    seed=${TMPDIR:-/tmp}/caregate-seed.ndjson
    : > "$seed"
    for f in "$shared"/*.json; do "$caregate" convert "$f" --to ndjson -q >> "$seed"; done
    : > "$big"
    while [ "$(stat -c %s "$big")" -lt 1000000000 ]; do cat "$seed" >> "$big"; done
  fi
  echo "== Streaming $(du -h "$big" | cut -f1) of NDJSON"
  $tool --ndjson-memory "$big"
fi
