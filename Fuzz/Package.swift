// swift-tools-version: 6.1
//
// CareGate's fuzzers (libFuzzer), kept out of the normal build. Build and run them with
// ../scripts/fuzz.sh, which compiles every module with -sanitize=fuzzer,address.
// The harnesses (Harnesses/) are also compiled into the main package's FuzzReplayTests, which
// replay each harness's corpus and kept crashers on every test run.
import PackageDescription

/// One libFuzzer executable per input surface; each entry only names its harness.
let harnesses = ["fhir-json", "fhir-xml", "fhir-stream", "fhirpath", "mapping", "carekit", "timing", "server-answers", "sync", "server-config", "bulk-manifest", "patient-boundary", "questionnaire"]

let package = Package(
    name: "CareGateFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "CareGate", path: ".."),
    ],
    targets: [
        .target(
            name: "FuzzHarnesses",
            dependencies: [
                .product(name: "JSON", package: "CareGate"),
                .product(name: "FHIR", package: "CareGate"),
                .product(name: "FHIRPath", package: "CareGate"),
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
                .product(name: "FHIRClient", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
                .product(name: "GatewayServer", package: "CareGate"),
                .product(name: "CarePages", package: "CareGate"),
            ],
            path: "Harnesses"
        ),
        // libFuzzer's driver, started by each executable's main.
        .target(name: "FuzzDriver", dependencies: ["FuzzHarnesses"], path: "Driver"),
    ] + harnesses.map { name in
        .executableTarget(name: "fuzz-\(name)", dependencies: ["FuzzHarnesses", "FuzzDriver"], path: "Entries/\(name)")
    }
)
