import HeraldPostgres
import Testing

@Suite struct ConnectionInfoTests {
    @Test func libpqParsesURLsAndKeywordStrings() throws {
        let url = try ConnectionInfo("postgresql://herald:s3cret@db.internal:6432/herald?sslmode=require&connect_timeout=5")
        #expect(url.options["host"] == "db.internal")
        #expect(url.options["port"] == "6432")
        #expect(url.options["dbname"] == "herald")
        #expect(url.options["sslmode"] == "require")
        #expect(url.redacted == "postgresql://herald@db.internal:6432/herald")
        #expect(!url.redacted.contains("s3cret"))
        let keywords = try ConnectionInfo("host=127.0.0.1 port=5433 dbname=x user=postgres")
        #expect(keywords.options["port"] == "5433")
    }

    @Test(arguments: ["postgresql://x@[bad", "host=a bogus_option=1", "postgresql://h/db?sslmode"])
    func refusesMalformedStrings(text: String) {
        #expect(throws: PostgresError.self) { try ConnectionInfo(text) }
    }
}
