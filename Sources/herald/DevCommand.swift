import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldSim
import HeraldWorker

/// `herald dev [--devices N] [--workers W] [--demo] [--exit]`: everything on one machine
/// (docs/operations.md): an embedded Kafka broker, a throwaway PostgreSQL, the APNs/FCM simulators, a
/// demo app with N devices, and W `herald run` worker processes; `--demo` also sends a campaign,
/// a VoIP push and a live-activity sequence and shows their progress. Ctrl-C stops and removes everything.
enum DevCommand {
    static let usage = """
        usage: herald dev [--devices N] [--workers W] [--demo] [--exit] [--ios-share X] [--unregistered-share X] [--timeout S]
          --devices N             demo devices to seed (default 10000)
          --workers W             worker processes (default 2)
          --demo                  send a demo campaign, a VoIP push and a live activity (start, 3 updates, end), show progress and a summary
          --exit                  with --demo: exit 0 once every demo receipt is in (1 on --timeout, default 600 s)
          --ios-share X           share of iOS devices (default 0.5)
          --unregistered-share X  share of tokens the simulators call unregistered (default 0.01)
          --log-dir DIR           write the workers' logs to DIR and keep them (default: a temporary folder, removed)
        """

    struct Options {
        var devices = 10_000
        var workers = 2
        var demo = false
        var exitWhenDone = false
        var iosShare = 0.5
        var unregisteredShare = 0.01
        var timeoutSeconds = 600
        var logDirectory: String?
    }

    static func parse(_ arguments: [String]) -> Options? {
        var parser = OptionParser(arguments, command: "herald dev", usage: usage, flags: ["--demo", "--exit"])
        var options = Options()
        options.demo = parser.flag("--demo")
        options.exitWhenDone = parser.flag("--exit")
        options.devices = parser.int("--devices", in: 0...5_000_000) ?? options.devices
        options.workers = parser.int("--workers", in: 1...32) ?? options.workers
        options.timeoutSeconds = parser.int("--timeout", in: 1...Int(Int32.max)) ?? options.timeoutSeconds
        options.iosShare = parser.double("--ios-share", in: 0...1) ?? options.iosShare
        options.unregisteredShare = parser.double("--unregistered-share", in: 0...1) ?? options.unregisteredShare
        options.logDirectory = parser.string("--log-dir")
        guard parser.finish() else { return nil }
        if options.logDirectory?.isEmpty == true {
            Console.error("herald dev: --log-dir takes a directory")
            return nil
        }
        if options.exitWhenDone && !options.demo {
            Console.error("herald dev: --exit only makes sense with --demo")
            return nil
        }
        return options
    }

    static func run(_ arguments: [String]) async -> Int32 {
        if arguments == ["--help"] || arguments == ["-h"] {
            print(usage)
            return 0
        }
        guard let options = parse(arguments) else { return 64 }
        let stop = StopSignal()
        let signals = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.set() }
            source.resume()
            return source
        }
        defer { withExtendedLifetime(signals) {} }
        let environment = DevEnvironment()
        let status = await environment.run(options, stop: stop)
        await environment.tearDown()
        return status
    }
}

/// The services of one `herald dev` run, and their teardown.
final class DevEnvironment: @unchecked Sendable {
    var postgres: DevPostgres?
    var cluster: EmbeddedKafkaCluster?
    var simulator: Simulator?
    var directory: URL?
    /// Worker processes started so far (replacements of stopped ones included). Behind a lock:
    /// `herald bench pipeline`'s fault schedule adds replacements while the job is watched.
    var workers: [DevChild] { workerLock.withLock { workerList } }
    private let workerLock = NSLock()
    private var workerList: [DevChild] = []
    private var workerBase: [String: String]?

    let topics = WorkerConfiguration.Topics()
    /// The `herald` binary the workers run: this one unless set (a bench comparing builds).
    var workerExecutable: String?
    /// The binary the even-numbered workers run instead (`herald bench pipeline --paired-binary`).
    var pairedExecutable: String?

    func say(_ line: String) {
        print(line)
        fflush(nil)
    }

    /// What a started environment offers its user.
    struct Started {
        let directory: URL
        let postgres: DevPostgres
        let cluster: EmbeddedKafkaCluster
        let simulator: Simulator
        let pool: PostgresPool
        let credentialsKey: String
        let environment: [String: String]
    }

