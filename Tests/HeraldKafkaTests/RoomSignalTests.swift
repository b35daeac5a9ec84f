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

    @Test func aSignalWakesAWaiterLongBeforeItsLimit() async {
        let signal = RoomSignal()
        let waited = Mutex<Duration?>(nil)
        let waiter = Thread {
            let started = ContinuousClock.now
            signal.wait(atMost: .seconds(60))
            waited.withLock { $0 = ContinuousClock.now - started }
        }
        // A signaller thread, not a task: the test must not depend on how busy the cooperative
        // pool is. It signals until the waiter wakes (a signal sent before it waits is dropped).
        let signaller = Thread {
            let deadline = ContinuousClock.now + .seconds(90)
            while waited.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
                signal.signal()
                Thread.sleep(forTimeInterval: 0.001)
            }
        }
        waiter.start()
        signaller.start()
        while waited.withLock({ $0 }) == nil {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Woken by a signal, not by its 60-second limit (however loaded the machine is).
        let duration = waited.withLock { $0 } ?? .seconds(60)
        #expect(duration < .seconds(30))
    }
}
