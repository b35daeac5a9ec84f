/// The consumer's backpressure rule, decided once per turn of its poll loop, without I/O.
///
/// Below the budget it takes messages (as many as fit). At the budget it first only holds off:
/// the application is usually about to finish something, and librdkafka's bounded prefetch
/// holds what is fetched. Only when the budget stays full for `pauseAfter` does it pause the
/// partitions, since pausing discards librdkafka's prefetch and costs a fetch round trip to undo.
/// Paused partitions resume at `resumeLevel` or below (hysteresis, so it does not flap).
struct FlowControl: Sendable {
    enum Action: Equatable, Sendable {
        /// Poll, taking at most `room` messages.
        case poll(room: Int)
        /// Take nothing until the application finishes some work, or until `until`, when the
        /// budget will have been full for `pauseAfter`.
        case hold(until: ContinuousClock.Instant)
        /// Pause the held partitions, then poll for callbacks only.
        case pause
        /// Resume the held partitions, then poll.
        case resume(room: Int)
    }

    let maximum: Int
    let resumeLevel: Int
    let pauseAfter: Duration
    private(set) var isPaused = false
    private var fullSince: ContinuousClock.Instant?

    init(maximum: Int, resumeLevel: Int, pauseAfter: Duration) {
        self.maximum = max(1, maximum)
        self.resumeLevel = min(max(0, resumeLevel), self.maximum - 1)
        self.pauseAfter = pauseAfter
    }

    mutating func next(inFlight: Int, now: ContinuousClock.Instant) -> Action {
        if !isPaused && inFlight >= maximum {
            let since = fullSince ?? now
            fullSince = since
            guard now - since >= pauseAfter else { return .hold(until: since.advanced(by: pauseAfter)) }
            isPaused = true
            fullSince = nil
            return .pause
        }
        fullSince = nil
        let room = max(1, maximum - inFlight)
        if isPaused && inFlight <= resumeLevel {
            isPaused = false
            return .resume(room: room)
        }
        return .poll(room: isPaused ? 1 : room)
    }
}
