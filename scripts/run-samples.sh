#!/usr/bin/env bash
# CareGate's main job on its embedded default: build the command line, check the shipped mappings,
# and import the demo patient in FHIRSamples/ into an SQLite store. Output goes to out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-system-packages.sh
swift build --product caregate
caregate="$(swift build --show-bin-path)/caregate"
mkdir -p out

bundle=FHIRSamples/bundle/maria-lopez-demo-bundle.json
echo "== Reading the demo Bundle ($bundle) and converting it"
"$caregate" convert "$bundle" --to xml -o out/maria-lopez-demo-bundle.xml
"$caregate" convert "$bundle" --to ndjson -o out/maria-lopez-demo.ndjson
"$caregate" convert out/maria-lopez-demo.ndjson --to json -o out/maria-lopez-demo-collection.json
echo "== Every sample resource, JSON and XML"
count=0
for file in FHIRSamples/json/*.json FHIRSamples/xml/*.xml; do
  "$caregate" convert "$file" --to json -q > /dev/null
  count=$((count + 1))
done
echo "read $count sample files without errors"
echo "== Checking the mapping files"
"$caregate" validate Mappings
echo "== Importing the demo patient into a fresh store (out/caregate.sqlite)"
rm -f out/caregate.sqlite out/caregate.sqlite-wal out/caregate.sqlite-shm
"$caregate" import "$bundle" --store out/caregate.sqlite --tz America/New_York --report out/import-report.json
echo "== Importing it again: nothing changes"
"$caregate" import "$bundle" --store out/caregate.sqlite --tz America/New_York | tail -1
echo "== Monday 2 November 2026, as the patient's app shows it"
"$caregate" store events --store out/caregate.sqlite --from 2026-11-02 --to 2026-11-03 --tz America/New_York
"$caregate" store export --carekit --store out/caregate.sqlite -o out/caregate-revision.json
echo "output in out/ (the store, its CareKit export, the import report)"
