import Foundation
import Glibc
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldSim
import Synchronization

/// The CPU time (utime + stime, from `/proc/PID/stat`) a changing set of processes spent since a
/// start: the workers of `herald bench pipeline`, replacements started by the fault schedule
/// included (all of a replacement's CPU counts). A process's last reading is kept after it
/// exits, so a killed worker's work up to its last sample still counts.
struct ProcessCPUMeter {
    private var baseline: [pid_t: Double] = [:]
    private var latest: [pid_t: Double] = [:]

    /// Starts counting from now for `pids`.
    init(pids: [pid_t]) {
        for pid in pids {
            let seconds = Self.cpuSeconds(of: pid) ?? 0
            baseline[pid] = seconds
            latest[pid] = seconds
        }
    }

    /// Reads `pids` again; a pid not seen before counts from zero.
    mutating func sample(_ pids: [pid_t]) {
        for pid in pids {
            guard let seconds = Self.cpuSeconds(of: pid) else { continue }
            if baseline[pid] == nil { baseline[pid] = 0 }
            latest[pid] = seconds
        }
    }

    /// CPU seconds `pid` spent since the start.
    func seconds(of pid: pid_t) -> Double {
        max(0, (latest[pid] ?? 0) - (baseline[pid] ?? 0))
    }

    /// CPU seconds spent since the start, all processes together.
    var seconds: Double {
        latest.reduce(0) { $0 + max(0, $1.value - (baseline[$1.key] ?? 0)) }
    }

    /// The utime + stime of `pid` in seconds; nil when it is gone or `/proc` is unreadable.
    static func cpuSeconds(of pid: pid_t) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        return cpuSeconds(stat: stat, ticksPerSecond: sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Fields 14 and 15 of a `/proc/PID/stat` line; the command name (field 2) may hold spaces
    /// and parentheses, so fields are counted from the last ")".
    static func cpuSeconds(stat: String, ticksPerSecond: Int) -> Double? {
        guard let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(ticksPerSecond)
    }
}

/// `herald bench pipeline --urgent-probe`: one single-device urgent job a second while the
/// campaign runs, each timed from the broker's acknowledgement of the job to the moment its
/// `accepted` receipt is read from the results topic by a reader of its own. The device belongs
/// to an app of its own (`probe`, the demo app's credentials) so the campaign's audience and the
/// simulators' duplicate count are untouched.
final class UrgentProbe: Sendable {
    static let appID = "probe"

    private struct State {
        var acknowledged: [String: ContinuousClock.Instant] = [:]
        var accepted: [String: ContinuousClock.Instant] = [:]
        /// The wall-clock time of each acknowledgement, and each `accepted` receipt's own time
        /// (the worker's, when the provider answered): the share of the latency spent before
        /// the receipt is produced.
        var acknowledgedAt: [String: Timestamp] = [:]
        var answeredAt: [String: Timestamp] = [:]
        /// The receipt message's own timestamp: when the worker handed it to its producer.
        var producedAt: [String: Timestamp] = [:]
        /// The wall-clock time the benchmark's reader took the receipt: with `producedAt`, the
        /// receipt's trip through the producer, the broker and this reader.
        var readAt: [String: Timestamp] = [:]
        var failures = 0
        var loadAverages: [Double] = []
        /// The probe reader has its partitions; its poll errors.
        var reading = false
        var readErrors = 0
    }

    private let subscriptionID: String
    /// The probe device's token, whose deliveries the simulators count with the campaign's.
    let token: String
    private let state = Mutex(State())

    private init(subscriptionID: String, token: String) {
        self.subscriptionID = subscriptionID
        self.token = token
    }

    /// The simulators' duplicate deliveries of the probe device: more deliveries than probes.
    /// (`SimulatorStats.Snapshot.duplicateDeliveries` counts every delivery after a token's
    /// first as a duplicate, which for the probe device is each probe after the first.)
    func duplicates(deliveries: Int) -> (counted: Int, real: Int) {
        let probes = state.withLock { $0.acknowledged.count }
        return (max(0, deliveries - 1), max(0, deliveries - probes))
    }

