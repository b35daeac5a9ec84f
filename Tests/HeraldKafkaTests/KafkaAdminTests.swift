import Foundation
import HeraldKafka
import HeraldTestSupport
import Testing

/// `KafkaAdmin` against an in-process mock cluster: metadata is read; CreateTopics, which the
/// mock cluster (librdkafka 2.0) does not implement, is refused at once with `.unsupported`
/// instead of waiting out its timeout. Creating topics on a real cluster is not covered here:
/// the tests have no real Kafka.
@Suite(.timeLimit(.minutes(1))) struct KafkaAdminTests {
    @Test func metadataListsBrokersAndTopicsWithTheirPartitions() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 3)
        let topic = TestEnvironment.uniqueName("admin")
        try cluster.createTopic(topic, partitions: 6)
        let admin = try KafkaAdmin(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: ["log_level": "3"]))
        let metadata = try await admin.metadata()
        #expect(metadata.brokers == 3)
        #expect(metadata.topics[topic] == 6)
        #expect(metadata.topics["no-such-topic"] == nil, "listing topics creates none")
        #expect(try await admin.createTopics([]) == [:])
    }

    @Test func theMockClusterRefusesCreateTopicsAtOnce() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1)
        let admin = try KafkaAdmin(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: ["log_level": "3"]))
        let started = ContinuousClock.now
        await #expect {
            try await admin.createTopics([KafkaNewTopic(name: TestEnvironment.uniqueName("admin"), partitions: 3, replicationFactor: 1)])
        } throws: { error in
            (error as? KafkaError)?.code == .unsupported
        }
        // The request timeout is 30 s; admin start and metadata take a few on a loaded machine.
        #expect(ContinuousClock.now - started < .seconds(25), "no wait for the request timeout")
    }

    @Test func anUnreachableClusterIsAnError() async throws {
        let admin = try KafkaAdmin(configuration: KafkaConfiguration(bootstrapServers: "127.0.0.1:1", properties: ["log_level": "0"]))
        await #expect(throws: KafkaError.self) { try await admin.metadata(timeoutMilliseconds: 1_000) }
    }
}
