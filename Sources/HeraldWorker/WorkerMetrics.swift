import HeraldCore
import Synchronization

/// A worker's counters, gauges and send-latency histograms: updated per notification by the
/// pipeline, scraped as Prometheus text from `/metrics`, and copied into the metrics topic.
///
/// Every figure lives in one `State` behind one `Mutex`: an update is a dictionary lookup and an
/// add, which costs far less than the network send it records.
final class WorkerMetrics: Sendable {
    /// The bucket upper bounds (seconds) of `herald_send_duration_seconds`; `+Inf` is implied.
    static let sendDurationBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// A send-latency histogram for one provider.
    struct Histogram: Sendable, Equatable {
        /// Observations per bucket, not cumulative: `bucketCounts[i]` counts values in
        /// (`bounds[i-1]`, `bounds[i]`]; the last element counts values above the last bound (`+Inf`).
        var bucketCounts: [Int]
        /// The sum of all observed values, in seconds.
        var sum: Double
        /// How many values were observed.
        var count: Int

        /// An empty histogram over ``WorkerMetrics/sendDurationBounds``.
        init() {
            bucketCounts = Array(repeating: 0, count: WorkerMetrics.sendDurationBounds.count + 1)
            sum = 0
            count = 0
        }

        /// Counts at or below each bound, then the total (the `+Inf` bucket), as Prometheus exposes them.
        var cumulativeCounts: [Int] {
            var running = 0
            return bucketCounts.map { count in
                running += count
                return running
            }
        }

        /// The `quantile` (0…1) estimated as Prometheus' `histogram_quantile` does: linear
        /// interpolation inside the bucket that holds it, 0 as the first bucket's lower edge, and
        /// the highest finite bound when it falls in `+Inf`. Nil when nothing was observed.
        func estimate(quantile: Double) -> Double? {
            guard count > 0, quantile.isFinite else { return nil }
            let q = min(max(quantile, 0), 1)
            let bounds = WorkerMetrics.sendDurationBounds
            let rank = q * Double(count)
            var below = 0
            for (index, bucket) in bucketCounts.enumerated() {
                let through = below + bucket
                if Double(through) >= rank && bucket > 0 {
                    guard index < bounds.count else { return bounds[bounds.count - 1] }
                    let lower = index == 0 ? 0 : bounds[index - 1]
                    let upper = bounds[index]
                    return lower + (upper - lower) * ((rank - Double(below)) / Double(bucket))
                }
                below = through
            }
            return bounds[bounds.count - 1]
        }

        /// Estimated median send duration in seconds.
        var p50: Double? { estimate(quantile: 0.5) }
        /// Estimated 90th percentile send duration in seconds.
        var p90: Double? { estimate(quantile: 0.9) }
        /// Estimated 99th percentile send duration in seconds.
        var p99: Double? { estimate(quantile: 0.99) }

        mutating func observe(_ seconds: Double) {
            let bounds = WorkerMetrics.sendDurationBounds
            var index = bounds.count
            // Thirteen bounds: a linear scan is as quick as a binary search here.
            for (candidate, bound) in bounds.enumerated() where seconds <= bound {
                index = candidate
                break
            }
            bucketCounts[index] += 1
            sum += seconds
            count += 1
        }
    }

    /// Estimated send-duration percentiles for one provider, in seconds (nil before the first send).
    struct Percentiles: Sendable, Equatable {
        /// Median.
        var p50: Double?
        /// 90th percentile.
        var p90: Double?
        /// 99th percentile.
        var p99: Double?
    }

    /// A reason count's labels: provider, final outcome and the receipt reason.
    struct ReasonKey: Sendable, Hashable {
        var provider: String
        var outcome: String
        var reason: Receipt.Reason
    }

    /// A notification count's labels.
    struct NotificationKey: Sendable, Hashable {
        /// `apns` or `fcm`.
        var provider: String
        /// `accepted`, `unregistered`, `failed`, `dropped`, `retried` or `halted`.
        var outcome: String

        /// Creates a key.
        init(provider: String, outcome: String) {
            self.provider = provider
            self.outcome = outcome
        }
    }

