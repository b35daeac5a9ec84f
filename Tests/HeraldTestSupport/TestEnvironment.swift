public import Foundation

/// The services `scripts/test` starts, as the integration suites see them.
///
/// A suite that needs a service is enabled when the service's variable is set, or when `CI=true`:
/// in CI a missing service must fail the run, never skip it.
public enum TestEnvironment {
    /// `HERALD_TEST_DATABASE_URL`: a throwaway PostgreSQL database.
    public static let databaseVariable = "HERALD_TEST_DATABASE_URL"
    /// `HERALD_TEST_KAFKA_BROKERS`: `herald dev-broker`'s bootstrap servers.
    public static let kafkaVariable = "HERALD_TEST_KAFKA_BROKERS"

    /// Whether suites needing `variable` should run.
    public static func shouldRun(needing variable: String) -> Bool {
        let environment = ProcessInfo.processInfo.environment
        return environment[variable].map { !$0.isEmpty } ?? false || environment["CI"] == "true"
    }

    /// A service was required but `scripts/test` did not provide it.
    public struct MissingService: Error, CustomStringConvertible {
        public let variable: String
        public var description: String { "\(variable) is not set: run the integration suites through scripts/test" }
    }

    /// The value of `variable`, or an error that fails the test.
    public static func require(_ variable: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
            throw MissingService(variable: variable)
        }
        return value
    }

    /// The repository's root folder.
    public static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        // Tests/HeraldTestSupport/TestEnvironment.swift → the root is three levels up.
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()

    /// The `herald` binary the tests run: `HERALD_BIN`, else the one built beside the test bundle.
    public static var heraldBinary: URL {
        if let path = ProcessInfo.processInfo.environment["HERALD_BIN"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundle.appendingPathComponent("herald")
    }

    /// A fresh name for test topics, groups and databases.
    public static func uniqueName(_ prefix: String) -> String {
        "\(prefix)_\(UInt32.random(in: 0...UInt32.max))_\(ProcessInfo.processInfo.processIdentifier)"
    }
}
