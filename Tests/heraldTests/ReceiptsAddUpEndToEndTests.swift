import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// Receipts that add up (issue 18), through `herald run`, the broker, PostgreSQL and the
/// simulator: every subscription a job lists gets exactly one terminal receipt whatever happens
/// to it (unknown, another app's, opted out before, during the campaign or while deferred), and
/// a job that expires behind a halted provider settles everything it still holds.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized, .timeLimit(.minutes(6)))
struct ReceiptsAddUpEndToEndTests {
    static let app = "e2e"

    @Test func everyListedIDGetsExactlyOneTerminalReceipt() async throws {
        try await withFixture("listed") { fixture in
            _ = try fixture.startSimulator()
            _ = try await fixture.seed(app: Self.app, devices: 40)
            // Another app with one subscription of its own (seeded rows are the same for every app).
            _ = try await fixture.seed(app: "other", devices: 0)
            let foreign = UUID().uuidString.lowercased()
            try await fixture.pool.query("""
                INSERT INTO subscriptions (id, app_id, platform, token) VALUES ($1::uuid, 'other', 'android', $1)
                """, [foreign])
            let ids = try await fixture.pool.query("SELECT id::text FROM subscriptions WHERE app_id = $1 ORDER BY id", [Self.app]).rows.compactMap { $0[0] }
            try #require(ids.count == 40)
            let regular = Array(ids[0..<8])
            let (quiet, deferredThenOut, outBefore, invalidBefore) = (ids[10], ids[11], ids[12], ids[13])
            let unknown = UUID().uuidString.lowercased()
            try await fixture.pool.query("UPDATE subscriptions SET opted_in = true, invalidated_at = NULL WHERE app_id = $1", [Self.app])
            try await fixture.pool.query("UPDATE subscriptions SET opted_in = false WHERE id = $1::uuid", [outBefore])
            try await fixture.pool.query("UPDATE subscriptions SET invalidated_at = now() WHERE id = $1::uuid", [invalidBefore])
            // Two devices in quiet hours now, in UTC, until the next minute (or the one after, so at
            // least 20 s remain to opt one out while it is deferred).
            let minute = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC") ?? .current, from: Date())
            let start = (minute.hour ?? 0) * 60 + (minute.minute ?? 0)
            func clock(_ minutes: Int) -> String { String(format: "%02d:%02d", (minutes / 60) % 24, minutes % 60) }
            // Seeded devices live in many zones: every other one gets a quiet window hours away.
            try await fixture.pool.query("""
                UPDATE subscriptions SET time_zone = 'UTC', quiet_start = $2::time, quiet_end = $3::time WHERE app_id = $1
                """, [Self.app, clock(start + 180), clock(start + 240)])
            try await fixture.pool.query("""
                UPDATE subscriptions SET quiet_start = $2::time, quiet_end = $3::time WHERE id = ANY($1::uuid[])
                """, ["{\(quiet),\(deferredThenOut)}", clock(start), clock(start + ((minute.second ?? 0) > 40 ? 2 : 1))])
            let listed = regular + [quiet, deferredThenOut, outBefore, invalidBefore, unknown, foreign]

            try await fixture.startWorkers(1)
            let job = "e2e-listed-1"
            let audience = #"{"subscription_ids":[\#(listed.map { "\"\($0)\"" }.joined(separator: ","))]}"#
            try await fixture.produceJob("""
                {"schema":"herald.job.v1","id":"\(job)","app_id":"\(Self.app)","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
                "audience":\(audience),"content":{"title":"Listed"},"delivery":{"respect_quiet_hours":true,"throttle_per_minute":120}}
                """, id: job)

            // Mid-deferral: both quiet devices are reported deferred; one opts out before its release.
            let deferred = try await fixture.wait(seconds: 60) {
                let byID = fixture.results.snapshot.byID
                return byID["\(job):\(quiet):deferred"] != nil && byID["\(job):\(deferredThenOut):deferred"] != nil
            }
            try #require(deferred, "the quiet devices were not reported deferred")
            try await fixture.pool.query("UPDATE subscriptions SET opted_in = false WHERE id = $1::uuid", [deferredThenOut])
            // Mid-campaign: the throttle sends one a second; the last regular device opts out meanwhile.
            _ = try await fixture.wait(seconds: 30) { fixture.results.terminalCount(job: job) >= 1 }
            try await fixture.pool.query("UPDATE subscriptions SET opted_in = false WHERE id = $1::uuid", [regular[7]])

            let done = try await fixture.wait(seconds: 200) {
                !fixture.results.events(job: job, stage: .completed).isEmpty && fixture.results.terminalCount(job: job) == listed.count
            }
            let terminal = fixture.results.terminalReceipts(job: job)
            #expect(done, "after 200 s: \(terminal.count) of \(listed.count) listed ids settled")
            #expect(Set(terminal.keys) == Set(listed), "ids without a terminal receipt: \(Set(listed).subtracting(terminal.keys))")
            for id in listed { #expect(terminal[id]?.count == 1, "\(id): \(terminal[id]?.map(\.json.serializedString) ?? [])") }
            func only(_ id: String) -> Receipt? { terminal[id]?.first }
            for id in regular.dropLast() { #expect(only(id)?.stage == .accepted, "\(id): \(only(id)?.json.serializedString ?? "none")") }
            #expect([.accepted, .dropped].contains(only(regular[7])?.stage), "opted out mid-campaign: sent or dropped, once")
            #expect(only(quiet)?.stage == .accepted, "held until its window ended, then sent")
            for id in [deferredThenOut, outBefore, invalidBefore] {
                #expect(only(id)?.stage == .dropped && only(id)?.reason == .optedOut, "\(id): \(only(id)?.json.serializedString ?? "none")")
            }
            for id in [unknown, foreign] {
                #expect(only(id)?.stage == .dropped && only(id)?.reason == .unknownSubscription && only(id)?.platform == nil,
                        "\(id): \(only(id)?.json.serializedString ?? "none")")
            }
            // The job's totals are its distinct terminal receipts.
            let totals = fixture.results.events(job: job, stage: .completed).first?.totals
            let stages = stageCounts(terminal)
            #expect(totals?.accepted == Int64(stages["accepted", default: 0]) && totals?.dropped == Int64(stages["dropped", default: 0])
                    && totals?.failed == Int64(stages["failed", default: 0]) && totals?.unregistered == Int64(stages["unregistered", default: 0]),
                    "totals \(String(describing: totals)) vs receipts \(stages)")
            try await expectCleanStop(fixture)
        }
    }

