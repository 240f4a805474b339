#!/usr/bin/env bash
# Builds CareGate and runs its whole test suite (Swift Testing). Conformance tests read
# ../shared when it is present beside the clone and print a SKIPPED notice when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-system-packages.sh --renderers
swift build --build-tests "$@"
# The tests' temporary files (stores, fixtures, keys) go to a folder removed afterwards; the
# FHIR server's virtual environment is kept between runs in a cache folder.
export CAREGATE_TEST_CACHE="${CAREGATE_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caregate-tests}"
mkdir -p "$CAREGATE_TEST_CACHE"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/caregate-test-run.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
TMPDIR="$scratch" swift test --skip-build "$@"
