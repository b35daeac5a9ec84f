import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// Scheduled delivery through real `herald run` workers (issue 10): quiet hours and send_after
/// become sub-jobs that the workers' schedulers release, and every subscription still gets
/// exactly one terminal receipt under the job the user sent.
extension HeraldRunEndToEnd {
@Suite(.timeLimit(.minutes(6)))
struct ScheduledDeliveryTests {
    @Test func quietHourDevicesAreDeferredThenSentOnceAfterTheirWindowUnderTheParentJob() async throws {
        let world = try await HeraldRunWorld()
        do {
            try await scenario(world)
            await world.tearDown(keepLogs: false)
        } catch {
            FileHandle.standardError.write(Data("scheduled delivery: logs kept in \(world.directory.path)\n".utf8))
            await world.tearDown(keepLogs: true)
            throw error
        }
    }

    private func scenario(_ world: HeraldRunWorld) async throws {
        try await world.seed(devices: 40)
        let audience = Set(try await world.pool.query(
            "SELECT id::text FROM subscriptions WHERE app_id = 'load' AND opted_in AND invalidated_at IS NULL").rows.compactMap { $0[0] })
        let quiet = Set(try await world.pool.query(
            "SELECT id::text FROM subscriptions WHERE app_id = 'load' AND opted_in AND invalidated_at IS NULL ORDER BY id LIMIT 10").rows.compactMap { $0[0] })
        try await world.startWorkers(2)
        // The window is set once the workers run, so however long they took to start, the job
        // meets it open.
        // Everyone in UTC; a quarter with a quiet window that started a minute ago and ends at the
        // next minute but one (quiet hours have minute precision), the rest outside any window.
        let now = Date()
        let format = { (date: Date) -> String in
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
            let parts = calendar.dateComponents([.hour, .minute], from: date)
            return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
        }
        let quietEnd = now.addingTimeInterval(120)
        try await world.pool.query("""
            UPDATE subscriptions SET time_zone = 'UTC', quiet_start = $1::time, quiet_end = $2::time WHERE app_id = 'load'
            """, [format(now.addingTimeInterval(-60)), format(quietEnd)])
        try await world.pool.query("""
            UPDATE subscriptions SET quiet_start = $1::time, quiet_end = $2::time
            WHERE app_id = 'load' AND id IN (SELECT id FROM subscriptions WHERE app_id = 'load' ORDER BY id OFFSET 10)
            """, [format(now.addingTimeInterval(3 * 3600)), format(now.addingTimeInterval(4 * 3600))])

        let sendAfter = Timestamp(Date().addingTimeInterval(5))
        let job = """
            {"schema":"herald.job.v1","id":"quiet","app_id":"load","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
            "audience":{"all":true},"content":{"title":"News"},\
            "delivery":{"respect_quiet_hours":true,"send_after":"\(sendAfter.rfc3339)"}}
            """
        try await world.produce(urgent: false, job, id: "quiet")
        // send_after first: nothing is sent before it; then quiet devices are deferred, the others sent.
        #expect(try await world.wait(seconds: 60) { world.receipts.all(job: "quiet").filter { $0.stage == .deferred }.count == quiet.count },
                "\(world.receipts.all(job: "quiet").filter { $0.stage == .deferred }.count) deferred receipts of \(quiet.count)")
        #expect(try await world.wait(seconds: 200) { world.receipts.terminal(job: "quiet") == audience.count && world.receipts.first(job: "quiet", stage: .completed) != nil },
                "\(world.receipts.terminal(job: "quiet")) terminal receipts of \(audience.count)")

        let receipts = world.receipts.all(job: "quiet")
        let deferred = receipts.filter { $0.stage == .deferred }
        #expect(Set(deferred.compactMap(\.subscriptionID)) == quiet && deferred.allSatisfy { $0.reason == .quietHours && $0.until != nil })
        let terminal = receipts.filter { $0.stage.isTerminal }
        var perSubscription: [String: Int] = [:]
        for receipt in terminal { perSubscription[receipt.subscriptionID ?? "", default: 0] += 1 }
        #expect(Set(perSubscription.keys) == audience && perSubscription.values.allSatisfy { $0 == 1 }, "exactly one terminal receipt each")
        #expect(terminal.allSatisfy { $0.stage == .accepted })
        #expect(terminal.allSatisfy { $0.at >= sendAfter }, "nothing before send_after")
        for receipt in terminal where quiet.contains(receipt.subscriptionID ?? "") {
            let until = deferred.first { $0.subscriptionID == receipt.subscriptionID }?.until
            #expect(until.map { receipt.at >= $0 } ?? false, "a quiet device went at \(receipt.at), before its window ended at \(String(describing: until))")
        }
        let completed = try #require(world.receipts.first(job: "quiet", stage: .completed))
        #expect(completed.totals == Receipt.Totals(accepted: Int64(audience.count)))
        #expect(world.receipts.jobs().allSatisfy { !$0.contains(":") }, "sub-job ids never reach the results topic: \(world.receipts.jobs())")
        let planned = world.receipts.all(job: "quiet").filter { $0.stage == .planned }
        #expect(planned.first?.audienceEstimate == Int64(audience.count))

        // A scheduled job that has expired by the time it is released is dropped, not sent late.
        let expiring = """
            {"schema":"herald.job.v1","id":"stale","app_id":"load","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
            "expires_at":"\(Timestamp(Date().addingTimeInterval(2)).rfc3339)","audience":{"all":true},"content":{"title":"Old news"},\
            "delivery":{"send_after":"\(Timestamp(Date().addingTimeInterval(4)).rfc3339)"}}
            """
        try await world.produce(urgent: false, expiring, id: "stale")
        #expect(try await world.wait(seconds: 90) { world.receipts.first(job: "stale", stage: .completed) != nil && world.receipts.terminal(job: "stale") >= audience.count })
        let stale = world.receipts.all(job: "stale").filter { $0.stage.isTerminal }
        #expect(stale.count == audience.count && stale.allSatisfy { $0.stage == .dropped && $0.reason == .expired })
        #expect(world.receipts.first(job: "stale", stage: .completed)?.totals == Receipt.Totals(dropped: Int64(audience.count)))

        // Cancelled while it waits for send_after (30 s: planning and the cancel command fit in it on
        // a loaded machine): released anyway, every device dropped `cancelled`.
        let cancelledJob = """
            {"schema":"herald.job.v1","id":"called-off","app_id":"load","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
            "audience":{"all":true},"content":{"title":"Never"},"delivery":{"send_after":"\(Timestamp(Date().addingTimeInterval(30)).rfc3339)"}}
            """
        try await world.produce(urgent: false, cancelledJob, id: "called-off")
        #expect(try await world.wait(seconds: 30) {
            try await world.pool.query("SELECT state FROM jobs WHERE id = 'called-off'").rows.first?.first == "scheduled"
        })
        let cancel = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["jobs", "cancel", "called-off", "--database-url", world.databaseURL])
        #expect(cancel.status == 0, "\(cancel.stderr)")
        #expect(try await world.wait(seconds: 90) { world.receipts.terminal(job: "called-off") >= audience.count })
        let calledOff = world.receipts.all(job: "called-off").filter { $0.stage.isTerminal }
        #expect(calledOff.count == audience.count && calledOff.allSatisfy { $0.stage == .dropped && $0.reason == .cancelled })
    }
}
}
