import Foundation
@testable import HeraldKafka
import Synchronization
import Testing

/// The producer's wait for room in librdkafka's queue, without librdkafka.
@Suite struct RoomSignalTests {
    @Test func aWaitWithoutASignalEndsAtItsLimit() {
        let signal = RoomSignal()
        let started = ContinuousClock.now
        signal.wait(atMost: .milliseconds(50))
        #expect(ContinuousClock.now - started >= .milliseconds(45))
    }

    @Test func aSignalNobodyWaitsForIsDropped() {
        let signal = RoomSignal()
        signal.signal()
        signal.signal()
        let started = ContinuousClock.now
        signal.wait(atMost: .milliseconds(50))
        #expect(ContinuousClock.now - started >= .milliseconds(45))
    }

    @Test func aSignalWakesAWaiterLongBeforeItsLimit() async throws {
        let signal = RoomSignal()
        let woken = Atomic<Bool>(false)
        let started = ContinuousClock.now
        let waiter = Thread {
            signal.wait(atMost: .seconds(30))
            woken.store(true, ordering: .releasing)
        }
        waiter.start()
        // Signal until the waiter wakes: a signal sent before it starts waiting is dropped.
        while !woken.load(ordering: .acquiring) && ContinuousClock.now - started < .seconds(10) {
            signal.signal()
            try await Task.sleep(for: .milliseconds(5))
        }
        let wasWoken = woken.load(ordering: .acquiring)
        #expect(wasWoken)
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}
