import Foundation
import HeraldCore
import HeraldPostgres

/// `herald bench audience`: streams an app's audience in keyset pages, as a shard runner does,
/// and prints rows, rows per second and the process's peak RSS.
enum BenchAudienceCommand {
    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald bench audience", usage: BenchCommand.usage)
        let url = options.string("--database-url") ?? ProcessInfo.processInfo.environment["HERALD_DATABASE_URL"]
        let app = options.string("--app")
        let filterText = options.string("--filter")
        let streams = options.int("--streams", in: 1...64) ?? 1
        let pageSize = options.int("--page-size", in: 1...100_000) ?? 5000
        let json = options.flag("--json")
        guard options.finish() else { return 64 }
        guard let app, let url, !url.isEmpty else {
            Console.error("herald bench audience: --app and --database-url (or HERALD_DATABASE_URL) are required\n\(BenchCommand.usage)")
            return 64
        }
        var audience = Audience.all
        if let filterText {
            do {
                audience = .filter(try AudienceFilter(json: try JSONValue.parse(filterText), at: JSONPath.root.appending("filter")))
            } catch {
                Console.error("herald bench audience: invalid --filter: \(error)")
                return 65
            }
        }
        let pool = PostgresPool(PostgresPoolConfiguration(url: url, size: streams + 1, statementTimeout: .zero, applicationName: "herald-bench"))
        let resolver = AudienceResolver(pool: pool)
        let query = AudienceQuery(appID: app, audience: audience)
        let clock = ContinuousClock()
        var rows = 0
        var planSeconds = 0.0
        let started = clock.now
        do {
            // Several streams read contiguous id ranges at once, as a worker runs several
            // shards; the ranges come from the shard plan (an index-only walk), timed apart.
            var ranges = [SubscriptionRange.everything]
            if streams > 1 {
                let estimate = try await resolver.estimate(query)
                let plan = try await resolver.shardPlan(query, devicesPerShard: max(1, (estimate + streams - 1) / streams))
                ranges = plan.ranges.isEmpty ? ranges : plan.ranges
                planSeconds = BenchMeasure.seconds(clock.now - started)
            }
            let size = pageSize
            rows = try await withThrowingTaskGroup(of: Int.self) { group in
                for range in ranges {
                    group.addTask {
                        var count = 0
                        var tokenBytes = 0
                        for try await page in resolver.pages(query, in: range, pageSize: size) {
                            count += page.count
                            // Touch what a sender reads, so the work is not optimised away.
                            for member in page { tokenBytes &+= member.token.utf8.count }
                        }
                        return tokenBytes >= 0 ? count : 0
                    }
                }
                return try await group.reduce(0, +)
            }
        } catch {
            Console.error("herald bench audience: \(error)")
            await pool.close()
            return 69
        }
        let total = BenchMeasure.seconds(clock.now - started)
        await pool.close()
        let streaming = total - planSeconds
        let rate = streaming > 0 ? Double(rows) / streaming : 0
        let peak = BenchMeasure.peakResidentMegabytes()
        if json {
            print(#"{"rows":\#(rows),"rows_per_second":\#(Int(rate)),"peak_rss_mb":\#(String(format: "%.1f", peak)),"seconds":\#(String(format: "%.3f", streaming)),"plan_seconds":\#(String(format: "%.3f", planSeconds)),"streams":\#(streams),"page_size":\#(pageSize)}"#)
        } else {
            print("streamed \(rows) subscriptions in \(String(format: "%.2f", streaming)) s over \(streams) stream(s) (plan \(String(format: "%.2f", planSeconds)) s): \(Int(rate)) rows/s, peak RSS \(String(format: "%.1f", peak)) MB")
        }
        return 0
    }

}
