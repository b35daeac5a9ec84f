import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `herald bench pipeline --paired-binary`: two builds' workers in one run, each side's CPU over
/// the notifications its own workers accepted (read from their logs), and the ratio. Both sides
/// run this build here, so every accepted notification must be found in exactly one side's logs.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(5)))
struct BenchPipelinePairsTests {
    @Test func eachSideIsChargedWithWhatItsOwnWorkersAccepted() async throws {
        let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary,
                                                      ["bench", "pipeline", "--devices", "4000", "--workers", "2",
                                                       "--paired-binary", TestEnvironment.heraldBinary.path, "--timeout", "200", "--json"],
                                                      timeout: 260)
        #expect(result.status == 0, "herald bench pipeline failed:\n\(result.stderr.suffix(3000))")
        let line = try #require(result.stdout.split(separator: "\n").last, "no JSON line:\n\(result.stdout)")
        let figures = try #require(try JSONValue.parse(String(line)).objectValue)
        let paired = try #require(figures["paired"]?.objectValue, "no paired member: \(line)")
        func number(_ value: JSONValue?) -> Double? {
            if case .number(let number)? = value { return number.double }
            return nil
        }
        let accepted = try #require(number(figures["accepted"]))
        let a = try #require(paired["a"]?.objectValue), b = try #require(paired["b"]?.objectValue)
        let acceptedA = try #require(number(a["accepted"])), acceptedB = try #require(number(b["accepted"]))
        #expect(paired["attributed"] == .bool(true))
        #expect(acceptedA + acceptedB == accepted, "every accepted notification in one side's logs")
        #expect(acceptedA > 0 && acceptedB > 0, "both workers took shards")
        #expect(b["binary"] == .string(TestEnvironment.heraldBinary.path))
        let perA = try #require(number(a["worker_cpu_us_per_notification"])), perB = try #require(number(b["worker_cpu_us_per_notification"]))
        let ratio = try #require(number(paired["b_over_a"]))
        #expect(perA > 0 && perB > 0)
        #expect(abs(ratio - perB / perA) < 0.01)
        // Each side's CPU is its own workers': together they are the run's.
        let total = try #require(number(figures["worker_cpu_seconds"]))
        let sides = try #require(number(a["cpu_seconds"])) + (try #require(number(b["cpu_seconds"])))
        #expect(abs(total - sides) <= 0.05 + total * 0.05)
    }

    @Test func aPairNeedsTwoWorkersAndNoFaults() async throws {
        let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary,
                                                      ["bench", "pipeline", "--devices", "10", "--workers", "1",
                                                       "--paired-binary", TestEnvironment.heraldBinary.path, "--json"],
                                                      timeout: 60)
        #expect(result.status == 64)
        #expect(result.stderr.contains("--paired-binary needs --workers 2"))
    }
}
