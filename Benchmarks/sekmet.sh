# Sourced by the benchmark scripts that need a real FHIR server: sekmet-fhir installed once into a
# virtual environment (as the tests do), and `start_sekmet PORT DIR` to run one on 127.0.0.1 with
# its data under DIR, waiting until it answers. `work` is a scratch directory; the servers are
# stopped and it is removed when the script exits.
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
start_sekmet() {
  local port=$1 dir=$2
  cat > "$dir/settings-$port.yaml" <<YAML
base_url: http://127.0.0.1:$port/fhir
host: 127.0.0.1
port: $port
data_dir: $dir/data-$port
simulator:
  enabled: false
log_inbound: false
YAML
  SEKMET_CONFIG="$dir/settings-$port.yaml" "$venv/bin/sekmet" serve --config "$dir/settings-$port.yaml" >"$dir/server-$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 80); do
    curl -sf "http://127.0.0.1:$port/fhir/metadata" >/dev/null && return 0
    sleep 0.25
  done
  echo "sekmet did not start on $port" >&2; exit 1
}
