#!/usr/bin/env bash
# Bulk import from a real FHIR server: starts sekmet-fhir on 127.0.0.1 (installed into a virtual
# environment, as the tests do), seeds it with a population (scripts/population.py: 200 Synthea
# patients with fresh ids by default, the care-plan resources and their references), then runs
# `caregate import --bulk-from` against it and prints the time on the server's export, the
# download and the import, as the command reports them.
#   ./bulk-import.sh [--copies N]   (N copies of the 20 Synthea patients; 10 by default)
set -euo pipefail
cd "$(dirname "$0")"
copies=10
[[ "${1:-}" == "--copies" ]] && copies="$2"
source ./sekmet.sh
port=$((20000 + RANDOM % 10000))
start_sekmet $port "$work"
python3 ../scripts/population.py "$work/population" --copies "$copies" >/dev/null
# The resources CareGate maps, and those they refer to, as transactions of PUTs (ids kept).
python3 - "$work/population" "http://127.0.0.1:$port/fhir" <<'PY'
import json, sys, urllib.request
folder, base = sys.argv[1], sys.argv[2]
entries = []
def flush():
    if not entries: return
    body = json.dumps({"resourceType": "Bundle", "type": "transaction", "entry": entries}).encode()
    request = urllib.request.Request(base, data=body, headers={"Content-Type": "application/fhir+json"}, method="POST")
    urllib.request.urlopen(request, timeout=600).read()
    entries.clear()
for kind in ["Organization", "Practitioner", "Patient", "CarePlan", "CareTeam", "MedicationRequest", "Observation"]:
    try: lines = open(f"{folder}/{kind}.ndjson")
    except FileNotFoundError: continue
    for line in lines:
        resource = json.loads(line)
        entries.append({"resource": resource, "request": {"method": "PUT", "url": f"{kind}/{resource['id']}"}})
        if len(entries) == 500: flush()
flush()
PY
(cd .. && swift build -c release --product caregate >/dev/null 2>&1)
caregate="$(cd .. && swift build -c release --show-bin-path)/caregate"
/usr/bin/time -f "caregate import --bulk-from: %e s in all, peak resident memory %M KB" \
  "$caregate" import --bulk-from "http://127.0.0.1:$port/fhir" --store "$work/store.sqlite" --tz America/New_York \
  --type Patient,CarePlan,CareTeam,MedicationRequest,Observation,Practitioner,Organization 2>&1 >"$work/out.txt" | grep -E "^bulk export|in all" || true
tail -1 "$work/out.txt"
