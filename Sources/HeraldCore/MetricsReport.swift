/// A worker's figures for one window (`herald.metrics.v1`), published to `herald.metrics` every 10 s.
public struct MetricsReport: Sendable, Equatable {
    /// The `schema` value this type reads and writes.
    public static let schemaName = "herald.metrics.v1"

    /// Started and finished counts.
    public struct Progress: Sendable, Equatable {
        public var started: Int64 = 0
        public var finished: Int64 = 0
        /// Creates counts.
        public init(started: Int64 = 0, finished: Int64 = 0) {
            self.started = started
            self.finished = finished
        }
    }

    /// Notifications with one outcome on one provider in the window.
    public struct OutcomeCount: Sendable, Equatable {
        public var provider: Receipt.Provider
        public var outcome: Receipt.Stage
        public var count: Int64
        /// Creates a count.
        public init(provider: Receipt.Provider, outcome: Receipt.Stage, count: Int64) {
            self.provider = provider
            self.outcome = outcome
            self.count = count
        }
    }

    /// Send latency quantiles, milliseconds.
    public struct Latency: Sendable, Equatable {
        public var p50: Double
        public var p90: Double
        public var p99: Double
        public var count: Int64
        /// Creates quantiles.
        public init(p50: Double, p90: Double, p99: Double, count: Int64) {
            self.p50 = p50
            self.p90 = p90
            self.p99 = p99
            self.count = count
        }
    }

    /// Consumer lag of one partition.
    public struct PartitionLag: Sendable, Equatable {
        public var topic: String
        public var partition: Int32
        public var lag: Int64
        /// Creates a lag figure.
        public init(topic: String, partition: Int32, lag: Int64) {
            self.topic = topic
            self.partition = partition
            self.lag = lag
        }
    }

    public var workerID: String
    /// The end of the window.
    public var at: Timestamp
    public var windowSeconds: Double
    public var jobs = Progress()
    public var shards = Progress()
    public var notifications: [OutcomeCount] = []
    public var retries: Int64 = 0
    public var latencyMilliseconds: [Receipt.Provider: Latency] = [:]
    public var inFlight: Int64 = 0
    public var connections: [Receipt.Provider: Int64] = [:]
    public var consumerLag: [PartitionLag] = []
    public var rebalances: Int64 = 0
    public var kafkaErrors: Int64 = 0
    public var postgresErrors: Int64 = 0

    /// Creates an empty report.
    public init(workerID: String, at: Timestamp, windowSeconds: Double) {
        self.workerID = workerID
        self.at = at
        self.windowSeconds = windowSeconds
    }

    /// Decodes and validates a report.
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> MetricsReport {
        try MetricsReport(json: try JSONValue.parse(bytes, limits: .init(maxBytes: 1 << 20)))
    }

    /// Validates a parsed report.
    public init(json: JSONValue) throws(ValidationError) {
        let root = try JSONObjectReader(json, at: .root)
        try MessageSchema.check(root, expected: MetricsReport.schemaName)
        workerID = try root.string("worker_id", .text(max: 128))
        at = try root.timestamp("at")
        windowSeconds = try root.number("window_s", in: 0...86_400)
        guard windowSeconds > 0 else { throw ValidationError(at: JSONPath.root.appending("window_s"), "must be greater than 0") }
        func progress(_ key: String) throws(ValidationError) -> Progress {
            let reader = try root.object(key)
            return Progress(started: try reader.int("started", in: 0...Int64.max), finished: try reader.int("finished", in: 0...Int64.max))
        }
        jobs = try progress("jobs")
        shards = try progress("shards")
        for item in try root.array("notifications", count: 0...1000, noun: "outcome counts") {
            let reader = try JSONObjectReader(item.value, at: item.path)
            notifications.append(OutcomeCount(
                provider: try reader.enumeration("provider"),
                outcome: try reader.enumeration("outcome"),
                count: try reader.int("count", in: 0...Int64.max)
            ))
        }
        retries = try root.optionalInt("retries", in: 0...Int64.max) ?? 0
        if let latency = try root.optionalObject("latency_ms") {
            for (key, value) in latency.members {
                let path = latency.path.appending(key)
                let provider: Receipt.Provider = try JSONObjectReader.enumeration(.string(key), at: path)
                let reader = try JSONObjectReader(value, at: path)
                latencyMilliseconds[provider] = Latency(
                    p50: try reader.number("p50", in: 0...1e9),
                    p90: try reader.number("p90", in: 0...1e9),
                    p99: try reader.number("p99", in: 0...1e9),
                    count: try reader.int("count", in: 0...Int64.max)
                )
            }
        }
        inFlight = try root.optionalInt("in_flight", in: 0...Int64.max) ?? 0
        if let connections = try root.optionalObject("connections") {
            for (key, value) in connections.members {
                let path = connections.path.appending(key)
                let provider: Receipt.Provider = try JSONObjectReader.enumeration(.string(key), at: path)
                self.connections[provider] = try JSONObjectReader.integer(value, in: 0...Int64.max, at: path)
            }
        }
        for item in try root.optionalArray("consumer_lag", count: 0...100_000, noun: "partitions") ?? [] {
            let reader = try JSONObjectReader(item.value, at: item.path)
            consumerLag.append(PartitionLag(
                topic: try reader.string("topic", .text(max: 249)),
                partition: Int32(try reader.int("partition", in: 0...Int64(Int32.max))),
                lag: try reader.int("lag", in: 0...Int64.max)
            ))
        }
        rebalances = try root.optionalInt("rebalances", in: 0...Int64.max) ?? 0
        if let errors = try root.optionalObject("errors") {
            kafkaErrors = try errors.optionalInt("kafka", in: 0...Int64.max) ?? 0
            postgresErrors = try errors.optionalInt("postgres", in: 0...Int64.max) ?? 0
        }
    }

    /// The message document.
    public var json: JSONValue {
        func progress(_ value: Progress) -> JSONValue {
            .object(["started": .int(value.started), "finished": .int(value.finished)])
        }
        return .object([
            "schema": .string(MetricsReport.schemaName),
            "worker_id": .string(workerID),
            "at": .string(at.rfc3339),
            "window_s": .double(windowSeconds),
            "jobs": progress(jobs),
            "shards": progress(shards),
            "notifications": .array(notifications.map {
                .object(["provider": .string($0.provider.rawValue), "outcome": .string($0.outcome.rawValue), "count": .int($0.count)])
            }),
            "retries": .int(retries),
            "latency_ms": .object(Dictionary(uniqueKeysWithValues: latencyMilliseconds.map { provider, latency in
                (provider.rawValue, JSONValue.object(["p50": .double(latency.p50), "p90": .double(latency.p90), "p99": .double(latency.p99), "count": .int(latency.count)]))
            })),
            "in_flight": .int(inFlight),
            "connections": .object(Dictionary(uniqueKeysWithValues: connections.map { ($0.key.rawValue, JSONValue.int($0.value)) })),
            "consumer_lag": .array(consumerLag.map {
                .object(["topic": .string($0.topic), "partition": .int($0.partition), "lag": .int($0.lag)])
            }),
            "rebalances": .int(rebalances),
            "errors": .object(["kafka": .int(kafkaErrors), "postgres": .int(postgresErrors)]),
        ])
    }
}
