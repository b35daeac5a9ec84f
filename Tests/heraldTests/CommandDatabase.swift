import HeraldPostgres
import HeraldTestSupport
import Testing

/// A database of its own on the server scripts/test started, migrated through `herald migrate`,
/// for the suites of commands that read and write one (`herald apps`, `herald jobs`).
struct CommandDatabase {
    let url: String
    let name: String

    /// Creates `prefix_<unique>` and runs `herald migrate` on it (a failure is recorded as an issue).
    static func migrated(_ prefix: String) async throws -> CommandDatabase {
        let serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        let name = TestEnvironment.uniqueName(prefix)
        let admin = try await PostgresConnection.connect(serverURL)
        // The name is generated here, never from input.
        try await admin.execute("CREATE DATABASE \(name)")
        await admin.close()
        let info = try ConnectionInfo(serverURL)
        let url = "postgresql://\(info.options["user"] ?? "postgres")@\(info.options["host"] ?? "127.0.0.1"):\(info.options["port"] ?? "5432")/\(name)"
        let migrate = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["migrate", "--database-url", url])
        #expect(migrate.status == 0, "\(migrate.stderr)")
        return CommandDatabase(url: url, name: name)
    }

    /// Closes `pool` (one on this database) and drops the database.
    func drop(closing pool: PostgresPool) async {
        await pool.close()
        guard let serverURL = try? TestEnvironment.require(TestEnvironment.databaseVariable),
              let admin = try? await PostgresConnection.connect(serverURL) else { return }
        try? await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
    }
}
