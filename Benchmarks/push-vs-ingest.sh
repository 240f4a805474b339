#!/usr/bin/env bash
# Push throughput against the server's own ingest rate: starts two fresh sekmet-fhir servers on
# 127.0.0.1 (installed into a virtual environment, as the tests do), posts batch Bundles straight
# to one and pushes the same outcomes through caregate to the other, in one run.
#   ./push-vs-ingest.sh [--outcomes N] [--batch B]
set -euo pipefail
cd "$(dirname "$0")"
source ./sekmet.sh
direct=$((20000 + RANDOM % 10000)); push=$((direct + 1))
start_sekmet $direct "$work"
start_sekmet $push "$work"
swift run -c release push-throughput --direct "http://127.0.0.1:$direct/fhir" --push "http://127.0.0.1:$push/fhir" "$@"
