#!/usr/bin/env bash
# Builds CareGate and runs its whole test suite (Swift Testing). Conformance tests read
# ../shared when it is present beside the clone and print a SKIPPED notice when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-system-packages.sh --for-tests
swift build --build-tests "$@"
# The tests' temporary files (stores, fixtures, keys) go to a folder removed afterwards; the
# FHIR server's virtual environment is kept between runs in a cache folder.
export CAREGATE_TEST_CACHE="${CAREGATE_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caregate-tests}"
mkdir -p "$CAREGATE_TEST_CACHE"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/caregate-test-run.XXXXXX")"
# A scratch PostgreSQL cluster (its own folder: its server runs as another user), stopped afterwards.
postgres="$(mktemp -d "${TMPDIR:-/tmp}/caregate-test-postgres.XXXXXX")"; chmod 755 "$postgres"
trap './scripts/test-postgres.sh stop "$postgres"; rm -rf "$scratch" "$postgres"' EXIT
eval "$(./scripts/test-postgres.sh start "$postgres/cluster")"
# A failing run ends by listing what failed, so the last lines of a long log name the tests.
TMPDIR="$scratch" swift test --skip-build "$@" 2>&1 | tee "$scratch/tests.log" || {
    echo "--- what failed ---"; grep -a -e '✘' -e 'SKIPPED' "$scratch/tests.log" | cut -c1-600 | tail -n 60; exit 1; }
# The release build too, as the container image builds it (the Swift runtime linked in): the
# optimizer has crashed on code the debug build took (it once broke `caregate import`). Its
# binary then imports the demo patient and checks the shipped mappings. (Built beside the tests
# at the lowest priority, it made the connection tests' two-second answers late: it runs after.)
started=$SECONDS
swift build -c release --product caregate --static-swift-stdlib
release="$(swift build -c release --static-swift-stdlib --show-bin-path)/caregate"
"$release" validate Mappings
"$release" import FHIRSamples/bundle/maria-lopez-demo-bundle.json --store "$scratch/release.sqlite" --tz America/New_York | tail -1
echo "release build and its smoke test: $((SECONDS - started)) s"
# The library products' API documentation: a broken link in a catalog, or a public symbol
# without a documentation comment, fails (each module's coverage closes the output).
started=$SECONDS
./scripts/docs.sh "$scratch/docs" > "$scratch/docs.log" 2>&1 || { cat "$scratch/docs.log"; exit 1; }
grep -v -e 'has no documentation comment$' -e ' coverage: ' "$scratch/docs.log" || true
echo "API documentation: $((SECONDS - started)) s"
