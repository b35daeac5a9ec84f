import Foundation
import HeraldKafka
import HeraldTestSupport
import Testing

/// Producer and consumer against an in-process mock cluster: acknowledged sends, consumer-group
/// reads, and a committed offset that a later group member resumes from.
@Suite(.timeLimit(.minutes(2))) struct EmbeddedKafkaClusterTests {
    @Test func producesConsumesAndResumesFromTheCommittedOffset() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 3)
        #expect(cluster.bootstrapServers.split(separator: ",").count == 3)
        let topic = TestEnvironment.uniqueName("embedded")
        try cluster.createTopic(topic, partitions: 2)
        let configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: fastGroupProperties)

        let producer = try KafkaProducer(configuration: configuration)
        var reports: [KafkaDeliveryReport] = []
        for index in 0..<20 {
            reports.append(try await producer.send(topic: topic, key: "k\(index % 4)", value: "message \(index)"))
        }
        #expect(reports.allSatisfy { $0.topic == topic && $0.offset >= 0 })
        #expect(Set(reports.map(\.partition)).isSubset(of: [0, 1]))

        let group = TestEnvironment.uniqueName("group")
        let first = try KafkaConsumer(configuration: configuration, groupID: group)
        try first.subscribe(topics: [topic])
        let received = try await consume(first, count: 20, seconds: 30)
        #expect(Set(received.map(\.valueString)) == Set((0..<20).map { "message \($0)" }))
        // Keys decide partitions: one key's messages keep their order.
        let k1 = received.filter { $0.keyString == "k1" }.map(\.valueString)
        #expect(k1 == ["message 1", "message 5", "message 9", "message 13", "message 17"])
        for message in received { first.markProcessed(message) }
        try await first.commit()
        await first.close()

        _ = try await producer.send(topic: topic, key: "k0", value: "after commit")
        let second = try KafkaConsumer(configuration: configuration, groupID: group)
        try second.subscribe(topics: [topic])
        let resumed = try await consume(second, count: 1, seconds: 30)
        #expect(resumed.map(\.valueString) == ["after commit"])
        // Nothing committed before is read again.
        let extra = try await consume(second, count: 1, seconds: 2)
        #expect(extra.isEmpty)
        await second.close()
    }

    @Test func aProduceWhileTheBrokersAreDownIsDeliveredOnceTheyAreUp() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1)
        #expect(cluster.brokerCount == 1)
        let topic = TestEnvironment.uniqueName("outage")
        try cluster.createTopic(topic, partitions: 1)
        let configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: fastGroupProperties)
        let producer = try KafkaProducer(configuration: configuration)
        _ = try await producer.send(topic: topic, key: "k", value: "before")

        try cluster.setBrokersDown()
        let clock = ContinuousClock()
        let downAt = clock.now
        // Sent while no broker answers: acknowledged only after they are back.
        let pending = Task { try await producer.send(topic: topic, key: "k", value: "during") }
        try await Task.sleep(for: .seconds(2))
        try cluster.setBrokersUp()
        let report = try await pending.value
        #expect(clock.now - downAt >= .seconds(2))
        #expect(report.offset == 1)

        // Nothing written before the outage was lost.
        let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("outage-group"))
        try consumer.subscribe(topics: [topic])
        let received = try await consume(consumer, count: 2, seconds: 30)
        #expect(received.map(\.valueString) == ["before", "during"])
        await consumer.close()
    }

    @Test func deliveryToAnUnreachableBrokerFailsWithATypedError() async throws {
        let producer = try KafkaProducer(configuration: KafkaConfiguration(
            bootstrapServers: "127.0.0.1:1", properties: ["message.timeout.ms": "1500", "socket.connection.setup.timeout.ms": "1000"]))
        await #expect {
            try await producer.send(topic: "nowhere", key: nil, value: "x")
        } throws: { error in
            (error as? KafkaError)?.code == .delivery
        }
    }
}
