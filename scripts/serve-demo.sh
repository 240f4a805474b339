#!/usr/bin/env bash
# The gateway in one command: build CareGate, import the demo patient, write a gateway.yaml and
# owner-only tokens into out/serve-demo/, enroll a device and record a week of outcomes through
# the sync API as a CareKit app would, then run `caregate serve` with the operator's dashboard
# until Ctrl-C.
#
#   CAREGATE=path/to/caregate   use that binary instead of building (the tests do)
#   SERVE_DEMO_OUT=folder       instead of out/serve-demo (made afresh)
#   SERVE_DEMO_PORT=8080        the port (0: any free one)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CAREGATE:-}" ]; then
  ./scripts/install-system-packages.sh
  swift build --product caregate
  CAREGATE="$(swift build --show-bin-path)/caregate"
fi
out="${SERVE_DEMO_OUT:-out/serve-demo}"
port="${SERVE_DEMO_PORT:-8080}"
rm -rf "$out"
mkdir -p "$out/secrets"
chmod 700 "$out" "$out/secrets"

echo "== Importing the demo patient into $out/caregate.sqlite"
"$CAREGATE" import FHIRSamples/bundle/maria-lopez-demo-bundle.json --store "$out/caregate.sqlite" --tz America/New_York | tail -1

echo "== Writing $out/gateway.yaml and the operators' sign-in token (owner-only)"
(umask 077 && head -c 24 /dev/urandom | base64 | tr '+/' '-_' > "$out/secrets/admin.token")
cat > "$out/gateway.yaml" <<YAML
# The demo's gateway: loopback only, the store beside this file, the dashboard at /ui.
# Every key there is: docs/gateway.yaml.
listen:
  host: 127.0.0.1
  port: $port
store: caregate.sqlite
dashboard:
  admin-token-file: secrets/admin.token
YAML
"$CAREGATE" serve --config "$out/gateway.yaml" --check-config

echo "== Starting caregate serve (its JSON log: $out/serve.log)"
"$CAREGATE" serve --config "$out/gateway.yaml" 2> "$out/serve.log" &
server=$!
trap 'kill "$server" 2> /dev/null || true; wait "$server" 2> /dev/null || true' EXIT
trap 'exit 0' INT TERM
for _ in $(seq 1 600); do
  grep -q "listening on" "$out/serve.log" 2> /dev/null && break
  kill -0 "$server" 2> /dev/null || { cat "$out/serve.log"; exit 1; }
  sleep 0.1
done
address="$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$out/serve.log" | head -1 | sed 's/listening on //')"
[ -n "$address" ] || { echo "caregate serve did not start:"; cat "$out/serve.log"; exit 1; }

echo "== Enrolling a device for Patient/maria-lopez, and recording a week as her app would"
code="$("$CAREGATE" enroll --patient Patient/maria-lopez --store "$out/caregate.sqlite" 2> /dev/null)"
"$CAREGATE" devices try --gateway "$address" --code "$code" --token-file "$out/device.token" \
  --days 7 --tz America/New_York \
  --value 29463-7=29463-7:78.4:kg --value 85354-9=8480-6:132:mmHg --value 85354-9=8462-4:84:mmHg

echo
echo "dashboard: $address/ui"
echo "sign in with: $(cat "$out/secrets/admin.token")"
echo "the device's token is in $out/device.token (see docs/serving.md for the sync API)"
echo "Ctrl-C stops the gateway; the store stays in $out/"
# A loop rather than `wait`: bash runs the INT trap once the sleep in hand ends, where a `wait`
# for a background job may not return on SIGINT in a shell without job control.
while kill -0 "$server" 2> /dev/null; do sleep 0.5; done
