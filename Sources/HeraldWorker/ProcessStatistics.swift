import Foundation
import Glibc
import HeraldCore

/// The process series a Prometheus client library exports (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`) and
/// `herald_build_info`, read from `/proc` when `/metrics` is scraped. Parsing is pure; only
/// ``current()`` reads files.
struct ProcessStatistics: Sendable, Equatable {
    var cpuSeconds: Double
    var residentBytes: Int
    var openFileDescriptors: Int
    /// UNIX seconds.
    var startTime: Double

    /// The figures of `/proc/self/stat` (`stat`), given the kernel's clock ticks per second,
    /// its page size, the boot time (`btime` of `/proc/stat`) and the open descriptors; nil when
    /// `stat` is not in the kernel's format.
    static func parse(stat: String, ticksPerSecond: Int, pageSize: Int, bootTime: Double, openFileDescriptors: Int) -> ProcessStatistics? {
        // The command name (field 2) is in parentheses and may hold spaces and parentheses:
        // the fields that follow start after the last ")".
        guard let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
        guard let user = field(14), let system = field(15), let start = field(22), let rssPages = field(24) else { return nil }
        let ticks = Double(ticksPerSecond)
        return ProcessStatistics(cpuSeconds: (user + system) / ticks, residentBytes: Int(rssPages) * pageSize,
                                 openFileDescriptors: openFileDescriptors, startTime: bootTime + start / ticks)
    }

    /// `btime` of `/proc/stat`.
    static func bootTime(procStat: String) -> Double? {
        for line in procStat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// This process now; nil where `/proc` cannot be read.
    static func current() -> ProcessStatistics? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let procStat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let boot = bootTime(procStat: procStat) else { return nil }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        return parse(stat: stat, ticksPerSecond: sysconf(Int32(_SC_CLK_TCK)), pageSize: sysconf(Int32(_SC_PAGESIZE)),
                     bootTime: boot, openFileDescriptors: descriptors)
    }

    /// The series in Prometheus's text format, with `herald_build_info{version,revision}`.
    static func prometheusText(_ statistics: ProcessStatistics?, version: String, revision: String) -> String {
        var text = PrometheusText()
        text.family("herald_build_info", type: "gauge", help: "Always 1; the version and git revision of this worker's build.")
        text.sample("herald_build_info", [("version", version), ("revision", revision)], 1)
        text.family("herald_log_lines_dropped_total", type: "counter",
                    help: "Log lines dropped because standard output or error did not keep up (LogSink).")
        text.sample("herald_log_lines_dropped_total", [], LogSink.shared.dropped)
        if let statistics {
            text.family("process_cpu_seconds_total", type: "counter", help: "User and system CPU time spent in seconds.")
            text.sample("process_cpu_seconds_total", [], PrometheusText.number(statistics.cpuSeconds))
            text.family("process_resident_memory_bytes", type: "gauge", help: "Resident memory size in bytes.")
            text.sample("process_resident_memory_bytes", [], statistics.residentBytes)
            text.family("process_open_fds", type: "gauge", help: "Number of open file descriptors.")
            text.sample("process_open_fds", [], statistics.openFileDescriptors)
            text.family("process_start_time_seconds", type: "gauge", help: "Start time of the process since the UNIX epoch in seconds.")
            text.sample("process_start_time_seconds", [], PrometheusText.number(statistics.startTime))
        }
        return text.output
    }
}
