import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldSim
import HeraldWorker

/// `herald bench pipeline --devices N --workers W [--ios-share S] --json`: the whole path on one
/// machine (embedded broker, throwaway PostgreSQL, `herald sim`, W worker processes) for one
/// campaign to every device, measured from the outside: receipts read back from the results
/// topic, deliveries counted by the simulators, the workers' peak RSS and CPU time from /proc.
/// `--worker-binary` runs another build's workers beside this build's harness (old against new);
/// `--urgent-probe` times one urgent single-device job a second during the campaign;
/// `--paired-binary` runs a second build's workers beside the first in the same run
/// (``BenchPipelinePairs``).
enum BenchPipelineCommand {
    static let usage = """
        usage: herald bench pipeline [--devices N] [--workers W] [--ios-share S] [--unregistered-share X]
                                     [--sim-threads T] [--partitions P] [--timeout S] [--log-dir DIR] [--json]
                                     [--worker-binary PATH] [--paired-binary PATH] [--urgent-probe] [faults…]
          --paired-binary PATH  even-numbered workers run PATH, the others --worker-binary (or this
                                build); reports each side's CPU per accepted notification (no faults)
          Worker settings come from this process's HERALD_* variables (HERALD_SHARD_SIZE,
          HERALD_SHARD_CONCURRENCY, HERALD_SEND_WINDOW, HERALD_PROVIDER_CONNECTIONS, …).
        """ + "\n" + ChaosPlan.usage

    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald bench pipeline", usage: usage, flags: ["--json", "--urgent-probe"])
        let devices = options.int("--devices", in: 1...20_000_000) ?? 100_000
        let workers = options.int("--workers", in: 1...32) ?? 2
        let iosShare = options.double("--ios-share", in: 0...1) ?? 0.5
        let unregisteredShare = options.double("--unregistered-share", in: 0...1) ?? 0.01
        let simulatorThreads = options.int("--sim-threads", in: 1...16) ?? 2
        let partitions = options.int("--partitions", in: 1...256) ?? 8
        let timeout = options.int("--timeout", in: 1...86_400) ?? 1800
        let json = options.flag("--json")
        let logDirectory = options.string("--log-dir")
        let workerBinary = options.string("--worker-binary")
        let urgentProbe = options.flag("--urgent-probe")
        let pairedBinary = options.string("--paired-binary")
        let chaos = ChaosPlan.parse(&options)
        guard options.finish() else { return 64 }
        if pairedBinary != nil, !chaos.isEmpty || workers < 2 {
            Console.error("herald bench pipeline: --paired-binary needs --workers 2 or more and no faults (a shard taken over is counted by its last worker)")
            return 64
        }

