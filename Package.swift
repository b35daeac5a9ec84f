// swift-tools-version:6.0
// Herald: a self-hosted push-notification delivery worker pool. Module map: docs/ARCHITECTURE.md.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
    ],
    targets: [
        // C libraries from Debian, each touched by exactly one Swift module.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // epoll and eventfd, which Glibc's Swift module does not export.
        .systemLibrary(name: "CLinux"),
        // The git revision the binary was built from (scripts/stamp-revision generates its header).
        .target(name: "CHeraldBuildInfo"),

        .target(name: "HeraldCore", swiftSettings: swiftSettings),
        .target(name: "HeraldCrypto", dependencies: ["COpenSSL"], swiftSettings: swiftSettings),
        .target(name: "HeraldHTTP2", dependencies: ["CNghttp2", "CLinux", "HeraldCore", "HeraldCrypto"], swiftSettings: swiftSettings),
        .target(name: "HeraldAPNs", dependencies: ["HeraldHTTP2", "HeraldCore", "HeraldCrypto"], swiftSettings: swiftSettings),
        .target(name: "HeraldFCM", dependencies: ["HeraldHTTP2", "HeraldCore", "HeraldCrypto"], swiftSettings: swiftSettings),
        .target(name: "HeraldKafka", dependencies: ["CRdKafka", "HeraldCore"], swiftSettings: swiftSettings),
        .target(name: "HeraldPostgres", dependencies: ["CLibPQ", "HeraldCore", "HeraldCrypto"], swiftSettings: swiftSettings),
        .target(
            name: "HeraldWorker",
            dependencies: ["HeraldCore", "HeraldCrypto", "HeraldHTTP2", "HeraldAPNs", "HeraldFCM", "HeraldKafka", "HeraldPostgres"],
            swiftSettings: swiftSettings
        ),
        .target(name: "HeraldSim", dependencies: ["HeraldCore", "HeraldHTTP2", "HeraldCrypto"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "herald",
            dependencies: ["CHeraldBuildInfo", "HeraldCore", "HeraldCrypto", "HeraldFCM", "HeraldKafka", "HeraldPostgres", "HeraldWorker", "HeraldSim"],
            swiftSettings: swiftSettings
        ),

        // Fuzz targets over every parser of outside input (scripts/fuzz builds it with libFuzzer and
        // ASan); a plain build replays files through a target. Not part of the `herald` binary.
        .executableTarget(
            name: "HeraldFuzz",
            dependencies: ["HeraldCore", "HeraldCrypto", "HeraldHTTP2", "HeraldAPNs", "HeraldFCM", "HeraldPostgres"],
            swiftSettings: swiftSettings
        ),

        // Shared by the test targets only: service URLs from scripts/test, the repository root, subprocesses.
        .target(name: "HeraldTestSupport", path: "Tests/HeraldTestSupport", swiftSettings: swiftSettings),

        .testTarget(name: "HeraldCoreTests", dependencies: ["HeraldCore", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldCryptoTests", dependencies: ["HeraldCrypto", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldHTTP2Tests", dependencies: ["HeraldHTTP2", "HeraldCrypto", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldAPNsTests", dependencies: ["HeraldAPNs", "HeraldCore", "HeraldSim", "HeraldHTTP2", "HeraldCrypto", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldFCMTests", dependencies: ["HeraldFCM", "HeraldCore", "HeraldSim", "HeraldHTTP2", "HeraldCrypto", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldKafkaTests", dependencies: ["HeraldKafka", "HeraldCore", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldPostgresTests", dependencies: ["HeraldPostgres", "HeraldCore", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldWorkerTests", dependencies: ["HeraldWorker", "HeraldCore", "HeraldAPNs", "HeraldFCM", "HeraldHTTP2", "HeraldPostgres", "HeraldKafka", "HeraldTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HeraldSimTests", dependencies: ["HeraldSim", "HeraldHTTP2", "HeraldCrypto", "HeraldCore", "HeraldTestSupport"], swiftSettings: swiftSettings),
        // Runs the built `herald` binary as a subprocess (validate-job, migrate, dev-broker, send,
        // tail, jobs, and the end-to-end pipeline suite); HeraldKafka and HeraldPostgres set up and read
        // back what the commands touch; HeraldSim for the simulators' unregistered-token rule.
        .testTarget(name: "heraldTests", dependencies: ["HeraldCore", "HeraldCrypto", "HeraldKafka", "HeraldPostgres", "HeraldSim", "HeraldTestSupport"],
                    swiftSettings: swiftSettings),
    ],
    swiftLanguageModes: [.v6]
)
