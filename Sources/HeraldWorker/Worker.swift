import Dispatch
import Glibc
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
import HeraldKafka
import HeraldPostgres
import Synchronization

/// Why a worker could not start, with the variable or service to fix.
public struct WorkerStartError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure, which decides the exit status.
    struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case configuration, unavailable, software
        }
        fileprivate let base: Base

        /// A variable is missing or wrong (exit 78, EX_CONFIG).
        static let configuration = Code(base: .configuration)
        /// PostgreSQL or Kafka cannot be used (exit 69, EX_UNAVAILABLE).
        static let unavailable = Code(base: .unavailable)
        /// The process could not make what it needs (event loops: exit 70, EX_SOFTWARE).
        static let software = Code(base: .software)

        var description: String { base.rawValue }
    }

    /// What kind of failure.
    let code: Code
    /// For people: what is wrong and what to do.
    public let message: String
    /// Where the error was raised.
    let file: String
    /// The line where the error was raised.
    let line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// sysexits(3) status: 78 configuration, 69 a service unavailable, 70 internal.
    public var exitStatus: Int32 {
        switch code.base {
        case .configuration: 78
        case .unavailable: 69
        case .software: 70
        }
    }

    public var description: String { message }
}

/// One `herald run` process: the services of docs/ARCHITECTURE.md, started in dependency order (database,
/// producer, provider pools, then the consumers) and stopped in reverse on SIGTERM or SIGINT:
/// stop taking work, checkpoint and release shards in flight, commit what is done, flush the
/// producer, exit.
///
/// Consumer groups: jobs use `HERALD_KAFKA_GROUP`; shards, the urgent lane and device events use
/// the same name with `.shards`, `.urgent` and `.device-events` appended, so each kind of work
/// is balanced over the workers independently and a long shard never holds a job back.
public final class Worker: Sendable {
    public let configuration: WorkerConfiguration
    let log: WorkerLog
    let stop = StopSignal()
    let metrics: WorkerMetrics
    /// The first fatal error of a lane or of the producer, which ends the worker non-zero.
    let fatal = FirstFatalError()

    /// A worker for `configuration` (not started).
    public init(configuration: WorkerConfiguration) {
        self.configuration = configuration
        log = WorkerLog(workerID: configuration.workerID, minimum: configuration.logLevel)
        metrics = WorkerMetrics(workerID: configuration.workerID)
    }

    /// What ``start(_:)`` made: the services to run and what the shutdown needs.
    private struct Parts: Sendable {
        let producer: KafkaProducer
        let services: [any Service]
        let lanes: [Lane]
        let healthPort: Int
    }

    /// Runs until SIGTERM/SIGINT (or ``requestStop()``); returns the exit status.
    ///
    /// The shutdown takes at most `HERALD_DRAIN_SECONDS` from the stop request to the return
    /// (``ShutdownBudget``); should anything hold it past that, the process exits with status 1
    /// (70 after a fatal error) from a thread of its own.
    public func run() async throws(WorkerStartError) -> Int32 {
        try await run(exit: { status in
            LogSink.shared.flush(timeout: .milliseconds(500))
            Glibc.exit(status)
        })
    }

