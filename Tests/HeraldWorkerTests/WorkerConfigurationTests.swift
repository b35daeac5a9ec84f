@testable import HeraldWorker
import Testing

@Suite struct WorkerConfigurationTests {
    private let minimal = ["HERALD_DATABASE_URL": "postgresql://herald@db/herald", "HERALD_KAFKA_BROKERS": "kafka:9092"]

    @Test func defaults() throws {
        let configuration = try WorkerConfiguration(environment: minimal)
        #expect(configuration.kafkaGroup == "herald-workers")
        #expect(configuration.topics.jobs == "herald.jobs")
        #expect(configuration.topics.deadLetters == "herald.dlq")
        #expect(configuration.shardSize == 50_000)
        #expect(configuration.kafka.properties["bootstrap.servers"] == "kafka:9092")
    }

    @Test func passesKafkaPropertiesThrough() throws {
        var environment = minimal
        environment["HERALD_KAFKA_PROPERTY_SASL_MECHANISM"] = "PLAIN"
        environment["HERALD_KAFKA_PROPERTY_SECURITY_PROTOCOL"] = "SASL_SSL"
        environment["HERALD_KAFKA_PROPERTY_SASL_PASSWORD"] = "hunter2"
        let configuration = try WorkerConfiguration(environment: environment)
        #expect(configuration.kafka.properties["sasl.mechanism"] == "PLAIN")
        #expect(configuration.kafka.properties["security.protocol"] == "SASL_SSL")
        #expect(configuration.kafka.redacted["sasl.password"] == "[redacted]")
    }

    @Test func errorsNameTheVariable() {
        #expect(throws: WorkerConfiguration.Invalid(variable: "HERALD_DATABASE_URL", reason: "is required")) {
            try WorkerConfiguration(environment: ["HERALD_KAFKA_BROKERS": "k:9092"])
        }
        var environment = minimal
        environment["HERALD_SHARD_SIZE"] = "lots"
        #expect(throws: WorkerConfiguration.Invalid.self) { try WorkerConfiguration(environment: environment) }
        environment["HERALD_SHARD_SIZE"] = "1000"
        environment["HERALD_TOPIC_RESULTS"] = "bad topic!"
        #expect(throws: WorkerConfiguration.Invalid.self) { try WorkerConfiguration(environment: environment) }
    }
}
