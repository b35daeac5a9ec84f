import Glibc
public import HeraldKafka
import HeraldFCM

/// A worker's configuration, read from `HERALD_*` environment variables in this one place and
/// checked at start-up, with errors that name the variable (docs/operations.md).
public struct WorkerConfiguration: Sendable {
    /// Why a configuration was refused.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        let variable: String
        public let reason: String
        public var description: String { "\(variable): \(reason)" }
    }

    /// `HERALD_DATABASE_URL` (required).
    var databaseURL: String
    /// `HERALD_KAFKA_BROKERS` (required): bootstrap servers.
    var kafkaBrokers: String
    /// `HERALD_KAFKA_GROUP`, default `herald-workers`.
    var kafkaGroup: String = "herald-workers"
    /// `HERALD_TOPIC_JOBS`, default `herald.jobs`; likewise the other topics.
    public var topics = Topics()
    /// `HERALD_DATABASE_POOL_SIZE`, default 8.
    var databasePoolSize: Int = 8
    /// `HERALD_DATABASE_STATEMENT_TIMEOUT_MS`, default 30 s; zero disables it.
    var databaseStatementTimeout: Duration = .seconds(30)
    /// `HERALD_DATABASE_ACQUIRE_TIMEOUT_MS`, default 10 s.
    var databaseAcquireTimeout: Duration = .seconds(10)
    /// `HERALD_SHARD_SIZE`: devices per shard, default 50,000.
    var shardSize: Int = 50_000
    /// `HERALD_CREDENTIALS_KEY`: 32 bytes, base64 (checked by the credential store).
    public var credentialsKey: String?
    /// `HERALD_CREDENTIALS_OLD_KEYS`: keys that open credentials during a rotation, never seal.
    var credentialsOldKeys: String?
    /// librdkafka settings: the brokers plus every `HERALD_KAFKA_PROPERTY_*` pass-through.
    public var kafka: KafkaConfiguration
    /// `HERALD_WORKER_ID`: names this worker in leases, logs and metrics; default `hostname-pid`.
    public var workerID: String
    /// `HERALD_HTTP_PORT`: port of `/healthz`, `/readyz`, `/metrics`; default 9090, 0 = none.
    var httpPort: Int = 9090
    /// `HERALD_HTTP_HOST`: the address the health and metrics server binds, default `0.0.0.0`.
    var httpHost: String = "0.0.0.0"
    /// `HERALD_STALL_SECONDS` (default 30): a heartbeat (an event loop, a consumer or the
    /// producer poll thread) unmoved this long fails `/healthz`.
    var stallAfter: Duration = .seconds(30)
    /// `HERALD_APNS_ENDPOINT`, `HERALD_FCM_ENDPOINT` (`https://host:port`), `HERALD_TLS_CA_FILE`.
    public var endpoints = ProviderEndpoints()
    /// `HERALD_SHARD_CONCURRENCY`: shards one worker runs at once, default 4.
    var shardConcurrency: Int = 4
    /// `HERALD_JOB_CONCURRENCY`: jobs planned (and small jobs run) at once, default 16.
    var jobConcurrency: Int = 16
    /// Shard pacing: `HERALD_SEND_WINDOW` (sends in flight per shard, default 256),
    /// `HERALD_RETRY_MAX_ATTEMPTS` (8), `HERALD_RETRY_MAX_AGE_SECONDS` (86400),
    /// `HERALD_RETRY_QUOTA_SECONDS` (first wait after FCM's QUOTA_EXCEEDED, 60 as Google asks),
    /// the sends-in-flight share of `HERALD_DRAIN_SECONDS` (``ShutdownBudget``),
    /// `HERALD_RETRY_HOLD_SECONDS` (a shard waiting only for retries due later than this frees
    /// its slot, default 10).
    public var shard = ShardSettings()
    /// `HERALD_DRAIN_SECONDS`: the whole time from SIGTERM to exit, default 30 (``ShutdownBudget``
    /// shares it out: sends in flight, work in hand, consumers' commits, the producer's flush).
    var shutdownBound: Duration = .seconds(30)
    /// `HERALD_INVALIDATION_WINDOW` (answers, default 200) and `HERALD_INVALIDATION_THRESHOLD`
    /// (largest share of unregistered answers acted on, default 0.2).
    var invalidationWindow: Int = 200
    var invalidationThreshold: Double = 0.2
    /// `HERALD_EVENT_LOOPS`: threads for provider connections, default 1 (one loop carries the
    /// connections of a worker of about three cores: they are about a third of its CPU).
    var eventLoops: Int = 1
    /// `HERALD_LOG_LEVEL`: debug, info (default), warning, error.
    var logLevel: WorkerLog.Level = .info
    /// `HERALD_APNS_RATE_PER_MINUTE` (default none) and `HERALD_FCM_RATE_PER_MINUTE` (default
    /// 600,000): sends a minute per app on each provider, shared by the live workers.
    var providerCeilings = ProviderCeilings()
    /// `HERALD_METRICS_INTERVAL_SECONDS`: how often a report goes to the metrics topic, default 10.
    var metricsInterval: Duration = .seconds(10)
    /// `HERALD_RETENTION_DAYS`: days finished jobs and device-event dedupe rows are kept
    /// (``RetentionSweeper``), default 30; 0 keeps them forever.
    var retentionDays: Int = 30
    /// `HERALD_HALTED_SWEEP_SECONDS`: how often a worker looks for jobs that expired behind a
    /// halted provider (``HaltedJobSweeper``), default 60.
    var haltedSweepInterval: Duration = .seconds(60)
    /// The build's version, for `herald_build_info` (set by `herald run`, not from the environment).
    public var buildVersion = "unknown"
    /// The git revision of the build, for `herald_build_info{revision}`.
    public var buildRevision = "unknown"
    /// `HERALD_*` variables of the environment Herald does not read (``ConfigurationAudit``),
    /// logged as a warning at start.
    var unknownVariables: [String] = []

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

        /// The default names.
        public init() {}
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
        databaseURL = try required("HERALD_DATABASE_URL")
        kafkaBrokers = try required("HERALD_KAFKA_BROKERS")
        if let group = environment["HERALD_KAFKA_GROUP"], !group.isEmpty { kafkaGroup = group }
        databasePoolSize = try integer("HERALD_DATABASE_POOL_SIZE", 1...256, default: 8)
        databaseStatementTimeout = .milliseconds(try integer("HERALD_DATABASE_STATEMENT_TIMEOUT_MS", 0...86_400_000, default: 30_000))
        databaseAcquireTimeout = .milliseconds(try integer("HERALD_DATABASE_ACQUIRE_TIMEOUT_MS", 1...3_600_000, default: 10_000))
        shardSize = try integer("HERALD_SHARD_SIZE", 100...500_000, default: 50_000)
        credentialsKey = environment["HERALD_CREDENTIALS_KEY"]
        credentialsOldKeys = environment["HERALD_CREDENTIALS_OLD_KEYS"]
        topics = try Topics(environment: environment)
        kafka = KafkaConfiguration(bootstrapServers: kafkaBrokers)
        kafka.addPassThroughProperties(from: environment)

        var host = [CChar](repeating: 0, count: 256)
        let hostname = gethostname(&host, host.count) == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "herald"
        workerID = "\(hostname)-\(getpid())"
        if let id = environment["HERALD_WORKER_ID"], !id.isEmpty {
            guard id.utf8.count <= 128, !id.contains(where: { $0.isWhitespace }) else {
                throw Invalid(variable: "HERALD_WORKER_ID", reason: "1–128 characters without spaces")
            }
            workerID = id
        }
        httpPort = try integer("HERALD_HTTP_PORT", 0...65535, default: 9090)
        if let host = environment["HERALD_HTTP_HOST"], !host.isEmpty {
            guard host.utf8.count <= 255, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw Invalid(variable: "HERALD_HTTP_HOST", reason: "must be an address or host name to bind, such as 0.0.0.0, 127.0.0.1 or ::")
            }
            httpHost = host
        }
        stallAfter = .seconds(try integer("HERALD_STALL_SECONDS", 2...3600, default: 30))
        endpoints = try Self.endpoints(environment: environment)
        shardConcurrency = try integer("HERALD_SHARD_CONCURRENCY", 1...256, default: 4)
        jobConcurrency = try integer("HERALD_JOB_CONCURRENCY", 1...1024, default: 16)
        shard.window = try integer("HERALD_SEND_WINDOW", 1...10_000, default: 256)
        shard.retry.maximumAttempts = try integer("HERALD_RETRY_MAX_ATTEMPTS", 1...100, default: 8)
        shard.retry.maximumAgeSeconds = Int64(try integer("HERALD_RETRY_MAX_AGE_SECONDS", 1...30 * 86_400, default: 86_400))
        shard.retry.backoff.quotaBaseSeconds = Double(try integer("HERALD_RETRY_QUOTA_SECONDS", 1...3600, default: 60))
        shutdownBound = .seconds(try integer("HERALD_DRAIN_SECONDS", 5...600, default: 30))
        shard.drainDeadline = ShutdownBudget(total: shutdownBound).sendsInFlight
        shard.retryHoldSeconds = Double(try integer("HERALD_RETRY_HOLD_SECONDS", 0...3600, default: 10))
        shard.messageRetryBudget = .seconds(try integer("HERALD_MESSAGE_RETRY_SECONDS", 0...86_400, default: 600))
        invalidationWindow = try integer("HERALD_INVALIDATION_WINDOW", 1...100_000, default: 200)
        if let text = environment["HERALD_INVALIDATION_THRESHOLD"], !text.isEmpty {
            guard let value = Double(text), value > 0, value <= 1 else {
                throw Invalid(variable: "HERALD_INVALIDATION_THRESHOLD", reason: "must be a number above 0 and at most 1, not \"\(text.prefix(32))\"")
            }
            invalidationThreshold = value
        }
        eventLoops = try integer("HERALD_EVENT_LOOPS", 1...64, default: 1)
        let apnsCeiling = try integer("HERALD_APNS_RATE_PER_MINUTE", 0...1_000_000_000, default: 0)
        providerCeilings.apnsPerMinute = apnsCeiling == 0 ? nil : Int64(apnsCeiling)
        let fcmCeiling = try integer("HERALD_FCM_RATE_PER_MINUTE", 0...1_000_000_000, default: 600_000)
        providerCeilings.fcmPerMinute = fcmCeiling == 0 ? nil : Int64(fcmCeiling)
        metricsInterval = .seconds(try integer("HERALD_METRICS_INTERVAL_SECONDS", 1...3600, default: 10))
        retentionDays = try integer("HERALD_RETENTION_DAYS", 0...36_500, default: 30)
        haltedSweepInterval = .seconds(try integer("HERALD_HALTED_SWEEP_SECONDS", 1...86_400, default: 60))
        unknownVariables = ConfigurationAudit.unknownVariables(environment)
        if let text = environment["HERALD_LOG_LEVEL"], !text.isEmpty {
            guard let level = WorkerLog.Level(name: text) else {
                throw Invalid(variable: "HERALD_LOG_LEVEL", reason: "debug, info, warning or error, not \"\(text.prefix(32))\"")
            }
            logLevel = level
        }
    }

    /// The provider endpoints from `HERALD_APNS_ENDPOINT`, `HERALD_FCM_ENDPOINT`,
    /// `HERALD_FCM_TOKEN_HOSTS`, `HERALD_TLS_CA_FILE` and `HERALD_PROVIDER_CONNECTIONS`, as a
    /// worker reads them (also `herald send --token`).
    public static func endpoints(environment: [String: String]) throws(Invalid) -> ProviderEndpoints {
        var endpoints = ProviderEndpoints()
        func endpoint(_ name: String) throws(Invalid) -> ProviderEndpoints.Endpoint? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let endpoint = ProviderEndpoints.Endpoint(url: text) else {
                throw Invalid(variable: name, reason: "must be an https://host[:port] URL, not \"\(text.prefix(64))\"")
            }
            return endpoint
        }
        endpoints.apns = try endpoint("HERALD_APNS_ENDPOINT")
        endpoints.fcm = try endpoint("HERALD_FCM_ENDPOINT")
        do {
            endpoints.fcmTokenHosts = try FCMTokenHosts(variable: environment["HERALD_FCM_TOKEN_HOSTS"])
        } catch {
            throw Invalid(variable: "HERALD_FCM_TOKEN_HOSTS", reason: error.reason)
        }
        if let file = environment["HERALD_TLS_CA_FILE"], !file.isEmpty {
            guard access(file, R_OK) == 0 else { throw Invalid(variable: "HERALD_TLS_CA_FILE", reason: "cannot read \(file)") }
            endpoints.caFile = file
        }
        if let text = environment["HERALD_PROVIDER_CONNECTIONS"], !text.isEmpty {
            guard let count = Int(text), (1...64).contains(count) else {
                throw Invalid(variable: "HERALD_PROVIDER_CONNECTIONS", reason: "must be a whole number from 1 to 64, not \"\(text.prefix(32))\"")
            }
            endpoints.connectionsPerHost = count
        }
        return endpoints
    }
}
