import Foundation
import HeraldKafka
import HeraldTestSupport
import Testing

/// HeraldKafka against `herald dev-broker` (started by scripts/test) and kcat, an independent
/// Kafka client: kcat → Herald's consumer, and Herald's producer → kcat.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)), .timeLimit(.minutes(2)))
struct KafkaInteropTests {
    private func kcat() throws -> URL {
        try #require(Subprocess.which("kcat"), "kcat is not installed: scripts/setup installs it")
    }

    @Test func consumesWhatKcatProduced() async throws {
        let brokers = try TestEnvironment.require(TestEnvironment.kafkaVariable)
        let topic = TestEnvironment.uniqueName("from_kcat")
        let lines = (0..<5).map { "kcat-\($0)" }.joined(separator: "\n") + "\n"
        let produced = try await Subprocess.runDetached(try kcat(), ["-P", "-b", brokers, "-t", topic, "-k", "key-1"], input: Data(lines.utf8))
        #expect(produced.status == 0, "kcat: \(produced.stderr)")

        let consumer = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers, properties: fastGroupProperties),
                                         groupID: TestEnvironment.uniqueName("interop"))
        try consumer.subscribe(topics: [topic])
        let messages = try await consume(consumer, count: 5, seconds: 30)
        #expect(messages.map(\.valueString) == (0..<5).map { "kcat-\($0)" })
        #expect(messages.allSatisfy { $0.keyString == "key-1" })
        await consumer.close()
    }

    @Test func kcatReadsWhatHeraldProduced() async throws {
        let brokers = try TestEnvironment.require(TestEnvironment.kafkaVariable)
        let topic = TestEnvironment.uniqueName("to_kcat")
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers))
        let report = try await producer.send(topic: topic, key: "job-7", value: #"{"schema":"herald.receipt.v1"}"#)
        #expect(report.offset == 0)
        let consumed = try await Subprocess.runDetached(try kcat(), ["-C", "-b", brokers, "-t", topic, "-p", String(report.partition), "-o", "beginning",
                                                       "-e", "-q", "-f", "%k|%s\n"], timeout: 30)
        #expect(consumed.status == 0, "kcat: \(consumed.stderr)")
        #expect(consumed.stdout == "job-7|{\"schema\":\"herald.receipt.v1\"}\n")
    }
}
