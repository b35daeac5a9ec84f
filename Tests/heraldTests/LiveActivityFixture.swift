import Foundation
import Glibc
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldTestSupport
import Synchronization
import Testing

/// The world of one issue-9 scenario: a database, a `herald sim --log`, topics and a consumer
/// group of its own on the test broker, `herald run` workers, and every receipt read from the
/// results topic. Its helper types are nested so they never clash with other suites' fixtures.
final class LiveActivityFixture {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    let name: String
    let app = "live"
    let serverURL: String
    let brokers: String
    let binary = TestEnvironment.heraldBinary
    let directory: URL
    let databaseURL: String
    let pool: PostgresPool
    let credentialsKey: String
    let topics: [String: String]
    let producer: KafkaProducer
    let receipts = Receipts()
    private(set) var simulator: BackgroundProcess?
    private(set) var apnsPort = 0
    private(set) var fcmPort = 0
    private(set) var workers: [BackgroundProcess] = []
    /// Each worker's `/metrics` port, by label.
    private(set) var metricsPorts: [String: Int] = [:]
    private var tail: Task<Void, Never>?
    private var consumer: KafkaConsumer?

    init(_ scenario: String) async throws {
        serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        brokers = try TestEnvironment.require(TestEnvironment.kafkaVariable)
        name = TestEnvironment.uniqueName("live_\(scenario)").lowercased()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-\(name)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        credentialsKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        guard let psql = Subprocess.which("psql") else { throw Failure("psql is not on PATH") }
        let created = try Subprocess.run(psql, [serverURL, "-qc", "CREATE DATABASE \(name)"])
        guard created.status == 0 else { throw Failure("CREATE DATABASE: \(created.stderr)") }
        let base = serverURL.prefix { $0 != "?" }
        databaseURL = String(base[..<(base.lastIndex(of: "/") ?? base.endIndex)]) + "/" + name
        pool = PostgresPool(PostgresPoolConfiguration(url: databaseURL, size: 2, applicationName: "herald-live-test"))
        let topics = WorkerEnvironment.topics(name)
        self.topics = topics
        producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers))
        let migrated = try await Subprocess.runDetached(binary, ["migrate", "--database-url", databaseURL])
        guard migrated.status == 0 else { throw Failure("herald migrate: \(migrated.stderr)") }

        // Receipts, read from the start of the results topic.
        let configuration = KafkaConfiguration(bootstrapServers: brokers, properties: [
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "topic.metadata.refresh.interval.ms": "1000",
        ])
        var options = KafkaConsumerOptions()
        options.maximumInFlight = 100_000
        options.log = { _ in }
        let consumer = try KafkaConsumer(configuration: configuration, groupID: "\(name).reader", options: options)
        try consumer.subscribe(topics: [topics["HERALD_TOPIC_RESULTS"]!])
        self.consumer = consumer
        let receipts = self.receipts
        tail = Task.detached {
            while !Task.isCancelled {
                do {
                    guard let message = try await consumer.poll(timeoutMilliseconds: 200) else { continue }
                    receipts.record(message.value)
                    consumer.markProcessed(message)
                } catch {
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
        }
    }

    var baseEnvironment: [String: String] {
        var environment = topics
        environment["HERALD_DATABASE_URL"] = databaseURL
        environment["HERALD_KAFKA_BROKERS"] = brokers
        environment["HERALD_CREDENTIALS_KEY"] = credentialsKey
        return environment
    }

    var simDirectory: URL { directory.appendingPathComponent("sim") }

    /// Starts `herald sim --log 5000` and creates the app with its credentials.
    func startSimulator(_ arguments: [String] = []) async throws {
        let sim = try BackgroundProcess(binary: binary, arguments: ["sim", "--state-dir", simDirectory.path, "--log", "5000"] + arguments,
                                 environment: [:], logs: directory, label: "sim")
        simulator = sim
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, apnsPort == 0 {
            if let line = sim.stdout.split(separator: "\n").first(where: { $0.contains("apns_port") }),
               let ready = try? JSONValue.parse(Array(line.utf8)), let apns = ready["apns_port"]?.liveInteger, let fcm = ready["fcm_port"]?.liveInteger {
                apnsPort = Int(apns)
                fcmPort = Int(fcm)
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        guard apnsPort != 0 else { throw Failure("herald sim did not get ready: \(sim.stderr)") }
        let seeded = try await Subprocess.runDetached(binary, ["seed", "--database-url", databaseURL, "--app", app,
                                                               "--credentials-from", simDirectory.path], environment: baseEnvironment, timeout: 60)
        guard seeded.status == 0 else { throw Failure("herald seed: \(seeded.stderr)") }
    }

    /// Starts `count` workers and waits for each to print "worker ready".
    func startWorkers(_ count: Int) async throws {
        var started: [BackgroundProcess] = []
        for _ in 0..<count {
            let id = "w\(workers.count + 1)-\(name)"
            let port = try TestPorts.free()
            metricsPorts[id] = port
            let environment = WorkerEnvironment.make(baseEnvironment, apnsPort: apnsPort, fcmPort: fcmPort,
                                                     caFile: simDirectory.appendingPathComponent("ca.pem"),
                                                     id: id, group: "\(name).workers", httpPort: port)
            let worker = try BackgroundProcess(binary: binary, arguments: ["run"], environment: environment, logs: directory, label: id)
            workers.append(worker)
            started.append(worker)
        }
        for worker in started {
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, !worker.stdout.contains("worker ready"), worker.isRunning {
                try await Task.sleep(for: .milliseconds(100))
            }
            guard worker.stdout.contains("worker ready") else { throw Failure("\(worker.label) not ready: \(worker.stderr.suffix(2000))") }
        }
    }

    /// Waits (up to `seconds`, then goes on) until every worker's consumers have had an assignment and no
    /// worker's `herald_rebalances_total` has moved for `quiet` seconds: the group has settled,
    /// so the work that follows is not moved between members mid-stream by a late join.
    func waitForSettledGroup(quiet: Double = 6, seconds: Double = 90) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        var last: [Int]?
        var since = Date()
        while Date() < deadline {
            var counts: [Int] = []
            for (label, port) in metricsPorts.sorted(by: { $0.key < $1.key }) {
                // A worker not answering yet counts as no rebalance.
                let text = (try? await metricsText(port: port, label: label)) ?? ""
                counts.append(prometheusSum(text, metric: "herald_rebalances_total") ?? 0)
            }
            if counts != last {
                last = counts
                since = Date()
            } else if counts.allSatisfy({ $0 >= 1 }) && Date().timeIntervalSince(since) >= quiet {
                return
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        // The scenario goes on and judges what it sees; the log says why it may have been moved.
        FileHandle.standardError.write(Data("live activities: the workers' group did not settle within \(Int(seconds)) s: rebalances \(last ?? [])\n".utf8))
    }

    // MARK: data

    /// Inserts a subscription; returns its id.
    @discardableResult
    func subscription(_ id: String, platform: Platform, token: String, voipToken: String? = nil, sdk: Bool = true) async throws -> String {
        try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token, voip_token, sdk) VALUES ($1::uuid, $2, $3, $4, $5, $6::boolean)",
                             [id, app, platform.rawValue, token, voipToken, sdk ? "true" : "false"], idempotent: false)
        return id
    }

    /// Attaches an iOS subscription to an activity with an activity push token.
    func activityToken(activity: String, subscription: String, token: String) async throws {
        try await pool.query("INSERT INTO live_activities (app_id, activity_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [app, activity], idempotent: false)
        try await pool.query("INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token) VALUES ($1, $2, $3::uuid, $4)",
                             [app, activity, subscription, token], idempotent: false)
    }

    func value(_ sql: String, _ parameters: [String?] = []) async throws -> String? {
        try await pool.query(sql, parameters).rows.first?.first ?? nil
    }

    /// Produces jobs in order, keyed as the upstream API keys them.
    func produce(_ jobs: [(key: String, json: String)]) async throws {
        let messages = jobs.map { KafkaProducerMessage(topic: topics["HERALD_TOPIC_JOBS"]!, key: Array($0.key.utf8), value: Array($0.json.utf8)) }
        for result in await producer.sendAll(messages) { _ = try result.get() }
    }

    /// A live-activity job document; `extra` adds members to `live_activity`.
    func liveJob(id: String, activity: String, event: String, stream: String, sequence: Int64, state: String, extra: String = "",
                 audience: String? = nil) -> (key: String, json: String) {
        let audienceMember = audience.map { #","audience":\#($0)"# } ?? ""
        return ("\(app)/\(activity)", """
            {"schema":"herald.job.v1","id":"\(id)","app_id":"\(app)","kind":"live_activity","created_at":"\(Timestamp.now.rfc3339)"\(audienceMember),\
            "live_activity":{"activity_id":"\(activity)","event":"\(event)","stream_id":"\(stream)","sequence":\(sequence),"content_state":\(state)\(extra)}}
            """)
    }

    /// What the simulator accepted for `token`, in order (`GET /_sim/log`).
    func log(_ platform: Platform, token: String) async throws -> [JSONValue] {
        let port = platform == .ios ? apnsPort : fcmPort
        let encoded = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token
        let result = try await Subprocess.runDetached(URL(fileURLWithPath: "/usr/bin/curl"), [
            "-sS", "--http2", "--cacert", simDirectory.appendingPathComponent("ca.pem").path, "https://127.0.0.1:\(port)/_sim/log?token=\(encoded)",
        ], timeout: 60)
        guard result.status == 0, let entries = try JSONValue.parse(Array(result.stdout.utf8))["entries"]?.arrayValue else {
            throw Failure("GET /_sim/log: \(result.status) \(result.stderr)")
        }
        return entries
    }

    /// Simulator counts (`GET /_sim/stats`).
    func stats(_ platform: Platform) async throws -> JSONValue {
        let port = platform == .ios ? apnsPort : fcmPort
        let result = try await Subprocess.runDetached(URL(fileURLWithPath: "/usr/bin/curl"), [
            "-sS", "--http2", "--cacert", simDirectory.appendingPathComponent("ca.pem").path, "https://127.0.0.1:\(port)/_sim/stats",
        ], timeout: 60)
        return try JSONValue.parse(Array(result.stdout.utf8))
    }

    /// Waits until `condition` holds (every 200 ms); false after `seconds`.
    func wait(seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            if !workers.isEmpty && workers.allSatisfy({ !$0.isRunning }) {
                throw Failure("every worker exited: \(workers.map { $0.stderr.suffix(1500) })")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        return try await condition()
    }

    /// Waits until each job is completed and every terminal receipt its totals count has been
    /// read (the results topic has several partitions: device receipts are keyed by
    /// subscription, the `completed` event by job, so the event may be read first).
    func waitCompleted(_ jobs: [String], seconds: Double) async throws -> Bool {
        try await wait(seconds: seconds) { receipts.settled(jobs) }
    }

    /// SIGKILL: a crash, no drain. The worker is left out of the exit statuses.
    func kill(_ worker: BackgroundProcess) {
        killed.insert(worker.label)
        Glibc.kill(worker.process.processIdentifier, SIGKILL)
    }

    private var killed: Set<String> = []

    /// Runs `body` on a fixture for `scenario` and tears it down: the logs stay, and `failure` goes
    /// to stderr, when `body` throws; otherwise every worker not killed must have exited 0.
    static func with(_ scenario: String, failure: String, _ body: (LiveActivityFixture) async throws -> Void) async throws {
        let fixture = try await LiveActivityFixture(scenario)
        var failed = true
        defer { if failed { FileHandle.standardError.write(Data("\(failure)\n".utf8)) } }
        do {
            try await body(fixture)
            failed = false
        } catch {
            _ = await fixture.tearDown(keepLogs: true)
            throw error
        }
        let statuses = await fixture.tearDown(keepLogs: false)
        #expect(statuses.allSatisfy { $0 == 0 }, "worker exit statuses \(statuses)")
    }

    /// Stops everything and drops the database; logs stay when `keepLogs`. Returns the exit
    /// statuses of the workers not killed.
    func tearDown(keepLogs: Bool) async -> [Int32] {
        var statuses: [Int32] = []
        for worker in workers {
            let status = await worker.stop()
            if !killed.contains(worker.label) { statuses.append(status) }
        }
        simulator.map { _ = Subprocess.stop($0.process) }
        tail?.cancel()
        _ = await tail?.value
        await consumer?.close()
        _ = await producer.flush(timeoutMilliseconds: 2000)
        await pool.close()
        if let psql = Subprocess.which("psql") {
            _ = try? await Subprocess.runDetached(psql, [serverURL, "-qc", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
        }
        if keepLogs {
            FileHandle.standardError.write(Data("live activity e2e: logs of \(name) kept in \(directory.path)\n".utf8))
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
        return statuses
    }

    /// Every receipt of the scenario.
    final class Receipts: Sendable {
        private let state = Mutex<[Receipt]>([])

        func record(_ bytes: [UInt8]) {
            guard let receipt = try? Receipt.decode(bytes) else { return }
            state.withLock { $0.append(receipt) }
        }

        var all: [Receipt] { state.withLock { $0 } }

        func completed(_ job: String) -> Bool {
            state.withLock { $0.contains { $0.jobID == job && $0.stage == .completed } }
        }

        /// Whether every job has its `completed` event and as many distinct terminal receipts
        /// as its totals say.
        /// For a failure message: per job, the totals of its `completed` event and its terminal receipts.
        func describe(_ jobs: [String]) -> String {
            let all = self.all
            return jobs.map { job in
                let totals = all.first { $0.jobID == job && $0.stage == .completed }?.totals
                let terminal = all.filter { $0.jobID == job && $0.stage.isTerminal }.map { "\($0.subscriptionID ?? "-"):\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" }
                return "\(job): totals \(totals.map { "\($0)" } ?? "none") terminal \(terminal)"
            }.joined(separator: "\n")
        }

        func settled(_ jobs: [String]) -> Bool {
            let all = self.all
            var expected: [String: Int64] = [:]
            var terminal: [String: Set<String>] = [:]
            let wanted = Set(jobs)
            for receipt in all where wanted.contains(receipt.jobID) {
                if receipt.stage == .completed, let totals = receipt.totals {
                    expected[receipt.jobID] = totals.accepted + totals.unregistered + totals.failed + totals.dropped
                } else if receipt.stage.isTerminal {
                    terminal[receipt.jobID, default: []].insert(receipt.id)
                }
            }
            return jobs.allSatisfy { job in expected[job].map { Int64(terminal[job]?.count ?? 0) >= $0 } ?? false }
        }

        /// Terminal receipts by job, then subscription (distinct receipt ids only).
        func terminal() -> [String: [String: [Receipt]]] {
            var seen = Set<String>()
            var result: [String: [String: [Receipt]]] = [:]
            for receipt in all where receipt.stage.isTerminal {
                guard seen.insert(receipt.id).inserted, let subscription = receipt.subscriptionID else { continue }
                result[receipt.jobID, default: [:]][subscription, default: []].append(receipt)
            }
            return result
        }
    }
}

extension JSONValue {
    /// The value as a whole number, if it is one.
    var liveInteger: Int64? {
        if case .number(let number) = self { return number.int64 }
        return nil
    }
}
