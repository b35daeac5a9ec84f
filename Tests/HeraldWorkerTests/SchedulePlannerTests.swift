import Foundation
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
@testable import HeraldWorker
import Synchronization
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct SchedulePlannerTests {
    let log = WorkerLog(workerID: "test", minimum: .error)

    static let zones = [
        "UTC", "Europe/London", "Europe/Paris", "Europe/Moscow", "Asia/Dubai", "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu",
        "Asia/Dhaka", "Asia/Bangkok", "Asia/Shanghai", "Asia/Tokyo", "Australia/Adelaide", "Australia/Sydney", "Pacific/Auckland",
        "Pacific/Kiritimati", "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Denver", "America/Chicago",
        "America/New_York", "America/St_Johns", "America/Sao_Paulo",
    ]

    /// A planner, a scheduler on the same injected clock, and what they published and released.
    final class Harness: Sendable {
        let clock: ManualWallClock
        let planner: SchedulePlanner
        let scheduler: Scheduler
        let receipts = Recorded<Receipt>()
        /// Each release with the clock's reading when it was released.
        let releases = Recorded<(at: Timestamp, job: Job)>()
        let pool: PostgresPool

        init(pool: PostgresPool, now: Timestamp, log: WorkerLog) {
            self.pool = pool
            let clock = ManualWallClock(now)
            self.clock = clock
            let receipts = self.receipts
            let releases = self.releases
            planner = SchedulePlanner(schedule: ScheduleRepository(pool: pool), jobs: JobRepository(pool: pool), clock: clock, log: log, pageSize: 7) { published in
                receipts.append(published)
            }
            scheduler = Scheduler(repository: ScheduleRepository(pool: pool), clock: clock, workerID: "w", log: log) { due in
                let at = clock.now
                releases.append(due.compactMap { release in
                    (try? Job(json: try JSONValue.parse(release.body))).map { (at, $0) }
                })
                return due.map(\.id)
            }
        }

        /// Stores `document` as a received job and plans it.
        func plan(_ document: String) async throws -> Job {
            let job = try Job(json: try JSONValue.parse(document))
            _ = try await JobRepository(pool: pool).insert(id: job.id, appID: job.appID, kind: job.kind.rawValue, body: job.document.serialized(),
                                                           createdAt: job.createdAt, expiresAt: job.expiresAt)
            try await planner.plan(job, state: .received)
            return job
        }

        /// Walks the clock to each stored due second: one second before it nothing is released,
        /// at it everything due is.
        func walk() async throws {
            while true {
                let rows = try await pool.query("SELECT min(due_at) FROM scheduled_jobs")
                guard let text = rows.rows.first?.first ?? nil, let due = SQLValue.timestamp(text) else { return }
                if due > clock.now {
                    clock.set(due.adding(seconds: -1))
                    #expect(try await scheduler.releaseDue() == 0, "nothing released a second early")
                    clock.set(due)
                }
                #expect(try await scheduler.releaseDue() > 0)
            }
        }
    }

    static func insert(_ pool: PostgresPool, app: String = "app", zone: String?, quiet: (String, String)? = nil, histogram: [Int]? = nil) async throws -> String {
        let id = UUID().uuidString.lowercased()
        try await pool.query("""
            INSERT INTO subscriptions (id, app_id, platform, token, time_zone, quiet_start, quiet_end, activity_histogram)
            VALUES ($1::uuid, $2, 'android', $1, $3, $4::time, $5::time, $6::integer[])
            """, [id, app, zone, quiet?.0, quiet?.1, histogram.map { "{" + $0.map(String.init).joined(separator: ",") + "}" }])
        return id
    }

    static func wallClock(_ instant: Timestamp, _ zone: String) -> (Int, Int, Int) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone) ?? .current
        let parts = calendar.dateComponents([.hour, .minute, .second], from: instant.date)
        return (parts.hour ?? -1, parts.minute ?? -1, parts.second ?? -1)
    }

    static func ids(_ job: Job) -> [String] {
        if case .subscriptionIDs(let ids)? = job.audience { return ids }
        return []
    }

    @Test func localNineOClockOverTwentyFourZonesReleasesEachGroupAtItsLocalNine() async throws {
        let database = try await WorkerTestDatabase.migrated()
        let pool = database.pool()
        // Subscriptions without a zone use the app's default.
        try await pool.query("UPDATE apps SET default_time_zone = 'Asia/Kathmandu' WHERE id = 'app'")
        var zoneOf: [String: String] = [:]
        for zone in Self.zones {
            for _ in 0..<3 { zoneOf[try await Self.insert(pool, zone: zone)] = zone }
        }
        for _ in 0..<2 { zoneOf[try await Self.insert(pool, zone: nil)] = "Asia/Kathmandu" }
        // 02:00Z on 2026-03-08, the day the United States move their clocks forward.
        let now = try #require(Timestamp(rfc3339: "2026-03-08T02:00:00Z"))
        let harness = Harness(pool: pool, now: now, log: log)
        let job = try await harness.plan(#"""
            {"schema":"herald.job.v1","id":"morning","app_id":"app","kind":"notification","created_at":"2026-03-08T01:59:00Z",
             "audience":{"all":true},"content":{"title":"Good morning"},"delivery":{"local_time":"09:00"}}
            """#)
        let planned = try #require(harness.receipts.all.first { $0.stage == .planned })
        #expect(planned.jobID == "morning" && planned.audienceEstimate == 74)
        try await harness.walk()

        let releases = harness.releases.all
        var released: [String: Int] = [:]
        for (at, sub) in releases {
            #expect(sub.parentID == job.id && sub.id.hasPrefix("morning:tz:"))
            #expect(sub.delivery.localTimeMinutes == nil, "released sub-jobs go at once")
            #expect(at >= now && at.seconds - now.seconds < 24 * 3600)
            for id in Self.ids(sub) {
                released[id, default: 0] += 1
                let zone = zoneOf[id] ?? "?"
                let (hour, minute, second) = Self.wallClock(at, zone)
                #expect(hour == 9 && minute == 0 && second <= 1, "\(zone) released at \(at): \(hour):\(minute):\(second) local")
            }
        }
        #expect(released.count == zoneOf.count && released.values.allSatisfy { $0 == 1 }, "every subscription in exactly one release")
        // New York: 09:00 EDT (after the change at 02:00 local) is 13:00Z, not 14:00Z.
        let newYork = try #require(zoneOf.first { $0.value == "America/New_York" }?.key)
        #expect(releases.first { Self.ids($0.job).contains(newYork) }?.at == Timestamp(rfc3339: "2026-03-08T13:00:00Z"))
        let kathmandu = try #require(zoneOf.first { $0.value == "Asia/Kathmandu" }?.key)
        #expect(releases.first { Self.ids($0.job).contains(kathmandu) }?.at == Timestamp(rfc3339: "2026-03-08T03:15:00Z"))
        // Planned again (a redelivered job message): nothing new is stored or released.
        try await harness.planner.plan(job, state: .received)
        #expect(try await pool.query("SELECT count(*) FROM scheduled_jobs").rows == [["0"]])
        await pool.close()
        await database.drop()
    }

    @Test func quietHourDevicesAreDeferredAtOnceAndHeldUntilTheirWindowEndsBestHourDevicesGoAtTheirHour() async throws {
        let database = try await WorkerTestDatabase.migrated(apps: ["app", "best"])
        let pool = database.pool()
        let paris = try await Self.insert(pool, zone: "Europe/Paris")  // 23:30: default window until 08:00
        let newYork = try await Self.insert(pool, zone: "America/New_York")  // 17:30: not quiet
        let tokyo = try await Self.insert(pool, zone: "Asia/Tokyo", quiet: ("06:00", "09:00"))  // 07:30, own window until 09:00
        let now = try #require(Timestamp(rfc3339: "2026-01-15T22:30:00Z"))
        let harness = Harness(pool: pool, now: now, log: log)
        _ = try await harness.plan(#"""
            {"schema":"herald.job.v1","id":"quiet","app_id":"app","kind":"notification","created_at":"2026-01-15T22:29:00Z",
             "audience":{"all":true},"content":{"title":"News"},"delivery":{"respect_quiet_hours":true}}
            """#)
        let deferred = harness.receipts.all.filter { $0.stage == .deferred }
        let parisEnd = try #require(Timestamp(rfc3339: "2026-01-16T07:00:00Z"))
        let tokyoEnd = try #require(Timestamp(rfc3339: "2026-01-16T00:00:00Z"))
        #expect(Set(deferred.map(\.subscriptionID)) == [paris, tokyo])
        #expect(deferred.allSatisfy { $0.jobID == "quiet" && $0.reason == .quietHours && $0.id.hasSuffix(":deferred") })
        #expect(deferred.first { $0.subscriptionID == paris }?.until == parisEnd)
        #expect(deferred.first { $0.subscriptionID == tokyo }?.until == tokyoEnd)

        // Best hour on another app: peaks at 18:00 Paris (17:00Z); no history goes now.
        var histogram = Array(repeating: 0, count: 24)
        histogram[18] = 12
        let active = try await Self.insert(pool, app: "best", zone: "Europe/Paris", histogram: histogram)
        let unknown = try await Self.insert(pool, app: "best", zone: "Europe/Paris")
        harness.clock.set(try #require(Timestamp(rfc3339: "2026-01-15T09:00:00Z")))
        _ = try await harness.plan(#"""
            {"schema":"herald.job.v1","id":"best","app_id":"best","kind":"notification","created_at":"2026-01-15T08:59:00Z",
             "audience":{"all":true},"content":{"title":"Deal"},"delivery":{"best_hour":true}}
            """#)
        harness.clock.set(now.adding(seconds: -14 * 3600))
        try await harness.walk()

        let releases = harness.releases.all
        func releasedAt(_ id: String) -> Timestamp? { releases.first { Self.ids($0.job).contains(id) }?.at }
        #expect(releasedAt(unknown) == Timestamp(rfc3339: "2026-01-15T09:00:00Z"), "no history: now")
        #expect(releasedAt(active) == Timestamp(rfc3339: "2026-01-15T17:00:00Z"), "18:00 in Paris")
        #expect(releasedAt(newYork) == now, "not quiet: now")
        #expect(releasedAt(tokyo) == tokyoEnd && releasedAt(paris) == parisEnd, "held until the window ends")
        #expect(releases.filter { Self.ids($0.job).contains(paris) }.count == 1)
        #expect(releases.allSatisfy { $0.job.delivery.respectQuietHours == false && $0.job.parentID != nil })
        await pool.close()
        await database.drop()
    }

    @Test func anAppThatRespectsQuietHoursHoldsJobsThatDoNotSayExceptOnDevicesThatTurnedThemOff() async throws {
        let database = try await WorkerTestDatabase.migrated(apps: ["app"])
        let pool = database.pool()
        try await pool.query("UPDATE apps SET respect_quiet_hours = true, quiet_start = '22:00', quiet_end = '07:00' WHERE id = 'app'")
        let paris = try await Self.insert(pool, zone: "Europe/Paris")  // 23:30: the app's window until 07:00
        let off = try await Self.insert(pool, zone: "Europe/Paris")
        try await pool.query("UPDATE subscriptions SET quiet_hours_disabled = true WHERE id = $1::uuid", [off])
        let now = try #require(Timestamp(rfc3339: "2026-01-15T22:30:00Z"))
        let harness = Harness(pool: pool, now: now, log: log)
        let job = try Job(json: try JSONValue.parse(#"""
            {"schema":"herald.job.v1","id":"news","app_id":"app","kind":"notification","created_at":"2026-01-15T22:29:00Z",
             "audience":{"all":true},"content":{"title":"News"}}
            """#))
        #expect(try await harness.planner.needsScheduling(job))
        _ = try await harness.plan(job.document.serialized())
        let deferred = harness.receipts.all.filter { $0.stage == .deferred }
        #expect(deferred.map(\.subscriptionID) == [paris])
        #expect(deferred.first?.until == Timestamp(rfc3339: "2026-01-16T06:00:00Z"))
        try await harness.walk()
        let releases = harness.releases.all
        #expect(releases.first { Self.ids($0.job).contains(off) }?.at == now, "quiet hours turned off: now")
        #expect(releases.allSatisfy { $0.job.delivery.respectQuietHours == false })
        // An urgent job is never held, whatever the app says.
        let urgent = try Job(json: try JSONValue.parse(#"""
            {"schema":"herald.job.v1","id":"otp","app_id":"app","kind":"notification","created_at":"2026-01-15T22:29:00Z",
             "audience":{"all":true},"content":{"title":"Code"},"delivery":{"urgent":true}}
            """#))
        #expect(try await !harness.planner.needsScheduling(urgent))
        await pool.close()
        await database.drop()
    }

    @Test func sendAfterParksOneReleaseAndTheParentCompletesWithItsSubJobsTotals() async throws {
        let database = try await WorkerTestDatabase.migrated()
        let pool = database.pool()
        let now = try #require(Timestamp(rfc3339: "2026-05-01T10:00:00Z"))
        let harness = Harness(pool: pool, now: now, log: log)
        let job = try await harness.plan(#"""
            {"schema":"herald.job.v1","id":"later","app_id":"app","kind":"notification","created_at":"2026-05-01T10:00:00Z",
             "audience":{"all":true},"content":{"title":"Later"},"delivery":{"send_after":"2026-05-01T12:00:00.250Z"}}
            """#)
        try await harness.walk()
        let releases = harness.releases.all
        #expect(releases.count == 1)
        #expect(releases.first?.at == Timestamp(rfc3339: "2026-05-01T12:00:01Z"), "rounded up: never before send_after")
        #expect(releases.first?.job.id == "later:sa" && releases.first?.job.audience == .all && releases.first?.job.delivery.sendAfter == nil)
        #expect(try await JobRepository(pool: pool).storedJob(id: job.id)?.state == .scheduled)
        // The sub-job completes: the parent reports its totals.
        try await JobRepository(pool: pool).markCompleted(jobID: "later:sa", totals: .init(accepted: 5, dropped: 1))
        try await harness.planner.completeParentIfDone("later", appID: "app")
        let completed = harness.receipts.all.filter { $0.stage == .completed }
        #expect(completed.count == 1 && completed.first?.jobID == "later" && completed.first?.totals == .init(accepted: 5, dropped: 1))
        #expect(try await JobRepository(pool: pool).storedJob(id: job.id)?.state == .completed)
        await pool.close()
        await database.drop()
    }
}

/// Values appended from concurrent code, read back by the test.
final class Recorded<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ more: [Value]) { values.withLock { $0 += more } }
    var all: [Value] { values.withLock { $0 } }
}
