import HeraldCore
import HeraldPostgres

/// What ``ShardRunState`` is told and what it answers with.
extension ShardRunState {
    /// What a run is told about its job and source, fixed for the run.
    struct Facts {
        /// The job it sends (a sub-job's `reported` job).
        var job: Job
        /// Settle every subscription with this `dropped` reason instead of sending.
        var dropping: Receipt.Reason?
        /// A live activity's run: iOS members are sent to a token of their own, which an
        /// unregistered answer invalidates instead of the subscription.
        var sendsToOwnTokens = false
        var retry = RetryPolicy()
        /// Hand the wait over when only retries due further than this are left (nil: never).
        var handOverAfterSeconds: Double?
    }

    /// A send for the driver to make.
    struct Send: Equatable {
        var member: AudienceMember
        var token: String
        var attempts: Int
        var firstAttemptAt: Timestamp
        var isRetry: Bool
    }

    /// Whether a subscription is sent.
    enum Admission: Equatable {
        case send(Send)
        /// Settled or parked without a send (dropped, cancelled, expired, halted…).
        case settled
    }

    /// A provider this run halts for the app: the driver marks it in the worker's shared halts
    /// and, when this worker did not know yet, logs it and calls ``haltToRecord(_:reason:)``.
    struct Halt: Equatable {
        var provider: Receipt.Provider
        var reason: Receipt.Reason
        var detail: String
    }

    /// What an answer asks of the driver besides the state change.
    struct AnswerEffects: Equatable {
        /// For the provider rate ceiling: an accepted send, or a quota answer.
        enum Rate: Equatable { case succeeded, quotaExceeded }
        var rate: Rate?
        var halt: Halt?
    }

    /// What a checkpoint saves, in order: halts, live-activity token invalidations, receipts,
    /// then the cursor, counts, parked rows, resolved rows and invalidations in one transaction.
    struct Checkpoint {
        var halts: [(provider: Receipt.Provider, reason: String)]
        var tokenInvalidations: [String]
        var receipts: [Receipt]
        var cursor: String?
        var counts: ShardCounts
        var park: [ParkedRetry]
        var resolved: [String]
        var invalidations: [TokenInvalidation]
        /// The metric counts since the last checkpoint, flushed with it.
        var tally: [ShardRunTally.Key: Int]
    }
}

/// The notification counts of a run (`herald_notifications_total`), kept per run and added to
/// the worker's metrics at each checkpoint instead of under a lock per send.
struct ShardRunTally: Equatable {
    struct Key: Hashable {
        var provider: String
        var outcome: String
        var reason: Receipt.Reason?
    }

    /// The counts by key. A run has a handful of keys and counts one per answer: a short list
    /// searched in order costs less than hashing two strings and a reason each time.
    private var entries: [(key: Key, count: Int)] = []

    var counts: [Key: Int] { Dictionary(entries.map { ($0.key, $0.count) }, uniquingKeysWith: +) }

    mutating func count(_ provider: Receipt.Provider, _ outcome: String, _ reason: Receipt.Reason? = nil) {
        let key = Key(provider: provider.rawValue, outcome: outcome, reason: reason)
        if let index = entries.firstIndex(where: { $0.key == key }) {
            entries[index].count += 1
        } else {
            entries.append((key, 1))
        }
    }

    static func == (lhs: Self, rhs: Self) -> Bool { lhs.counts == rhs.counts }
}
