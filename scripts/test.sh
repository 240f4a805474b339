#!/usr/bin/env bash
# Builds CareGate and runs its whole test suite (Swift Testing). Conformance tests read
# ../shared when it is present beside the clone and print a SKIPPED notice when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-system-packages.sh
swift build --build-tests "$@"
swift test --skip-build "$@"
