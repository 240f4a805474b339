#!/usr/bin/env bash
# Measures CareGate's FHIR reading and writing side by side with orjson and Python's json on the
# same files in one run, and (with --ndjson-1gb) streams a 1 GB NDJSON file reporting peak memory.
#
#   Benchmarks/compare-peers.sh [--rounds N] [--baseline OLD-fhir-throughput] [--import [--baseline-caregate OLD-caregate]] [--ndjson-1gb]
#
# Each round measures every party once, in turn (best of 3 each); with several rounds the last
# lines give each figure's median and the median of the per-round ratios, since this machine's
# speed drifts by a third between minutes. --baseline runs a fhir-throughput built from an earlier
# commit in the same rounds: before and after from one run. --import times `caregate import` of
# the bundles as a command (process start, mappings, a new SQLite store, commit) in each round,
# built as the container image builds it, and --baseline-caregate an earlier build's beside it.
# Needs ../shared/synthea beside the project, python3 and pip (orjson goes into Benchmarks/.venv).
set -euo pipefail
cd "$(dirname "$0")"
shared=../../shared/synthea
[ -d "$shared" ] || { echo "SKIPPED: $shared not found"; exit 0; }

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q orjson
fi
rounds=1; baseline=""; ndjson=false; import=false; baseline_caregate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --ndjson-1gb) ndjson=true; shift ;;
    --import) import=true; shift ;;
    --baseline-caregate) baseline_caregate="$2"; shift 2 ;;
    *) echo "compare-peers.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
swift build -c release --product fhir-throughput >/dev/null
tool=.build/release/fhir-throughput
log=$(mktemp)
# The caregate the container image ships: the Swift runtime linked in (faster to start).
if $import; then caregate=$(cd .. && swift build -c release --product caregate --static-swift-stdlib >/dev/null && swift build -c release --static-swift-stdlib --show-bin-path)/caregate; fi

# `caregate import` of the bundles into a new store, as a command: best of 3, in MB/s.
import_rate() {
  local binary="$1" label="$2" scratch best=""
  scratch=$(mktemp -d)
  for _ in 1 2 3; do
    rm -f "$scratch"/store.sqlite*
    local start end
    start=$(date +%s%N)
    "$binary" import --store "$scratch/store.sqlite" "$shared" > /dev/null 2> "$scratch/errors" || { cat "$scratch/errors" >&2; exit 1; }
    end=$(date +%s%N)
    if [ -z "$best" ] || [ $((end - start)) -lt "$best" ]; then best=$((end - start)); fi
  done
  rm -rf "$scratch"
  python3 -c "print(f'$label {$(cat "$shared"/*.json | wc -c) / ($best / 1e9) / 1e6:.1f} MB/s')"
}

echo "== All of synthea/ ($(du -sh $shared | cut -f1)), $rounds round(s), best of 3 each"
for round in $(seq "$rounds"); do
  echo "-- round $round"
  .venv/bin/python - "$shared" <<'PY' | tee -a "$log"
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
  $tool "$shared"/*.json | tee -a "$log"
  if [ -n "$baseline" ]; then "$baseline" "$shared"/*.json | sed 's/^/baseline-/' | tee -a "$log"; fi
  if $import; then
    import_rate "$caregate" import-command | tee -a "$log"
    if [ -n "$baseline_caregate" ]; then import_rate "$baseline_caregate" baseline-import-command | tee -a "$log"; fi
  fi
done
if [ "$rounds" -gt 1 ]; then
  echo "== Medians over $rounds rounds (MB/s), and of the per-round ratios"
  python3 - "$log" <<'PY'
import collections, statistics, sys
rounds, current = [], None
for line in open(sys.argv[1]):
    label, value = line.split()[:2]
    if label == "orjson-parse": current = {}; rounds.append(current)
    current[label] = float(value)
for label in rounds[0]:
    print(f"{label} {statistics.median(r[label] for r in rounds):.1f}")
def ratio(a, b, text):
    if all(a in r and b in r for r in rounds):
        print(f"{text} {statistics.median(r[a] / r[b] for r in rounds):.2f}x")
ratio("parse-json", "orjson-parse", "parse-json / orjson-parse")
ratio("parse-json", "baseline-parse-json", "parse-json / baseline")
ratio("write-json", "baseline-write-json", "write-json / baseline")
ratio("parse-xml", "baseline-parse-xml", "parse-xml / baseline")
ratio("write-xml", "baseline-write-xml", "write-xml / baseline")
ratio("import-command", "baseline-import-command", "import-command / baseline")
PY
fi
rm -f "$log"

if $ndjson; then
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
