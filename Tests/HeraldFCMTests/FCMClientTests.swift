import Foundation
import HeraldCore
import HeraldFCM
import HeraldHTTP2
import HeraldSim
import Testing

@Suite(.timeLimit(.minutes(2))) struct FCMClientTests {
    static func job(_ content: String) throws -> Job {
        try Job.decode(Array(#"""
        {"schema":"herald.job.v1","id":"welcome.1","app_id":"shop","kind":"notification","created_at":"2026-12-02T10:00:00Z",
         "expires_at":"2099-01-01T00:00:00Z","audience":{"all":true},"content":{\#(content)}}
        """#.utf8))
    }

    @Test(arguments: FCMMessage.Mode.allCases) func renderedMessagesAreAccepted(mode: FCMMessage.Mode) async throws {
        let fixture = try FCMSimulatorFixture()
        let client = try fixture.fcmClient()
        let job = try Self.job(#"""
        "title":"Hi","body":"Welcome","image_url":"https://cdn.example.com/a.png","url":"shop://home","data":{"a":{"b":[1,true]}},
        "buttons":[{"id":"go","text":"Go"}],"channel":"news","collapse_id":"welcome","sound":"ding","category":"OPEN"
        """#)
        let rendered = try FCMMessage.render(jobID: job.id, content: try #require(job.content), expiresAt: job.expiresAt, priority: nil,
                                             target: .init(token: "device-\(mode.rawValue)", mode: mode), now: fixture.clock.now)
        let outcome = await client.send(rendered)
        guard case .accepted(let name) = outcome else {
            Issue.record("expected accepted, got \(outcome)")
            return
        }
        #expect(name.hasPrefix("projects/\(fixture.account.projectID)/messages/"))
        #expect(fixture.stats.deliveries["device-\(mode.rawValue)"] == 1)
        #expect(fixture.stats.violations == 0)
    }

    @Test func unregisteredToken() async throws {
        var faults = SimulatorFaults()
        faults.unregistered = UnregisteredShare(1)
        let fixture = try FCMSimulatorFixture(faults: faults)
        let outcome = try await fixture.fcmClient().send(body: FCMSimulatorFixture.body())
        #expect(outcome.receiptReason == .unregistered)
        guard case .unregistered = outcome else { Issue.record("got \(outcome)"); return }
        #expect(fixture.stats.violations == 0)
    }

    @Test func wrongProjectIsSenderIDMismatch() async throws {
        let fixture = try FCMSimulatorFixture()
        var other = fixture.account
        other.projectID = "another-project"
        let outcome = try await fixture.fcmClient(account: other).send(body: FCMSimulatorFixture.body())
        guard case .unregistered(let reason, _) = outcome else { Issue.record("got \(outcome)"); return }
        #expect(reason == .senderIDMismatch)
        #expect(fixture.stats.violations == 0)
    }

    @Test func quotaExceededIsRetryableWithRetryAfter() async throws {
        var faults = SimulatorFaults()
        faults.tooManyRequestsRate = 1
        faults.retryAfterSeconds = 7
        let fixture = try FCMSimulatorFixture(faults: faults)
        let outcome = try await fixture.fcmClient().send(body: FCMSimulatorFixture.body())
        #expect(outcome == .retryable(retryAfterSeconds: 7, quotaExceeded: true, detail: "HTTP 429 QUOTA_EXCEEDED Quota exceeded."))
        #expect(fixture.stats.violations == 0)
    }

    @Test func serverErrorsAreRetryable() async throws {
        var faults = SimulatorFaults()
        faults.serverErrorRate = 1
        let fixture = try FCMSimulatorFixture(faults: faults)
        let client = try fixture.fcmClient()
        for index in 0..<6 {
            let outcome = await client.send(body: FCMSimulatorFixture.body(token: "device-\(index)"))
            guard case .retryable(_, let quota, let detail) = outcome else { Issue.record("got \(outcome)"); continue }
            #expect(!quota)
            #expect(detail.contains("INTERNAL") || detail.contains("UNAVAILABLE"))
        }
        #expect(fixture.stats.violations == 0)
    }

    @Test func invalidMessageIsPermanent() async throws {
        let fixture = try FCMSimulatorFixture()
        let outcome = try await fixture.fcmClient().send(body: FCMSimulatorFixture.body(data: #"{"n":1}"#))
        guard case .permanent(let reason, _) = outcome else { Issue.record("got \(outcome)"); return }
        #expect(reason == .badRequest)
        // The simulator counts the malformed message as a protocol violation: that is the point.
        #expect(fixture.stats.violations == 1)
    }

    @Test func transportFailureIsRetryable() async throws {
        let fixture = try FCMSimulatorFixture()
        let tokens = try fixture.tokenSource()
        _ = try await tokens.token()
        let closed = try FCMSimulatorFixture.client(port: 1, caFile: fixture.directory.appendingPathComponent("ca.pem").path, loop: fixture.loop)
        defer { closed.shutdown() }
        let outcome = await FCMClient(tokens: tokens, client: closed, timeoutNanoseconds: 3_000_000_000).send(body: FCMSimulatorFixture.body())
        guard case .retryable = outcome else { Issue.record("got \(outcome)"); return }
    }
}
