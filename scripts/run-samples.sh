#!/usr/bin/env bash
# CareGate's main job on its embedded default: build the command line and run it over the demo
# patient in FHIRSamples/. Output goes to out/ (ignored by git).
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
echo "read $count sample files without errors; output in out/"
