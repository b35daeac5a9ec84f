import Foundation
@testable import HeraldHTTP2
import Synchronization
import Testing

/// A loop clock a test moves by hand.
final class ManualLoopClock: LoopClock {
    private let nanoseconds = Atomic<UInt64>(1_000_000_000)

    var now: UInt64 { nanoseconds.load(ordering: .acquiring) }

    func advance(by delta: UInt64) { nanoseconds.add(delta, ordering: .releasing) }
}

@Suite(.timeLimit(.minutes(1))) struct EventLoopTests {
    /// Timers read the loop's clock: an hour-long timer fires as soon as the clock says an hour
    /// passed (and the loop looks), and not before.
    @Test func timersFireByTheLoopClock() async throws {
        let clock = ManualLoopClock()
        let loop = try EventLoop(clock: clock)
        defer { loop.shutdown() }
        let fired = Atomic<Int>(0)
        let hour: UInt64 = 3_600_000_000_000
        loop.execute {
            loop.scheduleTimer(afterNanoseconds: hour) { fired.add(1, ordering: .relaxed) }
            loop.scheduleTimer(afterNanoseconds: 2 * hour) { fired.add(10, ordering: .relaxed) }
        }
        try await Task.sleep(for: .milliseconds(200))
        let before = fired.load(ordering: .relaxed)
        #expect(before == 0, "nothing fires while the clock stands still")
        clock.advance(by: hour)
        loop.execute {}  // wakes the loop to read the clock
        let started = ContinuousClock.now
        while fired.load(ordering: .relaxed) == 0, ContinuousClock.now - started < .seconds(10) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let after = fired.load(ordering: .relaxed)
        #expect(after == 1, "the first timer fired, the second not yet")
    }

    @Test func executeRunsTasksInOrderOnTheLoopThread() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let order: [Int] = await withCheckedContinuation { continuation in
            let seen = Mutex<[Int]>([])
            for index in 0..<100 {
                loop.execute {
                    precondition(loop.inEventLoop)
                    let done = seen.withLock { seen in
                        seen.append(index)
                        return seen.count == 100 ? seen : nil
                    }
                    if let done { continuation.resume(returning: done) }
                }
            }
        }
        #expect(order == Array(0..<100))
        #expect(!loop.inEventLoop)
    }

    /// The loop's thread carries the loop's name (truncated to the kernel's 15 bytes), so
    /// profiles and `top -H` tell it from the cooperative pool.
    @Test func theLoopThreadIsNamedAfterTheLoop() async throws {
        let loop = try EventLoop(name: "herald-loop-name-test")
        defer { loop.shutdown() }
        let name: String = await withCheckedContinuation { continuation in
            loop.execute {
                let text = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                continuation.resume(returning: text.trimmingCharacters(in: .newlines))
            }
        }
        #expect(name == "herald-loop-nam")
    }

    /// `runAtEndOfIteration` defers to the end of the loop's current iteration on a loop thread
    /// (after the task that called it), and declines anywhere else.
    @Test func runAtEndOfIterationDefersOnALoopThreadAndDeclinesElsewhere() async throws {
        #expect(!EventLoop.runAtEndOfIteration {})
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let order: [String] = await withCheckedContinuation { continuation in
            let seen = Mutex<[String]>([])
            loop.execute {
                let deferred = EventLoop.runAtEndOfIteration {
                    continuation.resume(returning: seen.withLock { $0 + ["deferred"] })
                }
                seen.withLock { $0.append(deferred ? "task accepted the deferral" : "task was refused") }
            }
        }
        #expect(order == ["task accepted the deferral", "deferred"])
    }
}
