import Foundation
import HeraldCore
import HeraldKafka
import HeraldTestSupport
import Synchronization
import Testing

/// `herald dlq replay` against the broker scripts/test started, on topics of its own: dead letters
/// go back to their source topics with their original keys, filtered by time and reason.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)), .timeLimit(.minutes(3)))
struct DLQCommandTests {
    let dlq = TestEnvironment.uniqueName("dlq.dlq")
    let jobs = TestEnvironment.uniqueName("dlq.jobs")
    let events = TestEnvironment.uniqueName("dlq.device-events")

    private func replay(_ arguments: [String]) async throws -> Subprocess.Result {
        let environment = try CommandKafka.environment(["HERALD_TOPIC_DLQ": dlq, "HERALD_TOPIC_JOBS": jobs, "HERALD_TOPIC_DEVICE_EVENTS": events])
        return try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["dlq", "replay", "--idle-seconds", "6"] + arguments, environment: environment)
    }

    private func letter(_ reason: String, _ topic: String, _ original: String, at: String) throws -> [UInt8] {
        let at = try #require(Timestamp(rfc3339: at))
        return DeadLetter(reason: reason, source: .init(topic: topic, partition: 0, offset: 7), original: Array(original.utf8), at: at)
            .json.serializedBytes()
    }

    /// Three dead letters (January from jobs, March from jobs and from device events) and one
    /// message that is not a dead letter.
    private func fill() async throws {
        try await CommandKafka.produce(dlq, [
            ("job-a", try letter("content.buttons[3]: at most 3 buttons", jobs, #"{"id":"job-a"}"#, at: "2026-01-10T00:00:00Z")),
            ("job-b", try letter("message too large", jobs, #"{"id":"job-b"}"#, at: "2026-03-01T00:00:00Z")),
            ("sub-c", try letter("type: unknown", events, #"{"type":"zapped"}"#, at: "2026-03-02T00:00:00Z")),
            (nil, Array("not json".utf8)),
        ])
    }

    @Test func replaysTheMatchingOriginalsToTheirTopicsWithTheirKeys() async throws {
        try await fill()
        let dry = try await replay(["--since", "2026-02-01T00:00:00Z", "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("would replay 2026-03-01T00:00:00Z \(jobs)/0@7 key=job-b"))
        #expect(dry.stdout.contains("key=sub-c"))
        #expect(!dry.stdout.contains("key=job-a"))
        #expect(dry.stdout.contains("read 4 dead letters: 2 match, 2 would be replayed, 1 undecodable"))
        let dryJSON = try await replay(["--since", "2026-02-01T00:00:00Z", "--dry-run", "--json"])
        #expect(dryJSON.status == 0, "\(dryJSON.stderr)")
        #expect(dryJSON.stdout.contains(#""key":"job-b""#) && dryJSON.stdout.contains(#""would_replay":"\#(jobs)/0@7""#), "\(dryJSON.stdout)")
        #expect(dryJSON.stdout.contains(#"{"dry_run":true,"failed":0,"matched":2,"read":4,"refused":0,"replayed":0,"undecodable":1}"#), "\(dryJSON.stdout)")

        let large = try await replay(["--since", "2026-02-01T00:00:00Z", "--until", "2026-03-02T00:00:00Z", "--reason-contains", "large"])
        #expect(large.status == 0, "\(large.stderr)")
        #expect(large.stdout.contains("1 match, replayed 1, failed 0"))
        // Read from the beginning and watched after the first: the dry run put nothing before it.
        let back = try await CommandKafka.read(jobs, count: 1, thenWatch: 2)
        #expect(back.map(\.keyString) == ["job-b"], "a dry run produces nothing; one replay, one message")
        #expect(back.map(\.valueString) == [#"{"id":"job-b"}"#])

        let all = try await replay([])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("read 4 dead letters: 3 match, replayed 3"))
        let jobMessages = try await CommandKafka.read(jobs, count: 3, thenWatch: 2)
        #expect(jobMessages.compactMap(\.keyString).sorted() == ["job-a", "job-b", "job-b"])
        let eventMessages = try await CommandKafka.read(events, count: 1, thenWatch: 2)
        #expect(eventMessages.map(\.keyString) == ["sub-c"])
        #expect(eventMessages.map(\.valueString) == [#"{"type":"zapped"}"#])
    }

    @Test func aLetterWhoseOriginalWasTruncatedIsRefusedAndNamed() async throws {
        let original = Array(String(repeating: "j", count: 4000).utf8)
        let whole = DeadLetter(reason: "job is too large", cause: .invalid, attempts: 1, source: .init(topic: jobs, partition: 0, offset: 42),
                               original: original, at: Timestamp(seconds: 1_796_232_859))
        let truncated = try #require(whole.fitting(maxBytes: 2000) { _ in String(repeating: "c", count: 64) })
        #expect(truncated.originalTruncated)
        try await CommandKafka.produce(dlq, [("job-big", truncated.json.serializedBytes()),
                                             ("job-ok", try letter("app: unknown", jobs, #"{"id":"job-ok"}"#, at: "2026-03-01T00:00:00Z"))])
        let result = try await replay([])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("read 2 dead letters: 2 match, replayed 1, failed 0, refused 1"), "\(result.stdout)")
        #expect(result.stderr.contains("(from \(jobs)/0@42): its original was truncated (") && result.stderr.contains(" of 4000 bytes kept"), "\(result.stderr)")
        let back = try await CommandKafka.read(jobs, count: 1, thenWatch: 2)
        #expect(back.map(\.keyString) == ["job-ok"], "only the whole original is replayed")
    }

    /// The replay reads up to the end offsets it found, however short the quiet time: a tiny
    /// `--idle-seconds` (used only when the ends cannot be read) does not cut it short.
    @Test func readsToTheEndOffsetsWhateverTheQuietTime() async throws {
        try await fill()
        let dry = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["dlq", "replay", "--dry-run", "--idle-seconds", "0.2"],
                                                   environment: try CommandKafka.environment(["HERALD_TOPIC_DLQ": dlq]))
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("read 4 dead letters: 3 match, 3 would be replayed, 1 undecodable"), "\(dry.stdout)")
    }

    /// Dead letters that keep arriving while a replay runs are left for the next one: it stops at
    /// the end offsets it found instead of reading for as long as the stream goes on (a quiet
    /// time would never come).
    @Test func deadLettersArrivingDuringAReplayAreLeftForTheNext() async throws {
        try await fill()
        let streamEnded = Atomic<Bool>(false)
        let stream = Task {
            for n in 0..<300 where !Task.isCancelled {
                try await CommandKafka.produce(dlq, [("late-\(n)", try letter("late", jobs, #"{"id":"late-\#(n)"}"#, at: "2026-04-01T00:00:00Z"))])
                try await Task.sleep(for: .milliseconds(100))
            }
            streamEnded.store(true, ordering: .relaxed)
        }
        let dry = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["dlq", "replay", "--dry-run", "--idle-seconds", "0.5"],
                                                   environment: try CommandKafka.environment(["HERALD_TOPIC_DLQ": dlq]))
        let stoppedDuringTheStream = !streamEnded.load(ordering: .relaxed)
        stream.cancel()
        _ = try? await stream.value
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(stoppedDuringTheStream, "the replay read until the stream of new dead letters ended")
        #expect(["key=job-a", "key=job-b", "key=sub-c"].allSatisfy { dry.stdout.contains($0) }, "\(dry.stdout.suffix(500))")
    }

    @Test func badTimesAndOptionsAreUsageErrors() async throws {
        #expect(try await replay(["--since", "yesterday"]).status == 64)
        #expect(try await replay(["--colour", "red"]).status == 64)
        let noBrokers = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["dlq", "replay"], environment: ["HERALD_KAFKA_BROKERS": ""])
        #expect(noBrokers.status == 78)
    }
}
