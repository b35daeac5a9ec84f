import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldSim
import HeraldTestSupport
import Synchronization

/// One end-to-end scenario's world: a database of its own, a `herald sim`, topics and a
/// consumer group of its own on the shared broker, `herald run` workers, and a reader of the
/// results topic. Used from one test task only.
final class PipelineFixture {
    /// Where the pipeline suite found its services.
    struct Services {
        let serverURL: String
        let brokers: String
        /// `HERALD_PIPELINE_BIN` (a release build) when set, else the `herald` the other CLI tests run.
        let binary: URL

        static func fromEnvironment() throws -> Services {
            let environment = ProcessInfo.processInfo.environment
            let binary = environment["HERALD_PIPELINE_BIN"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) } ?? TestEnvironment.heraldBinary
            return Services(serverURL: try TestEnvironment.require(TestEnvironment.databaseVariable),
                            brokers: try TestEnvironment.require(TestEnvironment.kafkaVariable), binary: binary)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    let name: String
    let services: Services
    let directory: URL
    let databaseName: String
    let databaseURL: String
    let pool: PostgresPool
    /// 32 random bytes, base64: what `herald seed` encrypted the credentials under, and the workers read.
    let credentialsKey: String
    /// `HERALD_TOPIC_*` → this scenario's topic name.
    let topics: [String: String]
    let producer: KafkaProducer
    let results: ReceiptLog
    private(set) var simulator: SimProcess?
    private(set) var workers: [WorkerProcess] = []
    private var tails: [TopicTail] = []
    private let started = Date()

    init(_ scenario: String) async throws {
        services = try Services.fromEnvironment()
        name = TestEnvironment.uniqueName("e2e_\(scenario)").lowercased()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-\(name)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        credentialsKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()

        databaseName = name
        let psql = try PipelineFixture.psql()
        let created = try Subprocess.run(psql, [services.serverURL, "-qc", "CREATE DATABASE \(databaseName)"])
        guard created.status == 0 else { throw Failure("CREATE DATABASE \(databaseName): \(created.stderr)") }
        let base = services.serverURL.prefix { $0 != "?" }
        databaseURL = String(base[..<(base.lastIndex(of: "/") ?? base.endIndex)]) + "/" + databaseName
        pool = PostgresPool(PostgresPoolConfiguration(url: databaseURL, size: 2, statementTimeout: .seconds(120), applicationName: "herald-e2e"))

        let topics = WorkerEnvironment.topics(name)
        self.topics = topics
        producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: services.brokers))
        results = ReceiptLog()

