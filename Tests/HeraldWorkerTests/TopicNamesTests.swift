@testable import HeraldWorker
import Testing

@Suite struct TopicNamesTests {
    @Test func defaultsMatchTheWorkerAndVariablesOverrideThem() throws {
        let worker = try WorkerConfiguration(environment: ["HERALD_DATABASE_URL": "postgresql://db/herald", "HERALD_KAFKA_BROKERS": "k:9092"])
        #expect(try WorkerConfiguration.Topics(environment: [:]) == worker.topics)
        let topics = try WorkerConfiguration.Topics(environment: ["HERALD_TOPIC_SHARDS_URGENT": "x.shards.urgent", "HERALD_TOPIC_DLQ": "x.dlq"])
        #expect(topics.shardsUrgent == "x.shards.urgent" && topics.deadLetters == "x.dlq" && topics.jobs == "herald.jobs")
    }

    @Test func anInvalidNameIsRefusedNamingTheVariable() {
        do {
            _ = try WorkerConfiguration.Topics(environment: ["HERALD_TOPIC_RESULTS": "no spaces"])
            Issue.record("an invalid topic name was accepted")
        } catch {
            #expect(error.variable == "HERALD_TOPIC_RESULTS")
        }
    }
}
