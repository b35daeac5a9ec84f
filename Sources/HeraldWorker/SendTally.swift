import HeraldCore

/// What a shard run's sends add to ``WorkerMetrics``, gathered without a lock and added in one
/// step (``WorkerMetrics/add(_:)``) at each tick and checkpoint: a send and its answer cost no
/// lock of their own.
struct SendTally: Sendable, Equatable {
    /// Sends started minus answers taken since the last flush (`herald_in_flight`).
    private(set) var inFlight = 0
    /// Send durations by provider, and answers by provider and attempt result, as short lists: a
    /// run sees two providers and a handful of results, and counts one of each per answer, which
    /// a list searched in order does without hashing anything.
    private var durationEntries: [(provider: Receipt.Provider, histogram: WorkerMetrics.Histogram)] = []
    private var attemptEntries: [(attempt: Attempt, count: Int)] = []

    struct Attempt: Sendable, Hashable {
        var provider: Receipt.Provider
        var result: String
    }

    /// Send durations by provider (`herald_send_duration_seconds`).
    var durations: [Receipt.Provider: WorkerMetrics.Histogram] {
        Dictionary(durationEntries.map { ($0.provider, $0.histogram) }, uniquingKeysWith: { first, _ in first })
    }

    /// Answers by provider and attempt result (`herald_send_attempts_total`).
    var attempts: [Attempt: Int] { Dictionary(attemptEntries.map { ($0.attempt, $0.count) }, uniquingKeysWith: +) }

    var isEmpty: Bool { inFlight == 0 && durationEntries.isEmpty && attemptEntries.isEmpty }

    /// A send handed to the provider's client.
    mutating func started() { inFlight += 1 }

    /// An answer taken: its duration (ignored when not finite) and its attempt result.
    mutating func answered(provider: Receipt.Provider, result: String, seconds: Double) {
        inFlight -= 1
        if seconds.isFinite {
            if let index = durationEntries.firstIndex(where: { $0.provider == provider }) {
                durationEntries[index].histogram.observe(max(seconds, 0))
            } else {
                var histogram = WorkerMetrics.Histogram()
                histogram.observe(max(seconds, 0))
                durationEntries.append((provider, histogram))
            }
        }
        let attempt = Attempt(provider: provider, result: result)
        if let index = attemptEntries.firstIndex(where: { $0.attempt == attempt }) {
            attemptEntries[index].count += 1
        } else {
            attemptEntries.append((attempt, 1))
        }
    }

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.inFlight == rhs.inFlight && lhs.durations == rhs.durations && lhs.attempts == rhs.attempts
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
