#!/usr/bin/env bash
# US Core vital-sign Observations validated by CareGate against their profiles (compiled once,
# one core), beside fhirkit-rs (Rust, from PyPI) validating the same resources against base R4,
# in one run; and CareGate's export with validation against the export without it.
#
#   Benchmarks/profile-validation.sh [--count N] [--rounds N]
#
# Needs ../shared/fhir-packages beside the project (US Core 6.1.0), python3 and pip (fhirkit-rs
# goes into Benchmarks/.venv). Both parties are pinned to one core (taskset -c 0).
set -euo pipefail
cd "$(dirname "$0")"
package=../../shared/fhir-packages/hl7.fhir.us.core-6.1.0.tgz
[ -f "$package" ] || { echo "SKIPPED: $package not found"; exit 0; }
count=20000; rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -c "import fhirkit" 2>/dev/null || .venv/bin/pip install -q fhirkit-rs
swift build -c release --product profile-validation >/dev/null
ndjson=$(mktemp --suffix=.ndjson)
trap 'rm -f "$ndjson"' EXIT
taskset -c 0 .build/release/profile-validation "$package" "$ndjson" --count "$count" --rounds "$rounds"
taskset -c 0 .venv/bin/python - "$ndjson" "$rounds" <<'PY'
import sys, time, fhirkit
lines = open(sys.argv[1], "rb").read().splitlines()
best = float("inf")
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    for line in lines:
        fhirkit.validate(line)
    best = min(best, time.perf_counter() - start)
errors = sum(1 for line in lines[:100] for issue in fhirkit.validate(line) if issue.severity == "error")
print(f"fhirkit-rs {fhirkit.__version__} validate (base R4) {len(lines) / best:.0f} resources/s ({errors} errors in the first 100)")
PY
