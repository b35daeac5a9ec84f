import HeraldCore
import HeraldPostgres

/// Why a subscription waits in `shard_retries`, as its `last_reason` column stores it. The
/// encoding is the one every earlier worker wrote and read — `verdict:<reason>`,
/// `halted:<provider>:<detail>`, anything else a retry's provider reason — so old and new workers
/// can share a shard's rows during a rolling upgrade, in both directions
/// (`JobAdministration` also finds halted rows by the `halted` prefix).
enum ParkReason: Equatable, Sendable {
    /// A retryable answer, tried again at the row's `next_attempt_at`.
    case retry(providerReason: String)
    /// "Unregistered", waiting for the invalidation guard; after a restart the send is repeated
    /// (the answer will be the same). Nil when the stored reason is not one this build knows.
    case awaitingVerdict(Receipt.Reason?)
    /// Behind a halted provider. Nil when the stored provider is not one this build knows (the
    /// member's own provider is used).
    case halted(Receipt.Provider?, detail: String)

    /// Reads a stored `last_reason`.
    init(stored text: String?) {
        let text = text ?? ""
        if text.hasPrefix("halted:") {
            let rest = text.dropFirst("halted:".count)
            if let colon = rest.firstIndex(of: ":") {
                self = .halted(Receipt.Provider(rawValue: String(rest[..<colon])), detail: String(rest[rest.index(after: colon)...]))
            } else {
                self = .halted(Receipt.Provider(rawValue: String(rest)), detail: "")
            }
        } else if text.hasPrefix("verdict:") {
            self = .awaitingVerdict(Receipt.Reason(rawValue: String(text.dropFirst("verdict:".count))))
        } else {
            self = .retry(providerReason: text)
        }
    }

    /// The `last_reason` to store: a retry's reason up to 200 characters, a halt's detail up to 150.
    var stored: String {
        switch self {
        case .retry(let reason):
            String(reason.prefix(200))
        case .awaitingVerdict(let reason):
            "verdict:" + (reason ?? .unregistered).rawValue
        case .halted(let provider, let detail):
            "halted:\(provider?.rawValue ?? ""):\(detail.prefix(150))"
        }
    }
}

/// A subscription waiting for something: a retry, the verdict of the invalidation guard, or a
/// halted provider. Parked in `shard_retries` at checkpoints so the cursor can move on.
struct ParkedSubscription: Equatable {
    enum Kind: Equatable {
        /// A retryable answer; try again at `due`.
        case retry
        /// "Unregistered", held until the invalidation guard decides.
        case awaitingVerdict(reason: Receipt.Reason, providerReason: String, timestamp: Timestamp?)
        /// Its provider is halted for the app.
        case halted(Receipt.Provider)
    }

    var member: AudienceMember
    var kind: Kind
    /// Attempts made.
    var attempts: Int
    var due: Timestamp
    var lastReason: String
    var firstAttemptAt: Timestamp
    /// Written to `shard_retries` (so resolving it must delete the row).
    var persisted = false
    /// Changed since the last checkpoint.
    var dirty = true
    /// Being sent right now.
    var inFlight = false

    /// Why it waits, as stored.
    var reason: ParkReason {
        switch kind {
        case .retry: .retry(providerReason: lastReason)
        case .awaitingVerdict(let reason, _, _): .awaitingVerdict(reason)
        case .halted(let provider): .halted(provider, detail: lastReason)
        }
    }

    /// The `shard_retries` row at `now`: a verdict is due at once after a restart, a halt a year
    /// on (the halt's lifting, not the clock, brings it back).
    func row(now: Timestamp) -> ParkedRetry {
        let next: Timestamp
        switch kind {
        case .retry: next = due
        case .awaitingVerdict: next = now
        case .halted: next = Timestamp(seconds: now.seconds + 365 * 24 * 3600)
        }
        return ParkedRetry(subscriptionID: member.id, attempts: max(1, attempts), nextAttemptAt: next, lastReason: reason.stored)
    }
}
