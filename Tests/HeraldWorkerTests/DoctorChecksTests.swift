@testable import HeraldWorker
import Testing

@Suite struct DoctorChecksTests {
    @Test func theVerdictsOfEachCheck() {
        #expect(Doctor.migrations(applied: 13, embedded: 13).ok)
        #expect(!Doctor.migrations(applied: 12, embedded: 13).ok && Doctor.migrations(applied: 12, embedded: 13).detail.contains("herald migrate"))
        #expect(Doctor.migrations(applied: 14, embedded: 13).ok)
        #expect(Doctor.topics(required: ["a", "b"], present: ["a": 4, "b": 1, "c": 2]).ok)
        let missing = Doctor.topics(required: ["a", "b"], present: ["a": 4])
        #expect(!missing.ok && missing.detail.contains("missing: b"))
        #expect(Doctor.skew(hostMinusDatabaseSeconds: 1.5).ok && !Doctor.skew(hostMinusDatabaseSeconds: -2.5).ok)
        #expect(Doctor.credentials([("a", []), ("b", [])]).ok)
        let broken = Doctor.credentials([("a", []), ("b", ["apns"])])
        #expect(!broken.ok && broken.detail.contains("b (apns)"))
        #expect(Doctor.Check(name: "x", ok: false, detail: "y").line == "FAIL x: y")
    }

    /// The `date` header has whole seconds: a provider clock equal to this host's, read over a
    /// slow round trip, is never flagged; one 31 s off is, in either direction, with the direction named.
    @Test func providerClocksFromTheDateHeader() {
        let sent = 1_800_000_000.9, received = 1_800_000_001.6
        #expect(Doctor.providerClock("apns", origin: "https://a", sent: sent, received: received, date: 1_800_000_001).ok)
        #expect(Doctor.providerClock("apns", origin: "https://a", sent: sent, received: received, date: 1_800_000_000).ok)
        #expect(Doctor.providerClock("apns", origin: "https://a", sent: sent, received: received, date: 1_800_000_031).ok)
        let behind = Doctor.providerClock("fcm", origin: "https://f", sent: sent, received: received, date: 1_800_000_033)
        #expect(!behind.ok && behind.detail.contains("behind https://f") && behind.detail.contains("fix NTP"), "\(behind.detail)")
        let ahead = Doctor.providerClock("fcm", origin: "https://f", sent: sent, received: received, date: 1_799_999_960)
        #expect(!ahead.ok && ahead.detail.contains("ahead of"), "\(ahead.detail)")
        let silent = Doctor.providerClock("apns", origin: "https://a", sent: sent, received: received, date: nil)
        #expect(silent.ok && silent.detail.contains("no date header"))
    }
}