        let environment = DevEnvironment()
        environment.workerExecutable = workerBinary
        environment.pairedExecutable = pairedBinary
        defer { _ = environment }
        let status = await measure(environment, devices: devices, workers: workers, iosShare: iosShare, unregisteredShare: unregisteredShare,
                                   simulatorThreads: simulatorThreads, partitions: Int32(partitions), timeout: timeout, json: json, logDirectory: logDirectory,
                                   urgentProbe: urgentProbe, chaos: chaos)
        await environment.tearDown()
        return status
    }

    private static func measure(_ environment: DevEnvironment, devices: Int, workers: Int, iosShare: Double, unregisteredShare: Double,
                                simulatorThreads: Int, partitions: Int32, timeout: Int, json: Bool, logDirectory: String?, urgentProbe: Bool, chaos plan: ChaosPlan) async -> Int32 {
        do {
            let started = try await environment.start(devices: devices, iosShare: iosShare, unregisteredShare: unregisteredShare,
                                                      workers: workers, partitions: partitions, simulatorThreads: simulatorThreads, quiet: true)
            var workerEnvironment = started.environment
            for (name, value) in ProcessInfo.processInfo.environment where name.hasPrefix("HERALD_") && workerEnvironment[name] == nil
                || ["HERALD_SHARD_SIZE", "HERALD_METRICS_INTERVAL_SECONDS"].contains(name) {
                workerEnvironment[name] = value
            }
            // The workers' logs: kept in --log-dir, else removed with the rest.
            var logs = started.directory
            if let logDirectory {
                logs = URL(fileURLWithPath: logDirectory)
                try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
            }
            let probe = urgentProbe
                ? try await UrgentProbe.prepare(pool: started.pool, credentialsKey: started.credentialsKey,
                                                simulatorDirectory: started.directory.appendingPathComponent("sim"),
                                                unregistered: UnregisteredShare(unregisteredShare))
                : nil
            Console.error("herald bench pipeline: starting \(workers) worker(s) …")
            try await environment.startWorkers(workers, environment: workerEnvironment, directory: logs)
            let audienceRows = try await started.pool.query(
                "SELECT count(*) FROM subscriptions WHERE app_id = 'demo' AND opted_in AND invalidated_at IS NULL")
            let audience = audienceRows.rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
            await started.pool.close()

            let brokers = started.cluster.bootstrapServers
            let topics = environment.topics
            var consumerOptions = KafkaConsumerOptions()
            consumerOptions.maximumInFlight = 200_000
            let consumer = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers, properties: ["session.timeout.ms": "6000"]),
                                             groupID: "herald-bench-\(getpid())", options: consumerOptions)
            try consumer.subscribe(topics: [topics.results])
            // The probes' receipts are read by a consumer of their own (see `UrgentProbe.read`),
            // joining its group while the campaign's reader joins.
            var probeReader: KafkaConsumer?
            if probe != nil {
                let reader = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers, properties: UrgentProbe.readerProperties),
                                               groupID: "herald-bench-probe-\(getpid())", options: consumerOptions)
                try reader.subscribe(topics: [topics.results])
                probeReader = reader
            }
            let readerTask = probe.flatMap { probe in probeReader.map { reader in Task { await probe.read(reader) } } }
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers))
            let jobID = "bench-\(Timestamp.now.seconds)"
            let job: JSONValue = .object([
                "schema": .string(Job.schemaName), "id": .string(jobID), "app_id": .string("demo"), "kind": .string("notification"),
                "created_at": .string(Timestamp.now.description), "audience": .object(["all": .bool(true)]),
                "content": .object(["title": .string("Benchmark"), "body": .string("One campaign to every device.")]),
            ])
            Console.error("herald bench pipeline: \(audience) devices in the audience; sending the campaign …")
            let clock = ContinuousClock()
            if plan.hasProviderFaults {
                started.simulator.faults.set(plan.simulatorFaults(unregistered: UnregisteredShare(unregisteredShare)))
            }
            // CPU from the moment the job is produced: the workers (from /proc/PID/stat, sampled
            // each second, replacements included) and this process (simulators, broker, reader).
            var workerCPU = ProcessCPUMeter(pids: environment.workers.map(\.pid))
            let benchCPU = ProcessCPUMeter.cpuSeconds(of: getpid()) ?? 0
            var lastCPUSample = clock.now
            let produced = clock.now
            _ = try await producer.send(topic: topics.jobs, key: jobID, value: job.serialized())
            let probeTask = probe.map { probe in Task { await probe.run(producer: producer, topic: topics.jobsUrgent) } }
            let drainSeconds = Int(workerEnvironment["HERALD_DRAIN_SECONDS"] ?? "") ?? 30
            let chaos = ChaosRun(plan: plan, drainSeconds: drainSeconds)
            let chaosTask = Task { await chaos.run(environment: environment, started: started, logDirectory: logs, since: produced) }

            var stages: [String: Receipt.Stage] = [:]
            stages.reserveCapacity(audience)
            var repeats = 0
            // Messages read a second time (the reader's group rejoined and resumed from its last
            // commit), told apart from the same receipt in another message (a worker repeat).
            var seenMessages = Set<Int64>()
            var rereads = 0
            var conflicting = 0
            var counts: [Receipt.Stage: Int] = [:]
            var plannedAt: Timestamp?
            var latencies: [Int64] = []
            latencies.reserveCapacity(audience)
            var completedAt: ContinuousClock.Instant?
            var completedTotals: Receipt.Totals?
            var lastProgress = clock.now
            while true {
                if clock.now - produced > .seconds(timeout) {
                    Console.error("herald bench pipeline: no completion within \(timeout) s")
                    break
                }
                if let dead = environment.workers.first(where: { !$0.isRunning && !$0.isStoppedOnPurpose }) {
                    Console.error("herald bench pipeline: a worker exited (status \(dead.terminationStatus)); logs in \(logs.path)")
                    probeTask?.cancel()
                    readerTask?.cancel()
                    chaos.finish()
                    await chaosTask.value
                    return 1
                }
                // After `completed`, read on briefly for receipts still in other partitions.
                if let completedAt, clock.now - completedAt > .seconds(3) { break }
                if clock.now - lastCPUSample > .seconds(1) {
                    lastCPUSample = clock.now
                    workerCPU.sample(environment.workers.map(\.pid))
                }
                guard let message = try await consumer.poll(timeoutMilliseconds: 100) else { continue }
                consumer.markProcessed(message)
                guard seenMessages.insert(Int64(message.partition) << 48 | message.offset).inserted else {
                    rereads += 1
                    continue
                }
                guard let receipt = try? Receipt.decode(message.value) else { continue }
                guard receipt.jobID == jobID else { continue }
                switch receipt.stage {
                case .planned:
                    plannedAt = receipt.at
                case .completed:
                    if completedAt == nil { completedAt = clock.now }
                    completedTotals = receipt.totals
                case let stage where stage.isTerminal:
                    guard let subscription = receipt.subscriptionID else { continue }
                    if let previous = stages[subscription] {
                        if previous == stage { repeats += 1 } else { conflicting += 1 }
                        continue
                    }
                    stages[subscription] = stage
                    counts[stage, default: 0] += 1
                    if let plannedAt { latencies.append(receipt.at.unixMilliseconds - plannedAt.unixMilliseconds) }
                default:
                    break
                }
                if clock.now - lastProgress > .seconds(5) {
                    lastProgress = clock.now
                    Console.error("herald bench pipeline: \(stages.count) of \(audience) receipts")
                }
            }
            let finished = completedAt ?? clock.now
            workerCPU.sample(environment.workers.map(\.pid))
            let benchCPUSeconds = (ProcessCPUMeter.cpuSeconds(of: getpid()) ?? 0) - benchCPU
            probeTask?.cancel()
            await probeTask?.value
            readerTask?.cancel()
            await readerTask?.value
            await probeReader?.close()
            chaos.finish()
            await chaosTask.value
            let elapsed = finished - produced
            let seconds = BenchMeasure.seconds(elapsed)
            // Peak RSS of each worker, before they stop.
            var peakKilobytes = 0
            for worker in environment.workers {
                let status = (try? String(contentsOfFile: "/proc/\(worker.pid)/status", encoding: .utf8)) ?? ""
                for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
                    let digits = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
                    peakKilobytes = max(peakKilobytes, digits)
                }
            }
            await consumer.close()
            let apns = started.simulator.apnsStats.snapshot
            let fcm = started.simulator.fcmStats.snapshot
            latencies.sort()
            func percentile(_ q: Double) -> Int64 {
                guard !latencies.isEmpty else { return 0 }
                return latencies[min(latencies.count - 1, Int(Double(latencies.count - 1) * q))]
            }
            let delivered = (counts[.accepted] ?? 0) + (counts[.unregistered] ?? 0) + (counts[.failed] ?? 0)
            var record = chaos.finalRecord
            record.connectionResets = apns.resets + fcm.resets
            let bound = ChaosRecord.duplicatesBound(stoppedWorkers: record.kills.count + record.sigterms.count, connectionResets: record.connectionResets,
                                                    postgresRestarts: record.postgresRestarts.count, workers: workers,
                                                    shardConcurrency: Int(workerEnvironment["HERALD_SHARD_CONCURRENCY"] ?? "") ?? 4,
                                                    sendWindow: Int(workerEnvironment["HERALD_SEND_WINDOW"] ?? "") ?? 256)
            var duplicates = apns.duplicateDeliveries + fcm.duplicateDeliveries
            if let probe {
                let probeDuplicates = probe.duplicates(deliveries: apns.deliveries[probe.token] ?? 0)
                duplicates += probeDuplicates.real - probeDuplicates.counted
            }
            let lost = max(0, audience - stages.count)
            // A failure scenario passes with nothing lost, duplicates within the bound, no
            // conflicting receipts, every SIGTERM drained in time and every fault injected.
            let passed = completedTotals != nil && lost == 0 && conflicting == 0 && duplicates <= bound
                && record.failedDrains.isEmpty && record.errors.isEmpty
            var members: [String: JSONValue] = [
                "devices": .int(devices), "audience": .int(audience), "workers": .int(workers),
                "accepted": .int(counts[.accepted] ?? 0), "unregistered": .int(counts[.unregistered] ?? 0),
                "failed": .int(counts[.failed] ?? 0), "dropped": .int(counts[.dropped] ?? 0),
                "lost": .int(lost),
                "duplicates": .int(duplicates),
                "duplicate_receipts": .int(repeats), "conflicting_receipts": .int(conflicting), "reread_messages": .int(rereads),
                "completed": .bool(completedTotals != nil),
                "seconds": .double((seconds * 100).rounded() / 100),
                "notifications_per_second": .double((Double(delivered) / max(seconds, 0.001)).rounded()),
                "p50_ms": .int(Int(percentile(0.5))), "p99_ms": .int(Int(percentile(0.99))),
                "peak_rss_mb": .double((Double(peakKilobytes) / 1024).rounded()),
                "simulator_accepted": .int(apns.accepted + fcm.accepted), "protocol_violations": .int(apns.violations + fcm.violations),
                "simulator_requests": .int(apns.requests + fcm.requests),
                "simulator_reasons": .object(apns.reasons.merging(fcm.reasons, uniquingKeysWith: +).mapValues { .int($0) }),
            ]
            // µs of CPU per accepted notification and per terminal receipt (what transfers to
            // another machine, where throughput here also pays for the simulators and broker).
            func microseconds(_ seconds: Double, per count: Int) -> JSONValue {
                count > 0 ? .double((seconds * 1e6 / Double(count) * 10).rounded() / 10) : .null
            }
            members["worker_cpu_seconds"] = .double((workerCPU.seconds * 100).rounded() / 100)
            members["worker_cpu_us_per_notification"] = microseconds(workerCPU.seconds, per: counts[.accepted] ?? 0)
            members["worker_cpu_us_per_terminal_receipt"] = microseconds(workerCPU.seconds, per: stages.count)
            members["bench_cpu_us_per_notification"] = microseconds(benchCPUSeconds, per: counts[.accepted] ?? 0)
            if let probe { members.merge(probe.json) { _, new in new } }
            if let pairedBinary = environment.pairedExecutable {
                members["paired"] = await pairedReport(environment, cpu: workerCPU, logs: logs, jobID: jobID, pairedBinary: pairedBinary,
                                                       campaignAccepted: counts[.accepted] ?? 0)
            }
            if !plan.isEmpty {
                members["faults"] = record.json(duplicatesBound: bound)
                members["duplicates_bound"] = .int(bound)
                members["passed"] = .bool(passed)
            }
            let result = JSONValue.object(members)
            if json {
                print(result.serialized())
            } else {
                for (key, value) in result.objectValue?.sorted(by: { $0.key < $1.key }) ?? [] { print("\(key): \(value.serialized())") }
            }
            if !plan.isEmpty { return passed ? 0 : 1 }
            return completedTotals == nil || stages.count < audience ? 1 : 0
        } catch {
            Console.error("herald bench pipeline: \(error)")
            return 69
        }
    }

    /// Each side's CPU and accepted notifications (``BenchPipelinePairs``). A shard's last line is
    /// logged just after its last receipts are produced: the logs are read again for up to 15 s
    /// until every accepted notification of the campaign is found.
    private static func pairedReport(_ environment: DevEnvironment, cpu: ProcessCPUMeter, logs: URL, jobID: String, pairedBinary: String,
                                     campaignAccepted: Int) async -> JSONValue {
        var a = BenchPipelinePairs.Side(binary: environment.workerExecutable ?? "this build")
        var b = BenchPipelinePairs.Side(binary: pairedBinary)
        let deadline = ContinuousClock.now + .seconds(15)
        repeat {
            a.accepted = 0
            b.accepted = 0
            a.cpuSeconds = 0
            b.cpuSeconds = 0
            for (offset, worker) in environment.workers.enumerated() {
                let index = offset + 1
                let log = (try? String(contentsOf: logs.appendingPathComponent("worker-\(index).log"), encoding: .utf8)) ?? ""
                let accepted = BenchPipelinePairs.accepted(log: log, jobID: jobID)
                if BenchPipelinePairs.runsPaired(index) {
                    b.accepted += accepted
                    b.cpuSeconds += cpu.seconds(of: worker.pid)
                } else {
                    a.accepted += accepted
                    a.cpuSeconds += cpu.seconds(of: worker.pid)
                }
            }
            if a.accepted + b.accepted >= campaignAccepted { break }
            try? await Task.sleep(for: .milliseconds(500))
        } while ContinuousClock.now < deadline
        return BenchPipelinePairs.json(a, b, campaignAccepted: campaignAccepted)
    }
}
