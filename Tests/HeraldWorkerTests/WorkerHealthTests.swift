import Glibc
import HeraldHTTP2
import HeraldTestSupport
@testable import HeraldWorker
import Synchronization
import Testing

@Suite struct WorkerHealthTests {
    private let start = ContinuousClock.now

    @Test func aHeartbeatThatStopsMovingIsStalledAndAnIdleOneIsNot() {
        var monitor = HeartbeatMonitor()
        monitor.observe("consumer-jobs", count: 10, at: start)
        monitor.observe("producer", count: 5, at: start)
        // 40 s later the consumer still turns (idle: its poll returns empty), the producer does not.
        monitor.observe("consumer-jobs", count: 810, at: start + .seconds(40))
        monitor.observe("producer", count: 5, at: start + .seconds(40))
        #expect(monitor.stalled(at: start + .seconds(40), after: .seconds(30)) == ["producer"])
        #expect(monitor.stalled(at: start + .seconds(25), after: .seconds(30)).isEmpty, "not before the stall time")
        // Moving again: healthy again.
        monitor.observe("producer", count: 6, at: start + .seconds(41))
        #expect(monitor.stalled(at: start + .seconds(41), after: .seconds(30)).isEmpty)
    }

    @Test(.timeLimit(.minutes(1))) func aBlockedEventLoopStallsItsHeartbeat() async throws {
        let loop = try EventLoop(name: "herald-test-blocked")
        defer { loop.shutdown() }
        let release = Atomic<Bool>(false)
        var monitor = HeartbeatMonitor()
        monitor.observe("event-loop-0", count: loop.iterationCount, at: .now)
        try await Task.sleep(for: .milliseconds(1500))
        monitor.observe("event-loop-0", count: loop.iterationCount, at: .now)
        #expect(monitor.stalled(at: .now, after: .milliseconds(1200)).isEmpty, "an idle loop goes round at least once a second")
        // A task that blocks the loop's thread, as a stuck handler would.
        loop.execute {
            while !release.load(ordering: .acquiring) { usleep(10_000) }
        }
        try await Task.sleep(for: .milliseconds(200))
        let blockedAt = ContinuousClock.now
        monitor.observe("event-loop-0", count: loop.iterationCount, at: blockedAt)
        try await Task.sleep(for: .milliseconds(1500))
        monitor.observe("event-loop-0", count: loop.iterationCount, at: .now)
        #expect(monitor.stalled(at: .now, after: .milliseconds(1200)) == ["event-loop-0"])
        release.store(true, ordering: .releasing)
    }

    @Test func readinessNamesWhatIsMissingNeverAnErrorText() {
        #expect(Readiness.answer(stopping: false, lanesJoined: 4, lanes: 4, databaseAnswers: true) == (200, "ready\n"))
        #expect(Readiness.answer(stopping: false, lanesJoined: 3, lanes: 4, databaseAnswers: true) == (503, "kafka\n"))
        #expect(Readiness.answer(stopping: false, lanesJoined: 4, lanes: 4, databaseAnswers: false) == (503, "db\n"))
        #expect(Readiness.answer(stopping: true, lanesJoined: 4, lanes: 4, databaseAnswers: true) == (503, "stopping\n"))
    }

    @Test(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
    func theDatabaseProbeUsesAConnectionOfItsOwnAndForgetsAFailure() async throws {
        let database = try await WorkerTestDatabase.migrated()
        let probe = DatabaseProbe(url: database.url, freshFor: .milliseconds(100))
        #expect(await probe.answers())
        await probe.close()
        let unreachable = DatabaseProbe(url: "postgresql://postgres@127.0.0.1:1/herald")
        #expect(await unreachable.answers() == false)
        await database.drop()
    }
}