    /// A copy of every figure at one moment.
    struct Snapshot: Sendable, Equatable {
        /// The worker these figures belong to.
        var workerID: String
        /// `herald_notifications_total` by provider and outcome.
        var notifications: [NotificationKey: Int] = [:]
        /// `herald_notification_reasons_total`: the final `unregistered`, `failed` and `dropped`
        /// outcomes again, by their receipt reason (a ``Receipt/Reason``, so the label is bounded).
        var notificationReasons: [ReasonKey: Int] = [:]
        /// `herald_send_duration_seconds` by provider.
        var sendDurations: [String: Histogram] = [:]
        /// Percentiles estimated from ``sendDurations``, by provider.
        var sendDurationPercentiles: [String: Percentiles] = [:]
        /// `herald_jobs_started_total`.
        var jobsStarted = 0
        /// `herald_jobs_finished_total`.
        var jobsFinished = 0
        /// Jobs finished, by final state (`completed`, `cancelled`).
        var jobsFinishedByState: [String: Int] = [:]
        /// Provider requests by provider and result (`accepted`, `unregistered`, `retryable`,
        /// `failed`, `credentials`): attempts, where `notifications` counts outcomes.
        var sendAttempts: [NotificationKey: Int] = [:]
        /// `herald_shards_started_total`.
        var shardsStarted = 0
        /// `herald_shards_finished_total`.
        var shardsFinished = 0
        /// `herald_dead_letters_total` by lane and cause.
        var deadLetterCounts: [DeadLetterKey: Int] = [:]
        /// Every dead letter, whatever its lane and cause.
        var deadLetters: Int { deadLetterCounts.values.reduce(0, +) }
        /// `herald_oldest_unprocessed_seconds` by lane: how long the oldest message a lane has
        /// read and not finished has waited (0 when it holds none).
        var oldestUnprocessed: [String: Double] = [:]
        /// `herald_device_events_dropped_total` by reason (`unknown-job`).
        var deviceEventsDropped: [String: Int] = [:]
        /// `herald_device_events_total` by type (`received`, `confirmed`, `clicked`).
        var deviceEvents: [String: Int] = [:]
        /// `herald_kafka_errors_total`.
        var kafkaErrors = 0
        /// `herald_postgres_errors_total`.
        var postgresErrors = 0
        /// `herald_rebalances_total`.
        var rebalances = 0
        /// `herald_in_flight`: notifications sent and not yet answered.
        var inFlight = 0
        /// `herald_open_connections` by provider.
        var openConnections: [String: Int] = [:]
        /// The worker's PostgreSQL pool: `in_use`, `idle`, `waiting` (callers queued for a connection).
        var databasePool: [String: Int] = [:]
        /// Cluster-wide, read from PostgreSQL: `halted_apps`, `parked_retries`, `scheduled_due`,
        /// `scheduled_waiting` (the same on every worker).
        var backlog: [String: Int] = [:]
        /// Per lane: messages of its partitions not committed yet (`KafkaConsumer.lag`).
        var consumerLag: [String: Int] = [:]

        /// Notifications with this provider and outcome.
        func notifications(provider: String, outcome: String) -> Int {
            notifications[NotificationKey(provider: provider, outcome: outcome)] ?? 0
        }

        /// The snapshot as a JSON object for the metrics topic (percentiles in seconds, null when unknown).
        func json() -> JSONValue {
            var byProvider: [String: [String: JSONValue]] = [:]
            for (key, value) in notifications {
                byProvider[key.provider, default: [:]][key.outcome] = .int(value)
            }
            var latency: [String: JSONValue] = [:]
            for (provider, histogram) in sendDurations {
                func seconds(_ value: Double?) -> JSONValue { value.map { JSONValue.double($0) } ?? .null }
                latency[provider] = .object([
                    "count": .int(histogram.count), "sum_seconds": .double(histogram.sum),
                    "p50_seconds": seconds(histogram.p50), "p90_seconds": seconds(histogram.p90), "p99_seconds": seconds(histogram.p99),
                ])
            }
            return .object([
                "worker_id": .string(workerID),
                "notifications": .object(byProvider.mapValues { .object($0) }),
                "send_duration": .object(latency),
                "jobs_started": .int(jobsStarted), "jobs_finished": .int(jobsFinished),
                "shards_started": .int(shardsStarted), "shards_finished": .int(shardsFinished),
                "dead_letters": .int(deadLetters),
                "device_events": .object(deviceEvents.mapValues { .int($0) }),
                "kafka_errors": .int(kafkaErrors), "postgres_errors": .int(postgresErrors), "rebalances": .int(rebalances),
                "in_flight": .int(inFlight),
                "open_connections": .object(openConnections.mapValues { .int($0) }),
            ])
        }
    }

    /// The label values known in advance; their series start at 0 so a scrape shows them (and
    /// `rate()` works) before the first event.
    static let knownProviders = ["apns", "fcm"]
    static let knownOutcomes = ["accepted", "unregistered", "failed", "dropped", "retried", "halted"]
    static let knownDeviceEventTypes = ["received", "confirmed", "clicked"]

