import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `herald bench pipeline --json`: the figures the delivery-core work is judged by are in its
/// output and hold together — CPU per notification from the workers' `/proc`, and with
/// `--urgent-probe` the urgent jobs' latency, without the probe device counting as a duplicate.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(5)))
struct BenchPipelineCommandTests {
    @Test func reportsWorkerCPUAndTheUrgentProbe() async throws {
        let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary,
                                                      ["bench", "pipeline", "--devices", "3000", "--workers", "1", "--urgent-probe",
                                                       "--timeout", "200", "--json"],
                                                      timeout: 260)
        #expect(result.status == 0, "herald bench pipeline failed:\n\(result.stderr.suffix(3000))")
        let line = try #require(result.stdout.split(separator: "\n").last, "no JSON line:\n\(result.stdout)")
        let figures = try #require(try JSONValue.parse(String(line)).objectValue)
        func number(_ key: String) -> Double? {
            if case .number(let value) = figures[key] { return value.double }
            return nil
        }
        #expect(number("lost") == 0)
        #expect(number("duplicates") == 0, "the probe device's deliveries are not duplicates")
        let accepted = try #require(number("accepted"))
        #expect(accepted > 2000)
        let workerSeconds = try #require(number("worker_cpu_seconds"))
        let perNotification = try #require(number("worker_cpu_us_per_notification"))
        #expect(workerSeconds > 0 && perNotification > 0)
        // The per-notification figure is the workers' CPU over accepted notifications.
        #expect(abs(perNotification - workerSeconds * 1e6 / accepted) <= max(1, perNotification * 0.05))
        #expect(try #require(number("worker_cpu_us_per_terminal_receipt")) <= perNotification)
        #expect(try #require(number("bench_cpu_us_per_notification")) > 0)

        let probes = try #require(number("urgent_probes"))
        #expect(probes >= 1, "a probe a second while the campaign runs")
        #expect(try #require(number("urgent_answered")) >= 1)
        let p50 = try #require(number("urgent_p50_ms"))
        let p99 = try #require(number("urgent_p99_ms"))
        #expect(p50 > 0 && p50 <= p99)
        // The probes' reader: from the receipt's CreateTime to its reading, within the total.
        let readAfterProduced = try #require(number("urgent_read_after_produced_p50_ms"))
        #expect(readAfterProduced >= 0 && readAfterProduced <= p99)
        #expect(number("urgent_read_errors") == 0)
        #expect(number("load_average_max") != nil)
    }
}
