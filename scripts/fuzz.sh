#!/usr/bin/env bash
# Builds CareGate's libFuzzer harnesses (Fuzz/, every module compiled with
# -sanitize=fuzzer,address) and fuzzes them.
#
#   scripts/fuzz.sh                        every harness, 60 seconds each
#   scripts/fuzz.sh fhir-json --seconds 600
#   scripts/fuzz.sh fhirpath --runs 10000000 [--seconds 3600]   (whichever comes first)
#   scripts/fuzz.sh --merge                add what the runs found (new coverage only) to Fuzz/Corpus/
#
# Harnesses: fhir-json fhir-xml fhir-stream fhirpath mapping carekit timing server-answers sync
# server-config bulk-manifest patient-boundary (its corpus is sync's: the same push bodies) questionnaire.
# Each run starts from Fuzz/Corpus/<harness> (committed), the seeds built from FHIRSamples/,
# Mappings/ and ../shared (Fuzz/seeds.py), and what earlier runs found (Fuzz/.build/corpus).
# A crash, leak, timeout over 1 s, allocation over 2 GB or property failure stops the run; the
# input is kept in Fuzz/.build/crashes/<harness>/. Copy it to Tests/FuzzRegressions/<harness>/
# once fixed: the test suite replays those and the committed corpora on every run. A finding
# committed before its fix waits in Fuzz/Findings/<harness>/ (not replayed: the suite would fail).
set -euo pipefail
cd "$(dirname "$0")/.."
all=(fhir-json fhir-xml fhir-stream fhirpath mapping carekit timing server-answers sync server-config bulk-manifest patient-boundary questionnaire)
targets=()
seconds=""
runs=""
merge=false
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --merge) merge=true; shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 64 ;;
        *)
            if [[ " ${all[*]} " != *" $1 "* ]]; then echo "fuzz.sh: no harness '$1'; harnesses: ${all[*]}" >&2; exit 64; fi
            targets+=("$1"); shift ;;
    esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")

./scripts/install-system-packages.sh
build=Fuzz/.build
# lld: gold fails on these objects' debug line tables.
mkdir -p "$build/logs"
if ! swift build --package-path Fuzz -c release --scratch-path "$build" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -g -Xswiftc -use-ld=lld > "$build/logs/build.log" 2>&1; then
    grep -v "Cannot export local symbol" "$build/logs/build.log" | grep -E "error|warning" | head -20 >&2
    echo "fuzz.sh: the fuzzers did not build (log: $build/logs/build.log)" >&2
    exit 1
fi
bin="$(swift build --package-path Fuzz -c release --scratch-path "$build" --show-bin-path)"
python3 Fuzz/seeds.py

# One dictionary per harness, from the token lists in Fuzz/Dictionaries.
dictionary() {
    case "$1" in
        fhir-xml) echo xml ;;
        fhir-stream) echo "json xml" ;;
        fhirpath) echo fhirpath ;;
        mapping) echo "yaml fhirpath" ;;
        server-config) echo yaml ;;
        *) echo json ;;
    esac
}
longest() {
    case "$1" in
        fhirpath|server-answers) echo 4096 ;;
        fhir-json|fhir-xml|fhir-stream) echo 8192 ;;
        *) echo 16384 ;;
    esac
}

# Scratch files (the mapping and fhir-stream harnesses write one per input) on tmpfs when there
# is one: half the mapping harness's time went to creating and removing them on disk.
if [[ -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi

status=0
for target in "${targets[@]}"; do
    corpus="$build/corpus/$target"; crashes="$build/crashes/$target"; dict="$build/dict/$target.dict"
    mkdir -p "$corpus" "$crashes" "$build/dict" "$build/logs" "$build/seeds/$target" "Fuzz/Corpus/$target"
    (for d in $(dictionary "$target"); do cat "Fuzz/Dictionaries/$d.dict"; done) > "$dict"
    if $merge; then
        "$bin/fuzz-$target" -merge=1 "Fuzz/Corpus/$target" "$corpus" 2>&1 | tail -1
        continue
    fi
    # --runs and --seconds together stop at whichever comes first; neither: 60 s.
    limit=()
    [[ -n "$runs" ]] && limit+=(-runs="$runs")
    [[ -n "$seconds" || -z "$runs" ]] && limit+=(-max_total_time="${seconds:-60}")
    log="$build/logs/$target.log"
    echo "fuzz: $target (${limit[*]}), log $log"
    # A 64 MB quarantine (ASan's default is 256 MB): freed memory held back across size classes
    # grew the fhirpath harness past the 2 GB limit over 4 million runs, with nothing leaked
    # (flat at 128 MB without quarantine). Allocation stacks 2 frames deep: ASan keeps every
    # distinct stack for good, and FHIRPath's regular expressions made 30-frame stacks grow it
    # by 25 MB a minute. A finding's full stacks come from replaying its input:
    #   ASAN_OPTIONS=detect_leaks=1 Fuzz/.build/release/fuzz-<harness> <input>
    if SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=64:malloc_context_size=2 "$bin/fuzz-$target" "$corpus" "Fuzz/Corpus/$target" "$build/seeds/$target" \
        -dict="$dict" -max_len="$(longest "$target")" -timeout=1 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
        -artifact_prefix="$crashes/" -print_final_stats=1 "${limit[@]}" > "$log" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
        rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
        echo "fuzz: $target: $execs executions, $rate per second, no finding"
    else
        status=1
        echo "fuzz: $target: FINDING; the input is in $crashes/:" >&2
        { grep -E "ERROR|Fatal error|property failed|SUMMARY|Test unit written|ParseDictionary" "$log" || tail -3 "$log"; } | head -8 >&2
    fi
done
exit $status
