import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldSim
import HeraldWorker

/// `herald dev [--devices N] [--workers W] [--demo] [--exit]`: everything on one machine
/// (DESIGN §6): an embedded Kafka broker, a throwaway PostgreSQL, the APNs/FCM simulators, a
/// demo app with N devices, and W `herald run` worker processes; `--demo` also sends a campaign
/// and a VoIP push and shows their progress. Ctrl-C stops and removes everything.
enum DevCommand {
    static let usage = """
        usage: herald dev [--devices N] [--workers W] [--demo] [--exit] [--ios-share X] [--unregistered-share X] [--timeout S]
          --devices N             demo devices to seed (default 10000)
          --workers W             worker processes (default 2)
          --demo                  send a demo campaign and a VoIP push, show progress and a summary
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
        var options = Options()
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case "--demo": options.demo = true
            case "--exit": options.exitWhenDone = true
            case "--devices", "--workers", "--timeout":
                guard let value = remaining.popFirst().flatMap({ Int($0) }) else {
                    Console.error("herald dev: \(argument) takes a whole number\n\(usage)")
                    return nil
                }
                switch argument {
                case "--devices":
                    guard (0...5_000_000).contains(value) else { Console.error("herald dev: --devices from 0 to 5000000"); return nil }
                    options.devices = value
                case "--workers":
                    guard (1...32).contains(value) else { Console.error("herald dev: --workers from 1 to 32"); return nil }
                    options.workers = value
                default:
                    guard value >= 1 else { Console.error("herald dev: --timeout must be at least 1"); return nil }
                    options.timeoutSeconds = value
                }
            case "--ios-share", "--unregistered-share":
                guard let value = remaining.popFirst().flatMap({ Double($0) }), (0...1).contains(value) else {
                    Console.error("herald dev: \(argument) takes a number from 0 to 1")
                    return nil
                }
                if argument == "--ios-share" { options.iosShare = value } else { options.unregisteredShare = value }
            case "--log-dir":
                guard let value = remaining.popFirst(), !value.isEmpty else {
                    Console.error("herald dev: --log-dir takes a directory")
                    return nil
                }
                options.logDirectory = value
            case "--help", "-h":
                print(usage)
                return nil
            default:
                Console.error("herald dev: unknown option \(argument)\n\(usage)")
                return nil
            }
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
    var workers: [DevChild] = []
    var directory: URL?

    let topics = WorkerConfiguration.Topics()

    func say(_ line: String) {
        print(line)
        fflush(nil)
    }

    func run(_ options: DevCommand.Options, stop: StopSignal) async -> Int32 {
        var template = Array("/tmp/herald-dev.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            Console.error("herald dev: cannot create a temporary directory in /tmp")
            return 70
        }
        let directory = URL(fileURLWithPath: String(cString: made))
        self.directory = directory
        do {
            say("herald dev: starting PostgreSQL …")
            let postgres = try await DevPostgres.start()
            self.postgres = postgres

            say("herald dev: starting the Kafka broker (embedded mock cluster) …")
            let cluster = try EmbeddedKafkaCluster(brokers: 1)
            self.cluster = cluster
            for topic in [topics.jobs, topics.jobsUrgent, topics.shards, topics.shardsUrgent, topics.results, topics.deviceEvents, topics.metrics, topics.deadLetters] {
                try cluster.createTopic(topic, partitions: 4)
            }

            say("herald dev: starting the APNs and FCM simulators …")
            var simulatorConfiguration = Simulator.Configuration(stateDirectory: directory.appendingPathComponent("sim"))
            simulatorConfiguration.faults.unregistered = UnregisteredShare(options.unregisteredShare)
            let simulator = try Simulator(configuration: simulatorConfiguration)
            self.simulator = simulator

            say("herald dev: migrating and seeding \(options.devices) demo devices …")
            var keyBytes = [UInt8](repeating: 0, count: 32)
            guard getentropy(&keyBytes, 32) == 0 else { throw DevPostgres.Failure(description: "no randomness for the credentials key") }
            let credentialsKey = Data(keyBytes).base64EncodedString()
            let pool = PostgresPool(PostgresPoolConfiguration(url: postgres.url, size: 2, statementTimeout: .zero, applicationName: "herald-dev"))
            do {
                try await pool.withConnection { connection throws(PostgresError) in _ = try await Migrator().migrate(connection) }
                let credentials = try SeedCommand.readCredentials(directory.appendingPathComponent("sim"))
                try await AppRepository(pool: pool, key: try CredentialsKey(base64: credentialsKey))
                    .upsert(id: "demo", name: "Herald demo", apns: credentials.apns, fcm: credentials.fcm)
                var seed = SeedOptions(appID: "demo", devices: options.devices)
                seed.iosShare = options.iosShare
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
                "HERALD_TLS_CA_FILE": directory.appendingPathComponent("sim/ca.pem").path,
                // The mock cluster holds a rebalance for session.timeout.ms: keep it short here.
                "HERALD_KAFKA_PROPERTY_SESSION_TIMEOUT_MS": "6000",
                "HERALD_SHARD_SIZE": String(max(1000, min(50_000, options.devices / max(1, options.workers * 4)))),
                "HERALD_METRICS_INTERVAL_SECONDS": "2",
            ]
            // The key is written to a file only the owner can read, never printed: logs and
            // terminals are not places for credentials.
            let keyFile = directory.appendingPathComponent("credentials-key")
            FileManager.default.createFile(atPath: keyFile.path, contents: Data(credentialsKey.utf8), attributes: [.posixPermissions: 0o600])
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

    private func startWorkers(_ count: Int, environment: [String: String], directory: URL) async throws {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HERALD_") }
        base.merge(environment) { $1 }
        for index in 1...count {
            let log = directory.appendingPathComponent("worker-\(index).log")
            var variables = base
            variables["HERALD_WORKER_ID"] = "dev-worker-\(index)"
            variables["HERALD_HTTP_PORT"] = String(DevPorts.free())
            workers.append(try DevChild(path: executable.path, arguments: ["run"], environment: variables, outputPath: log.path))
        }
        // Ready when each log says so.
        let deadline = ContinuousClock.now + .seconds(60)
        for index in 1...count {
            let log = directory.appendingPathComponent("worker-\(index).log")
            while true {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                if text.contains("\"worker ready\"") { break }
                if !workers[index - 1].isRunning || ContinuousClock.now > deadline {
                    throw DevPostgres.Failure(description: "worker \(index) did not start: \(text.suffix(1200))")
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
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
