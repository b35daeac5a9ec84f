import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldTestSupport
@testable import HeraldWorker
import Synchronization
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .timeLimit(.minutes(3)))
struct SchedulerTests {
    let log = WorkerLog(workerID: "test", minimum: .error)

    @Test func twoWorkersPollingTheSameTableReleaseTenThousandDueRowsExactlyOnce() async throws {
        let database = try await WorkerTestDatabase.migrated()
        let setup = database.pool()
        _ = try await JobRepository(pool: setup).insert(id: "parent", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        // 10,000 due rows, one per second over the last ~3 hours (the key is job, reason, second).
        try await setup.query("""
            INSERT INTO scheduled_jobs (job_id, app_id, due_at, lane, body, reason)
            SELECT 'parent', 'app', date_trunc('second', now()) - n * interval '1 second',
                   CASE WHEN n % 10 = 0 THEN 'urgent' ELSE 'campaign' END, jsonb_build_object('n', n), 'local-time'
            FROM generate_series(1, 10000) AS n
            """)
        await setup.close()

        let topics = try WorkerConfiguration.Topics(environment: [
            "HERALD_TOPIC_JOBS": TestEnvironment.uniqueName("sched.jobs"), "HERALD_TOPIC_JOBS_URGENT": TestEnvironment.uniqueName("sched.urgent"),
        ])
        let brokers = try TestEnvironment.require(TestEnvironment.kafkaVariable)
        let configuration = KafkaConfiguration(bootstrapServers: brokers)
        // Two workers: each its own pool, producer and scheduler, racing over the same table.
        let pools = [database.pool(), database.pool()]
        let producers = [try KafkaProducer(configuration: configuration), try KafkaProducer(configuration: configuration)]
        // Each worker's sink holds its batch (rows locked) until the other has claimed one too, up
        // to 30 s, so both take part however late one of them starts on a loaded machine.
        let claimedOne = Mutex<[Bool]>([false, false])
        let schedulers = (0..<2).map { index in
            let kafka = Scheduler.kafkaSink(producer: producers[index], topics: topics)
            return Scheduler(repository: ScheduleRepository(pool: pools[index]), clock: SystemWallClock(), workerID: "w\(index)", log: log,
                             interval: .milliseconds(10), batch: 200) { releases in
                claimedOne.withLock { $0[index] = true }
                let deadline = ContinuousClock.now + .seconds(30)
                while !claimedOne.withLock({ $0.allSatisfy { $0 } }) && ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(10))
                }
                return await kafka(releases)
            }
        }
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for scheduler in schedulers {
                group.addTask { try await scheduler.releaseDue() }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        FileHandle.standardError.write(Data("scheduler: 10,000 due rows released by two schedulers as \(counts)\n".utf8))
        #expect(counts.reduce(0, +) == 10_000)
        #expect(counts.allSatisfy { $0 > 0 }, "both workers took part: \(counts)")
        let left = try await pools[0].query("SELECT count(*) FROM scheduled_jobs")
        #expect(left.rows == [["0"]])

        // Read everything back: each row exactly once, on its lane's topic.
        var seen: [Int: Int] = [:]
        var misplaced = 0
        for (topic, urgent) in [(topics.jobs, false), (topics.jobsUrgent, true)] {
            let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("sched.reader"))
            try consumer.subscribe(topics: [topic])
            let expected = urgent ? 1_000 : 9_000
            var read = 0
            var quietSince = Date()
            // Until every expected message came and 2 s passed without another (a duplicate would show).
            while Date().timeIntervalSince(quietSince) < 2 || read < expected {
                if Date().timeIntervalSince(quietSince) > 60 { break }
                guard let message = try await consumer.poll(timeoutMilliseconds: 200) else { continue }
                consumer.markProcessed(message)
                quietSince = Date()
                read += 1
                guard case .number(let number)? = try JSONValue.parse(message.value)["n"], let n = Int(number.text) else { Issue.record("no n"); continue }
                seen[n, default: 0] += 1
                if (n % 10 == 0) != urgent { misplaced += 1 }
                #expect(message.keyString == "parent")
            }
            await consumer.close()
        }
        #expect(seen.count == 10_000, "every row released")
        #expect(seen.values.allSatisfy { $0 == 1 }, "none twice: \(seen.filter { $0.value > 1 }.count) duplicated")
        #expect(misplaced == 0, "urgent rows on the urgent topic, the others on the jobs topic")
        for producer in producers { _ = await producer.flush(timeoutMilliseconds: 5_000) }
        for pool in pools { await pool.close() }
        await database.drop()
    }

    @Test func aRowIsReleasedWhenTheInjectedClockReachesItsDueSecondAndNotBefore() async throws {
        let database = try await WorkerTestDatabase.migrated()
        let pool = database.pool()
        let repository = ScheduleRepository(pool: pool)
        _ = try await JobRepository(pool: pool).insert(id: "p", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let due = Timestamp.now.adding(seconds: 7 * 24 * 3600)
        try await repository.schedule(jobID: "p", appID: "app", dueAt: due, lane: "campaign", body: #"{"x":1}"#, reason: "send-after")
        let clock = ManualWallClock(due.adding(seconds: -1))
        let released = Recorded<ScheduledRelease>()
        let scheduler = Scheduler(repository: repository, clock: clock, workerID: "w", log: log) { releases in
            released.append(releases)
            return releases.map(\.id)
        }
        #expect(try await scheduler.releaseDue() == 0)
        clock.set(Timestamp(seconds: due.seconds))
        #expect(try await scheduler.releaseDue() == 1)
        #expect(released.all.map(\.body) == [#"{"x": 1}"#])
        // A sink that did not get an acknowledgement keeps the row for the next round.
        try await repository.schedule(jobID: "p", appID: "app", dueAt: due.adding(seconds: 1), lane: "campaign", body: "{}", reason: "send-after")
        clock.advance(seconds: 5)
        let failing = Scheduler(repository: repository, clock: clock, workerID: "w", log: log) { _ in [] }
        #expect(try await failing.releaseDue() == 0)
        #expect(try await scheduler.releaseDue() == 1)
        await pool.close()
        await database.drop()
    }

    @Test func theLoopReleasesWhatFallsDueWritesItsHeartbeatAndStopsOnTheSignal() async throws {
        let database = try await WorkerTestDatabase.migrated()
        let pool = database.pool()
        let repository = ScheduleRepository(pool: pool)
        _ = try await JobRepository(pool: pool).insert(id: "p", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let due = Timestamp(seconds: Timestamp.now.seconds + 3600)
        try await repository.schedule(jobID: "p", appID: "app", dueAt: due, lane: "campaign", body: "{}", reason: "send-after")
        // Another worker seen 10 s ago shares the provider ceilings; one seen 2 minutes ago does not.
        try await pool.query("INSERT INTO worker_heartbeats VALUES ('other', now() - interval '10 seconds'), ('gone', now() - interval '2 minutes')")
        let clock = ManualWallClock(due.adding(seconds: -10))
        let released = Recorded<ScheduledRelease>()
        let scheduler = Scheduler(repository: repository, clock: clock, workerID: "me", log: log, interval: .milliseconds(20)) { releases in
            released.append(releases)
            return releases.map(\.id)
        }
        let stop = StopSignal()
        let loop = Task { await scheduler.run(stop: stop) }
        // The first heartbeat's round trip may be slow on a loaded machine; a wrong count (1 or 3)
        // never turns into 2 and fails at the deadline.
        let counted = ContinuousClock.now + .seconds(20)
        while scheduler.liveWorkers != 2 && ContinuousClock.now < counted { try await Task.sleep(for: .milliseconds(20)) }
        #expect(scheduler.liveWorkers == 2)
        #expect(released.all.isEmpty)
        clock.set(due)
        let releasedBy = ContinuousClock.now + .seconds(20)
        while released.all.isEmpty && ContinuousClock.now < releasedBy { try await Task.sleep(for: .milliseconds(20)) }
        #expect(released.all.count == 1)
        stop.set()
        await loop.value
        #expect(try await pool.query("SELECT count(*) FROM worker_heartbeats WHERE worker_id = 'me'").rows == [["1"]])
        await pool.close()
        await database.drop()
    }
}

/// Where each lane's releases go and under which key.
struct SchedulerLaneTests {
    @Test func lanesGoToTheirTopicsAndShardsAreKeyedByJobAndShard() throws {
        let topics = try WorkerConfiguration.Topics(environment: [:])
        let release = { (lane: String, shard: Int?) in
            ScheduledRelease(id: 1, jobID: "job-9", appID: "app", dueAt: .now, lane: lane, body: "{}", reason: "retry", shardNo: shard)
        }
        #expect(Scheduler.topic(of: release("campaign", nil), topics) == topics.jobs)
        #expect(Scheduler.topic(of: release("urgent", nil), topics) == topics.jobsUrgent)
        #expect(Scheduler.topic(of: release("shards", 3), topics) == topics.shards)
        #expect(Scheduler.topic(of: release("shards-urgent", 3), topics) == topics.shardsUrgent)
        #expect(Scheduler.key(of: release("campaign", nil)) == "job-9")
        #expect(Scheduler.key(of: release("shards", 3)) == "job-9/3", "as the planner keys shard messages")
        #expect(topics.shards != topics.jobs && topics.shardsUrgent != topics.jobsUrgent)
    }
}
