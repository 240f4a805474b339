// swift-tools-version: 6.1
//
// CareGate: a FHIR R4 interoperability gateway for CareKit care-plan stores.
// Modules follow the data's way through the gateway; each depends only on those before it.
import PackageDescription

let package = Package(
    name: "CareGate",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "JSON", targets: ["JSON"]),
        .library(name: "Diagnostics", targets: ["Diagnostics"]),
        .library(name: "FHIR", targets: ["FHIR"]),
        .library(name: "FHIRPath", targets: ["FHIRPath"]),
        .library(name: "FHIRPackages", targets: ["FHIRPackages"]),
        .library(name: "FHIRValidation", targets: ["FHIRValidation"]),
        .library(name: "CareStore", targets: ["CareStore"]),
        .library(name: "PostgresStore", targets: ["PostgresStore"]),
        .library(name: "Mapping", targets: ["Mapping"]),
        .library(name: "FHIRClient", targets: ["FHIRClient"]),
        .library(name: "Gateway", targets: ["Gateway"]),
        .library(name: "GatewayServer", targets: ["GatewayServer"]),
        .library(name: "CareCharts", targets: ["CareCharts"]),
        .library(name: "CarePages", targets: ["CarePages"]),
        .executable(name: "caregate", targets: ["caregate"]),
        .executable(name: "fhir-tablegen", targets: ["fhir-tablegen"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // JWT signing (RS384, ES384) for SMART Backend Services.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // The server (`caregate serve`): HTTP on SwiftNIO, run under a service group for graceful shutdown.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // SwiftNIO under Hummingbird: the server's own channel handler (a deadline for request heads).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // NIOSSL under HummingbirdTLS: the server's certificate and key read from PEM files.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // /metrics: swift-metrics' API, exported in Prometheus' text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The second store backend: several gateways over one PostgreSQL.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // API documentation: `swift package generate-documentation` (scripts/docs.sh).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // libxml2's SAX2 push parser, used by the FHIR XML reader; its tree API checks JSON narratives.
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]
        ),
        // libcurl, used by the FHIR client (URLSession cannot set a CA bundle or client certificate on Linux).
        .systemLibrary(
            name: "CLibCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // glibc's heaps for `caregate import`: grown in large steps, set before any thread allocates.
        .target(name: "CMalloc"),
        // 1. One JSON value, byte parser with positions, writer and escaping rule; one source
        //    location and diagnostic type with its renderers and "did you mean" suggestions.
        .target(name: "JSON"),
        .target(name: "Diagnostics", dependencies: ["JSON"]),
        // Charts of a patient's care (SVG with a text table each), for the dashboard and the report.
        .target(name: "CareCharts"),
        // 2. The FHIR R4 element model, generated type tables, JSON/XML/NDJSON readers and writers.
        .target(
            name: "FHIR",
            dependencies: ["JSON", "Diagnostics", "CLibXML2"]
        ),
        // 3. FHIRPath: parser, type checker and evaluator over the element model.
        .target(
            name: "FHIRPath",
            dependencies: ["Diagnostics", "FHIR", "JSON"]
        ),
        // zlib, which inflates FHIR packages (.tgz); it comes with libcurl4-openssl-dev.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // 3b. FHIR packages (.tgz, folders, loose conformance files), the R4 core's conformance
        //     resources built in, canonicals resolved with versions.
        .target(
            name: "FHIRPackages",
            dependencies: ["JSON", "FHIR", "CZlib"]
        ),
        // 3c. Profile validation: snapshots, slicing, bindings (value sets expanded), invariants
        //     through FHIRPath; results as an OperationOutcome.
        .target(
            name: "FHIRValidation",
            dependencies: ["JSON", "Diagnostics", "FHIR", "FHIRPath", "FHIRPackages"]
        ),
        // 4. CareKit's entities, schedules and events, the versioned store, CareKit JSON. Knows nothing of FHIR.
        .target(
            name: "CareStore",
            dependencies: [
                "JSON",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // 4b. The store protocols on PostgreSQL (postgres-nio), beside the SQLite store: several
        //     gateways over one database.
        .target(
            name: "PostgresStore",
            dependencies: [
                "JSON", "CareStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // 5. Mapping files, their checker, FHIR to store and store to FHIR. Knows no SQL and no HTTP.
        .target(
            name: "Mapping",
            dependencies: ["JSON", "Diagnostics", "FHIR", "FHIRPath", "FHIRPackages", "FHIRValidation", "CareStore", .product(name: "Yams", package: "Yams")],
            // The shipped mapping files, built into the binary (BuiltIn/Mappings links to the
            // repository's Mappings/), so that commands work without them on disk.
            resources: [.embedInCode("BuiltIn/Mappings")]
        ),
        // A patient's care as pages: the report, and the dashboard's patient pages (surveys scored through Mapping).
        .target(name: "CarePages", dependencies: ["JSON", "FHIR", "CareStore", "CareCharts", "Mapping"]),
        // 6. FHIR REST over libcurl: auth (bearer, SMART Backend Services), paging, retries.
        .target(
            name: "FHIRClient",
            dependencies: [
                "JSON", "FHIR", "CLibCurl",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // 7. Import, export and push use cases, the outbox, provenance.
        .target(
            name: "Gateway",
            dependencies: ["JSON", "Diagnostics", "FHIR", "FHIRPath", "FHIRPackages", "FHIRValidation", "CareStore", "Mapping", "FHIRClient",
                           .product(name: "Crypto", package: "swift-crypto")]
        ),
        // 8. The server: HTTP routes for CareKit apps and operators, over Gateway's use cases.
        .target(
            name: "GatewayServer",
            dependencies: [
                "JSON", "Diagnostics", "FHIRPackages", "CareStore", "Mapping", "FHIRClient", "Gateway", "CareCharts", "CarePages",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                // TLS in the process (NIOSSL under it), for a gateway served beyond loopback.
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // Regenerates Sources/FHIR/Generated/R4Definitions.swift from the R4 core package.
        .executableTarget(
            name: "fhir-tablegen",
            dependencies: ["JSON", "FHIRPackages"]
        ),
        // 8. The command line.
        .executableTarget(
            name: "caregate",
            dependencies: [
                "CMalloc",
                "JSON",
                "Diagnostics",
                "FHIR",
                "FHIRPath",
                "FHIRPackages",
                "FHIRValidation",
                "CareStore",
                "PostgresStore",
                "Mapping",
                "FHIRClient",
                "Gateway",
                "GatewayServer",
                "CarePages",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "JSONTests",
            dependencies: ["JSON"]
        ),
        .testTarget(
            name: "DiagnosticsTests",
            dependencies: ["Diagnostics", "JSON"]
        ),
        .testTarget(
            name: "CMallocTests",
            dependencies: ["CMalloc"]
        ),
        .testTarget(
            name: "FHIRTests",
            dependencies: ["FHIR", "JSON", "CLibXML2"],
            resources: []
        ),
        .testTarget(
            name: "FHIRPathTests",
            dependencies: ["FHIRPath", "FHIR", "Diagnostics", "JSON"],
            // Read through #filePath: the list of official-suite cases not passed, with reasons.
            exclude: ["official-suite-failures.txt"]
        ),
        .testTarget(
            name: "FHIRPackagesTests",
            dependencies: ["FHIRPackages", "FHIR", "JSON"]
        ),
        .testTarget(
            name: "FHIRValidationTests",
            dependencies: ["FHIRValidation", "FHIRPackages", "FHIR", "FHIRPath", "JSON"]
        ),
        .testTarget(
            name: "CareStoreTests",
            dependencies: [.product(name: "PostgresNIO", package: "postgres-nio"), "CareStore", "PostgresStore", "JSON", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "PostgresStoreTests",
            dependencies: [.product(name: "PostgresNIO", package: "postgres-nio"), "PostgresStore", "CareStore", "JSON", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "MappingTests",
            dependencies: ["Mapping", "FHIR", "FHIRPath", "CareStore"]
        ),
        .testTarget(
            name: "FHIRClientTests",
            dependencies: ["FHIRClient", "FHIR"]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [.product(name: "PostgresNIO", package: "postgres-nio"), "Gateway", "FHIRPackages", "Mapping", "CareStore", "PostgresStore", "CarePages", "FHIR", "FHIRClient", "JSON", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        // Replays every fuzz harness (Fuzz/Harnesses, linked in as Harnesses/) over its committed
        // corpus (Fuzz/Corpus) and the crashers kept in Tests/FuzzRegressions, without mutation.
        .testTarget(
            name: "FuzzReplayTests",
            dependencies: ["JSON", "Diagnostics", "FHIR", "FHIRPath", "CareStore", "Mapping", "FHIRClient", "Gateway", "GatewayServer", "CarePages"]
        ),
        .testTarget(
            name: "GatewayServerTests",
            dependencies: [.product(name: "PostgresNIO", package: "postgres-nio"), "GatewayServer", "Gateway", "CareStore", "PostgresStore", "FHIR", "FHIRClient", "FHIRPackages", "Mapping", "JSON",
                           .product(name: "GRDB", package: "GRDB.swift"),
                           .product(name: "HummingbirdTLS", package: "hummingbird"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "CarePagesTests",
            dependencies: ["CarePages", "CareCharts", "CareStore", "FHIR", "Mapping"]
        ),
        .testTarget(
            name: "CareChartsTests",
            dependencies: ["CareCharts"]
        ),
        .testTarget(
            name: "caregateTests",
            dependencies: ["caregate", "FHIR", "CareStore", "PostgresStore", .product(name: "PostgresNIO", package: "postgres-nio"), "JSON", "FHIRClient", "Gateway", "Mapping",
                           .product(name: "GRDB", package: "GRDB.swift")]
        ),
    ]
)
