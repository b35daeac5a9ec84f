import Foundation
import HeraldKafka
import HeraldTestSupport
import Testing

/// `herald topics create` against the broker scripts/test started (the mock cluster), with
/// topic names of its own. The mock cluster has no CreateTopics, so this covers the dry run, the
/// idempotent path (every topic there already) and the clear refusal; creating topics on a real
/// cluster is exercised by hand (docs/CONFIGURATION.md).
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)), .timeLimit(.minutes(2)))
struct TopicsCommandTests {
    let names: [String: String] = [
        "HERALD_TOPIC_JOBS": TestEnvironment.uniqueName("topics.jobs"),
        "HERALD_TOPIC_JOBS_URGENT": TestEnvironment.uniqueName("topics.jobs.urgent"),
        "HERALD_TOPIC_SHARDS": TestEnvironment.uniqueName("topics.shards"),
        "HERALD_TOPIC_SHARDS_URGENT": TestEnvironment.uniqueName("topics.shards.urgent"),
        "HERALD_TOPIC_RESULTS": TestEnvironment.uniqueName("topics.results"),
        "HERALD_TOPIC_DEVICE_EVENTS": TestEnvironment.uniqueName("topics.device-events"),
        "HERALD_TOPIC_METRICS": TestEnvironment.uniqueName("topics.metrics"),
        "HERALD_TOPIC_DLQ": TestEnvironment.uniqueName("topics.dlq"),
    ]

    private func topics(_ arguments: [String]) async throws -> Subprocess.Result {
        try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["topics"] + arguments, environment: try CommandKafka.environment(names))
    }

    @Test func dryRunListsEveryTopicAndCreatesNothing() async throws {
        let result = try await topics(["create", "--dry-run", "--partitions", "24"])
        #expect(result.status == 0, "\(result.stderr)")
        for name in names.values {
            #expect(result.stdout.contains("would create \(name) partitions=24 replication_factor=3"))
        }
        let admin = try KafkaAdmin(configuration: try CommandKafka.configuration())
        let existing = try await admin.metadata().topics
        #expect(names.values.allSatisfy { existing[$0] == nil })
    }

    @Test func existingTopicsAreReportedNotAnError() async throws {
        for name in names.values { try await CommandKafka.produce(name, [("k", Array("x".utf8))]) }
        let result = try await topics(["create"])
        #expect(result.status == 0, "\(result.stderr)")
        for name in names.values { #expect(result.stdout.contains("exists  \(name) (4 partitions)")) }
        #expect(!result.stdout.contains("created"))
    }

    @Test func jsonIsOneObjectPerTopic() async throws {
        let dry = try await topics(["create", "--dry-run", "--json", "--partitions", "6"])
        #expect(dry.status == 0, "\(dry.stderr)")
        let lines = dry.stdout.split(separator: "\n").map { String($0) }
        #expect(lines.count == names.count, "\(dry.stdout)")
        for name in names.values {
            #expect(lines.contains(#"{"action":"would-create","partitions":6,"replication_factor":3,"topic":"\#(name)"}"#), "\(name): \(dry.stdout)")
        }
        for name in names.values { try await CommandKafka.produce(name, [("k", Array("x".utf8))]) }
        let existing = try await topics(["create", "--json"])
        #expect(existing.status == 0)
        for name in names.values { #expect(existing.stdout.contains(#"{"action":"exists","partitions":4,"topic":"\#(name)"}"#)) }
    }

    @Test func theMockClusterCannotCreateAndSaysSo() async throws {
        let result = try await topics(["create", "--replication-factor", "1"])
        #expect(result.status == 69)
        #expect(result.stderr.contains("cannot create topics"))
        #expect(result.stderr.contains("--topic NAME:PARTITIONS"))
    }

    @Test func badOptionsAndMissingBrokers() async throws {
        #expect(try await topics(["create", "--partitions", "0"]).status == 64)
        #expect(try await topics(["delete"]).status == 64)
        let noBrokers = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["topics", "create"], environment: ["HERALD_KAFKA_BROKERS": ""])
        #expect(noBrokers.status == 78)
    }
}
