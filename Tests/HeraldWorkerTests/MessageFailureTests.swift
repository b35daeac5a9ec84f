import HeraldCore
@testable import HeraldKafka
@testable import HeraldPostgres
@testable import HeraldWorker
import Testing

@Suite struct MessageFailureTests {
    private func kind(_ error: any Error) -> MessageFailure.Kind { MessageFailure.classify(error).kind }

    @Test func theMessagesOwnRefusalsArePermanent() {
        #expect(kind(ValidationError(at: .root, "bad")) == .permanent(.invalid))
        // jsonb refusing \u0000 (the wedge this replaces), a constraint, a typo'd column, a row too big.
        for state in ["22P05", "22021", "23505", "42703", "54000"] {
            #expect(kind(PostgresError(.queryFailed, "refused", sqlState: state)) == .permanent(.databaseRefused), "\(state)")
        }
        #expect(kind(PostgresError(.queryFailed, "canceling statement due to statement timeout", sqlState: "57014")) == .permanent(.statementTimeout))
        #expect(kind(KafkaError(.messageTooLarge, "too big")) == .permanent(.tooLarge))
        #expect(kind(PublishError(underlying: KafkaError(.messageTooLarge, "too big"), unacknowledged: 1)) == .permanent(.tooLarge))
        #expect(kind(JobPlanner.UnknownApp(appID: "nope")) == .permanent(.unknownApp))
        #expect(kind(UnknownJob(jobID: "gone")) == .permanent(.unknownJob))
    }

    @Test func conflictsAndLostConnectionsAreTemporary() {
        for state in ["40001", "40P01", "53300", "57P01", "08006", "XX000"] {
            #expect(kind(PostgresError(.queryFailed, "try again", sqlState: state)) == .temporary, "\(state)")
        }
        #expect(kind(PostgresError(.connectionLost, "server closed the connection")) == .temporary)
        struct Surprise: Error {}
        #expect(kind(Surprise()) == .temporary, "anything unclassified is temporary, never permanent")
    }

    @Test func dependenciesDownForEveryoneAreOutages() {
        #expect(kind(PostgresError(.connectFailed, "connection refused")) == .outage)
        #expect(kind(PostgresError(.poolTimeout, "no free connection")) == .outage)
        #expect(kind(PublishError(underlying: KafkaError(.delivery, "all brokers down", isRetryable: true), unacknowledged: 3)) == .outage)
        #expect(kind(CancellationError()) == .outage)
    }
}

@Suite struct MessageRetryBudgetTests {
    private let start = ContinuousClock.now
    private let temporary = MessageFailure(.temporary, "deadlock")
    private let outage = MessageFailure(.outage, "connection refused")

    @Test func aPermanentFailureIsDeadLetteredAtOnce() {
        var budget = MessageRetryBudget(budget: .seconds(600))
        #expect(budget.failed(MessageFailure(.permanent(.statementTimeout), "57014"), at: start) == .deadLetter(.statementTimeout))
        #expect(budget.attempts == 1)
    }

    @Test func temporaryFailuresBackOffAndGiveUpWhenTheBudgetIsSpent() {
        var budget = MessageRetryBudget(budget: .seconds(600))
        var now = start
        var delays: [Duration] = []
        while case .retry(let delay) = budget.failed(temporary, at: now) {
            delays.append(delay)
            now += delay
        }
        #expect(delays.prefix(6) == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30)])
        #expect(delays.dropFirst(5).dropLast().allSatisfy { $0 == .seconds(30) })
        #expect(now - start == .seconds(600), "the verdict comes when the budget is spent, not a backoff later")
        #expect(budget.attempts == delays.count + 1)
    }

    @Test func anOutageSpendsNoBudgetAndRestartsTheClock() {
        var budget = MessageRetryBudget(budget: .seconds(60))
        var now = start
        // 50 s of temporary failures, then an hour of outage, then temporary again.
        #expect(budget.failed(temporary, at: now) == .retry(after: .seconds(1)))
        now += .seconds(50)
        #expect(budget.failed(temporary, at: now) != .deadLetter(.retriesExhausted))
        for _ in 0..<120 {
            now += .seconds(30)
            guard case .retry = budget.failed(outage, at: now) else {
                Issue.record("an outage dead-lettered healthy work")
                return
            }
        }
        now += .seconds(30)
        #expect(budget.failed(temporary, at: now) != .deadLetter(.retriesExhausted), "the whole budget again after the outage")
        now += .seconds(59)
        #expect(budget.failed(temporary, at: now) != .deadLetter(.retriesExhausted))
        now += .seconds(1)
        #expect(budget.failed(temporary, at: now) == .deadLetter(.retriesExhausted))
    }

    @Test func aZeroBudgetGivesUpOnTheFirstTemporaryFailure() {
        var budget = MessageRetryBudget(budget: .zero)
        #expect(budget.failed(temporary, at: start) == .deadLetter(.retriesExhausted))
    }
}