    /// The worker these figures belong to.
    let workerID: String
    private let state: Mutex<Snapshot>

    /// Creates zeroed metrics for worker `workerID`.
    init(workerID: String) {
        self.workerID = workerID
        var initial = Snapshot(workerID: workerID)
        for provider in Self.knownProviders {
            for outcome in Self.knownOutcomes {
                initial.notifications[NotificationKey(provider: provider, outcome: outcome)] = 0
            }
            initial.sendDurations[provider] = Histogram()
            initial.openConnections[provider] = 0
        }
        for type in Self.knownDeviceEventTypes { initial.deviceEvents[type] = 0 }
        state = Mutex(initial)
    }

    /// Counts `count` notifications to `provider` (`apns` | `fcm`) that ended as `outcome`
    /// (`accepted` | `unregistered` | `failed` | `dropped` | `retried` | `halted`).
    /// `reason`: the receipt's reason of a final `unregistered`, `failed` or `dropped`, also
    /// counted in `herald_notification_reasons_total`.
    func notification(provider: String, outcome: String, reason: Receipt.Reason? = nil, count: Int = 1) {
        let key = NotificationKey(provider: provider, outcome: outcome)
        state.withLock { state in
            state.notifications[key, default: 0] += count
            if let reason { state.notificationReasons[ReasonKey(provider: provider, outcome: outcome, reason: reason), default: 0] += count }
        }
    }

    /// Records the seconds from request start to the provider's answer in `provider`'s histogram.
    /// Negative values count as 0; NaN and infinities are ignored (a clock bug, not a latency).
    func sendDuration(provider: String, seconds: Double) {
        guard seconds.isFinite else { return }
        let value = max(seconds, 0)
        state.withLock { $0.sendDurations[provider, default: Histogram()].observe(value) }
    }

    /// Counts a job whose processing began.
    func jobStarted() { state.withLock { $0.jobsStarted += 1 } }
    /// Counts a job whose processing ended.
    func jobFinished(state finalState: String = "completed") {
        state.withLock { state in
            state.jobsFinished += 1
            state.jobsFinishedByState[finalState, default: 0] += 1
        }
    }

    /// One provider request answered (or lost), by provider and `DeliveryOutcome.attemptResult`.
    func sendAttempt(provider: String, result: String) {
        state.withLock { $0.sendAttempts[NotificationKey(provider: provider, outcome: result), default: 0] += 1 }
    }
    /// Counts a shard whose sending began.
    func shardStarted() { state.withLock { $0.shardsStarted += 1 } }
    /// Counts a shard whose sending ended.
    func shardFinished() { state.withLock { $0.shardsFinished += 1 } }
    /// Counts a message of `lane` sent to the dead-letter topic with `cause`.
    func deadLettered(lane: String, cause: String) {
        state.withLock { $0.deadLetterCounts[DeadLetterKey(lane: lane, cause: cause), default: 0] += 1 }
    }
    /// Sets how long the oldest message `lane` holds unfinished has waited.
    func setOldestUnprocessed(lane: String, seconds: Double) { state.withLock { $0.oldestUnprocessed[lane] = seconds } }
    /// Counts a device event dropped without a receipt, by `reason`.
    func deviceEventDropped(reason: String) { state.withLock { $0.deviceEventsDropped[reason, default: 0] += 1 } }

    /// Counts a device event of `type` (`received` | `confirmed` | `clicked`).
    func deviceEvent(type: String) {
        state.withLock { $0.deviceEvents[type, default: 0] += 1 }
    }

    /// Counts a Kafka error.
    func kafkaError() { state.withLock { $0.kafkaErrors += 1 } }
    /// Counts a PostgreSQL error.
    func postgresError() { state.withLock { $0.postgresErrors += 1 } }
    /// Sets the rebalance counter to the partition assignments this worker's consumers have
    /// received so far (each rebalance ends in one per consumer; the first join counts).
    func setRebalances(_ total: Int) { state.withLock { $0.rebalances = max($0.rebalances, total) } }

    /// Moves the in-flight gauge by `delta` (+1 when a send starts, -1 when it is answered).
    func adjustInFlight(_ delta: Int) { state.withLock { $0.inFlight += delta } }

