#!/usr/bin/env bash
# Push throughput against the server's own ingest rate: starts two fresh sekmet-fhir servers on
# 127.0.0.1 (installed into a virtual environment, as the tests do), posts batch Bundles straight
# to one and pushes the same outcomes through caregate to the other, in one run.
#   ./push-vs-ingest.sh [--outcomes N] [--batch B]
set -euo pipefail
cd "$(dirname "$0")"
venv="${CAREGATE_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caregate-tests}/caregate-sekmet-venv-0.1.1"
mkdir -p "$(dirname "$venv")"
if [ ! -x "$venv/bin/sekmet" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q sekmet-fhir==0.1.1
fi
work="$(mktemp -d)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
start_server() {
  local port=$1
  cat > "$work/settings-$port.yaml" <<YAML
base_url: http://127.0.0.1:$port/fhir
host: 127.0.0.1
port: $port
data_dir: $work/data-$port
simulator:
  enabled: false
log_inbound: false
YAML
  SEKMET_CONFIG="$work/settings-$port.yaml" "$venv/bin/sekmet" serve --config "$work/settings-$port.yaml" >"$work/server-$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 80); do
    curl -sf "http://127.0.0.1:$port/fhir/metadata" >/dev/null && return 0
    sleep 0.25
  done
  echo "sekmet did not start on $port" >&2; exit 1
}
direct=$((20000 + RANDOM % 10000)); push=$((direct + 1))
start_server $direct
start_server $push
swift run -c release push-throughput --direct "http://127.0.0.1:$direct/fhir" --push "http://127.0.0.1:$push/fhir" "$@"
