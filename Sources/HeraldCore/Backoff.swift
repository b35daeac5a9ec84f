/// Exponential backoff: `first`, doubling after each wait, never above `maximum`. The one place
/// Herald's retry loops compute their waits (the pool reconnecting to PostgreSQL, the publisher
/// waiting for Kafka, a message failing, the scheduler, an HTTP/2 pool's connects).
public struct Backoff: Sendable, Equatable {
    /// The first wait, and the one after ``reset()``.
    public let first: Duration
    /// The longest wait.
    public let maximum: Duration
    /// The wait ``next()`` gives now.
    public private(set) var upcoming: Duration

    /// Waits of `first`, `2 × first`, … up to `maximum`.
    public init(first: Duration, maximum: Duration) {
        self.first = first
        self.maximum = max(first, maximum)
        upcoming = first
    }

    /// The wait before the next attempt; the one after is twice as long, up to ``maximum``.
    public mutating func next() -> Duration {
        defer { upcoming = min(upcoming * 2, maximum) }
        return upcoming
    }

    /// Back to ``first`` (after a success).
    public mutating func reset() {
        upcoming = first
    }
}

/// Runs `body` until it returns, waiting the backoff's next delay between failed attempts.
///
/// After a failure, the error is thrown when the next wait would end past `deadline`, when the
/// task is cancelled, or when `retryIf` (given the error, the attempt that failed, counting from
/// 1, and the wait to come; it may log) says no; otherwise `sleep` waits and `body` runs again.
public func withBackoff<T, E: Error>(
    _ backoff: Backoff,
    until deadline: ContinuousClock.Instant? = nil,
    sleep: (Duration) async -> Void = { try? await Task.sleep(for: $0) },
    retryIf shouldRetry: (_ error: E, _ attempt: Int, _ delay: Duration) async -> Bool = { _, _, _ in true },
    _ body: (_ attempt: Int) async throws(E) -> T
) async throws(E) -> T {
    var backoff = backoff
    var attempt = 1
    while true {
        do {
            return try await body(attempt)
        } catch {
            let delay = backoff.next()
            if let deadline, ContinuousClock.now + delay > deadline { throw error }
            if Task.isCancelled { throw error }
            guard await shouldRetry(error, attempt, delay) else { throw error }
            await sleep(delay)
            attempt += 1
        }
    }
}
