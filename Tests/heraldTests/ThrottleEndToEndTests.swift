import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `delivery.throttle_per_minute` through real `herald run` workers (issue 10): the rate is
/// measured where the sends arrive, at the simulators (accepted deliveries per second).
extension HeraldRunEndToEnd {
@Suite(.timeLimit(.minutes(6)))
struct ThrottleEndToEndTests {
    @Test func sixtyThousandAMinuteOverFourShardsOnTwoWorkersHoldsEveryTenSecondWindow() async throws {
        let world = try await HeraldRunWorld()
        do {
            try await scenario(world)
            await world.tearDown(keepLogs: false)
        } catch {
            FileHandle.standardError.write(Data("throttle e2e: logs kept in \(world.directory.path)\n".utf8))
            await world.tearDown(keepLogs: true)
            throw error
        }
    }

    private func scenario(_ world: HeraldRunWorld) async throws {
        try await world.seed(devices: 24_000)
        let audience = try await world.pool.query(
            "SELECT count(*) FROM subscriptions WHERE app_id = 'load' AND opted_in AND invalidated_at IS NULL").rows.first?.first.flatMap { $0.flatMap { Int($0) } } ?? 0
        // Four shards, two running on each worker.
        try await world.startWorkers(2, shardSize: (audience + 3) / 4)
        let job = """
            {"schema":"herald.job.v1","id":"paced","app_id":"load","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
            "audience":{"all":true},"content":{"title":"Paced"},"delivery":{"throttle_per_minute":60000}}
            """
        try await world.produce(urgent: false, job, id: "paced")
        // Receipts are keyed by subscription and the completed event by job: different partitions,
        // so wait for both.
        #expect(try await world.wait(seconds: 180) { world.receipts.first(job: "paced", stage: .completed) != nil && world.receipts.terminal(job: "paced") >= audience },
                "\(world.receipts.terminal(job: "paced")) of \(audience) after 180 s")
        let planned = world.receipts.first(job: "paced", stage: .planned)
        #expect(planned?.shardCount == 4)
        #expect(world.receipts.all(job: "paced").filter { $0.stage.isTerminal }.count == audience)
        let finished = (0..<2).map { index in world.output("worker\(index)").components(separatedBy: "shard finished").count - 1 }
        #expect(finished.allSatisfy { $0 >= 1 } && finished.reduce(0, +) == 4, "the four shards ran on both workers: \(finished)")

        // Sends as the simulators accepted them, per second; the first and last seconds are
        // partial, so the full 10-second windows lie between them.
        let perSecond = try await world.acceptedPerSecond()
        let first = try #require(perSecond.keys.min())
        let last = try #require(perSecond.keys.max())
        #expect(perSecond.values.reduce(0, +) == audience)
        var windows: [Int] = []
        var start = first + 1
        while start + 10 <= last {
            windows.append((start..<(start + 10)).reduce(0) { $0 + (perSecond[$1] ?? 0) })
            start += 1
        }
        let smallest = windows.min() ?? 0
        let largest = windows.max() ?? 0
        FileHandle.standardError.write(Data("throttle e2e: \(audience) sends over \(last - first + 1) s on shards finished per worker \(finished); \(windows.count) full 10 s windows at the simulators hold \(smallest)...\(largest) (rate 10,000)\n".utf8))
        #expect(windows.count >= 8)
        #expect(smallest >= 9_500 && largest <= 10_500, "every full 10-second window within 5% of 10,000: \(smallest)...\(largest)")
    }
}
}
