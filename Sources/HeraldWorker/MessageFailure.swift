import HeraldCore
import HeraldKafka
import HeraldPostgres

/// An error that says by itself that its message can never succeed, and why.
protocol PermanentMessageError: Error, CustomStringConvertible {
    /// The dead letter's cause.
    var cause: DeadLetter.Cause { get }
}

/// How a lane treats one failure of one message (docs/ARCHITECTURE.md, "A message's failures").
struct MessageFailure: Sendable, Equatable, CustomStringConvertible {
    /// What the failure says about the message.
    enum Kind: Sendable, Equatable {
        /// The message fails the same way every time: it is dead-lettered at once.
        case permanent(DeadLetter.Cause)
        /// It may pass when tried again; trying spends the message's retry budget.
        case temporary
        /// A dependency is down for every message (PostgreSQL refuses connections, the broker
        /// does not answer): the lane waits and no budget is spent, so an outage never
        /// dead-letters healthy work.
        case outage
    }

    var kind: Kind
    /// The error, for the log and the dead letter's `reason`.
    var detail: String

    /// A failure of `kind`.
    init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    var description: String { detail }

    /// Classifies an error thrown while handling a message.
    ///
    /// Permanent: the validator's refusals; SQLSTATE classes 22 (data), 23 (constraints),
    /// 42 (syntax or access), 54 (limits) and 57014 (statement timeout); a message too large
    /// to produce; errors that name their own cause. Outage: PostgreSQL connections that cannot
    /// be made or had, a stopping pool, and broker failures that outlasted the publisher's own
    /// retries. Everything else is temporary, the unclassified included.
    static func classify(_ error: any Error) -> MessageFailure {
        switch error {
        case let error as ValidationError:
            return MessageFailure(.permanent(.invalid), error.description)
        case let error as any PermanentMessageError:
            return MessageFailure(.permanent(error.cause), error.description)
        case let error as PostgresError:
            return classify(error)
        case let error as PublishError:
            return classify(error.underlying)
        case let error as KafkaError:
            return classify(error)
        case is CancellationError:
            return MessageFailure(.outage, "cancelled")
        default:
            return MessageFailure(.temporary, "\(error)")
        }
    }

    static func classify(_ error: PostgresError) -> MessageFailure {
        switch error.code {
        case .connectFailed, .poolTimeout, .poolClosed, .cancelled:
            return MessageFailure(.outage, error.description)
        default:
            break
        }
        guard let state = error.sqlState else { return MessageFailure(.temporary, error.description) }
        if state == "57014" { return MessageFailure(.permanent(.statementTimeout), error.description) }
        if ["22", "23", "42", "54"].contains(where: { state.hasPrefix($0) }) {
            return MessageFailure(.permanent(.databaseRefused), error.description)
        }
        return MessageFailure(.temporary, error.description)
    }

    static func classify(_ error: KafkaError) -> MessageFailure {
        if error.code == .messageTooLarge { return MessageFailure(.permanent(.tooLarge), error.description) }
        // What reaches a handler has outlasted the publisher's own retries (two minutes):
        // the broker is not taking anything, whichever message asks.
        if error.isRetryable || error.code == .delivery || error.code == .timeout {
            return MessageFailure(.outage, error.description)
        }
        return MessageFailure(.temporary, error.description)
    }
}

/// One message's retries: decides after each failure whether to try again, after how long, or
/// to give up and dead-letter it. Pure: time comes in as an argument.
///
/// The budget is time spent failing, not a count: a temporary failure that only this message
/// suffers is retried with doubling delays (1 s to 30 s) until `budget` has passed since its
/// first temporary failure, then dead-lettered as `retries-exhausted`. An outage failure spends
/// nothing and restarts that clock, so a message caught in an outage gets its whole budget
/// once the dependency is back.
struct MessageRetryBudget: Sendable {
    /// What to do after a failure.
    enum Decision: Sendable, Equatable {
        /// Try again after this long.
        case retry(after: Duration)
        /// Give up: dead-letter the message with this cause.
        case deadLetter(DeadLetter.Cause)
    }

    /// How long a message may fail temporarily before it is dead-lettered.
    let budget: Duration
    /// The first delay, doubled after every failure up to `maximumDelay`.
    let firstDelay: Duration
    let maximumDelay: Duration
    /// Failures so far, of every kind.
    private(set) var attempts = 0
    private var failingSince: ContinuousClock.Instant?
    private var backoff: Backoff

    /// A budget of `budget` (`HERALD_MESSAGE_RETRY_SECONDS`).
    init(budget: Duration, firstDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30)) {
        self.budget = budget
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        backoff = Backoff(first: firstDelay, maximum: maximumDelay)
    }

    /// Records a failure at `now` and decides.
    mutating func failed(_ failure: MessageFailure, at now: ContinuousClock.Instant) -> Decision {
        attempts += 1
        switch failure.kind {
        case .permanent(let cause):
            return .deadLetter(cause)
        case .outage:
            failingSince = nil
            return .retry(after: nextDelay())
        case .temporary:
            let since = failingSince ?? now
            failingSince = since
            let spent = now - since
            if spent >= budget { return .deadLetter(.retriesExhausted) }
            // The last wait ends at the budget, so the verdict comes when it is due.
            return .retry(after: min(nextDelay(), budget - spent))
        }
    }

    private mutating func nextDelay() -> Duration {
        backoff.next()
    }
}
