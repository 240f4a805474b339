#!/usr/bin/env bash
# Population-scale figures, in one run (release builds):
#   - the 20 Synthea bundles: the whole run in memory on one core, staged one patient at a time
#     on one core (held to CPU 0), staged two at once on both cores (MB/s and peak memory, each
#     its own process);
#   - a population of NDJSON (scripts/population.py, 1 GB by default): the same three;
#   - `caregate export --format bundle` of a million outcomes (export-scale's store): time and
#     peak memory.
#   ./import-scale.sh [--megabytes N] [--skip-export]
set -euo pipefail
cd "$(dirname "$0")"
megabytes=1024
export_too=true
while [[ $# -gt 0 ]]; do
  case "$1" in
    --megabytes) megabytes="$2"; shift 2 ;;
    --skip-export) export_too=false; shift ;;
    *) echo "import-scale.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
cache="${XDG_CACHE_HOME:-$HOME/.cache}/caregate-bench"
population="$cache/population-$megabytes"
mkdir -p "$cache"
if [ ! -f "$population/Patient.ndjson" ]; then
  python3 ../scripts/population.py "$population" --megabytes "$megabytes"
fi
swift build -c release --product import-throughput >/dev/null 2>&1
swift build -c release --product export-scale >/dev/null 2>&1
(cd .. && swift build -c release --product caregate >/dev/null 2>&1)
bin="$(swift build -c release --show-bin-path)"
for input in ../../shared/synthea "$population"; do
  runs=3; [ "$input" = "$population" ] && runs=1
  # One core means one: the one-core runs are held to CPU 0 (taskset), as the staged import's
  # store writer is a thread of its own beside the mapping.
  for mode in "--mode whole" "--mode staged --window 1" "--mode staged --window 2"; do
    pin=(); [[ "$mode" != *"--window 2"* ]] && pin=(taskset -c 0)
    "${pin[@]}" "$bin/import-throughput" --input "$input" --runs "$runs" $mode | grep -E "^import|MB/s|peak"
  done
done
if $export_too; then
  work="$(mktemp -d "$cache/export-XXXX")"
  trap 'rm -rf "$work"' EXIT
  "$bin/export-scale" "$work/store.sqlite"
  caregate="$(cd .. && swift build -c release --show-bin-path)/caregate"
  /usr/bin/time -f "export of a million outcomes as a transaction Bundle: %e s, peak resident memory %M KB" \
    "$caregate" export --store "$work/store.sqlite" --format bundle -o "$work/bundle.json" --tz America/New_York >/dev/null
  ls -l "$work/bundle.json" | awk '{ printf "  the Bundle: %.0f MB\n", $5 / 1e6 }'
fi
