public import HeraldCore
import Glibc
import Synchronization

/// What a simulator saw, exactly, so tests can assert outcomes (`GET /_sim/stats`).
public final class SimulatorStats: Sendable {
    /// A snapshot of the counts.
    public struct Snapshot: Sendable, Equatable {
        public var requests = 0
        public var accepted = 0
        /// FCM messages sent with `validate_only`: checked and answered, never delivered.
        public var validated = 0
        /// Answers by reason string (`BadDeviceToken`, `UNREGISTERED`, `TooManyRequests`, …).
        public var reasons: [String: Int] = [:]
        /// Requests that broke the protocol (a client bug, never a device's fault).
        public var violations = 0
        /// Accepted deliveries per device token.
        public var deliveries: [String: Int] = [:]
        /// OAuth tokens issued (FCM).
        public var tokensIssued = 0
        /// Connections accepted.
        public var connections = 0
        /// Connections the fault injection dropped with a TCP reset (`resetEvery`, handshake failures).
        public var resets = 0
        /// Accepted deliveries per wall-clock second (Unix seconds), to measure send rates.
        public var acceptedPerSecond: [Int64: Int] = [:]

        /// Tokens that got more than one accepted delivery, counted once per extra delivery.
        public var duplicateDeliveries: Int { deliveries.values.reduce(0) { $0 + max(0, $1 - 1) } }

        /// The snapshot as JSON; per-token counts only when asked (they can be millions).
        public func json(includeTokens: Bool) -> JSONValue {
            var members: [String: JSONValue] = [
                "requests": .int(requests), "accepted": .int(accepted), "validated": .int(validated), "violations": .int(violations),
                "reasons": .object(reasons.mapValues { .int($0) }), "distinct_tokens": .int(deliveries.count),
                "duplicate_deliveries": .int(duplicateDeliveries), "tokens_issued": .int(tokensIssued), "connections": .int(connections),
                "resets": .int(resets),
            ]
            members["accepted_per_second"] = .object(Dictionary(uniqueKeysWithValues: acceptedPerSecond.map { (String($0.key), JSONValue.int($0.value)) }))
            if includeTokens { members["deliveries"] = .object(deliveries.mapValues { .int($0) }) }
            return .object(members)
        }
    }

    private let state = Mutex(Snapshot())

    /// Creates empty counts.
    public init() {}

    /// The current counts.
    public var snapshot: Snapshot { state.withLock { $0 } }

    func recordRequest() { state.withLock { $0.requests += 1 } }
    func recordConnection() { state.withLock { $0.connections += 1 } }
    func recordReset() { state.withLock { $0.resets += 1 } }
    func recordTokenIssued() { state.withLock { $0.tokensIssued += 1 } }

    func recordValidated() { state.withLock { $0.validated += 1 } }

    func recordAccepted(token: String) {
        state.withLock { stats in
            stats.accepted += 1
            stats.deliveries[token, default: 0] += 1
            stats.acceptedPerSecond[Timestamp.now.seconds, default: 0] += 1
        }
    }

    func recordRejected(reason: String, violation: Bool) {
        state.withLock { stats in
            stats.reasons[reason, default: 0] += 1
            if violation { stats.violations += 1 }
        }
    }

    /// Forgets everything (between benchmark phases).
    public func reset() { state.withLock { $0 = Snapshot() } }
}

/// Misbehaviour a simulator injects, for tests and benchmarks.
public struct SimulatorFaults: Sendable {
    /// Share of device tokens that are unregistered (see ``UnregisteredShare``).
    public var unregistered = UnregisteredShare(0)
    /// Share of requests answered 429 (with `Retry-After`).
    public var tooManyRequestsRate = 0.0
    /// Share of requests answered 500/503.
    public var serverErrorRate = 0.0
    /// The `Retry-After` seconds sent with 429 and 503.
    public var retryAfterSeconds = 1
    /// GOAWAY after every N requests on a connection (0: never).
    public var goawayEvery = 0
    /// Abrupt TCP reset after every N requests on a connection (0: never).
    public var resetEvery = 0
    /// Added latency per answer, milliseconds.
    public var latencyMilliseconds = 0
    /// Share of requests never answered (stalled streams).
    public var stallRate = 0.0
    /// Periodic stalls: every `stallEverySeconds` (0: never) the simulator stops answering for
    /// `stallSeconds`; requests that arrive meanwhile are answered when the stall ends, none is lost.
    public var stallEverySeconds = 0.0
    public var stallSeconds = 0.0
    /// TLS handshakes fail (the connection is reset on accept) for this long after the start.
    public var refuseConnectionsForSeconds = 0.0

