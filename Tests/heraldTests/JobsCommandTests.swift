import Foundation
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

/// `herald jobs show|cancel|resume` against the test database (and broker, for resume).
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable) && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .timeLimit(.minutes(2)))
struct JobsCommandTests {
    let shards = TestEnvironment.uniqueName("cli.shards")
    let urgentShards = TestEnvironment.uniqueName("cli.shards.urgent")

    /// A migrated database of its own (through `herald migrate`), with an app `demo`.
    private func migrated() async throws -> (url: String, database: CommandDatabase, pool: PostgresPool) {
        let database = try await CommandDatabase.migrated("herald_cli_jobs")
        let pool = PostgresPool(PostgresPoolConfiguration(url: database.url, size: 2))
        try await pool.query("INSERT INTO apps (id, name) VALUES ('demo', 'Demo')")
        return (database.url, database, pool)
    }

    /// A planned job of three shards, shard 1 finished, the others pending.
    private func plannedJob(_ pool: PostgresPool, id: String, urgent: Bool = false) async throws {
        let jobs = JobRepository(pool: pool)
        _ = try await jobs.insert(id: id, appID: "demo", kind: "notification", body: #"{"id":"\#(id)"}"#, createdAt: .now, urgent: urgent)
        let ranges = [
            SubscriptionRange(from: Shard.minimumID, to: "40000000-0000-0000-0000-000000000000"),
            SubscriptionRange(from: "40000000-0000-0000-0000-000000000000", to: "80000000-0000-0000-0000-000000000000"),
            SubscriptionRange(from: "80000000-0000-0000-0000-000000000000", to: nil),
        ]
        try await jobs.plan(jobID: id, ranges: ranges, audienceEstimate: 900)
        guard case .claimed(let lease) = try await jobs.claim(jobID: id, shardNo: 1, shardCount: 3, range: ranges[1], holder: "worker-a") else {
            Issue.record("shard 1 not claimed")
            return
        }
        try await jobs.finish(lease, counts: ShardCounts(sent: 300, accepted: 290, unregistered: 10))
    }

    private func jobs(_ arguments: [String], url: String?, brokers: Bool = true) async throws -> Subprocess.Result {
        var environment = [
            "HERALD_DATABASE_URL": url ?? "",
            "HERALD_TOPIC_SHARDS": shards,
            "HERALD_TOPIC_SHARDS_URGENT": urgentShards,
            "HERALD_KAFKA_BROKERS": "",
        ]
        if brokers { environment["HERALD_KAFKA_BROKERS"] = try TestEnvironment.require(TestEnvironment.kafkaVariable) }
        return try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["jobs"] + arguments, environment: environment)
    }

    @Test func showPrintsTheJobAndItsShards() async throws {
        let (url, database, pool) = try await migrated()
        try await plannedJob(pool, id: "show-1")
        // The device events counted on the job's row (DeviceEventDedupe.record writes them).
        try await pool.query("UPDATE jobs SET received = 7, confirmed = 5, clicked = 2 WHERE id = 'show-1'", idempotent: false)

        let text = try await jobs(["show", "show-1"], url: url)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("job show-1  app=demo kind=notification state=planned urgent=false"))
        #expect(text.stdout.contains("shard 1/3 finished sent=300 accepted=290 unregistered=10"))
        #expect(text.stdout.split(separator: "\n").filter { $0.hasPrefix("shard ") }.count == 3)
        #expect(text.stdout.contains("device_events received=7 confirmed=5 clicked=2"), "\(text.stdout)")

