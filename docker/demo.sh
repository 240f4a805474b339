#!/bin/sh
# The compose demo: seed the EHR with FHIRSamples/, import the patient from it, push outcomes back.
set -eu
cd /opt/caregate
base="${FHIR_BASE:-http://hapi:8080/fhir}"
store="${CAREGATE_STORE:-/data/caregate.sqlite}"
tz="${TZ:-America/New_York}"
echo "waiting for $base ..."
i=0
until curl -sf "$base/metadata" >/dev/null; do
  i=$((i + 1)); [ "$i" -gt 120 ] && { echo "the FHIR server did not come up" >&2; exit 1; }
  sleep 2
done
echo "seeding $base with FHIRSamples/json (PUT keeps the ids)"
for file in FHIRSamples/json/*.json; do
  name=$(basename "$file" .json)
  type=${name%%-*}
  id=$(caregate fhirpath id "$file" | sed 's/^\["\(.*\)"\]$/\1/')
  curl -sf -X PUT -H 'Content-Type: application/fhir+json' --data-binary "@$file" "$base/$type/$id" >/dev/null \
    || echo "warning: $base/$type/$id was not accepted" >&2
done
caregate validate
caregate import --from "$base" --patient maria-lopez --store "$store" --tz "$tz"
caregate store events --store "$store" --tz "$tz" --from "$(date +%F)" --to "$(date -d tomorrow +%F)"
caregate push --to "$base" --store "$store" --dry-run
caregate push --to "$base" --store "$store"
caregate status --store "$store"
