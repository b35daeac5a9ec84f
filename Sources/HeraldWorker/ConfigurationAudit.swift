import HeraldCore
import HeraldPostgres

/// What `herald run` logs about its configuration at start (issue 21): `HERALD_*` variables it
/// does not know, which are usually typos that would otherwise pass unnoticed, and the
/// effective configuration with every secret left out. Pure.
enum ConfigurationAudit {
    /// Every `HERALD_*` variable Herald's code reads (`scripts/check-deploy.py` checks this list
    /// against the literals in `Sources/`, and that each is in docs/operations.md).
    static let knownVariables: Set<String> = [
        "HERALD_APNS_ENDPOINT", "HERALD_APNS_RATE_PER_MINUTE", "HERALD_CREDENTIALS_KEY", "HERALD_CREDENTIALS_KEY_FILE",
        "HERALD_CREDENTIALS_OLD_KEYS", "HERALD_DATABASE_ACQUIRE_TIMEOUT_MS", "HERALD_DATABASE_POOL_SIZE",
        "HERALD_DATABASE_STATEMENT_TIMEOUT_MS", "HERALD_DATABASE_URL", "HERALD_DATABASE_URL_FILE", "HERALD_DRAIN_SECONDS",
        "HERALD_EVENT_LOOPS", "HERALD_FCM_ENDPOINT", "HERALD_FCM_RATE_PER_MINUTE", "HERALD_FCM_TOKEN_HOSTS", "HERALD_FUZZ_TARGET",
        "HERALD_HALTED_SWEEP_SECONDS", "HERALD_HTTP_HOST", "HERALD_HTTP_PORT", "HERALD_INVALIDATION_THRESHOLD",
        "HERALD_INVALIDATION_WINDOW", "HERALD_JOB_CONCURRENCY", "HERALD_KAFKA_BROKERS", "HERALD_KAFKA_GROUP",
        "HERALD_KAFKA_SASL_PASSWORD_FILE", "HERALD_LOG_LEVEL", "HERALD_MESSAGE_RETRY_SECONDS", "HERALD_METRICS_INTERVAL_SECONDS",
        "HERALD_PROVIDER_CONNECTIONS", "HERALD_RETENTION_DAYS", "HERALD_RETRY_HOLD_SECONDS", "HERALD_RETRY_MAX_AGE_SECONDS",
        "HERALD_RETRY_MAX_ATTEMPTS", "HERALD_RETRY_QUOTA_SECONDS", "HERALD_SEND_WINDOW", "HERALD_SHARD_CONCURRENCY",
        "HERALD_SHARD_SIZE", "HERALD_STALL_SECONDS", "HERALD_TLS_CA_FILE", "HERALD_TOPIC_DEVICE_EVENTS", "HERALD_TOPIC_DLQ",
        "HERALD_TOPIC_JOBS", "HERALD_TOPIC_JOBS_URGENT", "HERALD_TOPIC_METRICS", "HERALD_TOPIC_RESULTS", "HERALD_TOPIC_SHARDS",
        "HERALD_TOPIC_SHARDS_URGENT", "HERALD_WORKER_ID",
    ]

    /// Variables of Herald's own scripts and tests (`scripts/test`, `scripts/fuzz`, the test
    /// suites), harmless in a worker's environment.
    static let toolingPrefixes = ["HERALD_SKIP_", "HERALD_PG_", "HERALD_TEST_", "HERALD_PIPELINE_", "HERALD_BIN", "HERALD_WRITE_GOLDEN"]

    /// The `HERALD_*` names in `environment` Herald does not read, sorted. Known: the list
    /// above, the `HERALD_KAFKA_PROPERTY_*` family (passed to librdkafka) and the tooling
    /// variables.
    static func unknownVariables(_ environment: [String: String]) -> [String] {
        environment.keys.filter { name in
            name.hasPrefix("HERALD_") && !knownVariables.contains(name) && !name.hasPrefix("HERALD_KAFKA_PROPERTY_")
                && !toolingPrefixes.contains { name.hasPrefix($0) }
        }.sorted()
    }

    /// The effective configuration for the start log: no key, no password, the database URL
    /// without its password.
    static func summary(_ configuration: WorkerConfiguration) -> [String: JSONValue] {
        let database = (try? ConnectionInfo(configuration.databaseURL))?.redacted ?? "(unparsable URL)"
        var endpoints: [String: JSONValue] = [:]
        if let apns = configuration.endpoints.apns { endpoints["apns"] = .string(apns.description) }
        if let fcm = configuration.endpoints.fcm { endpoints["fcm"] = .string(fcm.description) }
        return [
            "worker_id": .string(configuration.workerID),
            "database": .string(database),
            "database_pool_size": .int(configuration.databasePoolSize),
            "kafka_brokers": .string(configuration.kafkaBrokers),
            "kafka_group": .string(configuration.kafkaGroup),
            "kafka_properties": .array(configuration.kafka.properties.keys.sorted().filter { !isSecret($0) }.map(JSONValue.string)),
            "topics": .object([
                "jobs": .string(configuration.topics.jobs), "jobs_urgent": .string(configuration.topics.jobsUrgent),
                "shards": .string(configuration.topics.shards), "shards_urgent": .string(configuration.topics.shardsUrgent),
                "results": .string(configuration.topics.results), "device_events": .string(configuration.topics.deviceEvents),
                "metrics": .string(configuration.topics.metrics), "dlq": .string(configuration.topics.deadLetters),
            ]),
            "shard_size": .int(configuration.shardSize),
            "shard_concurrency": .int(configuration.shardConcurrency),
            "job_concurrency": .int(configuration.jobConcurrency),
            "send_window": .int(configuration.shard.window),
            "event_loops": .int(configuration.eventLoops),
            "http": .string("\(configuration.httpHost):\(configuration.httpPort)"),
            "provider_endpoints": .object(endpoints),
            "credentials_key": .string(configuration.credentialsKey == nil ? "absent" : "set"),
            "credentials_old_keys": .string(configuration.credentialsOldKeys == nil ? "absent" : "set"),
            "retention_days": .int(configuration.retentionDays),
        ]
    }

    /// librdkafka properties whose values are secrets (their names are logged, never values;
    /// these not even by name).
    static func isSecret(_ property: String) -> Bool {
        let lower = property.lowercased()
        return lower.contains("password") || lower.contains("secret") || lower.contains("key.pem") || lower.contains("token")
    }
}