    /// Creates the probe app and its one iOS device, with a token the simulators do not answer
    /// `Unregistered` for under `unregistered`.
    static func prepare(pool: PostgresPool, credentialsKey: String, simulatorDirectory: URL, unregistered: UnregisteredShare) async throws -> UrgentProbe {
        let credentials = try SeedCommand.readCredentials(simulatorDirectory)
        try await AppRepository(pool: pool, key: try CredentialsKey(base64: credentialsKey))
            .upsert(id: appID, name: "Herald bench urgent probe", apns: credentials.apns, fcm: credentials.fcm)
        var token = ""
        repeat {
            var bytes = [UInt8](repeating: 0, count: 32)
            guard getentropy(&bytes, bytes.count) == 0 else { throw Failure(description: "no randomness for the probe's device token") }
            token = bytes.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        } while unregistered.isUnregistered(token)
        let rows = try await pool.query("INSERT INTO subscriptions (app_id, platform, token) VALUES ($1, 'ios', $2) RETURNING id",
                                        [appID, token], idempotent: false)
        guard let id = rows.rows.first?.first.flatMap({ $0 }) else { throw Failure(description: "the probe's subscription was not created") }
        return UrgentProbe(subscriptionID: id, token: token)
    }

    /// Sends a probe every second to `topic` until cancelled.
    func run(producer: KafkaProducer, topic: String) async {
        // A probe sent before the reader has its partitions would time the group's join.
        let joinDeadline = ContinuousClock.now + .seconds(30)
        while !isReading, !Task.isCancelled, ContinuousClock.now < joinDeadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        var number = 0
        while !Task.isCancelled {
            number += 1
            let id = "probe-\(Timestamp.now.seconds)-\(number)"
            let job: JSONValue = .object([
                "schema": .string(Job.schemaName), "id": .string(id), "app_id": .string(Self.appID), "kind": .string("notification"),
                "created_at": .string(Timestamp.now.description),
                "audience": .object(["subscription_ids": .array([.string(subscriptionID)])]),
                "content": .object(["title": .string("Probe"), "body": .string(id)]),
                "delivery": .object(["urgent": .bool(true)]),
            ])
            let load = Self.loadAverage()
            do {
                _ = try await producer.send(topic: topic, key: id, value: job.serialized())
                let now = ContinuousClock.now
                let wallNow = Timestamp.now
                state.withLock { state in
                    state.acknowledged[id] = now
                    state.acknowledgedAt[id] = wallNow
                    if let load { state.loadAverages.append(load) }
                }
            } catch {
                state.withLock { $0.failures += 1 }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// The reader's librdkafka settings: a fetch answered within 10 ms, as the workers' urgent
    /// lane asks (librdkafka's mock broker holds an empty fetch for the whole
    /// `fetch.wait.max.ms`, 500 ms by default, even when data arrives meanwhile, where a Kafka
    /// broker answers as soon as there is data).
    static let readerProperties = ["session.timeout.ms": "6000", "fetch.wait.max.ms": "10"]

    /// Reads the results topic with a consumer of its own until cancelled, taking the probes'
    /// receipts: the campaign's are told apart by their bytes, without decoding, so this reader
    /// keeps up with the campaign and its delay is the broker's, not the benchmark's. The probes
    /// wait for its first assignment (``isReading``).
    func read(_ consumer: KafkaConsumer) async {
        let clock = ContinuousClock()
        var reading = false
        while !Task.isCancelled {
            let message: KafkaMessage?
            do {
                message = try await consumer.poll(timeoutMilliseconds: 100)
            } catch {
                state.withLock { $0.readErrors += 1 }
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            if !reading, consumer.statistics.assignments > 0 {
                reading = true
                state.withLock { $0.reading = true }
            }
            guard let message else { continue }
            consumer.markProcessed(message)
            guard Self.mayBeProbe(message.value), let receipt = try? Receipt.decode(message.value) else { continue }
            _ = take(receipt, at: clock.now, produced: message.timestamp)
        }
    }

    /// Whether the reader has its partitions, so a probe's receipt will be seen.
    var isReading: Bool { state.withLock { $0.reading } }

    private static let marker = Array("\"probe-".utf8)

    /// Whether `bytes` holds `"probe-` (every probe's receipt does, in its job id): libc's
    /// `memchr` to each quote, `memcmp` for the rest. Foundation's generic `firstRange(of:)`,
    /// used here before, took a quarter of the benchmark process's CPU on the campaign's
    /// receipts, and the reader fell seconds behind the results topic.
    static func mayBeProbe(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { haystack in
            marker.withUnsafeBytes { needle in
                guard let base = haystack.baseAddress, let pattern = needle.baseAddress, let first = needle.first else { return false }
                var offset = 0
                while haystack.count - offset >= needle.count {
                    guard let found = memchr(base + offset, Int32(first), haystack.count - offset - needle.count + 1) else { return false }
                    if memcmp(found, pattern, needle.count) == 0 { return true }
                    offset = base.distance(to: UnsafeRawPointer(found)) + 1
                }
                return false
            }
        }
    }

    /// Takes `receipt` when it is a probe's; `at` is when it was read, `produced` its message's
    /// timestamp.
    func take(_ receipt: Receipt, at instant: ContinuousClock.Instant, produced: Timestamp?) -> Bool {
        guard receipt.jobID.hasPrefix("probe-"), receipt.appID == Self.appID else { return false }
        if receipt.stage == .accepted {
            state.withLock { state in
                if state.accepted[receipt.jobID] == nil {
                    state.accepted[receipt.jobID] = instant
                    state.answeredAt[receipt.jobID] = receipt.at
                    state.producedAt[receipt.jobID] = produced
                    state.readAt[receipt.jobID] = .now
                }
            }
        }
        return true
    }

    /// The figures for the benchmark's JSON: probes sent, answered, p50/p99/max in ms, and the
    /// one-minute load average while they ran (mean and highest).
    var json: [String: JSONValue] {
        state.withLock { state in
            var latencies: [Double] = []
            var workerLatencies: [Double] = []
            var producedLatencies: [Double] = []
            var readLatencies: [Double] = []
            for (id, acknowledged) in state.acknowledged {
                guard let accepted = state.accepted[id] else { continue }
                latencies.append(max(0, BenchMeasure.seconds(accepted - acknowledged) * 1000))
                if let sent = state.acknowledgedAt[id], let answered = state.answeredAt[id] {
                    workerLatencies.append(max(0, answered.date.timeIntervalSince(sent.date) * 1000))
                }
                if let sent = state.acknowledgedAt[id], let produced = state.producedAt[id] {
                    producedLatencies.append(max(0, produced.date.timeIntervalSince(sent.date) * 1000))
                }
                if let produced = state.producedAt[id], let read = state.readAt[id] {
                    readLatencies.append(max(0, read.date.timeIntervalSince(produced.date) * 1000))
                }
            }
            latencies.sort()
            workerLatencies.sort()
            producedLatencies.sort()
            readLatencies.sort()
            func percentile(_ q: Double, of values: [Double]? = nil) -> JSONValue {
                let values = values ?? latencies
                guard !values.isEmpty else { return .null }
                return .double((values[min(values.count - 1, Int((Double(values.count - 1) * q).rounded(.up)))] * 10).rounded() / 10)
            }
            let loads = state.loadAverages
            return [
                "urgent_probes": .int(state.acknowledged.count),
                "urgent_answered": .int(latencies.count),
                "urgent_send_failures": .int(state.failures),
                "urgent_read_errors": .int(state.readErrors),
                "urgent_p50_ms": percentile(0.5), "urgent_p99_ms": percentile(0.99), "urgent_max_ms": percentile(1),
                "urgent_answered_p50_ms": percentile(0.5, of: workerLatencies),
                "urgent_answered_p99_ms": percentile(0.99, of: workerLatencies),
                "urgent_produced_p50_ms": percentile(0.5, of: producedLatencies),
                "urgent_produced_p99_ms": percentile(0.99, of: producedLatencies),
                "urgent_read_after_produced_p50_ms": percentile(0.5, of: readLatencies),
                "urgent_read_after_produced_p99_ms": percentile(0.99, of: readLatencies),
                "load_average_mean": loads.isEmpty ? .null : .double((loads.reduce(0, +) / Double(loads.count) * 100).rounded() / 100),
                "load_average_max": loads.max().map { .double($0) } ?? .null,
            ]
        }
    }

    /// The one-minute load average of `/proc/loadavg`.
    static func loadAverage() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").first.flatMap { Double($0) }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }
}
