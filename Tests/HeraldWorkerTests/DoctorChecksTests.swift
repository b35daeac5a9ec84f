import HeraldWorker
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
}
