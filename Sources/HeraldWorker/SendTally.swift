import HeraldCore

/// What a shard run's sends add to ``WorkerMetrics``, gathered without a lock and added in one
/// step (``WorkerMetrics/add(_:)``) at each tick and checkpoint: a send and its answer cost no
/// lock of their own.
struct SendTally: Sendable, Equatable {
    /// Sends started minus answers taken since the last flush (`herald_in_flight`).
    private(set) var inFlight = 0
    /// Send durations by provider (`herald_send_duration_seconds`).
    private(set) var durations: [Receipt.Provider: WorkerMetrics.Histogram] = [:]
    /// Answers by provider and attempt result (`herald_send_attempts_total`).
    private(set) var attempts: [Attempt: Int] = [:]

    struct Attempt: Sendable, Hashable {
        var provider: Receipt.Provider
        var result: String
    }

    var isEmpty: Bool { inFlight == 0 && durations.isEmpty && attempts.isEmpty }

    /// A send handed to the provider's client.
    mutating func started() { inFlight += 1 }

    /// An answer taken: its duration (ignored when not finite) and its attempt result.
    mutating func answered(provider: Receipt.Provider, result: String, seconds: Double) {
        inFlight -= 1
        if seconds.isFinite { durations[provider, default: WorkerMetrics.Histogram()].observe(max(seconds, 0)) }
        attempts[Attempt(provider: provider, result: result), default: 0] += 1
    }
}

extension WorkerMetrics.Histogram {
    /// Adds `other`'s observations (the same bounds).
    mutating func merge(_ other: Self) {
        for index in bucketCounts.indices where index < other.bucketCounts.count {
            bucketCounts[index] += other.bucketCounts[index]
        }
        sum += other.sum
        count += other.count
    }
}
