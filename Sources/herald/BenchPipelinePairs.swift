import HeraldCore

/// `herald bench pipeline --paired-binary B`: two builds' workers in one run, sharing the same
/// campaign, simulators, broker and moment, so the host's load (which moves one build's CPU per
/// notification by a third between runs on a shared two-core machine) falls on both alike. The
/// odd-numbered workers run `--worker-binary` (or this build), the even-numbered ones B; each
/// side's CPU (from /proc, as for the whole run) is divided by the notifications its workers
/// accepted, read from their logs' `shard finished` lines for the campaign's job.
///
/// A shard's `shard finished` line carries its whole count, including any part done by a worker
/// that held it before: a clean run (no chaos) has none, so the option refuses a fault plan.
enum BenchPipelinePairs {
    /// One side: the binary its workers ran, their CPU and what they accepted.
    struct Side: Equatable {
        var binary: String
        var cpuSeconds: Double = 0
        var accepted = 0

        var microsecondsPerNotification: Double? {
            accepted > 0 ? (cpuSeconds * 1e6 / Double(accepted) * 10).rounded() / 10 : nil
        }
    }

    /// Whether worker `index` (1-based, as the log files are named) runs the paired binary.
    static func runsPaired(_ index: Int) -> Bool { index % 2 == 0 }

    /// The campaign's notifications a worker's log says its shards finished with accepted.
    /// Lines that are not JSON, other messages and other jobs (the urgent probes') are skipped.
    static func accepted(log: String, jobID: String) -> Int {
        var total = 0
        for line in log.split(separator: "\n") where line.contains("\"shard finished\"") {
            guard let object = try? JSONValue.parse(String(line)).objectValue, object["message"] == .string("shard finished"),
                  object["job_id"] == .string(jobID), case .number(let accepted)? = object["accepted"],
                  let count = accepted.int64, count >= 0 else { continue }
            total += Int(count)
        }
        return total
    }

    /// The `paired` member of the report: each side, and B's CPU per notification over A's.
    static func json(_ a: Side, _ b: Side, campaignAccepted: Int) -> JSONValue {
        func side(_ side: Side) -> JSONValue {
            .object([
                "binary": .string(side.binary), "accepted": .int(side.accepted),
                "cpu_seconds": .double((side.cpuSeconds * 100).rounded() / 100),
                "worker_cpu_us_per_notification": side.microsecondsPerNotification.map(JSONValue.double) ?? .null,
            ])
        }
        var ratio = JSONValue.null
        if let over = b.microsecondsPerNotification, let under = a.microsecondsPerNotification, under > 0 {
            ratio = .double((over / under * 1000).rounded() / 1000)
        }
        return .object([
            "a": side(a), "b": side(b), "b_over_a": ratio,
            // Every accepted notification of the campaign found in a worker's log, or not.
            "attributed": .bool(a.accepted + b.accepted == campaignAccepted),
        ])
    }
}
