import Foundation

/// What the `herald bench` commands measure about themselves.
enum BenchMeasure {
    /// A duration in seconds.
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The process's resident set size now (VmRSS), in whole MB; 0 when unreadable.
    static func residentMegabytes() -> Int {
        Int(statusKilobytes("VmRSS:") / 1024)
    }

    /// The process's peak resident set size so far (VmHWM), in MB; 0 when unreadable.
    static func peakResidentMegabytes() -> Double {
        statusKilobytes("VmHWM:") / 1024
    }

    /// A `kB` figure from /proc/self/status.
    private static func statusKilobytes(_ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(field) {
            return Double(line.filter(\.isNumber)) ?? 0
        }
        return 0
    }
}
