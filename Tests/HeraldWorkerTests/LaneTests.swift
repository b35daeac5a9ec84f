import Foundation
@testable import HeraldKafka
@testable import HeraldWorker
import Testing

@Suite(.timeLimit(.minutes(1))) struct LaneTests {
    @Test func idleWaitsUntilNothingIsBeingHandled() async throws {
        let busy = BusyCount()
        busy.adjust(2)
        let idle = Task { await busy.idle() }
        busy.adjust(-1)
        try await Task.sleep(for: .milliseconds(50))
        #expect(busy.value == 1)
        busy.adjust(-1)
        await idle.value
        #expect(busy.value == 0)
    }

    @Test func theFirstFatalErrorIsKept() {
        let fatal = FirstFatalError()
        #expect(fatal.first == nil)
        fatal.record("lane shards: first")
        fatal.record("producer: second")
        #expect(fatal.first == "lane shards: first")
    }

    @Test func theOldestMessageInHandIsWhatTheGaugeReads() {
        let inHand = InHandMessages()
        #expect(inHand.oldestSeconds() == 0)
        let first = KafkaMessage(topic: "t", partition: 0, offset: 1, key: nil, value: [])
        let second = KafkaMessage(topic: "t", partition: 0, offset: 2, key: nil, value: [])
        inHand.arrived(first)
        inHand.arrived(second)
        let later = ContinuousClock.now + .seconds(5)
        #expect(inHand.oldestSeconds(now: later) >= 5)
        inHand.finished(first)
        inHand.finished(second)
        #expect(inHand.oldestSeconds(now: later) == 0)
    }
}