    /// Adds a shard run's tally under one lock, and empties it.
    func add(_ tally: inout SendTally) {
        guard !tally.isEmpty else { return }
        let adding = tally
        tally = SendTally()
        state.withLock { state in
            state.inFlight += adding.inFlight
            for (provider, histogram) in adding.durations {
                state.sendDurations[provider.rawValue, default: Histogram()].merge(histogram)
            }
            for (attempt, count) in adding.attempts {
                state.sendAttempts[NotificationKey(provider: attempt.provider.rawValue, outcome: attempt.result), default: 0] += count
            }
        }
    }

    /// Sets a lane's consumer lag.
    func setConsumerLag(lane: String, _ value: Int) { state.withLock { $0.consumerLag[lane] = value } }

    /// Sets the cluster-wide backlog gauges.
    func setBacklog(haltedApps: Int, parkedRetries: Int, scheduledDue: Int, scheduledWaiting: Int) {
        state.withLock {
            $0.backlog = ["halted_apps": haltedApps, "parked_retries": parkedRetries, "scheduled_due": scheduledDue, "scheduled_waiting": scheduledWaiting]
        }
    }

    /// Sets the pool gauges, read when `/metrics` is scraped.
    func setDatabasePool(inUse: Int, idle: Int, waiting: Int) {
        state.withLock { $0.databasePool = ["in_use": inUse, "idle": idle, "waiting": waiting] }
    }

    /// Sets the open-connections gauge for `provider`.
    func setOpenConnections(provider: String, _ value: Int) {
        state.withLock { $0.openConnections[provider] = value }
    }

    /// A copy of every figure, with per-provider p50/p90/p99 estimated from the histograms.
    func snapshot() -> Snapshot {
        var copy = state.withLock { $0 }
        copy.sendDurationPercentiles = copy.sendDurations.mapValues { Percentiles(p50: $0.p50, p90: $0.p90, p99: $0.p99) }
        return copy
    }

