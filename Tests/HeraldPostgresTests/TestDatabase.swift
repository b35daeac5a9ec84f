import HeraldCore
import HeraldPostgres
import HeraldTestSupport

/// A fresh database on the server scripts/test started, so suites never see each other's rows.
struct TestDatabase {
    let url: String
    let name: String

    static func create() async throws -> TestDatabase {
        let serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        let admin = try await PostgresConnection.connect(serverURL)
        let name = TestEnvironment.uniqueName("herald_test")
        // CREATE DATABASE takes no parameters; the name is generated here, never from input.
        try await admin.execute("CREATE DATABASE \(name)")
        await admin.close()
        let info = try ConnectionInfo(serverURL)
        let host = info.options["host"] ?? "127.0.0.1"
        let port = info.options["port"] ?? "5432"
        let user = info.options["user"] ?? "postgres"
        return TestDatabase(url: "postgresql://\(user)@\(host):\(port)/\(name)", name: name)
    }

    func drop() async {
        guard let serverURL = try? TestEnvironment.require(TestEnvironment.databaseVariable),
              let admin = try? await PostgresConnection.connect(serverURL) else { return }
        try? await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
    }
}

extension TestDatabase {
    /// A fresh database with Herald's schema, a pool on it, and an app row `appID`.
    static func migrated(poolSize: Int = 4, apps: [String] = ["app"]) async throws -> (TestDatabase, PostgresPool) {
        let database = try await TestDatabase.create()
        let connection = try await PostgresConnection.connect(database.url)
        _ = try await Migrator().migrate(connection)
        for app in apps {
            try await connection.query("INSERT INTO apps (id, name) VALUES ($1, $1)", [app])
        }
        await connection.close()
        let pool = PostgresPool(PostgresPoolConfiguration(url: database.url, size: poolSize))
        return (database, pool)
    }

    /// Closes the pool and drops the database.
    func tearDown(_ pool: PostgresPool) async {
        await pool.close()
        await drop()
    }
}


extension SplitMix64 {
    /// A random UUID string drawn from this generator (replayable, unlike `UUID()`).
    mutating func uuid() -> String {
        let hex = Array("0123456789abcdef")
        var text = ""
        for index in 0..<32 {
            if [8, 12, 16, 20].contains(index) { text.append("-") }
            text.append(hex[Int(next() & 15)])
        }
        return text
    }
}
