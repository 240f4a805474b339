#!/usr/bin/env bash
# Runs the test suite under the sanitizers: the whole suite under AddressSanitizer (with
# LeakSanitizer), and the concurrent code (store writers and readers, the outbox, push, token
# sharing, the server, its EHR workers, CareKit sync, dashboard sessions and staged imports) under ThreadSanitizer. Each has its own build folder (.build/asan, .build/tsan).
#
#   scripts/sanitizers.sh            both
#   scripts/sanitizers.sh address    ASan only
#   scripts/sanitizers.sh thread     TSan only
#
# Leaks reported only inside the XCTest host that runs the tests (objects it keeps until exit)
# are suppressed by scripts/lsan-suppressions.txt; any other leak, and any ASan or TSan report,
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-system-packages.sh
which=("${@:-address thread}")
export CAREGATE_TEST_CACHE="${CAREGATE_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caregate-tests}"
mkdir -p "$CAREGATE_TEST_CACHE"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/caregate-sanitizers.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# The concurrent code's suites, for ThreadSanitizer.
concurrent="Concurrent|SQLiteStore|StoreTransaction|Push|Outbox|SMART|SyncRoute|ServerLimit|CareKitSync|EHRLoop|ConcurrencyLimit|HostileClient|NotifyRoute|DashboardRoute|StagedImport"
status=0
for sanitizer in ${which[*]}; do
    case "$sanitizer" in
        address) filter=() ;;
        thread) filter=(--filter "$concurrent") ;;
        *) echo "sanitizers.sh: no sanitizer '$sanitizer' (address or thread)" >&2; exit 64 ;;
    esac
    build=".build/${sanitizer:0:1}san"
    log="$scratch/$sanitizer.log"
    echo "sanitizers: building with --sanitize=$sanitizer in $build"
    if ! swift build --build-tests --sanitize="$sanitizer" --scratch-path "$build" > "$scratch/build-$sanitizer.log" 2>&1; then
        grep -E "error:" "$scratch/build-$sanitizer.log" | head -20 >&2
        echo "sanitizers: the $sanitizer build failed" >&2
        exit 1
    fi
    echo "sanitizers: testing under $sanitizer${filter:+ (${filter[*]})}"
    if TMPDIR="$scratch" LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-suppressions.txt:print_suppressions=0" \
        TSAN_OPTIONS="halt_on_error=0" SWIFT_BACKTRACE=enable=no \
        swift test --skip-build --sanitize="$sanitizer" --scratch-path "$build" "${filter[@]}" > "$log" 2>&1 \
        && ! grep -qE "ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer" "$log"; then
        echo "sanitizers: $sanitizer: $(grep -E '^✔ Test run with' "$log" | tail -1)"
    else
        status=1
        echo "sanitizers: $sanitizer: FAILED" >&2
        grep -E "Sanitizer|✘|SUMMARY" "$log" | head -20 >&2 || tail -20 "$log" >&2
        cp "$log" ".build/sanitizers-$sanitizer.log" && echo "sanitizers: the whole log is in .build/sanitizers-$sanitizer.log" >&2
    fi
done
exit $status
