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
