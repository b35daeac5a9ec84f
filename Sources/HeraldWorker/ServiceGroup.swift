import Synchronization

/// A long-running part of a worker: a lane, the scheduler, a sweeper, the metrics publisher.
protocol Service: Sendable {
    /// For logs: which part.
    var name: String { get }
    /// Runs until `stop` is set, then winds down gracefully (stops taking work, checkpoints,
    /// commits) and returns; returns at once when its task is cancelled (the shutdown bound
    /// passed).
    func run(stop: StopSignal) async
}

/// A service made of a closure (the small watchers of ``Worker``).
struct ClosureService: Service {
    let name: String
    let body: @Sendable (StopSignal) async -> Void

    func run(stop: StopSignal) async { await body(stop) }
}

/// Runs a worker's services together: each starts in the order given; after the stop request
/// they wind down by themselves, and the ones still running `cancelAfter` past the request are
/// cancelled and left behind, so one stuck part (a consumer closing against a broker that went
/// away) cannot hold the shutdown past its bound.
struct ServiceGroup: Sendable {
    let services: [any Service]
    let stop: StopSignal

    /// Runs every service until all returned, or until `cancelAfter` has passed since the stop
    /// request; returns the names of those still running then (empty after a graceful stop).
    func run(cancelAfter: Duration) async -> [String] {
        let running = Shared<[Int: String]>(Dictionary(uniqueKeysWithValues: services.enumerated().map { ($0.offset, $0.element.name) }))
        let services = self.services
        let stop = self.stop
        let all = Task {
            await withTaskGroup(of: Void.self) { group in
                for (index, service) in services.enumerated() {
                    group.addTask {
                        await service.run(stop: stop)
                        _ = running.withLock { $0.removeValue(forKey: index) }
                    }
                }
            }
        }
        // Until they all return, or `cancelAfter` past the stop request.
        let graceful = await firstReturns({ await all.value }, before: {
            await stop.wait()
            try? await Task.sleep(for: max(.zero, cancelAfter - stop.elapsed))
        })
        if graceful { return [] }
        all.cancel()
        // Cancelled services return at once; give them a moment, never more.
        _ = await returnsWithin(.milliseconds(500)) { await all.value }
        return running.withLock { $0.sorted { $0.key < $1.key }.map(\.value) }
    }
}

/// What a worker acquired while starting, released in reverse order: after a failed start and
/// at the end of the shutdown (the one copy of the cleanup sequence).
final class Teardown: Sendable {
    private let steps = Shared<[(name: String, step: @Sendable () async -> Void)]>([])

    /// Registers how to release what was just acquired.
    func add(_ name: String, _ step: @escaping @Sendable () async -> Void) {
        steps.withLock { $0.append((name, step)) }
    }

    /// Runs the steps, the last registered first, all within `bound`: a step still running when
    /// the bound passes is left behind (a pool closing against a database that went away), and
    /// each later step still gets 100 ms. Returns the names of the steps left behind.
    func run(within bound: Duration) async -> [String] {
        let deadline = ContinuousClock.now + bound
        let steps = self.steps.withLock { steps in
            defer { steps.removeAll() }
            return steps
        }
        var late: [String] = []
        for (name, step) in steps.reversed() {
            let left = max(.milliseconds(100), deadline - ContinuousClock.now)
            if !(await returnsWithin(left, step)) { late.append(name) }
        }
        return late
    }
}
