import HeraldCore
import HeraldPostgres
import HeraldTestSupport

/// A fresh migrated database on the server scripts/test started, with app rows, for the
/// worker's integration suites (the same shape as HeraldPostgresTests' TestDatabase).
struct WorkerTestDatabase {
    let url: String
    let name: String

    static func migrated(apps: [String] = ["app"]) async throws -> WorkerTestDatabase {
        let serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        let admin = try await PostgresConnection.connect(serverURL)
        let name = TestEnvironment.uniqueName("herald_worker_test")
        // CREATE DATABASE takes no parameters; the name is generated here, never from input.
        try await admin.execute("CREATE DATABASE \(name)")
        await admin.close()
        let info = try ConnectionInfo(serverURL)
        let url = "postgresql://\(info.options["user"] ?? "postgres")@\(info.options["host"] ?? "127.0.0.1"):\(info.options["port"] ?? "5432")/\(name)"
        let connection = try await PostgresConnection.connect(url)
        _ = try await Migrator().migrate(connection)
        for app in apps {
            try await connection.query("INSERT INTO apps (id, name) VALUES ($1, $1)", [app])
        }
        await connection.close()
        return WorkerTestDatabase(url: url, name: name)
    }

    func pool(size: Int = 4) -> PostgresPool {
        PostgresPool(PostgresPoolConfiguration(url: url, size: size))
    }

    func drop() async {
        guard let serverURL = try? TestEnvironment.require(TestEnvironment.databaseVariable),
              let admin = try? await PostgresConnection.connect(serverURL) else { return }
        try? await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
    }
}
