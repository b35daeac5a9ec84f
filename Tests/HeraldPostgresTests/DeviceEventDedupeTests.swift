import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Synchronization
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct DeviceEventDedupeTests {
    @Test func firstSightingOnlyAcrossAndWithinBatches() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let dedupe = DeviceEventDedupe(pool: pool)
        let sub = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        let batch = [DeviceEventKey(type: "received", jobID: "j1", subscriptionID: sub),
                     DeviceEventKey(type: "clicked", jobID: "j1", subscriptionID: sub, actionID: "open"),
                     DeviceEventKey(type: "clicked", jobID: "j1", subscriptionID: sub.uppercased(), actionID: "open"),
                     DeviceEventKey(type: "clicked", jobID: "j1", subscriptionID: sub, actionID: "later")]
        #expect(try await dedupe.firstSightings(batch) == [true, true, false, true])
        #expect(try await dedupe.firstSightings(batch + [DeviceEventKey(type: "confirmed", jobID: "j1", subscriptionID: sub)])
                == [false, false, false, false, true])
        #expect(try await dedupe.firstSightings([]) == [])
        await database.tearDown(pool)
    }

    /// Counts the forwards; each answers with the next of `answers` (then true).
    private final class Forwarder: Sendable {
        private let state: Mutex<(calls: Int, answers: [Bool])>
        init(_ answers: [Bool] = []) { state = Mutex((0, answers)) }
        var calls: Int { state.withLock { $0.calls } }
        func forward() -> Bool {
            state.withLock { state in
                state.calls += 1
                return state.answers.isEmpty ? true : state.answers.removeFirst()
            }
        }
    }

    private func counts(_ pool: PostgresPool, _ jobID: String) async throws -> [String?] {
        try await pool.query("SELECT received, confirmed, clicked FROM jobs WHERE id = $1", [jobID]).rows.first ?? []
    }

    @Test func recordAndForwardForwardsAndCountsFirstSightingsOnly() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        _ = try await JobRepository(pool: pool).insert(id: "job-events", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let dedupe = DeviceEventDedupe(pool: pool)
        let forwarder = Forwarder()
        let sub = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        let other = "1b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        let events = [DeviceEventKey(type: "received", jobID: "job-events", subscriptionID: sub),
                      DeviceEventKey(type: "received", jobID: "job-events", subscriptionID: other),
                      DeviceEventKey(type: "confirmed", jobID: "job-events", subscriptionID: sub),
                      DeviceEventKey(type: "clicked", jobID: "job-events", subscriptionID: sub, actionID: "open"),
                      DeviceEventKey(type: "clicked", jobID: "job-events", subscriptionID: sub, actionID: "later")]
        for event in events {
            #expect(try await dedupe.recordAndForward(event) { forwarder.forward() })
        }
        #expect(forwarder.calls == 5)
        #expect(try await counts(pool, "job-events") == ["2", "1", "2"])
        // Redelivered (and the same subscription written in upper case): dropped, not counted.
        for event in events + [DeviceEventKey(type: "received", jobID: "job-events", subscriptionID: sub.uppercased())] {
            #expect(try await dedupe.recordAndForward(event) { forwarder.forward() } == false)
        }
        #expect(forwarder.calls == 5, "a repeat is not forwarded")
        #expect(try await counts(pool, "job-events") == ["2", "1", "2"])
        // The batch dedupe sees the same rows.
        #expect(try await dedupe.firstSightings(events) == [false, false, false, false, false])
        // A job past its retention (no row) still gets its events forwarded.
        #expect(try await dedupe.recordAndForward(DeviceEventKey(type: "received", jobID: "job-gone", subscriptionID: sub)) { forwarder.forward() })
        await database.tearDown(pool)
    }

    @Test func aFailedForwardRollsBackSoTheNextCallForwardsAgain() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        _ = try await JobRepository(pool: pool).insert(id: "job-retry", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let dedupe = DeviceEventDedupe(pool: pool)
        let forwarder = Forwarder([false, false])
        let key = DeviceEventKey(type: "clicked", jobID: "job-retry", subscriptionID: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234", actionID: "open")
        for _ in 0..<2 {
            await #expect(throws: PostgresError.self) { try await dedupe.recordAndForward(key) { forwarder.forward() } }
            #expect(try await counts(pool, "job-retry") == ["0", "0", "0"], "the count is rolled back with the sighting")
        }
        #expect(try await dedupe.recordAndForward(key) { forwarder.forward() }, "the redelivered event is forwarded, not lost")
        #expect(forwarder.calls == 3)
        #expect(try await counts(pool, "job-retry") == ["0", "0", "1"])
        #expect(try await dedupe.recordAndForward(key) { forwarder.forward() } == false)
        #expect(forwarder.calls == 3)
        await database.tearDown(pool)
    }

    /// The forward waits for the broker (seconds, or minutes in an outage). Meanwhile the job's
    /// row must stay writable: completing the job, halting it and the other device events of
    /// the same job must not queue behind that one publish, each holding a pooled connection.
    @Test func theJobRowIsNotLockedWhileAForwardIsPending() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 4)
        _ = try await JobRepository(pool: pool).insert(id: "job-busy", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let dedupe = DeviceEventDedupe(pool: pool)
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let slow = Task {
            try await dedupe.recordAndForward(DeviceEventKey(type: "received", jobID: "job-busy",
                                                             subscriptionID: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234")) {
                enteredContinuation.yield()
                for await _ in release { break }
                return true
            }
        }
        for await _ in entered { break }
        // Fails with lock_timeout (55P03) if the pending forward holds the row.
        let write: Result<Void, PostgresError> = await {
            do throws(PostgresError) {
                try await pool.withTransaction { connection throws(PostgresError) in
                    try await connection.query("SELECT set_config('lock_timeout', '2s', true)")
                    try await connection.query("UPDATE jobs SET received = received WHERE id = 'job-busy'")
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }()
        releaseContinuation.yield()
        releaseContinuation.finish()
        #expect(try await slow.value)
        #expect(throws: Never.self) { try write.get() }
        #expect(try await counts(pool, "job-busy") == ["1", "0", "0"])
        await database.tearDown(pool)
    }
}
