// swift-tools-version: 6.1
//
// CareGate's benchmarks (package-benchmark). Run from this folder:
//   swift package --allow-writing-to-package-directory benchmark
// Data comes from ../../shared (the Synthea bundles); benchmarks that need it say so and skip.
import PackageDescription

let package = Package(
    name: "CareGateBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "CareGate", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // Latency percentiles for the sync load (sync-load).
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // The server's service group, run in-process by sync-load.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // push-cycle writes its million pushed outbox items straight into the store's file.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // Prints MB/s for reading and writing FHIR, for side-by-side runs with peers (compare-peers.sh).
        // Prints the care store's bulk insert, day-view and history figures (release build).
        .executableTarget(
            name: "store-throughput",
            dependencies: [.product(name: "CareStore", package: "CareGate")],
            path: "Sources/store-throughput"
        ),
        // Prints the import of all Synthea bundles: MB/s, entries/s, and the share of each phase.
        .executableTarget(
            name: "import-throughput",
            dependencies: [
                .product(name: "Gateway", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "PostgresStore", package: "CareGate"),
            ],
            path: "Sources/import-throughput"
        ),
        // 200 CareKit devices syncing over loopback: up-to-date pulls and POSTs against /healthz.
        .executableTarget(
            name: "sync-load",
            dependencies: [
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "PostgresStore", package: "CareGate"),
                .product(name: "FHIRClient", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
                .product(name: "GatewayServer", package: "CareGate"),
                .product(name: "JSON", package: "CareGate"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/sync-load"
        ),
        // One push cycle among a million pushed outcomes, beside what a cycle read before.
        .executableTarget(
            name: "push-cycle",
            dependencies: [
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "FHIRClient", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/push-cycle"
        ),
        // A store of a million outcomes, for the export's memory figure (export-scale.sh).
        .executableTarget(
            name: "export-scale",
            dependencies: [.product(name: "CareStore", package: "CareGate")],
            path: "Sources/export-scale"
        ),
        // US Core vital signs validated against their profiles; the export with and without it
        // (profile-validation.sh runs it beside fhirkit-rs).
        .executableTarget(
            name: "profile-validation",
            dependencies: [
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "FHIR", package: "CareGate"),
                .product(name: "FHIRPackages", package: "CareGate"),
                .product(name: "FHIRPath", package: "CareGate"),
                .product(name: "FHIRValidation", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
            ],
            path: "Sources/profile-validation"
        ),
        .executableTarget(
            name: "fhir-throughput",
            dependencies: [.product(name: "FHIR", package: "CareGate")],
            path: "Sources/fhir-throughput"
        ),
        .executableTarget(
            name: "CareStoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CareStore", package: "CareGate"),
            ],
            path: "Benchmarks/CareStoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "SurveyBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "FHIR", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
            ],
            path: "Benchmarks/SurveyBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "FHIRPathBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "FHIR", package: "CareGate"),
                .product(name: "FHIRPath", package: "CareGate"),
            ],
            path: "Benchmarks/FHIRPathBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "GatewayBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "FHIR", package: "CareGate"),
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
            ],
            path: "Benchmarks/GatewayBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        // Push through the gateway against posting the same batches straight to a FHIR server
        // (push-vs-ingest.sh starts two fresh servers and runs it).
        .executableTarget(
            name: "push-throughput",
            dependencies: [
                .product(name: "FHIR", package: "CareGate"),
                .product(name: "FHIRClient", package: "CareGate"),
                .product(name: "CareStore", package: "CareGate"),
                .product(name: "Mapping", package: "CareGate"),
                .product(name: "Gateway", package: "CareGate"),
            ],
            path: "Sources/push-throughput"
        ),
        .executableTarget(
            name: "FHIRFormats",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "FHIR", package: "CareGate"),
            ],
            path: "Benchmarks/FHIRFormats",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
