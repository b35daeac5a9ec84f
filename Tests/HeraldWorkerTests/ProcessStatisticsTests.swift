import Foundation
@testable import HeraldWorker
import Testing

@Suite struct ProcessStatisticsTests {
    /// A `/proc/self/stat` line whose command name holds a space and a parenthesis.
    static let stat = "4242 (herald (run) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 130 0 0 20 0 9 0 500000 123456789 2048 "
        + "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0"

    @Test func theStatLineGivesCPUMemoryAndStartTime() throws {
        let statistics = try #require(ProcessStatistics.parse(stat: Self.stat, ticksPerSecond: 100, pageSize: 4096,
                                                              bootTime: 1_796_000_000, openFileDescriptors: 37))
        #expect(statistics.cpuSeconds == 3.8)  // (250 + 130) ticks / 100
        #expect(statistics.residentBytes == 2048 * 4096)
        #expect(statistics.startTime == 1_796_005_000)  // boot + 500000 / 100
        #expect(statistics.openFileDescriptors == 37)
        #expect(ProcessStatistics.parse(stat: "garbage", ticksPerSecond: 100, pageSize: 4096, bootTime: 0, openFileDescriptors: 0) == nil)
        #expect(ProcessStatistics.bootTime(procStat: "cpu 1 2 3\nbtime 1796000000\nprocesses 9\n") == 1_796_000_000)
    }

    @Test func thisProcessIsReadFromProcAndExportedInPrometheusText() throws {
        let statistics = try #require(ProcessStatistics.current())
        #expect(statistics.cpuSeconds > 0 && statistics.residentBytes > 1_000_000 && statistics.openFileDescriptors > 2)
        #expect(abs(statistics.startTime - Date().timeIntervalSince1970) < 24 * 3600, "started today: \(statistics.startTime)")
        let text = ProcessStatistics.prometheusText(statistics, version: "1.2.3", revision: "abc1234")
        for series in ["herald_build_info{version=\"1.2.3\",revision=\"abc1234\"} 1", "process_cpu_seconds_total ", "process_resident_memory_bytes ",
                       "process_open_fds ", "process_start_time_seconds ", "# TYPE process_cpu_seconds_total counter",
                       "# TYPE herald_log_lines_dropped_total counter", "herald_log_lines_dropped_total 0"] {
            #expect(text.contains(series), "\(series) missing from:\n\(text)")
        }
        // Without /proc, only the build info and the log sink's drops.
        #expect(ProcessStatistics.prometheusText(nil, version: "v", revision: "r").components(separatedBy: "# TYPE").count == 3)
    }
}
