import Foundation
import HeraldCore
import HeraldPostgres

/// `herald migrate [--database-url URL]`: applies Herald's migrations (safe to run from many
/// processes at once; re-running is a no-op).
enum MigrateCommand {
    static let usage = """
    usage: herald migrate [--database-url URL] [--json]  (or HERALD_DATABASE_URL)
      Applies the embedded migrations under an advisory lock; --json prints one object: applied,
      already_applied, unknown_versions, milliseconds, database.
    """

    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald migrate", usage: usage)
        let json = options.flag("--json")
        let url = options.string("--database-url") ?? ProcessInfo.processInfo.environment["HERALD_DATABASE_URL"]
        guard options.finish() else { return 64 }
        guard let url, !url.isEmpty else {
            Console.error("herald migrate: no database: set HERALD_DATABASE_URL or pass --database-url postgresql://USER@HOST:PORT/DB")
            return 78
        }
        do {
            let connection = try await PostgresConnection.connect(url, applicationName: "herald-migrate")
            let started = Date()
            let outcome = try await Migrator().migrate(connection)
            await connection.close()
            let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
            if json {
                print(JSONValue.object([
                    "applied": .array(outcome.applied.map { .string("\(fourDigits($0.version))_\($0.name)") }),
                    "already_applied": .int(outcome.alreadyApplied),
                    "unknown_versions": .array(outcome.unknownVersions.map { .int($0) }),
                    "milliseconds": .int(milliseconds),
                    "database": .string(connection.info.redacted),
                ]).serialized())
                return 0
            }
            for migration in outcome.applied {
                print("applied \(fourDigits(migration.version))_\(migration.name)")
            }
            if !outcome.unknownVersions.isEmpty {
                Console.error("herald migrate: note: the database has migrations this binary does not know (\(outcome.unknownVersions.map(String.init).joined(separator: ", "))); a newer Herald migrated it")
            }
            print("migrations: \(outcome.applied.count) applied, \(outcome.alreadyApplied) already applied (\(milliseconds) ms) on \(connection.info.redacted)")
            return 0
        } catch {
            Console.error("herald migrate: \(error)")
            switch error.code {
            case .invalidURL: return 78
            case .connectFailed, .connectionLost: return 69
            default: return 65
            }
        }
    }

    private static func fourDigits(_ value: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
