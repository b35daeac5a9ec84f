import Foundation
import HeraldCore
import HeraldPostgres

/// `herald bench audience`: streams an app's audience in keyset pages, as a shard runner does,
/// and prints rows, rows per second and the process's peak RSS.
enum BenchAudienceCommand {
    static func run(_ arguments: [String]) async -> Int32 {
        var url = ProcessInfo.processInfo.environment["HERALD_DATABASE_URL"]
        var app: String?
        var filterText: String?
        var pageSize = 5000
        var json = false
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument == "--json" {
                json = true
                continue
            }
            guard let value = remaining.popFirst() else {
                Console.error("herald bench audience: \(argument) needs a value\n\(BenchCommand.usage)")
                return 64
            }
            switch argument {
            case "--database-url": url = value
            case "--app": app = value
            case "--filter": filterText = value
            case "--page-size":
                guard let number = Int(value), (1...100_000).contains(number) else {
                    Console.error("herald bench audience: --page-size must be 1 to 100000")
                    return 64
                }
                pageSize = number
            default:
                Console.error("herald bench audience: unknown option \(argument)\n\(BenchCommand.usage)")
                return 64
            }
        }
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
        let pool = PostgresPool(PostgresPoolConfiguration(url: url, size: 2, statementTimeout: .zero, applicationName: "herald-bench"))
        let resolver = AudienceResolver(pool: pool)
        let query = AudienceQuery(appID: app, audience: audience)
        let clock = ContinuousClock()
        var rows = 0
        var tokenBytes = 0
        let started = clock.now
        do {
            for try await page in resolver.pages(query, pageSize: pageSize) {
                rows += page.count
                // Touch what a sender reads, so the work is not optimised away.
                for member in page { tokenBytes &+= member.token.utf8.count }
            }
        } catch {
            Console.error("herald bench audience: \(error)")
            await pool.close()
            return 69
        }
        let elapsed = clock.now - started
        await pool.close()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(rows) / seconds : 0
        let peak = peakRSSMegabytes()
        if json {
            print(#"{"rows":\#(rows),"seconds":\#(String(format: "%.3f", seconds)),"rows_per_second":\#(Int(rate)),"peak_rss_mb":\#(String(format: "%.1f", peak)),"page_size":\#(pageSize)}"#)
        } else {
            print("streamed \(rows) subscriptions (\(tokenBytes) token bytes) in \(String(format: "%.2f", seconds)) s: \(Int(rate)) rows/s, peak RSS \(String(format: "%.1f", peak)) MB")
        }
        return 0
    }

    /// Peak resident set size (VmHWM in /proc/self/status), MB.
    static func peakRSSMegabytes() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let digits = line.filter(\.isNumber)
            return (Double(digits) ?? 0) / 1024
        }
        return 0
    }
}
