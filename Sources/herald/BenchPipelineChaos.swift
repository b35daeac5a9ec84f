import Foundation
import HeraldCore
import HeraldKafka
import HeraldSim
import HeraldWorker

/// The faults `herald bench pipeline` injects while its job runs (the failure suite,
/// `scripts/chaos`). Times are seconds after the job is produced.
struct ChaosPlan: Sendable, Equatable {
    /// Provider faults in force from the moment the job is produced.
    var tooManyRequestsRate = 0.0
    var serverErrorRate = 0.0
    var retryAfterSeconds = 1
    var goawayEvery = 0
    var resetEvery = 0
    var stallEverySeconds = 0.0
    var stallSeconds = 2.0
    /// Provider latency per answer (real providers answer in tens to hundreds of milliseconds;
    /// it also makes a job last long enough for its faults).
    var latencyMilliseconds = 0
    /// TLS handshake failures: open connections dropped, new ones failing, for a while.
    var tlsFailAt: Double?
    var tlsFailSeconds = 30.0
    /// `kill -9` of a worker every `killEvery` seconds (the first at `killFirstAt`, else at
    /// `killEvery`) while the job runs, at most `maximumKills` times (0: no limit).
    var killEvery: Double?
    var killFirstAt: Double?
    var maximumKills = 0
    /// SIGTERM to one worker: it must drain and exit 0 within its deadline.
    var sigtermAt: Double?
    var postgresRestartAt: Double?
    var brokerDownAt: Double?
    var brokerDownSeconds = 20.0

    static let usage = """
          Faults (the failure suite; times in seconds after the job is produced):
          --rate-429 X --rate-5xx X --retry-after S    share of provider answers 429 / 5xx (half 500, half 503), Retry-After
          --goaway-every N --reset-every N             GOAWAY / TCP reset after every N requests on a connection
          --latency-ms MS                              provider answers take MS milliseconds
          --stall-every S [--stall-seconds D]          every S seconds the providers stop answering for D (default 2) seconds
          --tls-fail-at T [--tls-fail-for D]           at T, drop the provider connections and fail TLS handshakes for D (default 30) seconds
          --kill-every S [--kill-first-at T] [--kills N]  kill -9 a worker every S seconds while the job runs, starting a new one
          --sigterm-at T                               SIGTERM a worker: it must exit 0 within HERALD_DRAIN_SECONDS + 2 s; a new one starts
          --postgres-restart-at T                      restart PostgreSQL (pg_ctl restart -m fast)
          --broker-down-at T [--broker-down-for D]     take the Kafka brokers down for D (default 20) seconds
        """

    /// Reads the fault options (a malformed one is reported by the parser's `finish`).
    static func parse(_ options: inout OptionParser) -> ChaosPlan {
        var plan = ChaosPlan()
        plan.tooManyRequestsRate = options.double("--rate-429", in: 0...1) ?? 0
        plan.serverErrorRate = options.double("--rate-5xx", in: 0...1) ?? 0
        plan.retryAfterSeconds = options.int("--retry-after", in: 0...3600) ?? 1
        plan.goawayEvery = options.int("--goaway-every", in: 0...Int(Int32.max)) ?? 0
        plan.resetEvery = options.int("--reset-every", in: 0...Int(Int32.max)) ?? 0
        plan.stallEverySeconds = options.double("--stall-every", in: 0...3600) ?? 0
        plan.stallSeconds = options.double("--stall-seconds", in: 0...3600) ?? 2
        plan.latencyMilliseconds = options.int("--latency-ms", in: 0...60_000) ?? 0
        plan.tlsFailAt = options.double("--tls-fail-at", in: 0...86_400)
        plan.tlsFailSeconds = options.double("--tls-fail-for", in: 0...3600) ?? 30
        plan.killEvery = options.double("--kill-every", in: 1...86_400)
        plan.killFirstAt = options.double("--kill-first-at", in: 0...86_400)
        plan.maximumKills = options.int("--kills", in: 0...10_000) ?? 0
        plan.sigtermAt = options.double("--sigterm-at", in: 0...86_400)
        plan.postgresRestartAt = options.double("--postgres-restart-at", in: 0...86_400)
        plan.brokerDownAt = options.double("--broker-down-at", in: 0...86_400)
        plan.brokerDownSeconds = options.double("--broker-down-for", in: 0...3600) ?? 20
        return plan
    }