    /// Starts PostgreSQL, the broker (topics of `partitions`), the simulators, migrates and seeds
    /// the `demo` app; the workers are started by the caller.
    func start(devices: Int, iosShare: Double, unregisteredShare: Double, workers: Int, partitions: Int32 = 4,
               simulatorThreads: Int = 1, quiet: Bool = false) async throws -> Started {
        var template = Array("/tmp/herald-dev.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw DevPostgres.Failure(description: "cannot create a temporary directory in /tmp") }
        let directory = URL(fileURLWithPath: String(cString: made))
        self.directory = directory
        let say: (String) -> Void = quiet ? { Console.error($0) } : { self.say($0) }
        say("herald dev: starting PostgreSQL …")
        let postgres = try await DevPostgres.start()
        self.postgres = postgres

        say("herald dev: starting the Kafka broker (embedded mock cluster) …")
        let cluster = try EmbeddedKafkaCluster(brokers: 1)
        self.cluster = cluster
        for topic in [topics.jobs, topics.jobsUrgent, topics.shards, topics.shardsUrgent, topics.results, topics.deviceEvents, topics.metrics, topics.deadLetters] {
            try cluster.createTopic(topic, partitions: partitions)
        }

        say("herald dev: starting the APNs and FCM simulators …")
        var simulatorConfiguration = Simulator.Configuration(stateDirectory: directory.appendingPathComponent("sim"))
        simulatorConfiguration.faults.unregistered = UnregisteredShare(unregisteredShare)
        simulatorConfiguration.threads = simulatorThreads
        let simulator = try Simulator(configuration: simulatorConfiguration)
        self.simulator = simulator

        say("herald dev: migrating and seeding \(devices) demo devices …")
        var keyBytes = [UInt8](repeating: 0, count: 32)
        guard getentropy(&keyBytes, 32) == 0 else { throw DevPostgres.Failure(description: "no randomness for the credentials key") }
        let credentialsKey = Data(keyBytes).base64EncodedString()
        let pool = PostgresPool(PostgresPoolConfiguration(url: postgres.url, size: 2, statementTimeout: .zero, applicationName: "herald-dev"))
        do {
            try await pool.withConnection { connection throws(PostgresError) in _ = try await Migrator().migrate(connection) }
            let credentials = try SeedCommand.readCredentials(directory.appendingPathComponent("sim"))
            try await AppRepository(pool: pool, key: try CredentialsKey(base64: credentialsKey))
                .upsert(id: "demo", name: "Herald demo", apns: credentials.apns, fcm: credentials.fcm)
            var seed = SeedOptions(appID: "demo", devices: devices)
            seed.iosShare = iosShare
            _ = try await SubscriptionSeeder(pool: pool).seed(seed)
        } catch {
            await pool.close()
            throw error
        }
        let environment: [String: String] = [
            "HERALD_KAFKA_BROKERS": cluster.bootstrapServers,
            "HERALD_DATABASE_URL": postgres.url,
            "HERALD_CREDENTIALS_KEY": credentialsKey,
            "HERALD_APNS_ENDPOINT": "https://127.0.0.1:\(simulator.apnsPort)",
            "HERALD_FCM_ENDPOINT": "https://127.0.0.1:\(simulator.fcmPort)",
            // The simulator's service account names its own token endpoint.
            "HERALD_FCM_TOKEN_HOSTS": "127.0.0.1",
            "HERALD_TLS_CA_FILE": directory.appendingPathComponent("sim/ca.pem").path,
            // The mock cluster holds a rebalance for session.timeout.ms: keep it short here.
            "HERALD_KAFKA_PROPERTY_SESSION_TIMEOUT_MS": "6000",
            "HERALD_SHARD_SIZE": String(max(1000, min(50_000, devices / max(1, workers * 4)))),
            "HERALD_METRICS_INTERVAL_SECONDS": "2",
        ]
        return Started(directory: directory, postgres: postgres, cluster: cluster, simulator: simulator, pool: pool,
                       credentialsKey: credentialsKey, environment: environment)
    }

    func run(_ options: DevCommand.Options, stop: StopSignal) async -> Int32 {
        do {
            let started = try await start(devices: options.devices, iosShare: options.iosShare, unregisteredShare: options.unregisteredShare,
                                          workers: options.workers)
            let directory = started.directory
            let cluster = started.cluster
            let postgres = started.postgres
            let simulator = started.simulator
            let pool = started.pool
            let credentialsKey = started.credentialsKey
            let environment = started.environment
            // The key is written to a file only the owner can read, never printed: logs and
            // terminals are not places for credentials.
            let keyFile = directory.appendingPathComponent("credentials-key")
            if !FileManager.default.createFile(atPath: keyFile.path, contents: Data(credentialsKey.utf8), attributes: [.posixPermissions: 0o600]) {
                say("herald dev: warning: could not write the credentials key to \(keyFile.path)")
            }
            say("herald dev: starting \(options.workers) worker(s) …")
            var logs = directory
            if let logDirectory = options.logDirectory {
                logs = URL(fileURLWithPath: logDirectory)
                try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
            }
            try await startWorkers(options.workers, environment: environment, directory: logs)

            say("""

                Herald is running. From another terminal:
                  export HERALD_KAFKA_BROKERS=\(cluster.bootstrapServers)
                  export HERALD_DATABASE_URL=\(postgres.url)
                  herald send --app demo --all --title Hello --body World
                  herald tail results
                  export HERALD_CREDENTIALS_KEY=$(cat \(keyFile.path))   # for herald seed / herald apps
                  # for herald doctor and herald send --token, which reach the simulators as a worker does:
                  export HERALD_APNS_ENDPOINT=https://127.0.0.1:\(simulator.apnsPort) HERALD_FCM_ENDPOINT=https://127.0.0.1:\(simulator.fcmPort)
                  export HERALD_TLS_CA_FILE=\(directory.path)/sim/ca.pem HERALD_FCM_TOKEN_HOSTS=127.0.0.1
                Simulators: APNs https://127.0.0.1:\(simulator.apnsPort), FCM https://127.0.0.1:\(simulator.fcmPort) (CA \(directory.path)/sim/ca.pem)
                Worker logs: \(logs.path)/worker-*.log. Ctrl-C stops everything.

                """)
            if options.demo {
                let demo = DevDemo(brokers: cluster.bootstrapServers, topics: topics, pool: pool, simulator: simulator)
                let outcome = await demo.run(stop: stop, timeoutSeconds: options.timeoutSeconds, workers: workers)
                await pool.close()
                if options.exitWhenDone || outcome != 0 { return outcome }
                say("herald dev: demo done; Ctrl-C to stop")
            } else {
                await pool.close()
            }
            while !stop.isSet {
                if let dead = workers.first(where: { !$0.isRunning }) {
                    Console.error("herald dev: a worker exited (status \(dead.terminationStatus)); see \(logs.path)/worker-*.log")
                    return 1
                }
                try? await Task.sleep(for: .milliseconds(200))
            }
            say("\nherald dev: stopping …")
            return 0
        } catch {
            Console.error("herald dev: \(error)")
            return error is DevPostgres.Failure ? 69 : 70
        }
    }

    func startWorkers(_ count: Int, environment: [String: String], directory: URL) async throws {
        var base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HERALD_") }
        base.merge(environment) { $1 }
        workerLock.withLock { workerBase = base }
        var started: [(DevChild, URL, Int, Int)] = []
        for _ in 1...count { started.append(try spawnWorker(directory: directory)) }
        for (worker, log, index, _) in started { try await waitUntilReady(worker, log: log, index: index) }
        // Every lane of every worker has joined its group: the last worker's join is the last
        // rebalance, which the mock cluster holds for session.timeout.ms. Sending before it
        // settles stalled the demo's campaign for that long, with nothing sent.
        for (worker, log, index, port) in started { try await waitUntilJoined(worker, log: log, index: index, port: port) }
    }

    /// Starts one more worker with the environment of ``startWorkers(_:environment:directory:)``
    /// and a new `HERALD_WORKER_ID` (a stopped worker's leases stay its own until they lapse),
    /// and waits until it is ready.
    @discardableResult
    func startReplacementWorker(directory: URL) async throws -> DevChild {
        let (worker, log, index, _) = try spawnWorker(directory: directory)
        try await waitUntilReady(worker, log: log, index: index)
        return worker
    }

    private func spawnWorker(directory: URL) throws -> (DevChild, URL, Int, Int) {
        return try workerLock.withLock {
            let index = workerList.count + 1
            let chosen = BenchPipelinePairs.runsPaired(index) ? pairedExecutable ?? workerExecutable : workerExecutable
            let executable = chosen.map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            let log = directory.appendingPathComponent("worker-\(index).log")
            var variables = workerBase ?? [:]
            variables["HERALD_WORKER_ID"] = "dev-worker-\(index)"
            let port = DevPorts.free()
            variables["HERALD_HTTP_PORT"] = String(port)
            let worker = try DevChild(path: executable.path, arguments: ["run"], environment: variables, outputPath: log.path)
            workerList.append(worker)
            return (worker, log, index, port)
        }
    }

    /// Ready when its log says so.
    private func waitUntilReady(_ worker: DevChild, log: URL, index: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if text.contains("\"worker ready\"") { return }
            if !worker.isRunning || ContinuousClock.now > deadline {
                throw DevPostgres.Failure(description: "worker \(index) did not start: \(text.suffix(1200))")
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Joined when its `/readyz` answers 200: every lane has an assignment (and PostgreSQL
    /// answers).
    private func waitUntilJoined(_ worker: DevChild, log: URL, index: Int, port: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? await DevHTTP.get(port: port, path: "/readyz", timeoutSeconds: 2)) == nil {
            if !worker.isRunning || ContinuousClock.now > deadline {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw DevPostgres.Failure(description: "worker \(index) did not join its consumer groups within 60 s: \(text.suffix(1200))")
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    func tearDown() async {
        for worker in workers { worker.signal(SIGTERM) }
        let deadline = ContinuousClock.now + .seconds(30)
        while workers.contains(where: \.isRunning) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(100))
        }
        for worker in workers { worker.signal(SIGKILL) }
        while workers.contains(where: \.isRunning) { try? await Task.sleep(for: .milliseconds(20)) }
        simulator?.stop()
        simulator = nil
        cluster = nil
        await postgres?.stop()
        postgres = nil
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }
}