    /// Every metric in the Prometheus text exposition format 0.0.4 (`text/plain; version=0.0.4`).
    func prometheusText() -> String {
        let s = state.withLock { $0 }
        var text = PrometheusText()

        text.family("herald_notifications_total", type: "counter", help: "Notifications by provider and final outcome.")
        for (key, value) in s.notifications.sorted(by: { ($0.key.provider, $0.key.outcome) < ($1.key.provider, $1.key.outcome) }) {
            text.sample("herald_notifications_total", [("provider", key.provider), ("outcome", key.outcome)], value)
        }

        text.family("herald_notification_reasons_total", type: "counter",
                    help: "Final unregistered, failed and dropped notifications by receipt reason (a fixed set).")
        for (key, value) in s.notificationReasons.sorted(by: { ($0.key.provider, $0.key.outcome, $0.key.reason.rawValue) < ($1.key.provider, $1.key.outcome, $1.key.reason.rawValue) }) {
            text.sample("herald_notification_reasons_total", [("provider", key.provider), ("outcome", key.outcome), ("reason", key.reason.rawValue)], value)
        }

        text.family("herald_send_duration_seconds", type: "histogram", help: "Seconds from request start to the provider's answer.")
        for (provider, histogram) in s.sendDurations.sorted(by: { $0.key < $1.key }) {
            let cumulative = histogram.cumulativeCounts
            for (index, bound) in Self.sendDurationBounds.enumerated() {
                text.sample("herald_send_duration_seconds_bucket", [("provider", provider), ("le", PrometheusText.number(bound))], cumulative[index])
            }
            text.sample("herald_send_duration_seconds_bucket", [("provider", provider), ("le", "+Inf")], histogram.count)
            text.sample("herald_send_duration_seconds_sum", [("provider", provider)], PrometheusText.number(histogram.sum))
            text.sample("herald_send_duration_seconds_count", [("provider", provider)], histogram.count)
        }

        if !s.databasePool.isEmpty {
            text.family("herald_postgres_pool_connections", type: "gauge", help: "The worker's PostgreSQL pool: connections in use and idle.")
            for key in ["in_use", "idle"] { text.sample("herald_postgres_pool_connections", [("state", key)], s.databasePool[key] ?? 0) }
            text.family("herald_postgres_pool_waiting", type: "gauge", help: "Callers waiting for a PostgreSQL connection right now.")
            text.sample("herald_postgres_pool_waiting", [], s.databasePool["waiting"] ?? 0)
        }

        if !s.consumerLag.isEmpty {
            text.family("herald_consumer_lag", type: "gauge", help: "Messages on the partitions a lane holds that it has not committed yet.")
            for (lane, value) in s.consumerLag.sorted(by: { $0.key < $1.key }) { text.sample("herald_consumer_lag", [("lane", lane)], value) }
        }

        if !s.backlog.isEmpty {
            text.family("herald_halted_apps", type: "gauge", help: "Apps halted on at least one provider (cluster-wide; the same on every worker).")
            text.sample("herald_halted_apps", [], s.backlog["halted_apps"] ?? 0)
            text.family("herald_parked_retries", type: "gauge", help: "Subscriptions parked for a retry or behind a halt (cluster-wide).")
            text.sample("herald_parked_retries", [], s.backlog["parked_retries"] ?? 0)
            text.family("herald_scheduled_backlog", type: "gauge", help: "Scheduled releases (sub-jobs, retry waits) due now and waiting (cluster-wide).")
            text.sample("herald_scheduled_backlog", [("state", "due")], s.backlog["scheduled_due"] ?? 0)
            text.sample("herald_scheduled_backlog", [("state", "waiting")], s.backlog["scheduled_waiting"] ?? 0)
        }

        text.family("herald_send_attempts_total", type: "counter", help: "Provider requests by provider and result; retries count each time.")
        for (key, value) in s.sendAttempts.sorted(by: { ($0.key.provider, $0.key.outcome) < ($1.key.provider, $1.key.outcome) }) {
            text.sample("herald_send_attempts_total", [("provider", key.provider), ("result", key.outcome)], value)
        }

        text.family("herald_jobs_finished_total", type: "counter", help: "Jobs whose processing ended, by final state.")
        for (finalState, value) in s.jobsFinishedByState.sorted(by: { $0.key < $1.key }) {
            text.sample("herald_jobs_finished_total", [("state", finalState)], value)
        }

        let plainCounters: [(String, String, Int)] = [
            ("herald_jobs_started_total", "Jobs whose processing began.", s.jobsStarted),
            ("herald_shards_started_total", "Shards whose sending began.", s.shardsStarted),
            ("herald_shards_finished_total", "Shards whose sending ended.", s.shardsFinished),
        ]
        for (name, help, value) in plainCounters {
            text.family(name, type: "counter", help: help)
            text.sample(name, [], value)
        }

        text.family("herald_dead_letters_total", type: "counter", help: "Messages sent to the dead-letter topic, by lane and cause.")
        for (key, value) in s.deadLetterCounts.sorted(by: { ($0.key.lane, $0.key.cause) < ($1.key.lane, $1.key.cause) }) {
            text.sample("herald_dead_letters_total", [("lane", key.lane), ("cause", key.cause)], value)
        }
        text.family("herald_oldest_unprocessed_seconds", type: "gauge", help: "Seconds the oldest message a lane has read and not finished has waited; 0 when none.")
        for (lane, seconds) in s.oldestUnprocessed.sorted(by: { $0.key < $1.key }) {
            text.sample("herald_oldest_unprocessed_seconds", [("lane", lane)], PrometheusText.number(seconds))
        }
        text.family("herald_device_events_dropped_total", type: "counter", help: "Device events dropped without a receipt, by reason (unknown-job: the job no longer exists).")
        for (reason, value) in s.deviceEventsDropped.sorted(by: { $0.key < $1.key }) {
            text.sample("herald_device_events_dropped_total", [("reason", reason)], value)
        }

        text.family("herald_device_events_total", type: "counter", help: "Device events (received, confirmed, clicked) by type.")
        for (type, value) in s.deviceEvents.sorted(by: { $0.key < $1.key }) {
            text.sample("herald_device_events_total", [("type", type)], value)
        }

        let errorCounters: [(String, String, Int)] = [
            ("herald_kafka_errors_total", "Kafka errors.", s.kafkaErrors),
            ("herald_postgres_errors_total", "PostgreSQL errors.", s.postgresErrors),
            ("herald_rebalances_total", "Consumer-group rebalances.", s.rebalances),
        ]
        for (name, help, value) in errorCounters {
            text.family(name, type: "counter", help: help)
            text.sample(name, [], value)
        }

        text.family("herald_in_flight", type: "gauge", help: "Notifications sent and not yet answered.")
        text.sample("herald_in_flight", [], s.inFlight)

        text.family("herald_open_connections", type: "gauge", help: "Open connections to the provider.")
        for (provider, value) in s.openConnections.sorted(by: { $0.key < $1.key }) {
            text.sample("herald_open_connections", [("provider", provider)], value)
        }
        return text.output
    }
}

/// A `herald_dead_letters_total` series.
struct DeadLetterKey: Sendable, Hashable {
    /// `jobs`, `urgent`, `shards`, `device-events`.
    var lane: String
    /// A ``DeadLetter/Cause`` raw value.
    var cause: String
}
