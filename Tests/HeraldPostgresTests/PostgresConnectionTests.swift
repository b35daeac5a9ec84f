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

    @Test func aNULInAParameterIsRefusedNotCutShort() async throws {
        let connection = try await PostgresConnection.connect(try TestEnvironment.require(TestEnvironment.databaseVariable))
        // Through a C string this would arrive as "before", and the statement would succeed.
        await #expect {
            try await connection.query("SELECT $1::text AS echoed", ["before\u{0}after"])
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.sqlState == "22021" && error.message.contains("$1") && !error.isRetryable
        }
        #expect(try await connection.query("SELECT $1::text AS echoed", ["still usable"]).value(0, "echoed") == "still usable")
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

    @Test func copyInStreamsChunksAndABadRowFailsCleanly() async throws {
        let database = try await TestDatabase.create()
        let connection = try await PostgresConnection.connect(database.url)
        try await connection.execute("CREATE TABLE c (n int, t text)")
        let chunks = Chunks(["1\tone\n2\t", "two\n3\t\\N\n"])
        #expect(try await connection.copyIn("COPY c FROM STDIN") { chunks.next(into: &$0) } == 3)
        #expect(try await connection.query("SELECT count(*), count(t) FROM c").rows == [["3", "2"]])
        let bad = Chunks(["4\tfour\nnot-a-number\tx\n"])
        await #expect {
            try await connection.copyIn("COPY c FROM STDIN") { bad.next(into: &$0) }
        } throws: { error in
            (error as? PostgresError)?.sqlState == "22P02"
        }
        // Nothing of the failed COPY is kept, the connection is still usable and reusable.
        #expect(try await connection.query("SELECT count(*) FROM c").rows == [["3"]])
        #expect(connection.isReusable)
        await connection.close()
        await database.drop()
    }
}

/// Hands out text chunks one call at a time. `@unchecked Sendable`: called only from the
/// connection's serial queue.
private final class Chunks: @unchecked Sendable {
    private var remaining: [String]

    init(_ chunks: [String]) { remaining = chunks }

    func next(into buffer: inout [UInt8]) -> Bool {
        guard !remaining.isEmpty else { return false }
        buffer += Array(remaining.removeFirst().utf8)
        return !remaining.isEmpty
    }
}
