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

    @Test func theFCMCeilingDefaultsToSixHundredThousandAMinuteAndIsConfigurable() throws {
        let base = ["HERALD_DATABASE_URL": "postgresql://x/y", "HERALD_KAFKA_BROKERS": "k:9092"]
        let defaults = try WorkerConfiguration(environment: base)
        #expect(defaults.providerCeilings.fcmPerMinute == 600_000 && defaults.providerCeilings.apnsPerMinute == nil)
        let set = try WorkerConfiguration(environment: base.merging(["HERALD_APNS_RATE_PER_MINUTE": "120000", "HERALD_FCM_RATE_PER_MINUTE": "0"]) { $1 })
        #expect(set.providerCeilings.apnsPerMinute == 120_000 && set.providerCeilings.fcmPerMinute == nil)
        #expect(throws: WorkerConfiguration.Invalid.self) { try WorkerConfiguration(environment: base.merging(["HERALD_FCM_RATE_PER_MINUTE": "-1"]) { $1 }) }
    }
}
