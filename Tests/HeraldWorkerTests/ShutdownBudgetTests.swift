@testable import HeraldWorker
import Testing

@Suite struct ShutdownBudgetTests {
    @Test func theStepsShareTheBoundInOrder() {
        let budget = ShutdownBudget(total: .seconds(30))
        #expect(budget.sendsInFlight == .seconds(12))
        #expect(budget.workInHand == .seconds(18))
        #expect(budget.cancelServices == .seconds(24))
        #expect(budget.flushUntil == .milliseconds(28_500))
        #expect(budget.sendsInFlight < budget.workInHand && budget.workInHand < budget.cancelServices
                && budget.cancelServices < budget.flushUntil && budget.flushUntil < budget.total)
    }

    @Test func whatIsLeftNeverGoesBelowZero() {
        let budget = ShutdownBudget(total: .seconds(10))
        #expect(budget.flushTimeout(elapsed: .seconds(2)) == .milliseconds(7_500))
        #expect(budget.flushTimeout(elapsed: .seconds(60)) == .zero)
        #expect(budget.remaining(elapsed: .seconds(4)) == .seconds(6))
        #expect(budget.remaining(elapsed: .seconds(11)) == .zero)
    }

    @Test func theConfiguredBoundSetsTheSendsInFlightShare() throws {
        var environment = ["HERALD_DATABASE_URL": "postgres://localhost/x", "HERALD_KAFKA_BROKERS": "localhost:9092"]
        environment["HERALD_DRAIN_SECONDS"] = "20"
        let configuration = try WorkerConfiguration(environment: environment)
        #expect(configuration.shutdownBound == .seconds(20))
        #expect(configuration.shard.drainDeadline == .seconds(8))
        environment["HERALD_DRAIN_SECONDS"] = "2"
        #expect(throws: (any Error).self) { try WorkerConfiguration(environment: environment) }
        environment["HERALD_DRAIN_SECONDS"] = nil
        #expect(try WorkerConfiguration(environment: environment).shutdownBound == .seconds(30))
    }
}
