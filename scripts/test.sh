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
release_build=""
trap '[ -z "$release_build" ] || kill -- -"$release_build" 2>/dev/null; ./scripts/test-postgres.sh stop "$postgres"; rm -rf "$scratch" "$postgres"' EXIT
eval "$(./scripts/test-postgres.sh start "$postgres/cluster")"
# The release build too, as the container image builds it (the Swift runtime linked in): the
# optimizer has crashed on code the debug build took (it once broke `caregate import`). It is
# built beside the tests, in a build folder of its own and at the lowest priority, so it takes
# the cores the tests leave idle (they wait on servers, sockets and timers much of the time).
release_log="$scratch/release-build.log"
setsid nice -n 19 swift build -c release --product caregate --static-swift-stdlib --scratch-path .build-release > "$release_log" 2>&1 &
release_build=$!
started=$SECONDS
# A failing run ends by listing what failed, so the last lines of a long log name the tests.
TMPDIR="$scratch" swift test --skip-build "$@" 2>&1 | tee "$scratch/tests.log" || {
    echo "--- what failed ---"; grep -a -e '✘' -e 'SKIPPED' "$scratch/tests.log" | cut -c1-600 | tail -n 60; exit 1; }
echo "tests: $((SECONDS - started)) s"
# The release binary then imports the demo patient and checks the shipped mappings.
wait "$release_build" || { cat "$release_log"; echo "error: the release build failed (above)"; exit 1; }
release_build=""
echo "release build finished $((SECONDS - started)) s after the tests started"
release="$(swift build -c release --static-swift-stdlib --scratch-path .build-release --show-bin-path)/caregate"
"$release" validate Mappings
"$release" import FHIRSamples/bundle/maria-lopez-demo-bundle.json --store "$scratch/release.sqlite" --tz America/New_York | tail -1
echo "release build and its smoke test: $((SECONDS - started)) s after the tests started"
# The library products' API documentation: a broken link in a catalog, or a public symbol
# without a documentation comment, fails (each module's coverage closes the output).
started=$SECONDS
./scripts/docs.sh "$scratch/docs" > "$scratch/docs.log" 2>&1 || { cat "$scratch/docs.log"; exit 1; }
grep -v -e 'has no documentation comment$' -e ' coverage: ' "$scratch/docs.log" || true
echo "API documentation: $((SECONDS - started)) s"
