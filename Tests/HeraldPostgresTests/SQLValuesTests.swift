import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct SQLValuesTests {
    @Test func timestampsRoundTripPostgresText() {
        #expect(SQLValue.timestamp("2026-12-02 18:00:14.123456+00") == Timestamp(rfc3339: "2026-12-02T18:00:14.123456Z"))
        #expect(SQLValue.timestamp("2026-12-02 18:00:14+00") == Timestamp(seconds: 1_796_234_414))
        #expect(SQLValue.timestamp(Timestamp(seconds: 5, nanoseconds: 123_456_789)) == "1970-01-01T00:00:05.123456Z")
    }
}

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct SQLValuesDatabaseTests {
    @Test func arrayLiteralsKeepEveryElementIntact() async throws {
        let connection = try await PostgresConnection.connect(try TestEnvironment.require(TestEnvironment.databaseVariable))
        let values: [String?] = ["plain", "with,comma", "quote\"s", "back\\slash", "{brace}", "NULL", nil, "", " spaced ", "é"]
        let rows = try await connection.query("SELECT x FROM unnest($1::text[]) WITH ORDINALITY AS t(x, n) ORDER BY n", [SQLValue.array(values)])
        #expect(rows.rows.map { $0[0] } == values)
        await connection.close()
    }
}
