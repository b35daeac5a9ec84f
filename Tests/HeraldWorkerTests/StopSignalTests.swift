import Foundation
@testable import HeraldWorker
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1))) struct StopSignalTests {
    @Test func waitersResumeWhenTheStopIsRequestedAndItsTimeIsKept() async throws {
        let stop = StopSignal()
        #expect(stop.requestedAt == nil && stop.elapsed == .zero)
        let waiter = Task { await stop.wait() }
        try await Task.sleep(for: .milliseconds(50))
        let before = ContinuousClock.now
        stop.set()
        await waiter.value
        let first = try #require(stop.requestedAt)
        #expect(first >= before && stop.isSet)
        stop.set()
        #expect(stop.requestedAt == first, "the first request is the start of the bound")
        await stop.wait()  // at once once set
    }

    /// (The bounds below are loose: every suite runs at once on two cores, and a task may wait
    /// many seconds for a thread of the cooperative pool. What they tell apart is an hour.)
    @Test func aLongSleepEndsAtTheStop() async {
        let stop = StopSignal()
        let started = ContinuousClock.now
        async let slept: Void = stop.sleep(for: .seconds(3600))
        try? await Task.sleep(for: .milliseconds(100))
        stop.set()
        await slept
        #expect(ContinuousClock.now - started < .seconds(45))
    }

    @Test func aCancelledWaiterReturns() async {
        let stop = StopSignal()
        let waiter = Task { await stop.wait() }
        waiter.cancel()
        await waiter.value
        #expect(!stop.isSet)
    }

    @Test func aCancelledSleeperReturnsAtOnce() async {
        let stop = StopSignal()
        let started = ContinuousClock.now
        let sleeper = Task { await stop.sleep(for: .seconds(3600)) }
        try? await Task.sleep(for: .milliseconds(50))
        sleeper.cancel()
        await sleeper.value
        #expect(ContinuousClock.now - started < .seconds(45) && !stop.isSet)
    }


    /// A body that ignores cancellation (here: a thread blocked for a minute) cannot hold the
    /// caller past the bound.
    @Test func returnsWithinLeavesABodyThatIgnoresCancellation() async {
        let started = ContinuousClock.now
        let returned = await returnsWithin(.milliseconds(200)) {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    Thread.sleep(forTimeInterval: 3600)
                    continuation.resume()
                }
            }
        }
        #expect(!returned)
        #expect(ContinuousClock.now - started < .seconds(45))
        #expect(await returnsWithin(.seconds(30)) {})
    }
}
