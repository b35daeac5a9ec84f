import HeraldCore
import HeraldKafka

/// Publishes a `herald.metrics.v1` report to the metrics topic every `interval` (default 10 s,
/// docs/ARCHITECTURE.md): what happened in the window since the previous report (so summing a worker's
/// reports gives its totals), plus the gauges as they are now. Keyed by worker id.
struct MetricsPublisher: Sendable {
    let metrics: WorkerMetrics
    let publisher: ReceiptPublisher
    let log: WorkerLog
    let interval: Duration
    /// Reads the gauges kept elsewhere (open connections, rebalances) into `metrics` before each report.
    let refresh: @Sendable () async -> Void

    /// A publisher of `metrics`' figures.
    init(metrics: WorkerMetrics, publisher: ReceiptPublisher, log: WorkerLog, interval: Duration = .seconds(10),
         refresh: @escaping @Sendable () async -> Void = {}) {
        self.metrics = metrics
        self.publisher = publisher
        self.log = log
        self.interval = interval
        self.refresh = refresh
    }

    /// Publishes until `stop` is set, then once more for the last partial window.
    func run(stop: StopSignal) async {
        var previous = WorkerMetrics.Snapshot(workerID: metrics.workerID)
        var windowStart = ContinuousClock.now
        while true {
            await stop.sleep(for: interval)
            await refresh()
            let current = metrics.snapshot()
            let now = ContinuousClock.now
            let elapsed = now - windowStart
            let seconds = max(0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            let report = Self.report(from: previous, to: current, windowSeconds: seconds, at: .now)
            do {
                try await publisher.send([KafkaProducerMessage(topic: publisher.topics.metrics, key: Array(metrics.workerID.utf8),
                                                               value: report.json.serializedBytes())])
                previous = current
                windowStart = now
            } catch {
                // The window grows until a report gets through: nothing is lost, only merged.
                metrics.kafkaError()
                log.warning("metrics report not published", ["error": .string(error.description)])
            }
            if stop.isSet { return }
        }
    }

    /// The report for the window between two snapshots.
    static func report(from previous: WorkerMetrics.Snapshot, to current: WorkerMetrics.Snapshot, windowSeconds: Double, at: Timestamp) -> MetricsReport {
        var report = MetricsReport(workerID: current.workerID, at: at, windowSeconds: windowSeconds)
        report.jobs = .init(started: Int64(current.jobsStarted - previous.jobsStarted), finished: Int64(current.jobsFinished - previous.jobsFinished))
        report.shards = .init(started: Int64(current.shardsStarted - previous.shardsStarted), finished: Int64(current.shardsFinished - previous.shardsFinished))
        var retries: Int64 = 0
        for provider in Receipt.Provider.allCases {
            for outcome in ["accepted", "unregistered", "failed", "dropped", "retried"] {
                let delta = current.notifications(provider: provider.rawValue, outcome: outcome)
                    - previous.notifications(provider: provider.rawValue, outcome: outcome)
                if outcome == "retried" {
                    retries += Int64(delta)
                } else if delta > 0, let stage = Receipt.Stage(rawValue: outcome) {
                    report.notifications.append(.init(provider: provider, outcome: stage, count: Int64(delta)))
                }
            }
            if let now = current.sendDurations[provider.rawValue] {
                var window = now
                if let before = previous.sendDurations[provider.rawValue] {
                    window.bucketCounts = zip(now.bucketCounts, before.bucketCounts).map { $0 - $1 }
                    window.count = now.count - before.count
                    window.sum = now.sum - before.sum
                }
                if window.count > 0, let p50 = window.p50, let p90 = window.p90, let p99 = window.p99 {
                    report.latencyMilliseconds[provider] = .init(p50: p50 * 1000, p90: p90 * 1000, p99: p99 * 1000, count: Int64(window.count))
                }
            }
            if let open = current.openConnections[provider.rawValue] { report.connections[provider] = Int64(open) }
        }
        report.retries = retries
        report.inFlight = Int64(max(0, current.inFlight))
        report.rebalances = Int64(current.rebalances - previous.rebalances)
        report.kafkaErrors = Int64(current.kafkaErrors - previous.kafkaErrors)
        report.postgresErrors = Int64(current.postgresErrors - previous.postgresErrors)
        return report
    }
}

extension MetricsPublisher: Service {
    var name: String { "metrics-publisher" }
}