    /// ``run()`` with what to call when the bound passes (tests run it in process).
    func run(exit: @escaping @Sendable (Int32) -> Void) async throws(WorkerStartError) -> Int32 {
        let teardown = Teardown()
        let parts: Parts
        do {
            parts = try await start(teardown)
        } catch {
            _ = await teardown.run(within: .seconds(15))
            throw error
        }
        let signals = installSignalHandlers()
        let configuration = self.configuration
        let unknown = configuration.unknownVariables
        if !unknown.isEmpty {
            log.warning("HERALD_* variables this worker does not read (ignored: a typo?)", ["variables": .array(unknown.map(JSONValue.string))])
        }
        log.info("configuration", ConfigurationAudit.summary(configuration))
        let topics = configuration.topics
        log.info("worker ready", [
            "group": .string(configuration.kafkaGroup),
            "topics": .array([topics.jobs, topics.jobsUrgent, topics.shards, topics.shardsUrgent, topics.deviceEvents].map(JSONValue.string)),
            "results": .string(topics.results), "shard_concurrency": .int(configuration.shardConcurrency),
            "http_port": .int(parts.healthPort),
        ])

        // The bound: whatever still runs when it passes, the process ends.
        let budget = ShutdownBudget(total: configuration.shutdownBound)
        let stop = self.stop
        let log = self.log
        let fatal = self.fatal
        let finished = Shared(false)
        let lanes = parts.lanes
        let armed = Task {
            await stop.wait()
            guard !Task.isCancelled else { return }
            let left = budget.remaining(elapsed: stop.elapsed)
            // On a thread of its own: a stuck cooperative pool must not hold the exit.
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(left.nanoseconds))) {
                guard !finished.withLock({ $0 }) else { return }
                log.error("the shutdown bound passed with work still running; exiting",
                          ["drain_seconds": .int(Int(budget.total.components.seconds))])
                exit(Self.exitStatus(flushed: false, fatal: fatal.first))
            }
            let busy = lanes.reduce(0) { $0 + $1.busy.value }
            log.info("stopping: no new work; checkpointing work in hand", ["busy": .int(busy), "drain_seconds": .int(Int(budget.total.components.seconds))])
        }

        let left = await ServiceGroup(services: parts.services, stop: stop).run(cancelAfter: budget.cancelServices)
        if !left.isEmpty {
            log.error("services still running at the shutdown bound were left behind", ["services": .array(left.map(JSONValue.string))])
        }
        withExtendedLifetime(signals) {}
        let flushed = await parts.producer.flush(timeoutMilliseconds: Int32(clamping: budget.flushTimeout(elapsed: stop.elapsed).milliseconds))
        let late = await teardown.run(within: budget.remaining(elapsed: stop.elapsed))
        finished.withLock { $0 = true }
        armed.cancel()
        let status = Self.exitStatus(flushed: flushed && left.isEmpty && late.isEmpty, fatal: fatal.first)
        log.info("worker stopped", ["producer_flushed": .bool(flushed), "exit_status": .int(Int(status)),
                                    "left_running": .array((left + late).map(JSONValue.string)),
                                    "fatal": fatal.first.map(JSONValue.string) ?? .null])
        return status
    }

    /// Starts the parts of docs/ARCHITECTURE.md in dependency order, registering in `teardown` how to
    /// release each; throws (leaving the release to the caller) when one cannot start.
    private func start(_ teardown: Teardown) async throws(WorkerStartError) -> Parts {
        let configuration = self.configuration
        // 1. PostgreSQL, migrated.
        let key: CredentialsKey
        do {
            guard let text = configuration.credentialsKey, !text.isEmpty else {
                throw WorkerStartError(.configuration, "HERALD_CREDENTIALS_KEY: is required (32 random bytes, base64; the key app credentials were stored with)")
            }
            key = try CredentialsKey(base64: text).opening(also: try CredentialsKey.oldKeys(configuration.credentialsOldKeys))
        } catch let error as WorkerStartError {
            throw error
        } catch {
            // The message names the variable (HERALD_CREDENTIALS_KEY or HERALD_CREDENTIALS_OLD_KEYS).
            throw WorkerStartError(.configuration, (error as? PostgresError)?.message ?? "HERALD_CREDENTIALS_KEY: \(error)")
        }
        if let caFile = configuration.endpoints.caFile {
            do {
                _ = try TLSContext(client: caFile)
            } catch {
                throw WorkerStartError(.configuration, "HERALD_TLS_CA_FILE: \(caFile) is not a usable CA bundle: \(error)")
            }
        }
        var poolConfiguration = PostgresPoolConfiguration(url: configuration.databaseURL, size: configuration.databasePoolSize,
                                                          acquireTimeout: configuration.databaseAcquireTimeout,
                                                          statementTimeout: configuration.databaseStatementTimeout)
        poolConfiguration.applicationName = "herald-\(configuration.workerID)"
        let pool = PostgresPool(poolConfiguration)
        teardown.add("postgres") { await pool.close() }
        do {
            let applied = try await Migrator.appliedVersion(pool)
            let latest = Migration.all.map(\.version).max() ?? 0
            guard applied >= latest else {
                throw WorkerStartError(.configuration, "the database is at migration \(applied), this worker needs \(latest): run `herald migrate` first")
            }
        } catch let error as WorkerStartError {
            throw error
        } catch {
            let hint = "\(error)".contains("herald_schema_migrations") ? " (no Herald schema: run `herald migrate` first)" : ""
            throw WorkerStartError(.unavailable, "HERALD_DATABASE_URL: PostgreSQL is not usable: \(error)\(hint)")
        }

        // 2. Kafka producer, provider pools, the pipeline.
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(configuration: configuration.kafka)
        } catch {
            throw WorkerStartError(.configuration, "HERALD_KAFKA_BROKERS: cannot create a Kafka producer: \(error)")
        }
        let loops: EventLoopGroup
        do {
            loops = try EventLoopGroup(count: configuration.eventLoops)
        } catch {
            throw WorkerStartError(.software, "cannot start the provider event loops: \(error)")
        }
        teardown.add("event loops") { loops.shutdown() }
        let guards = InvalidationGuards(window: configuration.invalidationWindow, threshold: configuration.invalidationThreshold)
        let directory = ProviderDirectory(apps: AppRepository(pool: pool, key: key), endpoints: configuration.endpoints, loops: loops, guards: guards)
        teardown.add("provider pools") { directory.shutdown() }
        let publisher = ReceiptPublisher(producer: producer, topics: configuration.topics, log: log)
        let context = PipelineContext(workerID: configuration.workerID, jobs: JobRepository(pool: pool), audience: AudienceResolver(pool: pool),
                                      subscriptions: SubscriptionRepository(pool: pool), directory: directory, publisher: publisher,
                                      metrics: metrics, log: log, settings: configuration.shard, stop: stop)
        // Scheduling (issue 10): sub-jobs planned into scheduled_jobs, released by the scheduler.
        let clock = SystemWallClock()
        let scheduling = SchedulePlanner(schedule: ScheduleRepository(pool: pool), jobs: JobRepository(pool: pool), clock: clock, log: log) { receipts in
            try await publisher.publish(receipts)
        }
        let scheduler = Scheduler(repository: ScheduleRepository(pool: pool), clock: clock, workerID: configuration.workerID, log: log,
                                  sink: Scheduler.kafkaSink(producer: producer, topics: configuration.topics))
        var shardRunner = ShardRunner(context: context)
        shardRunner.scheduling = scheduling
        shardRunner.retryWaits = ScheduleRepository(pool: pool)
        let throttles = ThrottleRepository(pool: pool)
        shardRunner.throttles = throttles
        let workerLog = self.log
        shardRunner.rateLimits = ProviderRateLimits(ceilings: configuration.providerCeilings, clock: clock, overrides: { appID in
            do {
                return try await throttles.providerCeilings(appID: appID)
            } catch {
                workerLog.warning("cannot read the app's provider ceilings; using the defaults", ["app_id": .string(appID), "error": .string("\(error)")])
                return (nil, nil)
            }
        }, workers: { scheduler.liveWorkers })
        let runner = shardRunner
        var jobPlanner = JobPlanner(context: context, runner: runner, shardSize: configuration.shardSize,
                                    liveActivities: LiveActivityRepository(pool: pool))
        jobPlanner.scheduling = scheduling
        let planner = jobPlanner
        let events = DeviceEventProcessor(context: context, dedupe: DeviceEventDedupe(pool: pool))

        // 3. Consumers, last: from here on work arrives.
        let topics = configuration.topics
        let group = configuration.kafkaGroup
        // The urgent lane asks the broker to answer a fetch within 10 ms (librdkafka waits up to
        // 500 ms for data by default), so a one-time code is not held by an idle fetch.
        var urgentKafka = configuration.kafka
        if urgentKafka.properties["fetch.wait.max.ms"] == nil { urgentKafka.properties["fetch.wait.max.ms"] = "10" }
        let lanes: [Lane]
        do {
            lanes = [
                try Lane(name: "urgent", groupID: group + ".urgent", topics: [topics.jobsUrgent, topics.shardsUrgent],
                         concurrency: configuration.jobConcurrency, ordered: true, configuration: urgentKafka, log: log),
                try Lane(name: "jobs", groupID: group, topics: [topics.jobs],
                         concurrency: configuration.jobConcurrency, ordered: true, configuration: configuration.kafka, log: log),
                try Lane(name: "shards", groupID: group + ".shards", topics: [topics.shards],
                         concurrency: configuration.shardConcurrency, ordered: false, configuration: configuration.kafka, log: log),
                try Lane(name: "device-events", groupID: group + ".device-events", topics: [topics.deviceEvents],
                         concurrency: configuration.jobConcurrency, ordered: true, configuration: configuration.kafka, log: log),
            ]
        } catch {
            throw WorkerStartError(.unavailable, "HERALD_KAFKA_BROKERS: cannot join the consumer groups: \(error)")
        }
        // Closed by their services on a stop; here for a start that fails later (closing twice waits for the one close).
        teardown.add("consumers") { for lane in lanes { await lane.consumer.close() } }

        // 4. Health and metrics. Two figures live elsewhere and are read in when asked for: the
        // consumers' partition assignments (rebalances) and the provider pools' open connections.
        let gaugeMetrics = self.metrics
        let administration = JobAdministration(pool: pool)
        // The cluster-wide backlog costs a query: read at most every 10 s, whoever asks.
        let backlogReadAt = Mutex<ContinuousClock.Instant?>(nil)
        let refreshGauges: @Sendable () async -> Void = {
            let now = ContinuousClock.now
            let due = backlogReadAt.withLock { last in
                guard last.map({ now - $0 >= .seconds(10) }) ?? true else { return false }
                last = now
                return true
            }
            if due, let backlog = try? await administration.backlog() {
                gaugeMetrics.setBacklog(haltedApps: backlog.haltedApps, parkedRetries: backlog.parkedRetries,
                                        scheduledDue: backlog.scheduledDue, scheduledWaiting: backlog.scheduledWaiting)
            }
            gaugeMetrics.setRebalances(lanes.reduce(0) { $0 + $1.consumer.statistics.assignments })
            let usage = pool.usage
            gaugeMetrics.setDatabasePool(inUse: usage.inUse, idle: usage.idle, waiting: usage.waiting)
            for lane in lanes {
                gaugeMetrics.setOldestUnprocessed(lane: lane.name, seconds: lane.inHand.oldestSeconds())
                gaugeMetrics.setConsumerLag(lane: lane.name, Int(lane.consumer.lag))
            }
            for (provider, open) in await directory.openConnections() {
                gaugeMetrics.setOpenConnections(provider: provider.rawValue, open)
            }
        }
        // Liveness: heartbeats of every part that must keep turning, sampled every second
        // and by each /healthz (docs/operations.md, "Health and metrics").
        let heartbeats = HeartbeatBoard()
        let stallAfter = configuration.stallAfter
        let sampleHeartbeats: @Sendable () -> [String] = {
            let now = ContinuousClock.now
            return heartbeats.update { monitor in
                for (index, loop) in loops.loops.enumerated() { monitor.observe("event-loop-\(index)", count: loop.iterationCount, at: now) }
                for lane in lanes { monitor.observe("consumer-\(lane.name)", count: lane.consumer.pollIterations, at: now) }
                monitor.observe("producer", count: producer.pollIterations, at: now)
                return monitor.stalled(at: now, after: stallAfter)
            }
        }
        let database = DatabaseProbe(url: configuration.databaseURL)
        teardown.add("readiness probe") { await database.close() }
        var healthPort = 0
        if configuration.httpPort != 0 {
            let metrics = self.metrics
            let stop = self.stop
            let buildVersion = configuration.buildVersion
            let buildRevision = configuration.buildRevision
            let server = HealthServer(host: configuration.httpHost, port: configuration.httpPort) { path in
                switch path {
                case "/healthz":
                    let stalled = sampleHeartbeats()
                    if stalled.isEmpty { return HealthServer.Response(status: 200, body: "ok\n") }
                    return HealthServer.Response(status: 503, body: "stalled: \(stalled.joined(separator: " "))\n")
                case "/readyz":
                    let joined = lanes.filter { $0.consumer.statistics.assignments > 0 }.count
                    let answer = Readiness.answer(stopping: stop.isSet, lanesJoined: joined, lanes: lanes.count,
                                                  databaseAnswers: stop.isSet || joined < lanes.count ? true : await database.answers())
                    return HealthServer.Response(status: answer.status, body: answer.body)
                case "/metrics":
                    await refreshGauges()
                    let process = ProcessStatistics.prometheusText(ProcessStatistics.current(), version: buildVersion, revision: buildRevision)
                    return HealthServer.Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                                                 body: metrics.prometheusText() + process)
                default:
                    return HealthServer.Response(status: 404, body: "not found\n")
                }
            }
            do {
                try server.start()
            } catch {
                throw WorkerStartError(.unavailable, "HERALD_HTTP_PORT: \(error)")
            }
            // It answers until the very end: /readyz says "stopping" meanwhile.
            teardown.add("health server") { server.stop() }
            healthPort = server.port
        }

        let log = self.log
        let metrics = self.metrics
        let fatal = self.fatal
        let budget = ShutdownBudget(total: configuration.shutdownBound)
        // A producer that failed fatally sends nothing more: stop, and exit non-zero so the
        // orchestrator restarts the process with a new one.
        let producerWatch = ClosureService(name: "producer-watch") { stop in
            while !stop.isSet {
                if let error = producer.fatalError {
                    log.error("the Kafka producer failed fatally; stopping", ["error": .string(error.description)])
                    fatal.record("producer: \(error)")
                    stop.set()
                    break
                }
                await stop.sleep(for: .seconds(1))
            }
        }
        let heartbeatWatch = ClosureService(name: "heartbeat-watch") { stop in
            var reported: [String] = []
            while !stop.isSet {
                let stalled = sampleHeartbeats()
                if stalled != reported && !stalled.isEmpty {
                    log.error("heartbeats stalled; /healthz fails", ["stalled": .array(stalled.map(JSONValue.string)),
                                                                      "stall_seconds": .int(Int(stallAfter.components.seconds))])
                }
                reported = stalled
                await stop.sleep(for: .seconds(1))
            }
        }
        let handler: @Sendable (KafkaMessage) async -> Bool = { message in
            if message.topic == topics.shards || message.topic == topics.shardsUrgent {
                return await Self.handleShard(message, context: context, runner: runner, liveActivities: planner.liveActivities)
            }
            if message.topic == topics.deviceEvents { return await events.handle(message) }
            return await planner.handle(message)
        }
        var services: [any Service] = [producerWatch]
        services += lanes.map { LaneService(lane: $0, fatal: fatal, workInHand: budget.workInHand, handler: handler) }
        services += [
            heartbeatWatch,
            scheduler,
            RetentionSweeper(pool: pool, retentionDays: configuration.retentionDays, log: log),
            HaltedJobSweeper(administration: JobAdministration(pool: pool), publisher: publisher, log: log,
                             interval: configuration.haltedSweepInterval),
            MetricsPublisher(metrics: metrics, publisher: publisher, log: log, interval: configuration.metricsInterval,
                             refresh: refreshGauges),
        ]
        return Parts(producer: producer, services: services, lanes: lanes, healthPort: healthPort)
    }

    /// 0 after a clean stop; 70 (EX_SOFTWARE) after a fatal error of a lane or the producer;
    /// 1 when receipts could not be flushed to the broker.
    static func exitStatus(flushed: Bool, fatal: String?) -> Int32 {
        if fatal != nil { return 70 }
        return flushed ? 0 : 1
    }

    /// Asks the worker to stop, as SIGTERM does.
    func requestStop() { stop.set() }

    private func installSignalHandlers() -> [any DispatchSourceSignal] {
        [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            let stop = self.stop
            let log = self.log
            source.setEventHandler {
                log.info("signal received", ["signal": .int(Int(number))])
                stop.set()
            }
            source.resume()
            return source
        }
    }

    /// Runs one shard message: decodes it (a bad one is dead-lettered), reads its job from the
    /// `jobs` table, and runs it. A live-activity job's shard (re-queued by `herald jobs resume`)
    /// goes to the activity's tokens with the job's recorded numbering verdict, never to an audience.
    /// A shard whose job has no row, or whose run fails for good, is dead-lettered.
    static func handleShard(_ message: KafkaMessage, context: PipelineContext, runner: ShardRunner,
                            liveActivities: LiveActivityPlanner) async -> Bool {
        let shard: Shard
        do {
            shard = try Shard.decode(message.value)
        } catch {
            return await PipelineDeadLetters.send(message, cause: .invalid, reason: "invalid shard message: \(error)", attempts: 1, context: context)
        }
        let subject: [String: JSONValue] = ["job_id": .string(shard.jobID), "shard": .int(shard.shardNo)]
        let work = await MessageRetrier.run(message, context: context, subject: subject) { () async throws -> Bool in
            guard let stored = try await context.jobs.storedJob(id: shard.jobID) else { throw UnknownJob(jobID: shard.jobID) }
            let job: Job
            do {
                job = try Job(json: try JSONValue.parse(stored.body))
            } catch {
                throw ValidationError(at: .root, "the stored job \(shard.jobID) no longer validates: \(error)")
            }
            if job.kind == .liveActivity {
                return try await liveActivities.run(job, stored: stored)
            }
            return try await runner.run(job: job, shard: shard).committingMessage()
        }
        switch work {
        case .done(let commits):
            return commits
        case .stopped:
            return false
        case .gaveUp(let failure, let cause, let attempts):
            let reason = "shard \(shard.jobID)/\(shard.shardNo): \(failure.detail)"
            return await PipelineDeadLetters.send(message, cause: cause, reason: reason, attempts: attempts, context: context)
        }
    }
}

/// A shard message whose job has no row in `jobs` (removed by retention or by hand).
struct UnknownJob: PermanentMessageError {
    let jobID: String
    var cause: DeadLetter.Cause { .unknownJob }
    var description: String { "unknown job \(jobID): no row in jobs" }
}
