import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct PostgresConnectionTests {
    @Test func parametersNeverBecomeSQL() async throws {
        let connection = try await PostgresConnection.connect(try TestEnvironment.require(TestEnvironment.databaseVariable))
        let hostile = "x'); DROP TABLE pg_class; --"
        let rows = try await connection.query("SELECT $1::text AS echoed, $2::int + 1 AS next, $3::text IS NULL AS missing", [hostile, "41", nil])
        #expect(rows.value(0, "echoed") == hostile)
        #expect(rows.value(0, "next") == "42")
        #expect(rows.value(0, "missing") == "t")
        await connection.close()
    }

    @Test func errorsCarrySQLState() async throws {
        let connection = try await PostgresConnection.connect(try TestEnvironment.require(TestEnvironment.databaseVariable))
        await #expect {
            try await connection.query("SELECT 1/0")
        } throws: { error in
            (error as? PostgresError)?.sqlState == "22012"
        }
        // The connection stays usable after a failed statement.
        #expect(try await connection.query("SELECT 2 AS two").value(0, "two") == "2")
        await connection.close()
    }

    @Test func connectFailureIsClearAndRetryable() async {
        await #expect {
            try await PostgresConnection.connect("postgresql://postgres@127.0.0.1:1/herald")
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.code == .connectFailed && error.isRetryable && error.message.contains("127.0.0.1:1")
        }
    }
}
