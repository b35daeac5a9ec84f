import Foundation
import HeraldKafka
import HeraldTestSupport

/// Kafka helpers for the suites that run `herald send`, `tail` and `jobs` against the broker
/// scripts/test started. Every test uses topics of its own, passed to the binary as
/// `HERALD_TOPIC_*`, so tests never read each other's messages.
enum CommandKafka {
    static func configuration() throws -> KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: try TestEnvironment.require(TestEnvironment.kafkaVariable),
                           properties: ["log_level": "3", "topic.metadata.refresh.interval.ms": "1000"])
    }

    /// The binary's environment: the test broker and these topic variables.
    static func environment(_ topics: [String: String]) throws -> [String: String] {
        topics.merging(["HERALD_KAFKA_BROKERS": try TestEnvironment.require(TestEnvironment.kafkaVariable)]) { _, new in new }
    }

    /// Produces `values` (key, value) to `topic` and requires every acknowledgement.
    static func produce(_ topic: String, _ values: [(String?, [UInt8])]) async throws {
        let producer = try KafkaProducer(configuration: configuration())
        for result in await producer.sendAll(values.map { KafkaProducerMessage(topic: topic, key: $0.0.map { Array($0.utf8) }, value: $0.1) }) {
            _ = try result.get()
        }
    }

    /// Reads `topic` from the start with a fresh group until `count` messages came or
    /// `seconds` passed (then fewer come back; a test that expects none waits it out),
    /// then keeps reading `thenWatch` seconds more so a test can see that nothing else follows.
    static func read(_ topic: String, count: Int, seconds: Double = 15, thenWatch: Double = 0) async throws -> [KafkaMessage] {
        var configuration = try configuration()
        configuration.properties["session.timeout.ms"] = "6000"
        configuration.properties["heartbeat.interval.ms"] = "500"
        let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("herald-cli-test"))
        try consumer.subscribe(topics: [topic])
        var messages: [KafkaMessage] = []
        var deadline = Date().addingTimeInterval(seconds)
        // The read's `seconds` count from the group's first assignment, which a loaded broker
        // can take longer than that to make (a read of nothing while the CI ran other suites);
        // a group that is never assigned gives up 45 s later.
        let joinBy = deadline.addingTimeInterval(45)
        var assigned = false
        var watching = false
        while Date() < deadline || (!assigned && Date() < joinBy) {
            if !assigned && consumer.statistics.assignments > 0 {
                assigned = true
                deadline = max(deadline, Date().addingTimeInterval(seconds))
            }
            if !watching && messages.count >= count {
                guard thenWatch > 0 else { break }
                watching = true
                deadline = Date().addingTimeInterval(thenWatch)
            }
            if let message = try await consumer.poll(timeoutMilliseconds: 200) {
                assigned = true
                messages.append(message)
                consumer.markProcessed(message)
            }
        }
        await consumer.close()
        return messages
    }
}