        let migrated = try await Subprocess.runDetached(services.binary, ["migrate", "--database-url", databaseURL])
        guard migrated.status == 0 else { throw Failure("herald migrate: \(migrated.stderr)") }
        let results = self.results
        tails.append(try TopicTail(brokers: services.brokers, topic: topics["HERALD_TOPIC_RESULTS"]!, group: "\(name).reader") { message in
            results.record(message.value)
        })
    }

    static func psql() throws -> URL {
        guard let psql = Subprocess.which("psql") else { throw Failure("psql is not on PATH") }
        return psql
    }

    var seconds: Double { Date().timeIntervalSince(started) }

    /// Environment shared by `herald run`, `herald seed` and `herald jobs`.
    var baseEnvironment: [String: String] {
        var environment = topics
        environment["HERALD_DATABASE_URL"] = databaseURL
        environment["HERALD_KAFKA_BROKERS"] = services.brokers
        environment["HERALD_CREDENTIALS_KEY"] = credentialsKey
        return environment
    }

    // MARK: simulator

    /// Starts `herald sim` with `arguments` (fault options) on a state directory of this scenario.
    func startSimulator(_ arguments: [String] = []) throws -> SimProcess {
        let sim = try SimProcess(binary: services.binary, directory: directory.appendingPathComponent("sim"), arguments: arguments,
                                 logs: directory)
        simulator = sim
        return sim
    }

    // MARK: database

    /// `herald seed` of `devices` subscriptions (half iOS) with the simulator's credentials.
    func seed(app: String, devices: Int) async throws -> Double {
        guard let simulator else { throw Failure("start the simulator before seeding") }
        let begin = Date()
        let result = try await Subprocess.runDetached(services.binary, [
            "seed", "--database-url", databaseURL, "--app", app, "--devices", String(devices),
            "--credentials-from", simulator.stateDirectory.path, "--ios-share", "0.5",
        ], environment: baseEnvironment, timeout: 300)
        guard result.status == 0 else { throw Failure("herald seed exited \(result.status): \(result.stderr)") }
        return Date().timeIntervalSince(begin)
    }

    struct Subscription: Sendable {
        let id: String
        let platform: Platform
        let token: String
    }

    /// The subscriptions a job for `app` with audience `all` targets now: opted in, not invalidated.
    func audience(app: String) async throws -> [String: Subscription] {
        let rows = try await pool.query("""
            SELECT id::text, platform, token FROM subscriptions WHERE app_id = $1 AND opted_in AND invalidated_at IS NULL
            """, [app])
        var audience: [String: Subscription] = [:]
        audience.reserveCapacity(rows.rows.count)
        for row in rows.rows {
            guard let id = row[0], let platform = row[1].flatMap(Platform.init(rawValue:)), let token = row[2] else {
                throw Failure("unexpected subscriptions row \(row)")
            }
            audience[id] = Subscription(id: id, platform: platform, token: token)
        }
        return audience
    }

    func count(_ sql: String, _ parameters: [String?] = []) async throws -> Int {
        let rows = try await pool.query(sql, parameters)
        return rows.rows.first?.first.flatMap { $0.flatMap { Int($0) } } ?? 0
    }

    /// Ids of `app`'s subscriptions with `invalidated_at` set.
    func invalidated(app: String) async throws -> Set<String> {
        let rows = try await pool.query("SELECT id::text FROM subscriptions WHERE app_id = $1 AND invalidated_at IS NOT NULL", [app])
        return Set(rows.rows.compactMap { $0[0] })
    }

    /// The simulator's APNs credentials from its state directory.
    func simulatorAPNsCredentials() throws -> APNsTokenCredentials {
        guard let simulator else { throw Failure("no simulator") }
        let pem = try String(contentsOf: simulator.stateDirectory.appendingPathComponent("apns-key.p8"), encoding: .utf8)
        let settings = try JSONSerialization.jsonObject(with: Data(contentsOf: simulator.stateDirectory.appendingPathComponent("apns.json"))) as? [String: Any]
        guard let keyID = settings?["key_id"] as? String, let teamID = settings?["team_id"] as? String, let bundleID = settings?["bundle_id"] as? String else {
            throw Failure("apns.json is incomplete")
        }
        return APNsTokenCredentials(keyID: keyID, teamID: teamID, bundleID: bundleID, environment: "production", privateKeyPEM: pem)
    }

    func simulatorFCMCredentials() throws -> FCMCredentials {
        guard let simulator else { throw Failure("no simulator") }
        let text = try String(contentsOf: simulator.stateDirectory.appendingPathComponent("fcm-service-account.json"), encoding: .utf8)
        let account = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        guard let project = account?["project_id"] as? String else { throw Failure("fcm-service-account.json has no project_id") }
        return FCMCredentials(projectID: project, serviceAccountJSON: text)
    }

    /// Replaces the app's credentials in place (subscriptions stay), as the upstream API would.
    func updateApp(_ app: String, apns: APNsTokenCredentials?, fcm: FCMCredentials?) async throws {
        let key = try CredentialsKey(base64: credentialsKey)
        try await AppRepository(pool: pool, key: key).upsert(id: app, name: app, apns: apns, fcm: fcm)
    }

    // MARK: workers

    /// Starts `count` more `herald run` workers and waits until each printed "worker ready".
    @discardableResult
    func startWorkers(_ count: Int, shardSize: Int = 5000, extra: [String: String] = [:]) async throws -> [WorkerProcess] {
        guard let simulator else { throw Failure("start the simulator before the workers") }
        var started: [WorkerProcess] = []
        for _ in 0..<count {
            let index = workers.count + 1
            var environment = WorkerEnvironment.make(baseEnvironment, apnsPort: simulator.apnsPort, fcmPort: simulator.fcmPort,
                                                     caFile: simulator.stateDirectory.appendingPathComponent("ca.pem"),
                                                     id: "w\(index)-\(name)", group: "\(name).workers", httpPort: try TestPorts.free())
            environment["HERALD_SHARD_SIZE"] = String(shardSize)
            // Metrics reports every second, so a test reads a job's totals there soon after it ends.
            environment["HERALD_METRICS_INTERVAL_SECONDS"] = "1"
            environment.merge(extra) { _, new in new }
            let worker = try WorkerProcess(binary: services.binary, id: environment["HERALD_WORKER_ID"]!, environment: environment, logs: directory)
            workers.append(worker)
            started.append(worker)
        }
        for worker in started {
            guard await worker.waitUntilReady(seconds: 60) else {
                throw Failure("\(worker.id) printed no \"worker ready\" within 60 s (running: \(worker.isRunning)); stderr:\n\(worker.stderrTail())\nstdout:\n\(worker.stdoutTail())")
            }
        }
        return started
    }

    // MARK: jobs

    /// Produces a job to the jobs topic keyed by its id.
    func produceJob(_ json: String, id: String) async throws {
        _ = try await producer.send(topic: topics["HERALD_TOPIC_JOBS"]!, key: id, value: json)
    }

    /// A minimal notification job.
    static func job(id: String, app: String, audience: String) -> String {
        """
        {"schema":"herald.job.v1","id":"\(id)","app_id":"\(app)","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
        "audience":\(audience),"content":{"title":"Herald e2e","body":"Job \(id)"}}
        """
    }

    /// Starts reading a topic of this scenario (the dead-letter topic, say) into `handler`.
    func tail(_ variable: String, handler: @escaping @Sendable (KafkaMessage) -> Void) throws {
        tails.append(try TopicTail(brokers: services.brokers, topic: topics[variable]!, group: "\(name).\(variable.lowercased())") { handler($0) })
    }

    /// Waits until `condition` holds, checking every half second; false after `seconds`.
    /// Fails early when every worker has exited.
    func wait(seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            if !workers.isEmpty && workers.allSatisfy({ !$0.isRunning }) {
                throw Failure("every worker exited; last stderr of each:\n" + workers.map { "\($0.id) (status \($0.exitStatus ?? -1)):\n\($0.stderrTail())" }.joined(separator: "\n"))
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        return try await condition()
    }

    /// Runs `herald jobs resume ID`.
    func resume(job: String) async throws -> Subprocess.Result {
        try await Subprocess.runDetached(services.binary, ["jobs", "resume", job], environment: baseEnvironment, timeout: 60)
    }

    // MARK: teardown

    /// Stops the workers with SIGTERM and returns their exit statuses (a worker killed earlier reports its signal).
    func stopWorkers() async -> [String: Int32] {
        var statuses: [String: Int32] = [:]
        await withTaskGroup(of: (String, Int32).self) { group in
            for worker in workers {
                group.addTask { (worker.id, await worker.stop()) }
            }
            for await (id, status) in group { statuses[id] = status }
        }
        return statuses
    }

    /// Stops everything this scenario started and drops its database. Worker logs stay in
    /// `directory` when the scenario failed (the caller passes `keepLogs`).
    func tearDown(keepLogs: Bool) async {
        _ = await stopWorkers()
        for tail in tails { await tail.stop() }
        simulator?.terminate()
        _ = await producer.flush(timeoutMilliseconds: 2000)
        await pool.close()
        if let psql = try? PipelineFixture.psql() {
            _ = try? await Subprocess.runDetached(psql, [services.serverURL, "-qc", "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)"])
        }
        if keepLogs {
            FileHandle.standardError.write(Data("pipeline e2e: logs of \(name) kept in \(directory.path)\n".utf8))
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

// MARK: - Processes

/// The environment of a `herald run` worker against both simulators.
enum WorkerEnvironment {
    /// Every `HERALD_TOPIC_*` variable, each topic named `name.<lane>`: a scenario's topics of its own.
    static func topics(_ name: String) -> [String: String] {
        var topics: [String: String] = [:]
        for (variable, suffix) in [("HERALD_TOPIC_JOBS", "jobs"), ("HERALD_TOPIC_JOBS_URGENT", "jobs.urgent"), ("HERALD_TOPIC_SHARDS", "shards"),
                                   ("HERALD_TOPIC_SHARDS_URGENT", "shards.urgent"), ("HERALD_TOPIC_RESULTS", "results"),
                                   ("HERALD_TOPIC_DEVICE_EVENTS", "device-events"), ("HERALD_TOPIC_METRICS", "metrics"), ("HERALD_TOPIC_DLQ", "dlq")] {
            topics[variable] = "\(name).\(suffix)"
        }
        return topics
    }

    /// `base` and the simulators' endpoints (their CA trusted, the FCM token host allowed), the
    /// worker's id, health port and consumer group, and Kafka timings for a test's time.
    static func make(_ base: [String: String], apnsPort: Int, fcmPort: Int, caFile: URL, id: String, group: String,
                     httpPort: Int) -> [String: String] {
        var environment = base
        environment["HERALD_APNS_ENDPOINT"] = "https://127.0.0.1:\(apnsPort)"
        environment["HERALD_FCM_ENDPOINT"] = "https://127.0.0.1:\(fcmPort)"
        environment["HERALD_FCM_TOKEN_HOSTS"] = "127.0.0.1"
        environment["HERALD_TLS_CA_FILE"] = caFile.path
        environment["HERALD_HTTP_PORT"] = String(httpPort)
        environment["HERALD_WORKER_ID"] = id
        environment["HERALD_KAFKA_GROUP"] = group
        // The mock cluster evicts a dead member after the session timeout (librdkafka's default
        // is 45 s); shorter here so a killed worker's partitions move on within the test's time.
        environment["HERALD_KAFKA_PROPERTY_SESSION_TIMEOUT_MS"] = "6000"
        environment["HERALD_KAFKA_PROPERTY_HEARTBEAT_INTERVAL_MS"] = "500"
        environment["HERALD_KAFKA_PROPERTY_TOPIC_METADATA_REFRESH_INTERVAL_MS"] = "1000"
        return environment
    }
}

/// A background `herald` process whose output goes to files (a pipe nobody reads would block it).
class BackgroundProcess: @unchecked Sendable {
    // Process is thread-safe enough for isRunning/processIdentifier/terminationStatus; the
    // files are only appended to by the child.
    let process = Process()
    /// Names the log files (`label.out`, `label.err`): "sim", or the worker's id.
    let label: String
    let stdoutFile: URL
    let stderrFile: URL

    init(binary: URL, arguments: [String], environment: [String: String], logs: URL, label: String) throws {
        self.label = label
        stdoutFile = logs.appendingPathComponent("\(label).out")
        stderrFile = logs.appendingPathComponent("\(label).err")
        _ = FileManager.default.createFile(atPath: stdoutFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = try FileHandle(forWritingTo: stdoutFile)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }
    var exitStatus: Int32? { process.isRunning ? nil : process.terminationStatus }

    var stdout: String { (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    func stdoutTail(lines: Int = 15) -> String { stdout.split(separator: "\n").suffix(lines).joined(separator: "\n") }
    func stderrTail(lines: Int = 15) -> String { stderr.split(separator: "\n").suffix(lines).joined(separator: "\n") }

    /// SIGTERM, then SIGKILL after `grace` seconds; the exit status, on a thread of its own.
    func stop(grace: TimeInterval = 20) async -> Int32 {
        let process = self.process
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: Subprocess.stop(process, grace: grace)) }
        }
    }

    /// SIGKILL, no drain: a crash.
    func killHard() {
        kill(process.processIdentifier, SIGKILL)
    }
}

/// `herald sim` with its ready line read.
final class SimProcess: BackgroundProcess, @unchecked Sendable {
    let stateDirectory: URL
    private(set) var apnsPort = 0
    private(set) var fcmPort = 0

    init(binary: URL, directory: URL, arguments: [String], logs: URL) throws {
        stateDirectory = directory
        try super.init(binary: binary, arguments: ["sim", "--state-dir", directory.path] + arguments, environment: [:], logs: logs, label: "sim")
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let line = stdout.split(separator: "\n").first(where: { $0.contains("apns_port") }),
               let ready = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
               let apns = ready["apns_port"] as? Int, let fcm = ready["fcm_port"] as? Int {
                apnsPort = apns
                fcmPort = fcm
                return
            }
            if !isRunning { break }
            usleep(50_000)
        }
        throw PipelineFixture.Failure("herald sim did not get ready: \(stderrTail())")
    }

    /// What one simulator saw (`GET /_sim/stats?tokens=1`).
    struct Stats {
        var accepted = 0
        /// FCM messages checked under validate_only (never delivered).
        var validated = 0
        var requests = 0
        var duplicateDeliveries = 0
        var reasons: [String: Int] = [:]
        var deliveries: [String: Int] = [:]
    }

    func stats(_ platform: Platform) async throws -> Stats {
        let port = platform == .ios ? apnsPort : fcmPort
        let result = try await Subprocess.runDetached(URL(fileURLWithPath: "/usr/bin/curl"), [
            "-sS", "--http2", "--cacert", stateDirectory.appendingPathComponent("ca.pem").path, "https://127.0.0.1:\(port)/_sim/stats?tokens=1",
        ], timeout: 60)
        guard result.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw PipelineFixture.Failure("GET /_sim/stats on \(port): \(result.status) \(result.stderr)")
        }
        return Stats(accepted: json["accepted"] as? Int ?? -1, validated: json["validated"] as? Int ?? -1, requests: json["requests"] as? Int ?? -1,
                     duplicateDeliveries: json["duplicate_deliveries"] as? Int ?? -1,
                     reasons: json["reasons"] as? [String: Int] ?? [:], deliveries: json["deliveries"] as? [String: Int] ?? [:])
    }

    func reset() async throws {
        for port in [apnsPort, fcmPort] {
            let result = try await Subprocess.runDetached(URL(fileURLWithPath: "/usr/bin/curl"), [
                "-sS", "--http2", "-X", "POST", "--cacert", stateDirectory.appendingPathComponent("ca.pem").path, "https://127.0.0.1:\(port)/_sim/reset",
            ])
            guard result.status == 0 else { throw PipelineFixture.Failure("POST /_sim/reset on \(port): \(result.stderr)") }
        }
    }

    func terminate() { Subprocess.stop(process) }
}

/// One `herald run`.
final class WorkerProcess: BackgroundProcess, @unchecked Sendable {
    let id: String
    /// Where its `/metrics`, `/healthz` and `/readyz` answer.
    let httpPort: Int?

    init(binary: URL, id: String, environment: [String: String], logs: URL) throws {
        self.id = id
        httpPort = environment["HERALD_HTTP_PORT"].flatMap { Int($0) }
        try super.init(binary: binary, arguments: ["run"], environment: environment, logs: logs, label: id)
    }

    func waitUntilReady(seconds: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if stdout.contains("worker ready") { return true }
            if !isRunning { return false }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return stdout.contains("worker ready")
    }

    /// Log lines (stdout is JSON lines) that look like errors, for a failure message.
    func errorLines(limit: Int = 10) -> String {
        // (librdkafka's CONFWARN about the consumer settings this fixture passes to every client is noise.)
        let lines = (stdout + "\n" + stderr).split(separator: "\n").filter {
            ($0.contains("\"error\"") || $0.contains("\"level\":\"error\"") || $0.contains("\"level\":\"warning\"") || $0.contains("rror:") || $0.contains("atal"))
                && !$0.contains("CONFWARN")
        }
        return lines.suffix(limit).joined(separator: "\n")
    }
}

// MARK: - Kafka

/// A consumer of one topic in a background task, handing every message to `handler`.
final class TopicTail: Sendable {
    private let consumer: KafkaConsumer
    private let task: Task<Void, Never>

    init(brokers: String, topic: String, group: String, handler: @escaping @Sendable (KafkaMessage) -> Void) throws {
        let configuration = KafkaConfiguration(bootstrapServers: brokers, properties: [
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "topic.metadata.refresh.interval.ms": "1000",
        ])
        var options = KafkaConsumerOptions()
        options.maximumInFlight = 100_000
        options.log = { _ in }
        let consumer = try KafkaConsumer(configuration: configuration, groupID: group, options: options)
        try consumer.subscribe(topics: [topic])
        self.consumer = consumer
        task = Task.detached {
            while !Task.isCancelled {
                do {
                    guard let message = try await consumer.poll(timeoutMilliseconds: 200) else { continue }
                    handler(message)
                    consumer.markProcessed(message)
                } catch {
                    FileHandle.standardError.write(Data("pipeline e2e: reading \(topic): \(error)\n".utf8))
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
        }
    }

    func stop() async {
        task.cancel()
        _ = await task.value
        await consumer.close()
    }
}

/// Every receipt read from the results topic, indexed the ways the scenarios check them.
final class ReceiptLog: Sendable {
    struct State {
        /// First copy of each receipt id.
        var byID: [String: Receipt] = [:]
        /// Copies of an id identical to the first (job, subscription, stage, reason, platform,
        /// provider, totals), e.g. a producer retry or a resend after a crash.
        var repeats = 0
        /// Copies of an id that differ from the first in what they say: never allowed.
        var conflicts: [String] = []
        /// Terminal receipts per job per subscription, by stage.
        var terminal: [String: [String: Set<Receipt.Stage>]] = [:]
        /// Job-level events per job, in arrival order.
        var jobEvents: [String: [Receipt]] = [:]
        /// Messages that did not decode as `herald.receipt.v1`.
        var undecodable: [String] = []
        var messages = 0
    }

    private let state = Mutex(State())

    func record(_ bytes: [UInt8]) {
        let decoded: Receipt
        do { decoded = try Receipt.decode(bytes) } catch {
            state.withLock { state in
                state.messages += 1
                if state.undecodable.count < 20 { state.undecodable.append("\(error): \(String(decoding: bytes.prefix(300), as: UTF8.self))") }
            }
            return
        }
        state.withLock { state in
            state.messages += 1
            let id = decoded.id
            if let first = state.byID[id] {
                if ReceiptLog.sameStatement(first, decoded) {
                    state.repeats += 1
                } else if state.conflicts.count < 50 {
                    state.conflicts.append("\(id): first \(first.json.serializedString) then \(decoded.json.serializedString)")
                }
                return
            }
            state.byID[id] = decoded
            if decoded.stage.isJobLevel {
                state.jobEvents[decoded.jobID, default: []].append(decoded)
            } else if decoded.stage.isTerminal, let subscription = decoded.subscriptionID {
                state.terminal[decoded.jobID, default: [:]][subscription, default: []].insert(decoded.stage)
            }
        }
    }

    /// Whether two receipts with one id say the same thing (times, attempts and provider ids
    /// may differ when a delivery was repeated).
    static func sameStatement(_ a: Receipt, _ b: Receipt) -> Bool {
        a.jobID == b.jobID && a.subscriptionID == b.subscriptionID && a.stage == b.stage && a.reason == b.reason && a.platform == b.platform
            && a.provider == b.provider && a.totals == b.totals
    }

    var snapshot: State { state.withLock { $0 } }

    func terminalCount(job: String) -> Int { state.withLock { $0.terminal[job]?.count ?? 0 } }

    func events(job: String, stage: Receipt.Stage) -> [Receipt] {
        state.withLock { ($0.jobEvents[job] ?? []).filter { $0.stage == stage } }
    }

    /// The terminal receipt per subscription of `job` (the first of each stage).
    func terminalReceipts(job: String) -> [String: [Receipt]] {
        state.withLock { state in
            var result: [String: [Receipt]] = [:]
            for (subscription, stages) in state.terminal[job] ?? [:] {
                result[subscription] = stages.compactMap { state.byID["\(job):\(subscription):\($0.rawValue)"] }
            }
            return result
        }
    }
}

extension JSONValue {
    var serializedString: String { String(decoding: serializedBytes(), as: UTF8.self) }
}
