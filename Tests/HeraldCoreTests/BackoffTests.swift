@testable import HeraldCore
import Testing

@Suite struct BackoffTests {
    struct Failure: Error, Equatable { let attempt: Int }

    @Test func waitsDoubleUpToTheMaximumAndResetToTheFirst() {
        var backoff = Backoff(first: .milliseconds(100), maximum: .milliseconds(700))
        let waits = (0..<6).map { _ in backoff.next() }
        #expect(waits == [100, 200, 400, 700, 700, 700].map { Duration.milliseconds($0) })
        backoff.reset()
        #expect(backoff.next() == .milliseconds(100))
        #expect(Backoff(first: .seconds(5), maximum: .seconds(1)).maximum == .seconds(5), "never below the first wait")
    }

    /// Time is not spent: `sleep` records the waits instead.
    @Test func withBackoffRetriesUntilTheBodySucceeds() async throws {
        var slept: [Duration] = []
        let result = try await withBackoff(Backoff(first: .seconds(1), maximum: .seconds(3)), sleep: { slept.append($0) }) { (attempt: Int) throws(Failure) -> Int in
            if attempt < 4 { throw Failure(attempt: attempt) }
            return attempt
        }
        #expect(result == 4)
        #expect(slept == [.seconds(1), .seconds(2), .seconds(3)])
    }

    @Test func withBackoffGivesUpWhenTold() async {
        var asked: [(Int, Duration)] = []
        await #expect(throws: Failure(attempt: 2)) {
            try await withBackoff(Backoff(first: .seconds(1), maximum: .seconds(8)), sleep: { _ in }, retryIf: { (_: Failure, attempt, delay) in
                asked.append((attempt, delay))
                return attempt < 2
            }) { (attempt: Int) throws(Failure) in throw Failure(attempt: attempt) }
        }
        #expect(asked.map(\.0) == [1, 2] && asked.map(\.1) == [.seconds(1), .seconds(2)])
    }

    @Test func withBackoffStopsBeforeAWaitThatWouldEndPastTheDeadline() async {
        var attempts = 0
        var slept: [Duration] = []
        await #expect(throws: Failure(attempt: 3)) {
            try await withBackoff(Backoff(first: .seconds(2), maximum: .seconds(10)), until: .now + .seconds(5), sleep: { slept.append($0) }) { (attempt: Int) throws(Failure) in
                attempts = attempt
                throw Failure(attempt: attempt)
            }
        }
        // Time does not pass here (the sleeps are recorded, not slept): the 2 s and 4 s waits
        // each fit in the 5 s left, the 8 s one after the third failure does not.
        #expect(attempts == 3 && slept == [.seconds(2), .seconds(4)])
    }
}
