import Synchronization

/// Where the pipeline reads the time of day (STYLE: time is injected), so scheduling, local
/// time, quiet hours and throttles are testable without sleeping.
public protocol WallClock: Sendable {
    /// The current instant.
    var now: Timestamp { get }
}

/// The system's clock.
public struct SystemWallClock: WallClock {
    /// The system clock.
    public init() {}
    /// `Timestamp.now`.
    public var now: Timestamp { .now }
}

/// A clock that moves only when told to, for tests and simulations.
public final class ManualWallClock: WallClock {
    private let current: Mutex<Timestamp>

    /// A clock reading `start`.
    public init(_ start: Timestamp) {
        current = Mutex(start)
    }

    /// The instant it reads.
    public var now: Timestamp { current.withLock { $0 } }

    /// Sets the instant it reads.
    public func set(_ instant: Timestamp) {
        current.withLock { $0 = instant }
    }

    /// Moves it forward by `seconds`.
    public func advance(seconds: Int64) {
        current.withLock { $0 = $0.adding(seconds: seconds) }
    }
}