        // --database-url works as well as the variable.
        let json = try await jobs(["show", "show-1", "--json", "--database-url", url], url: nil)
        #expect(json.status == 0, "\(json.stderr)")
        let document = try JSONValue.parse(json.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(document["id"] == .string("show-1"))
        #expect(document["audience_estimate"] == .int(900))
        #expect(document["device_events"] == .object(["received": .int(7), "confirmed": .int(5), "clicked": .int(2)]))
        #expect(document["shards"]?.arrayValue?.map { $0["state"] } == [.string("pending"), .string("finished"), .string("pending")])

        let missing = try await jobs(["show", "no-such-job"], url: url)
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("no-such-job"))
        await database.drop(closing: pool)
    }

    @Test func cancelStopsAJobOnce() async throws {
        let (url, database, pool) = try await migrated()
        try await plannedJob(pool, id: "cancel-1")
        let first = try await jobs(["cancel", "cancel-1"], url: url)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("cancelled job cancel-1"))
        let row = try await pool.query("SELECT state, cancelled_at IS NOT NULL FROM jobs WHERE id = 'cancel-1'").rows
        #expect(row == [["cancelled", "t"]])

        let again = try await jobs(["cancel", "cancel-1"], url: url)
        #expect(again.status == 0)
        #expect(again.stdout.contains("already cancelled"))
        #expect(try await jobs(["cancel", "no-such-job"], url: url).status == 66)
        await database.drop(closing: pool)
    }

    @Test func listShowsTheJobsUsersSentNewestFirstAndFilters() async throws {
        let (url, database, pool) = try await migrated()
        try await pool.query("INSERT INTO apps (id, name) VALUES ('other', 'Other')")
        try await plannedJob(pool, id: "list-1")
        try await plannedJob(pool, id: "list-2", urgent: true)
        _ = try await JobRepository(pool: pool).insert(id: "list-3", appID: "other", kind: "voip", body: #"{"id":"list-3"}"#, createdAt: .now)
        // A derived sub-job is not listed.
        try await pool.query("""
            INSERT INTO jobs (id, app_id, kind, body, created_at, parent_id) VALUES ('list-1:now:0', 'demo', 'notification', '{}', now(), 'list-1')
            """)
        try await pool.query("UPDATE jobs SET received_at = now() - interval '1 minute' WHERE id = 'list-1'")
        let all = try await jobs(["list", "--json"], url: url)
        #expect(all.status == 0, "\(all.stderr)")
        let lines = all.stdout.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
        #expect(lines.compactMap { $0["id"]?.stringValue } == ["list-2", "list-3", "list-1"] || lines.compactMap { $0["id"]?.stringValue } == ["list-3", "list-2", "list-1"],
                "\(all.stdout)")
        #expect(lines.first { $0["id"] == .string("list-1") }?["audience_estimate"] == .int(900))
        let demo = try await jobs(["list", "--app", "demo", "--state", "planned"], url: url)
        #expect(demo.status == 0 && demo.stdout.contains("list-1") && demo.stdout.contains("list-2") && !demo.stdout.contains("list-3"), "\(demo.stdout)")
        #expect(try await jobs(["list", "--state", "bogus"], url: url).status == 64)
        // --name=value is the same as --name value; a flag takes none.
        let equals = try await jobs(["list", "--app=demo", "--state=planned", "--json"], url: url)
        #expect(equals.status == 0 && equals.stdout.contains("list-2") && !equals.stdout.contains("list-3"), "\(equals.stdout) \(equals.stderr)")
        #expect(try await jobs(["list", "--json=yes"], url: url).status == 64)
        // --json on cancel.
        let cancelled = try await jobs(["cancel", "list-1", "--json"], url: url)
        #expect(cancelled.status == 0 && cancelled.stdout.contains(#""cancelled":true"#) && cancelled.stdout.contains(#""state":"cancelled""#), "\(cancelled.stdout)")
        await database.drop(closing: pool)
    }

    @Test func watchPrintsProgressUntilTheJobCompletes() async throws {
        let (url, database, pool) = try await migrated()
        try await plannedJob(pool, id: "watch-1")
        // Running, not finished: progress lines from the shards, then the timeout (exit 2).
        let running = try await jobs(["watch", "watch-1", "--timeout", "1"], url: url)
        #expect(running.status == 2, "\(running.stdout) \(running.stderr)")
        #expect(running.stdout.contains("watch-1  sent 300  accepted 290  unregistered 10  failed 0  dropped 0"), "\(running.stdout)")
        // Completed meanwhile: the summary and exit 0.
        try await pool.query("""
            UPDATE jobs SET state = 'completed', completed_at = received_at + interval '12 seconds', accepted = 880, unregistered = 20
            WHERE id = 'watch-1'
            """)
        let done = try await jobs(["watch", "watch-1"], url: url)
        #expect(done.status == 0, "\(done.stderr)")
        #expect(done.stdout.contains("completed watch-1: accepted 880  unregistered 20  failed 0  dropped 0  in 12.0 s"), "\(done.stdout)")
        #expect(try await jobs(["watch", "nope"], url: url).status == 66)
        await database.drop(closing: pool)
    }

    @Test func resumeReleasesTheHaltAndRequeuesUnfinishedShards() async throws {
        let (url, database, pool) = try await migrated()
        try await plannedJob(pool, id: "resume-1", urgent: true)
        try await pool.query("UPDATE jobs SET state = 'halted' WHERE id = 'resume-1'")
        try await pool.query("UPDATE apps SET apns_halted_reason = 'credentials', apns_halted_at = now() WHERE id = 'demo'")

        let result = try await jobs(["resume", "resume-1"], url: url)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("re-queued 2 shards on \(urgentShards)"))
        let state = try await pool.query("""
            SELECT j.state, a.apns_halted_reason IS NULL FROM jobs j JOIN apps a ON a.id = j.app_id WHERE j.id = 'resume-1'
            """).rows
        #expect(state == [["running", "t"]])

        // The urgent job's unfinished shards, keyed job_id/shard_no, as herald.shard.v1.
        let messages = try await CommandKafka.read(urgentShards, count: 2)
        #expect(Set(messages.compactMap(\.keyString)) == ["resume-1/0", "resume-1/2"])
        let decoded = try messages.map { try Shard.decode($0.value) }
        #expect(Set(decoded.map(\.shardNo)) == [0, 2])
        #expect(decoded.allSatisfy { $0.jobID == "resume-1" && $0.appID == "demo" && $0.shardCount == 3 })
        await database.drop(closing: pool)
    }

    @Test func resumeOfANonUrgentJobUsesTheCampaignShardsTopic() async throws {
        let (url, database, pool) = try await migrated()
        try await plannedJob(pool, id: "resume-2")
        let result = try await jobs(["resume", "resume-2"], url: url)
        #expect(result.status == 0, "\(result.stderr)")
        let messages = try await CommandKafka.read(shards, count: 2)
        #expect(Set(messages.compactMap(\.keyString)) == ["resume-2/0", "resume-2/2"])
        await database.drop(closing: pool)
    }

    @Test func resumeRefusalsChangeNothing() async throws {
        let (url, database, pool) = try await migrated()
        try await plannedJob(pool, id: "halted-1")
        try await pool.query("UPDATE jobs SET state = 'halted' WHERE id = 'halted-1'")

        // Without brokers the database is not touched: nobody could run the re-queued shards.
        let noBrokers = try await jobs(["resume", "halted-1"], url: url, brokers: false)
        #expect(noBrokers.status == 78)
        #expect(noBrokers.stderr.contains("HERALD_KAFKA_BROKERS"))
        #expect(try await pool.query("SELECT state FROM jobs WHERE id = 'halted-1'").rows == [["halted"]])

        try await pool.query("UPDATE jobs SET state = 'completed', completed_at = now() WHERE id = 'halted-1'")
        let completed = try await jobs(["resume", "halted-1"], url: url)
        #expect(completed.status == 65)
        #expect(completed.stderr.contains("completed"))
        #expect(try await jobs(["resume", "no-such-job"], url: url).status == 66)
        await database.drop(closing: pool)
    }

    @Test func usageAndConfiguration() async throws {
        #expect(try await jobs([], url: nil).status == 64)
        #expect(try await jobs(["show"], url: nil).status == 64)
        #expect(try await jobs(["frobnicate", "x"], url: nil).status == 64)
        #expect(try await jobs(["cancel", "x", "--bogus"], url: nil).status == 64)
        let noDatabase = try await jobs(["show", "x"], url: nil)
        #expect(noDatabase.status == 78)
        #expect(noDatabase.stderr.contains("HERALD_DATABASE_URL"))
        #expect(try await jobs(["show", "x", "--database-url", "postgresql://nobody@127.0.0.1:1/none"], url: nil).status == 69)
    }
}
