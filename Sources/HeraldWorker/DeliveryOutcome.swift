public import HeraldAPNs
public import HeraldCore
public import HeraldFCM

/// What one send came to, the same for both providers, so the shard runner has one set of rules
/// (docs/ARCHITECTURE.md) instead of one copy per provider.
public enum DeliveryOutcome: Sendable, Equatable {
    /// The provider took it; `providerID` is the apns-id or the FCM message name.
    case accepted(providerID: String)
    /// The token is dead. `timestamp`: APNs's time of the 410, so an answer older than the
    /// token's last registration invalidates nothing.
    case unregistered(reason: Receipt.Reason, providerReason: String, timestamp: Timestamp?)
    /// Try again later (429, 5xx, connection lost, GOAWAY, refused stream).
    case retryable(providerReason: String, retryAfterSeconds: Int?, quotaExceeded: Bool)
    /// Will never succeed as it is.
    case failed(reason: Receipt.Reason, providerReason: String)
    /// The app's credential (or topic) is at fault, not this device: halt the app on this
    /// provider, with `haltReason` on the `halted` receipt (`credentials`, or
    /// `unreadable-credentials` when the stored credentials open under no configured key).
    case credentialFault(providerReason: String, haltReason: Receipt.Reason = .credentials)

    /// Classifies an APNs answer.
    public init(_ outcome: APNsOutcome) {
        switch outcome {
        case .accepted(let id):
            self = .accepted(providerID: id)
        case .unregistered(let reason, let milliseconds):
            self = .unregistered(reason: outcome.receiptReason ?? .unregistered, providerReason: reason,
                                 timestamp: milliseconds.map { Timestamp(seconds: $0 / 1000) })
        case .retryable(let reason, let retryAfter):
            self = .retryable(providerReason: reason, retryAfterSeconds: retryAfter, quotaExceeded: false)
        case .permanent(_, let reason):
            self = .failed(reason: outcome.receiptReason ?? .badRequest, providerReason: reason)
        case .credentialFault(let reason):
            self = .credentialFault(providerReason: reason)
        }
    }

    /// Classifies an FCM answer.
    public init(_ outcome: FCMOutcome) {
        switch outcome {
        case .accepted(let name):
            self = .accepted(providerID: name)
        case .unregistered(let reason, let detail):
            self = .unregistered(reason: reason, providerReason: detail, timestamp: nil)
        case .retryable(let retryAfter, let quota, let detail):
            self = .retryable(providerReason: detail, retryAfterSeconds: retryAfter, quotaExceeded: quota)
        case .permanent(let reason, let detail):
            self = .failed(reason: reason, providerReason: detail)
        case .credentialFault(let detail):
            self = .credentialFault(providerReason: detail)
        }
    }

    /// Whether the answer says something about the token (counted by the invalidation guard).
    var isVerdictOnToken: Bool {
        switch self {
        case .accepted, .unregistered: true
        case .retryable, .failed, .credentialFault: false
        }
    }
}

extension DeliveryOutcome {
    /// The `result` label of `herald_send_attempts_total`: what one request came to, apart from
    /// what became of the subscription (a retryable answer is an attempt, not an outcome).
    var attemptResult: String {
        switch self {
        case .accepted: "accepted"
        case .unregistered: "unregistered"
        case .retryable: "retryable"
        case .failed: "failed"
        case .credentialFault: "credentials"
        }
    }
}