    /// The provider faults, as the simulators take them.
    func simulatorFaults(unregistered: UnregisteredShare) -> SimulatorFaults {
        var faults = SimulatorFaults()
        faults.unregistered = unregistered
        faults.tooManyRequestsRate = tooManyRequestsRate
        faults.serverErrorRate = serverErrorRate
        faults.retryAfterSeconds = retryAfterSeconds
        faults.goawayEvery = goawayEvery
        faults.resetEvery = resetEvery
        faults.stallEverySeconds = stallEverySeconds
        faults.stallSeconds = stallEverySeconds > 0 ? stallSeconds : 0
        faults.latencyMilliseconds = latencyMilliseconds
        return faults
    }

    var hasProviderFaults: Bool {
        tooManyRequestsRate > 0 || serverErrorRate > 0 || goawayEvery > 0 || resetEvery > 0 || stallEverySeconds > 0
            || latencyMilliseconds > 0
    }

    var isEmpty: Bool {
        !hasProviderFaults && tlsFailAt == nil && killEvery == nil && sigtermAt == nil && postgresRestartAt == nil && brokerDownAt == nil
    }

    /// When the `number`th kill (0-based) is due.
    func killTime(_ number: Int) -> Double? {
        guard let killEvery, maximumKills == 0 || number < maximumKills else { return nil }
        return (killFirstAt ?? killEvery) + Double(number) * killEvery
    }
}

/// What the faults did, and the duplicates they may cause.
struct ChaosRecord: Sendable, Equatable {
    struct Stop: Sendable, Equatable {
        var at: Double
        var worker: String
        var exitStatus: Int32
        /// From the signal to the exit.
        var seconds: Double
    }

    var kills: [Stop] = []
    var sigterms: [Stop] = []
    /// The SIGTERM deadline: HERALD_DRAIN_SECONDS, the worker's whole shutdown, + 2 s for the
    /// process to end and be reaped.
    var sigtermDeadlineSeconds = 32.0
    var postgresRestarts: [Double] = []
    var brokerOutages: [Double] = []
    var tlsFailureSeconds: [Double] = []
    /// Connections the simulators reset (`--reset-every`, `--tls-fail-at`).
    var connectionResets = 0
    var errors: [String] = []

    /// The SIGTERM drains that failed: a status other than 0, or later than the deadline.
    var failedDrains: [Stop] {
        sigterms.filter { $0.exitStatus != 0 || $0.seconds > sigtermDeadlineSeconds }
    }

    /// How many simulator deliveries may repeat (docs/ARCHITECTURE.md): a worker stopped, by kill -9 or by a
    /// SIGTERM whose drain left sends unanswered, resends for each shard it held (at most
    /// `shardConcurrency`) the sends in flight (`sendWindow`) plus one checkpoint interval (at most
    /// 1,000 sends); a connection reset resends what was in flight on it, at most the worker's
    /// sends in flight, capped by the streams a connection allows; a PostgreSQL restart may end
    /// the shard runs of every worker (a statement that is not idempotent fails), each as a stop.
    static func duplicatesBound(stoppedWorkers: Int, connectionResets: Int, postgresRestarts: Int = 0, workers: Int = 0,
                                shardConcurrency: Int, sendWindow: Int, streamsPerConnection: Int = 1000) -> Int {
        let perStop = shardConcurrency * (sendWindow + 1000)
        let perReset = min(streamsPerConnection, shardConcurrency * sendWindow)
        return (stoppedWorkers + postgresRestarts * workers) * perStop + connectionResets * perReset
    }

