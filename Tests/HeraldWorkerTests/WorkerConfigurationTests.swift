import Foundation
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

    private func configuration(_ extra: [String: String]) throws(WorkerConfiguration.Invalid) -> WorkerConfiguration {
        try WorkerConfiguration(environment: minimal.merging(extra) { $1 })
    }

    /// The variable named in the error when `value` is refused, or nil when accepted.
    private func refusal(_ name: String, _ value: String) -> String? {
        do throws(WorkerConfiguration.Invalid) {
            _ = try configuration([name: value])
            return nil
        } catch {
            #expect(error.description.hasPrefix(name + ": "), "the message names the variable")
            return error.variable
        }
    }

    @Test func pipelineDefaults() throws {
        let configuration = try WorkerConfiguration(environment: minimal)
        #expect(configuration.workerID.hasSuffix("-\(ProcessInfo.processInfo.processIdentifier)"), "hostname-pid")
        #expect(configuration.httpPort == 9090)
        #expect(configuration.endpoints == ProviderEndpoints())
        #expect(configuration.endpoints.connectionsPerHost == 4)
        #expect(configuration.shardConcurrency == 4)
        #expect(configuration.jobConcurrency == 16)
        #expect(configuration.shard.window == 256)
        #expect(configuration.eventLoops == 1)
        #expect(configuration.shard.retry == RetryPolicy())
        #expect(configuration.shard.retry.maximumAttempts == 8)
        #expect(configuration.shard.retry.maximumAgeSeconds == 86_400)
        #expect(configuration.shutdownBound == .seconds(30))
        #expect(configuration.shard.drainDeadline == .seconds(12), "40% of the bound")
        #expect(configuration.shard.retryHoldSeconds == 10)
        #expect(configuration.invalidationWindow == 200)
        #expect(configuration.invalidationThreshold == 0.2)
        #expect(configuration.logLevel == .info)
        #expect(configuration.retentionDays == 30)
        #expect(configuration.databaseStatementTimeout == .seconds(30))
        #expect(configuration.databaseAcquireTimeout == .seconds(10))
        #expect(configuration.shard.messageRetryBudget == .seconds(600))
    }

    @Test func pipelineVariablesAreRead() throws {
        let configuration = try configuration([
            "HERALD_WORKER_ID": "worker-7",
            "HERALD_HTTP_PORT": "0",
            "HERALD_APNS_ENDPOINT": "https://apns-sim:8443",
            "HERALD_FCM_ENDPOINT": "https://fcm-sim:9443/",
            "HERALD_SHARD_CONCURRENCY": "16",
            "HERALD_SEND_WINDOW": "1000",
            "HERALD_RETRY_MAX_ATTEMPTS": "3",
            "HERALD_RETRY_MAX_AGE_SECONDS": "3600",
            "HERALD_DRAIN_SECONDS": "5",
            "HERALD_RETRY_HOLD_SECONDS": "0",
            "HERALD_INVALIDATION_WINDOW": "500",
            "HERALD_INVALIDATION_THRESHOLD": "0.35",
            "HERALD_LOG_LEVEL": "WARN",
            "HERALD_RETENTION_DAYS": "0",
            "HERALD_DATABASE_STATEMENT_TIMEOUT_MS": "1500",
            "HERALD_DATABASE_ACQUIRE_TIMEOUT_MS": "250",
            "HERALD_MESSAGE_RETRY_SECONDS": "90",
        ])
        #expect(configuration.workerID == "worker-7")
        // The worker's pool used to be built with the defaults whatever these said.
        #expect(configuration.databaseStatementTimeout == .milliseconds(1500))
        #expect(configuration.databaseAcquireTimeout == .milliseconds(250))
        #expect(configuration.shard.messageRetryBudget == .seconds(90))
        #expect(configuration.httpPort == 0, "0 turns the HTTP endpoints off")
        #expect(configuration.endpoints.apns == ProviderEndpoints.Endpoint(host: "apns-sim", port: 8443))
        #expect(configuration.endpoints.fcm == ProviderEndpoints.Endpoint(host: "fcm-sim", port: 9443))
        #expect(configuration.shardConcurrency == 16)
        #expect(configuration.shard.window == 1000)
        #expect(configuration.shard.retry.maximumAttempts == 3)
        #expect(configuration.shard.retry.maximumAgeSeconds == 3600)
        #expect(configuration.shutdownBound == .seconds(5))
        #expect(configuration.shard.drainDeadline == .seconds(2))
        #expect(configuration.shard.retryHoldSeconds == 0, "0 hands every retry wait over")
        #expect(configuration.invalidationWindow == 500)
        #expect(configuration.invalidationThreshold == 0.35)
        #expect(configuration.logLevel == .warning)
        #expect(configuration.retentionDays == 0, "0 keeps rows forever")
    }

    @Test func workerIDMustBeShortAndWithoutSpaces() throws {
        #expect(try configuration(["HERALD_WORKER_ID": String(repeating: "w", count: 128)]).workerID.count == 128)
        #expect(refusal("HERALD_WORKER_ID", String(repeating: "w", count: 129)) == "HERALD_WORKER_ID")
        #expect(refusal("HERALD_WORKER_ID", "worker 7") == "HERALD_WORKER_ID")
        #expect(refusal("HERALD_WORKER_ID", "worker\t7") == "HERALD_WORKER_ID")
    }

    @Test func numbersOutOfRangeNameTheirVariable() {
        let refused: [(String, String)] = [
            ("HERALD_HTTP_PORT", "65536"), ("HERALD_HTTP_PORT", "-1"), ("HERALD_HTTP_PORT", "http"),
            ("HERALD_SHARD_CONCURRENCY", "0"), ("HERALD_SHARD_CONCURRENCY", "257"),
            ("HERALD_SEND_WINDOW", "0"), ("HERALD_SEND_WINDOW", "10001"), ("HERALD_SEND_WINDOW", "1e3"),
            ("HERALD_RETRY_MAX_ATTEMPTS", "0"), ("HERALD_RETRY_MAX_ATTEMPTS", "101"),
            ("HERALD_RETRY_MAX_AGE_SECONDS", "0"), ("HERALD_RETRY_MAX_AGE_SECONDS", "2592001"),
            ("HERALD_RETRY_MAX_AGE_SECONDS", "24h"),
            ("HERALD_RETRY_HOLD_SECONDS", "-1"), ("HERALD_RETRY_HOLD_SECONDS", "3601"), ("HERALD_RETRY_HOLD_SECONDS", "10s"),
            ("HERALD_INVALIDATION_WINDOW", "0"), ("HERALD_INVALIDATION_WINDOW", "100001"),
            ("HERALD_INVALIDATION_THRESHOLD", "0"), ("HERALD_INVALIDATION_THRESHOLD", "1.5"),
            ("HERALD_INVALIDATION_THRESHOLD", "20%"), ("HERALD_INVALIDATION_THRESHOLD", "nan"),
            ("HERALD_INVALIDATION_THRESHOLD", "-0.2"),
            ("HERALD_LOG_LEVEL", "verbose"),
            ("HERALD_RETENTION_DAYS", "-1"), ("HERALD_RETENTION_DAYS", "36501"), ("HERALD_RETENTION_DAYS", "30d"),
        ]
        for (name, value) in refused {
            #expect(refusal(name, value) == name, "\(name)=\(value)")
        }
        let accepted: [(String, String)] = [
            ("HERALD_HTTP_PORT", "65535"), ("HERALD_SHARD_CONCURRENCY", "256"), ("HERALD_SEND_WINDOW", "1"),
            ("HERALD_RETRY_MAX_ATTEMPTS", "1"), ("HERALD_RETRY_MAX_AGE_SECONDS", "2592000"),
            ("HERALD_INVALIDATION_THRESHOLD", "1"), ("HERALD_LOG_LEVEL", "debug"),
            ("HERALD_RETENTION_DAYS", "36500"),
        ]
        for (name, value) in accepted {
            #expect(refusal(name, value) == nil, "\(name)=\(value)")
        }
    }

    @Test func badEndpointsNameTheirVariable() {
        for bad in ["http://apns-sim:8443", "apns-sim:8443", "https://apns-sim:8443/3/device", "https://apns-sim:0", "https://"] {
            #expect(refusal("HERALD_APNS_ENDPOINT", bad) == "HERALD_APNS_ENDPOINT", "\(bad)")
            #expect(refusal("HERALD_FCM_ENDPOINT", bad) == "HERALD_FCM_ENDPOINT", "\(bad)")
        }
    }

    @Test func caFileMustBeReadable() throws {
        let missing = "/nonexistent-\(UUID().uuidString)/ca.pem"
        #expect(refusal("HERALD_TLS_CA_FILE", missing) == "HERALD_TLS_CA_FILE")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("herald-ca-\(UUID().uuidString).pem").path
        try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(try configuration(["HERALD_TLS_CA_FILE": file]).endpoints.caFile == file)
    }

    @Test func theFCMCeilingDefaultsToSixHundredThousandAMinuteAndIsConfigurable() throws {
        let defaults = try WorkerConfiguration(environment: minimal)
        #expect(defaults.providerCeilings.fcmPerMinute == 600_000 && defaults.providerCeilings.apnsPerMinute == nil)
        let set = try configuration(["HERALD_APNS_RATE_PER_MINUTE": "120000", "HERALD_FCM_RATE_PER_MINUTE": "0"])
        #expect(set.providerCeilings.apnsPerMinute == 120_000 && set.providerCeilings.fcmPerMinute == nil)
        #expect(refusal("HERALD_FCM_RATE_PER_MINUTE", "-1") == "HERALD_FCM_RATE_PER_MINUTE")
    }
}
