public import HeraldKafka

/// A worker's configuration, read from `HERALD_*` environment variables in this one place and
/// checked at start-up, with errors that name the variable (DESIGN §6).
public struct WorkerConfiguration: Sendable {
    /// Why a configuration was refused.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        public let variable: String
        public let reason: String
        public var description: String { "\(variable): \(reason)" }
    }

    /// `HERALD_DATABASE_URL` (required).
    public var databaseURL: String
    /// `HERALD_KAFKA_BROKERS` (required): bootstrap servers.
    public var kafkaBrokers: String
    /// `HERALD_KAFKA_GROUP`, default `herald-workers`.
    public var kafkaGroup: String = "herald-workers"
    /// `HERALD_TOPIC_JOBS`, default `herald.jobs`; likewise the other topics.
    public var topics = Topics()
    /// `HERALD_DATABASE_POOL_SIZE`, default 8.
    public var databasePoolSize: Int = 8
    /// `HERALD_SHARD_SIZE`: devices per shard, default 50,000.
    public var shardSize: Int = 50_000
    /// `HERALD_CREDENTIALS_KEY`: 32 bytes, base64 (checked by the credential store).
    public var credentialsKey: String?
    /// librdkafka settings: the brokers plus every `HERALD_KAFKA_PROPERTY_*` pass-through.
    public var kafka: KafkaConfiguration

    /// Topic names.
    public struct Topics: Sendable, Equatable {
        public var jobs = "herald.jobs"
        public var jobsUrgent = "herald.jobs.urgent"
        public var shards = "herald.shards"
        public var shardsUrgent = "herald.shards.urgent"
        public var results = "herald.results"
        public var deviceEvents = "herald.device-events"
        public var metrics = "herald.metrics"
        public var deadLetters = "herald.dlq"
    }

    /// Reads the configuration from `environment`.
    public init(environment: [String: String]) throws(Invalid) {
        func required(_ name: String) throws(Invalid) -> String {
            guard let value = environment[name], !value.isEmpty else {
                throw Invalid(variable: name, reason: "is required")
            }
            return value
        }
        func integer(_ name: String, _ range: ClosedRange<Int>, default value: Int) throws(Invalid) -> Int {
            guard let text = environment[name], !text.isEmpty else { return value }
            guard let parsed = Int(text), range.contains(parsed) else {
                throw Invalid(variable: name, reason: "must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(text.prefix(32))\"")
            }
            return parsed
        }
        func topic(_ name: String, default value: String) throws(Invalid) -> String {
            guard let text = environment[name], !text.isEmpty else { return value }
            let valid = text.utf8.count <= 249 && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
            guard valid else { throw Invalid(variable: name, reason: "a Kafka topic name is 1–249 of A-Z a-z 0-9 . _ -") }
            return text
        }
        databaseURL = try required("HERALD_DATABASE_URL")
        kafkaBrokers = try required("HERALD_KAFKA_BROKERS")
        if let group = environment["HERALD_KAFKA_GROUP"], !group.isEmpty { kafkaGroup = group }
        databasePoolSize = try integer("HERALD_DATABASE_POOL_SIZE", 1...256, default: 8)
        shardSize = try integer("HERALD_SHARD_SIZE", 100...10_000_000, default: 50_000)
        credentialsKey = environment["HERALD_CREDENTIALS_KEY"]
        topics.jobs = try topic("HERALD_TOPIC_JOBS", default: topics.jobs)
        topics.jobsUrgent = try topic("HERALD_TOPIC_JOBS_URGENT", default: topics.jobsUrgent)
        topics.shards = try topic("HERALD_TOPIC_SHARDS", default: topics.shards)
        topics.shardsUrgent = try topic("HERALD_TOPIC_SHARDS_URGENT", default: topics.shardsUrgent)
        topics.results = try topic("HERALD_TOPIC_RESULTS", default: topics.results)
        topics.deviceEvents = try topic("HERALD_TOPIC_DEVICE_EVENTS", default: topics.deviceEvents)
        topics.metrics = try topic("HERALD_TOPIC_METRICS", default: topics.metrics)
        topics.deadLetters = try topic("HERALD_TOPIC_DLQ", default: topics.deadLetters)
        kafka = KafkaConfiguration(bootstrapServers: kafkaBrokers)
        kafka.addPassThroughProperties(from: environment)
    }
}