    @Test func aJobThatExpiresBehindAHaltedProviderSettlesEverythingItHolds() async throws {
        try await withFixture("haltexpiry") { fixture in
            _ = try fixture.startSimulator()
            _ = try await fixture.seed(app: Self.app, devices: 60)
            let good = try fixture.simulatorAPNsCredentials()
            var bad = good
            bad.privateKeyPEM = try freshP256Key()
            try await fixture.updateApp(Self.app, apns: bad, fcm: try fixture.simulatorFCMCredentials())
            let audience = try await fixture.audience(app: Self.app)
            let ios = Set(audience.filter { $0.value.platform == .ios }.keys)
            try #require(!ios.isEmpty)
            try await fixture.startWorkers(1, extra: ["HERALD_HALTED_SWEEP_SECONDS": "1"])
            let job = "e2e-halt-expiry"
            let expires = Timestamp.now.adding(seconds: 20)
            try await fixture.produceJob("""
                {"schema":"herald.job.v1","id":"\(job)","app_id":"\(Self.app)","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
                "expires_at":"\(expires.rfc3339)","audience":{"all":true},"content":{"title":"Soon stale"}}
                """, id: job)
            let halted = try await fixture.wait(seconds: 60) { !fixture.results.events(job: job, stage: .halted).isEmpty }
            try #require(halted, "APNs was not halted")
            #expect(fixture.results.events(job: job, stage: .completed).isEmpty, "completed while halted")

            // Nobody resumes it: after expires_at the sweeper runs the shard again, which drops what it holds.
            let done = try await fixture.wait(seconds: 90) {
                !fixture.results.events(job: job, stage: .completed).isEmpty && fixture.results.terminalCount(job: job) == audience.count
            }
            let terminal = fixture.results.terminalReceipts(job: job)
            #expect(done, "after expiry: \(terminal.count) of \(audience.count) settled")
            for id in ios {
                let receipts = terminal[id] ?? []
                #expect(receipts.count == 1 && receipts.first?.stage == .dropped && receipts.first?.reason == .expired,
                        "\(id): \(receipts.map(\.json.serializedString))")
            }
            let totals = fixture.results.events(job: job, stage: .completed).first?.totals
            #expect(totals?.dropped == Int64(ios.count) && totals?.accepted == Int64(audience.count - ios.count),
                    "totals \(String(describing: totals))")
            try await expectCleanStop(fixture)
        }
    }
}