    func json(duplicatesBound: Int) -> JSONValue {
        func stops(_ list: [Stop]) -> JSONValue {
            .array(list.map { stop in
                .object(["at": .double(Self.rounded(stop.at)), "worker": .string(stop.worker), "exit_status": .int(Int(stop.exitStatus)),
                         "seconds": .double(Self.rounded(stop.seconds))])
            })
        }
        return .object([
            "kills": stops(kills), "sigterms": stops(sigterms), "sigterm_deadline_seconds": .double(sigtermDeadlineSeconds),
            "postgres_restart_seconds": .array(postgresRestarts.map { .double(Self.rounded($0)) }),
            "broker_outage_seconds": .array(brokerOutages.map { .double(Self.rounded($0)) }),
            "tls_failure_seconds": .array(tlsFailureSeconds.map { .double(Self.rounded($0)) }),
            "connection_resets": .int(connectionResets), "errors": .array(errors.map { .string($0) }),
            "duplicates_bound": .int(duplicatesBound),
        ])
    }

    static func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }
}

/// Runs a ``ChaosPlan`` against a started environment while the caller watches the receipts.
/// `@unchecked Sendable`: `record` is touched under `lock` only.
final class ChaosRun: @unchecked Sendable {
    let plan: ChaosPlan
    private let lock = NSLock()
    private var state = ChaosRecord()
    private let finished = StopSignal()

    init(plan: ChaosPlan, drainSeconds: Int) {
        self.plan = plan
        state.sigtermDeadlineSeconds = Double(drainSeconds + 2)
    }

    var record: ChaosRecord { lock.withLock { state } }

    /// The record, with an error for each planned fault the job ended before (a scenario whose
    /// fault never happened proves nothing).
    var finalRecord: ChaosRecord {
        var record = self.record
        if plan.killEvery != nil && record.kills.isEmpty { record.errors.append("the job ended before the first kill") }
        if plan.sigtermAt != nil && record.sigterms.isEmpty { record.errors.append("the job ended before the SIGTERM") }
        if plan.postgresRestartAt != nil && record.postgresRestarts.isEmpty { record.errors.append("the job ended before the PostgreSQL restart") }
        if plan.brokerDownAt != nil && record.brokerOutages.isEmpty { record.errors.append("the job ended before the brokers went down") }
        if plan.tlsFailAt != nil && record.tlsFailureSeconds.isEmpty { record.errors.append("the job ended before the TLS failures") }
        return record
    }

    /// Ends the schedule (the job is done or given up): nothing more is injected.
    func finish() { finished.set() }

    private func update(_ change: (inout ChaosRecord) -> Void) { lock.withLock { change(&state) } }

    private func note(_ line: String) { Console.error("herald bench pipeline: chaos: \(line)") }

