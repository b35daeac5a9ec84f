import Foundation
import HeraldTestSupport
import Testing

/// `herald dev --demo --exit`: the README's "run it" command, end to end on this machine (its
/// own PostgreSQL, broker, simulators and worker processes). Needs PostgreSQL's server programs,
/// which scripts/setup installs; under CI a missing one is a failure, not a skip.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(6)))
struct DevCommandTests {
    @Test func demoRunsToTheEndAndItsOutputHoldsNoSecret() async throws {
        let logs = FileManager.default.temporaryDirectory.appendingPathComponent(TestEnvironment.uniqueName("herald_dev_logs"))
        defer { try? FileManager.default.removeItem(at: logs) }
        let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary,
                                                      ["dev", "--demo", "--exit", "--devices", "3000", "--workers", "2", "--timeout", "240",
                                                       "--log-dir", logs.path],
                                                      timeout: 300)
        #expect(result.status == 0, "herald dev failed:\n\(result.stdout.suffix(3000))\n\(result.stderr.suffix(3000))")
        #expect(result.stdout.contains("all receipts are in"))
        #expect(result.stdout.contains("campaign to every device"))
        #expect(result.stdout.contains("VoIP call to"))
        for step in ["start", "update 1", "update 2", "update 3", "end"] {
            #expect(result.stdout.contains("live activity: \(step)"), "the live-activity sequence: \(step)")
        }
        #expect(result.stdout.contains("sent/s"), "a progress line")
        // The summary's campaign row: audience, accepted, unregistered, failed, dropped, seconds
        // from the demo's start, seconds from the first accepted receipt to completed.
        let row = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("campaign to every device") })
        let cells = row.split(separator: " ").suffix(7).compactMap { Double($0) }
        #expect(cells.count == 7, "\(row)")
        if cells.count == 7 {
            #expect(cells[0] > 2500 && cells[0] <= 3000, "audience \(row)")
            #expect(cells[1] + cells[2] + cells[3] + cells[4] == cells[0], "every device has one terminal receipt: \(row)")
            #expect(cells[2] > 0, "the simulators call about 1% unregistered: \(row)")
            #expect(cells[6] <= cells[5], "sending fits in the job's time: \(row)")
        }

        // No device token or credential in any output: stdout, stderr, and every worker's log.
        var outputs = [("stdout", result.stdout), ("stderr", result.stderr)]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: logs.path)) ?? [] {
            outputs.append((name, (try? String(contentsOf: logs.appendingPathComponent(name), encoding: .utf8)) ?? ""))
        }
        #expect(outputs.count >= 4, "two worker logs were kept")
        let apnsToken = try Regex("[0-9a-fA-F]{64}")
        for (name, text) in outputs {
            #expect(!text.contains("PRIVATE KEY"), "\(name) shows a private key")
            #expect(text.firstMatch(of: apnsToken) == nil, "\(name) shows something shaped like an APNs device token")
            #expect(!text.contains("\"token\""), "\(name) shows a token member")
        }
        // Workers logged JSON lines.
        let workerLog = outputs.first { $0.0.hasPrefix("worker-") }?.1 ?? ""
        let lines = workerLog.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines.prefix(50) {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line.prefix(200))")
        }
    }
}
