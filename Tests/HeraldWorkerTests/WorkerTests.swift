@testable import HeraldWorker
import Testing

@Suite struct WorkerExitStatusTests {
    @Test func aFatalErrorExitsNonZeroWhateverWasFlushed() {
        #expect(Worker.exitStatus(flushed: true, fatal: nil) == 0)
        #expect(Worker.exitStatus(flushed: false, fatal: nil) == 1)
        #expect(Worker.exitStatus(flushed: true, fatal: "lane jobs: KafkaError.consume: fenced") == 70)
        #expect(Worker.exitStatus(flushed: false, fatal: "producer: KafkaError.fatal") == 70)
    }

    @Test func theFirstFatalErrorIsKept() {
        let fatal = FirstFatalError()
        #expect(fatal.first == nil)
        fatal.record("lane shards: first")
        fatal.record("producer: second")
        #expect(fatal.first == "lane shards: first")
    }
}
