@testable import HeraldWorker
import Testing

@Suite struct WorkerExitStatusTests {
    @Test func aFatalErrorExitsNonZeroWhateverWasFlushed() {
        #expect(Worker.exitStatus(flushed: true, fatal: nil) == 0)
        #expect(Worker.exitStatus(flushed: false, fatal: nil) == 1)
        #expect(Worker.exitStatus(flushed: true, fatal: "lane jobs: KafkaError.consume: fenced") == 70)
        #expect(Worker.exitStatus(flushed: false, fatal: "producer: KafkaError.fatal") == 70)
    }

    @Test func aStartErrorsKindDecidesItsExitStatusAndItKnowsWhereItWasRaised() {
        let configuration = WorkerStartError(.configuration, "HERALD_CREDENTIALS_KEY: is required")
        #expect(configuration.exitStatus == 78 && configuration.description == "HERALD_CREDENTIALS_KEY: is required")
        #expect(configuration.file.hasSuffix("WorkerTests.swift") && configuration.line > 0)
        #expect(WorkerStartError(.unavailable, "PostgreSQL").exitStatus == 69)
        #expect(WorkerStartError(.software, "event loops").exitStatus == 70)
    }

}