    /// Injects the plan's faults on schedule until ``finish()``; returns once every fault it
    /// started is undone (brokers up, PostgreSQL running, replacements ready).
    func run(environment: DevEnvironment, started: DevEnvironment.Started, logDirectory: URL, since produced: ContinuousClock.Instant) async {
        let clock = ContinuousClock()
        func elapsed() -> Double { BenchMeasure.seconds(clock.now - produced) }
        /// Waits until `time` seconds after the job was produced; false once the run is over.
        func wait(until time: Double) async -> Bool {
            while elapsed() < time {
                if finished.isSet { return false }
                try? await Task.sleep(for: .milliseconds(50))
            }
            return !finished.isSet
        }
        await withTaskGroup(of: Void.self) { tasks in
            if let at = plan.tlsFailAt {
                tasks.addTask {
                    guard await wait(until: at) else { return }
                    self.note("TLS handshakes fail for \(self.plan.tlsFailSeconds) s")
                    started.simulator.faults.failHandshakes(forSeconds: self.plan.tlsFailSeconds)
                    self.update { $0.tlsFailureSeconds.append(self.plan.tlsFailSeconds) }
                }
            }
            if plan.killEvery != nil {
                tasks.addTask {
                    var number = 0
                    while let at = self.plan.killTime(number), await wait(until: at) {
                        await self.stopWorker(SIGKILL, at: at, environment: environment, logDirectory: logDirectory)
                        number += 1
                    }
                }
            }
            if let at = plan.sigtermAt {
                tasks.addTask {
                    guard await wait(until: at) else { return }
                    await self.stopWorker(SIGTERM, at: at, environment: environment, logDirectory: logDirectory)
                }
            }
            if let at = plan.postgresRestartAt {
                tasks.addTask {
                    guard await wait(until: at) else { return }
                    self.note("restarting PostgreSQL")
                    let begun = clock.now
                    do {
                        try await started.postgres.restart()
                        let seconds = BenchMeasure.seconds(clock.now - begun)
                        self.note("PostgreSQL restarted in \(ChaosRecord.rounded(seconds)) s")
                        self.update { $0.postgresRestarts.append(seconds) }
                    } catch {
                        self.update { $0.errors.append("PostgreSQL restart: \(error)") }
                    }
                }
            }
            if let at = plan.brokerDownAt {
                tasks.addTask {
                    guard await wait(until: at) else { return }
                    do {
                        try started.cluster.setBrokersDown()
                    } catch {
                        self.update { $0.errors.append("brokers down: \(error)") }
                        return
                    }
                    self.note("Kafka brokers down for \(self.plan.brokerDownSeconds) s")
                    let begun = clock.now
                    // Up again after the outage even if the job ends meanwhile.
                    try? await Task.sleep(for: .milliseconds(Int64(self.plan.brokerDownSeconds * 1000)))
                    do {
                        try started.cluster.setBrokersUp()
                    } catch {
                        self.update { $0.errors.append("brokers up: \(error)") }
                    }
                    let seconds = BenchMeasure.seconds(clock.now - begun)
                    self.note("Kafka brokers up after \(ChaosRecord.rounded(seconds)) s")
                    self.update { $0.brokerOutages.append(seconds) }
                }
            }
        }
    }

    /// Stops the longest-running live worker with `number` (SIGKILL or SIGTERM), waits for its
    /// exit, records it and starts a new worker in its place.
    private func stopWorker(_ number: Int32, at: Double, environment: DevEnvironment, logDirectory: URL) async {
        guard let victim = environment.workers.first(where: { $0.isRunning && !$0.isStoppedOnPurpose }) else {
            update { $0.errors.append("no running worker to signal at \(at) s") }
            return
        }
        let name = number == SIGKILL ? "kill -9" : "SIGTERM"
        note("\(name) worker pid \(victim.pid)")
        let clock = ContinuousClock()
        let begun = clock.now
        victim.stopOnPurpose(number)
        // A SIGTERM that outlives its deadline by far is ended, and counted as failed.
        let limit = begun + .seconds(number == SIGKILL ? 30 : Int(record.sigtermDeadlineSeconds) + 30)
        while victim.isRunning && clock.now < limit { try? await Task.sleep(for: .milliseconds(20)) }
        if victim.isRunning {
            victim.signal(SIGKILL)
            while victim.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        }
        let seconds = BenchMeasure.seconds(clock.now - begun)
        let stop = ChaosRecord.Stop(at: at, worker: String(victim.pid), exitStatus: victim.terminationStatus, seconds: seconds)
        note("\(name) worker pid \(victim.pid): exit status \(stop.exitStatus) after \(ChaosRecord.rounded(seconds)) s; starting a new worker")
        update { record in
            if number == SIGKILL { record.kills.append(stop) } else { record.sigterms.append(stop) }
        }
        do {
            try await environment.startReplacementWorker(directory: logDirectory)
        } catch {
            update { $0.errors.append("replacement worker: \(error)") }
        }
    }
}