    /// No faults.
    public init() {}
}

/// The faults of a running simulator, changeable while it serves (`herald bench pipeline`
/// starts some of them mid-job). Every request reads the current set.
public final class SimulatorFaultSwitch: Sendable {
    private struct State {
        var faults: SimulatorFaults
        /// Monotonic nanoseconds: where the stall periods are counted from.
        var stallOrigin: UInt64
        /// Handshakes fail until this monotonic instant.
        var refuseUntil: UInt64
        /// Connections opened before this monotonic instant are reset at their next request.
        var dropOpenedBefore: UInt64 = 0
    }

    private let state: Mutex<State>

    /// Starts with `faults`; `refuseConnectionsForSeconds` counts from now.
    public init(_ faults: SimulatorFaults = SimulatorFaults()) {
        let now = Self.monotonicNow
        state = Mutex(State(faults: faults, stallOrigin: now, refuseUntil: now + Self.nanoseconds(faults.refuseConnectionsForSeconds)))
    }

    /// The faults in force.
    public var current: SimulatorFaults { state.withLock { $0.faults } }

    /// Replaces the faults (their `refuseConnectionsForSeconds` is ignored: see
    /// ``failHandshakes(forSeconds:)``); stall periods count from now.
    public func set(_ faults: SimulatorFaults) {
        let now = Self.monotonicNow
        state.withLock {
            $0.faults = faults
            $0.stallOrigin = now
        }
    }

    /// TLS handshake failures for `seconds` from now: every connection already open is reset at
    /// its next request (a pooled connection would otherwise never handshake again), and new
    /// connections are reset on accept until the time is up.
    public func failHandshakes(forSeconds seconds: Double) {
        let now = Self.monotonicNow
        state.withLock {
            $0.refuseUntil = now + Self.nanoseconds(seconds)
            $0.dropOpenedBefore = now
        }
    }

    /// Whether a connection accepted now must fail its handshake.
    func refusesConnections(now: UInt64 = SimulatorFaultSwitch.monotonicNow) -> Bool {
        state.withLock { now < $0.refuseUntil }
    }

    /// What one request sees: the faults, whether its connection (opened at `openedAt`) is to be
    /// dropped, and how long its answer waits (latency plus what is left of a stall).
    struct Reading {
        let faults: SimulatorFaults
        let drop: Bool
        let delayNanoseconds: UInt64
    }

    /// The request's ``Reading``, under one lock.
    func reading(openedAt: UInt64, now: UInt64 = SimulatorFaultSwitch.monotonicNow) -> Reading {
        state.withLock { state in
            Reading(faults: state.faults, drop: openedAt < state.dropOpenedBefore,
                    delayNanoseconds: UInt64(state.faults.latencyMilliseconds) * 1_000_000 + Self.stallRemaining(state, now: now))
        }
    }

    /// How long an answer given now waits for the current stall to end (0: no stall now).
    func stallRemainingNanoseconds(now: UInt64 = SimulatorFaultSwitch.monotonicNow) -> UInt64 {
        state.withLock { Self.stallRemaining($0, now: now) }
    }

    private static func stallRemaining(_ state: State, now: UInt64) -> UInt64 {
        let every = nanoseconds(state.faults.stallEverySeconds)
        let length = nanoseconds(state.faults.stallSeconds)
        guard every > 0, length > 0, now > state.stallOrigin else { return 0 }
        // The first stall starts one period after the origin, then one each period.
        let elapsed = now - state.stallOrigin
        guard elapsed >= every else { return 0 }
        let phase = elapsed % every
        return phase < length ? length - phase : 0
    }

    static var monotonicNow: UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    private static func nanoseconds(_ seconds: Double) -> UInt64 {
        seconds > 0 ? UInt64(min(seconds, 1e9) * 1e9) : 0
    }
}
