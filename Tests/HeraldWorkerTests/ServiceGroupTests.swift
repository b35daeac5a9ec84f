import Foundation
@testable import HeraldWorker
import Testing

@Suite(.timeLimit(.minutes(1))) struct ServiceGroupTests {
    /// Services that wind down at the stop: the group returns with none left.
    @Test func aGracefulStopLeavesNothingRunning() async {
        let stop = StopSignal()
        let ended = Shared<[String]>([])
        let services: [any Service] = ["a", "b", "c"].map { name in
            ClosureService(name: name) { stop in
                await stop.wait()
                ended.withLock { $0.append(name) }
            }
        }
        async let left = ServiceGroup(services: services, stop: stop).run(cancelAfter: .seconds(20))
        try? await Task.sleep(for: .milliseconds(50))
        stop.set()
        #expect(await left == [])
        #expect(Set(ended.withLock { $0 }) == ["a", "b", "c"])
    }

    /// One service ignores the stop but honours cancellation, another ignores both (a socket
    /// call against a broker that went away): the group returns soon after the bound, naming
    /// only the one still running.
    @Test func servicesStillRunningAtTheBoundAreCancelledAndTheStuckOnesLeft() async {
        let stop = StopSignal()
        let services: [any Service] = [
            ClosureService(name: "graceful") { stop in await stop.wait() },
            ClosureService(name: "deaf") { _ in try? await Task.sleep(for: .seconds(600)) },
            ClosureService(name: "stuck") { _ in
                await withCheckedContinuation { continuation in
                    Thread.detachNewThread {
                        Thread.sleep(forTimeInterval: 3600)
                        continuation.resume()
                    }
                }
            },
        ]
        async let left = ServiceGroup(services: services, stop: stop).run(cancelAfter: .milliseconds(300))
        try? await Task.sleep(for: .milliseconds(50))
        stop.set()
        let names = await left
        #expect(names == ["stuck"])
        // Loose: on a loaded machine a task may wait seconds for a pool thread; the stuck one would take an hour.
        #expect(stop.elapsed < .seconds(45), "the group returned \(stop.elapsed) after the stop")
    }

    @Test func aServiceEndingByItselfBeforeTheStopDoesNotEndTheGroup() async {
        let stop = StopSignal()
        let services: [any Service] = [
            ClosureService(name: "once") { _ in },
            ClosureService(name: "waits") { stop in await stop.wait() },
        ]
        let group = Task { await ServiceGroup(services: services, stop: stop).run(cancelAfter: .seconds(5)) }
        try? await Task.sleep(for: .milliseconds(200))
        stop.set()
        #expect(await group.value == [])
    }

    @Test func teardownRunsNewestFirstAndLeavesAStuckStepAtItsBound() async {
        let teardown = Teardown()
        let order = Shared<[String]>([])
        teardown.add("pool") { order.withLock { $0.append("pool") } }
        teardown.add("stuck") {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    Thread.sleep(forTimeInterval: 3600)
                    continuation.resume()
                }
            }
        }
        teardown.add("loops") { order.withLock { $0.append("loops") } }
        let started = ContinuousClock.now
        let late = await teardown.run(within: .milliseconds(300))
        #expect(late == ["stuck"])
        #expect(order.withLock { $0 } == ["loops", "pool"], "after the stuck step, the rest still runs")
        #expect(ContinuousClock.now - started < .seconds(45))
        #expect(await teardown.run(within: .seconds(1)) == [], "the steps ran once")
    }
}
