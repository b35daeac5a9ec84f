import HeraldHTTP2
import Testing

@Suite struct HPACKTests {
    @Test func roundTripsAnAPNsHeaderBlockTwice() throws {
        let encoder = try HPACKEncoder()
        let decoder = try HPACKDecoder()
        let fields = [
            HeaderField(":method", "POST"), HeaderField(":scheme", "https"),
            HeaderField(":path", "/3/device/00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0", neverIndex: true),
            HeaderField("authorization", "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9.e30.sig", neverIndex: true),
            HeaderField("apns-topic", "com.example.app"), HeaderField("apns-push-type", "alert"), HeaderField("apns-priority", "10"),
        ]
        let first = try encoder.encode(fields)
        #expect(try decoder.decode(first) == fields)
        // The second block reuses the dynamic table, so it is smaller, and still decodes the same.
        let second = try encoder.encode(fields)
        #expect(second.count < first.count)
        #expect(try decoder.decode(second) == fields)
    }

    @Test func refusesGarbage() throws {
        let decoder = try HPACKDecoder()
        #expect(throws: HPACKError.self) { try decoder.decode([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) }
    }
}
