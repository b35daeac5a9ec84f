import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `herald send` against the test broker.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)), .timeLimit(.minutes(2)))
struct SendCommandTests {
    let jobs = TestEnvironment.uniqueName("cli.jobs")
    let urgent = TestEnvironment.uniqueName("cli.jobs.urgent")

    private func send(_ arguments: [String], input: Data? = nil) async throws -> Subprocess.Result {
        try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["send"] + arguments, input: input,
                                         environment: try CommandKafka.environment(["HERALD_TOPIC_JOBS": jobs, "HERALD_TOPIC_JOBS_URGENT": urgent]))
    }

    private func printed(_ result: Subprocess.Result) throws -> JSONValue {
        try JSONValue.parse(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func builtJobIsValidatedProducedKeyedByIDAndReported() async throws {
        let result = try await send(["--app", "demo", "--title", "Hello", "--body", "World", "--subscription", "3f1c1a52-0b6e-4a4e-9a57-9d2b8d0f6a10",
                                     "--subscription", "3f1c1a52-0b6e-4a4e-9a57-9d2b8d0f6a11", "--id", "cli-send-1",
                                     "--data", #"{"order":42}"#, "--url", "https://example.com/o/42", "--expires-in", "600"])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try printed(result)
        #expect(report["job_id"] == .string("cli-send-1"))
        #expect(report["topic"] == .string(jobs))
        #expect(result.stdout.hasPrefix(#"{"job_id":"cli-send-1","topic":""#), "documented member order")

        let messages = try await CommandKafka.read(jobs, count: 1)
        let message = try #require(messages.first)
        #expect(message.keyString == "cli-send-1")
        #expect(report["partition"] == .int(message.partition) && report["offset"] == .int(message.offset))
        let job = try Job.decode(message.value)
        #expect(job.id == "cli-send-1" && job.appID == "demo" && job.kind == .notification && !job.delivery.urgent)
        #expect(job.audience == .subscriptionIDs(["3f1c1a52-0b6e-4a4e-9a57-9d2b8d0f6a10", "3f1c1a52-0b6e-4a4e-9a57-9d2b8d0f6a11"]))
        #expect(job.content?.text.title == "Hello" && job.content?.text.body == "World")
        #expect(job.content?.data == .object(["order": .int(42)]))
        #expect(job.content?.url == "https://example.com/o/42")
        let expiresAt = try #require(job.expiresAt)
        #expect(expiresAt.seconds - job.createdAt.seconds == 600)
        #expect(abs(job.createdAt.seconds - Timestamp.now.seconds) < 60)
    }

    @Test func urgentJobGoesToTheUrgentTopicWithAFreshID() async throws {
        let result = try await send(["--app", "demo", "--title", "Your code is 123456", "--external-id", "user-7", "--urgent"])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try printed(result)
        #expect(report["topic"] == .string(urgent))
        let id = try #require(report["job_id"]?.stringValue)
        #expect(!id.isEmpty)

        let message = try #require(try await CommandKafka.read(urgent, count: 1).first)
        let job = try Job.decode(message.value)
        #expect(job.id == id && message.keyString == id)
        #expect(job.delivery.urgent)
        #expect(job.audience == .externalIDs(["user-7"]))
    }

    @Test func fileJobOfALiveActivityIsKeyedByAppAndActivity() async throws {
        let document = """
            {"schema":"herald.job.v1","id":"la-1","app_id":"demo","kind":"live_activity","created_at":"2026-12-02T18:00:00Z",
             "live_activity":{"activity_id":"match-9","event":"update","stream_id":"s1","sequence":3,"content_state":{"score":"1-0"}}}
            """
        let result = try await send(["--file", "-"], input: Data(document.utf8))
        #expect(result.status == 0, "\(result.stderr)")
        let message = try #require(try await CommandKafka.read(jobs, count: 1).first)
        #expect(message.keyString == "demo/match-9")
        #expect(try Job.decode(message.value).id == "la-1")
        #expect(message.valueString == document, "a file is sent as written")
    }

    @Test func invalidJobExits65WithTheReasonAndProducesNothing() async throws {
        let invalid = try await send(["--app", "Not A Slug", "--title", "x", "--all", "--id", "bad-1"])
        #expect(invalid.status == 65)
        #expect(invalid.stderr.contains("app_id"), "\(invalid.stderr)")
        let fromFile = try await send(["--file", "-"], input: Data(#"{"schema":"herald.job.v1","id":"bad-2"}"#.utf8))
        #expect(fromFile.status == 65)
        #expect(fromFile.stderr.contains("invalid:"))
        let badData = try await send(["--app", "demo", "--title", "x", "--all", "--data", "{nope"])
        #expect(badData.status == 65)

        // A valid job afterwards is the first and only message on the topic.
        let valid = try await send(["--app", "demo", "--title", "x", "--all", "--id", "good-1"])
        #expect(valid.status == 0, "\(valid.stderr)")
        // The first read waits for the valid job however loaded the machine is; the watch after
        // it shows no rejected job follows.
        let messages = try await CommandKafka.read(jobs, count: 1, seconds: 45, thenWatch: 3)
        #expect(messages.map(\.keyString) == ["good-1"])
    }

    @Test func usageMissingInputAndConfiguration() async throws {
        #expect(try await send(["--app", "demo", "--title", "x"]).status == 64, "no audience")
        #expect(try await send(["--app", "demo", "--title", "x", "--all", "--external-id", "u"]).status == 64, "two audiences")
        #expect(try await send(["--file", "-", "--app", "demo"]).status == 64, "file and builder options")
        #expect(try await send(["--app", "demo", "--all", "--bogus", "1"]).status == 64)
        #expect(try await send(["--file", "/no/such/job.json"]).status == 66)
        let noBrokers = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["send", "--app", "demo", "--title", "x", "--all"],
                                                         environment: ["HERALD_KAFKA_BROKERS": ""])
        #expect(noBrokers.status == 78)
        #expect(noBrokers.stderr.contains("HERALD_KAFKA_BROKERS"))
    }
}
