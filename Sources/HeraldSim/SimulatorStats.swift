public import HeraldCore
import Synchronization

/// What a simulator saw, exactly, so tests can assert outcomes (`GET /_sim/stats`).
public final class SimulatorStats: Sendable {
    /// A snapshot of the counts.
    public struct Snapshot: Sendable, Equatable {
        public var requests = 0
        public var accepted = 0
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
        /// Accepted deliveries per wall-clock second (Unix seconds), to measure send rates.
        public var acceptedPerSecond: [Int64: Int] = [:]

        /// Tokens that got more than one accepted delivery, counted once per extra delivery.
        public var duplicateDeliveries: Int { deliveries.values.reduce(0) { $0 + max(0, $1 - 1) } }

        /// The snapshot as JSON; per-token counts only when asked (they can be millions).
        public func json(includeTokens: Bool) -> JSONValue {
            var members: [String: JSONValue] = [
                "requests": .int(requests), "accepted": .int(accepted), "violations": .int(violations),
                "reasons": .object(reasons.mapValues { .int($0) }), "distinct_tokens": .int(deliveries.count),
                "duplicate_deliveries": .int(duplicateDeliveries), "tokens_issued": .int(tokensIssued), "connections": .int(connections),
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
    func recordTokenIssued() { state.withLock { $0.tokensIssued += 1 } }

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
    /// TLS handshakes fail (the connection is reset on accept) until this monotonic instant.
    public var refuseConnectionsForSeconds = 0.0

    /// No faults.
    public init() {}
}
