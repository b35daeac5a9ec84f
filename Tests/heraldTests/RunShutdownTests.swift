import Foundation
import Glibc
import HeraldTestSupport
import Testing

/// `herald run`'s shutdown bound: `HERALD_DRAIN_SECONDS` is the whole time from SIGTERM to
/// exit, whatever the broker and the database do meanwhile.
@Suite(.serialized, .timeLimit(.minutes(4))) struct RunShutdownTests {
    /// A process whose first line of output is read (a port, a bootstrap list).
    final class LineProcess: @unchecked Sendable {
        let process: Process
        let firstLine: String

        init(_ executable: URL, _ arguments: [String]) throws {
            (process, firstLine) = try Subprocess.startReadingFirstLine(executable, arguments, quietStandardError: true)
        }

        func signal(_ number: Int32) { kill(process.processIdentifier, number) }

        deinit { if process.isRunning { _ = Subprocess.stop(process) } }
    }

    /// Observed before the bound was one: workers SIGTERMed as their broker and PostgreSQL went
    /// away still ran minutes later. Now: the broker's brokers go down, the database goes
    /// silent (a proxy that swallows every byte and keeps the connections open), then SIGTERM;
    /// the worker exits within the bound, non-zero, since the metrics reports it queued meanwhile
    /// could not be flushed.
    @Test func sigtermWithTheBrokerAndDatabaseGoneExitsWithinTheBoundNonZero() async throws {
        guard TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable) else { return }
        let serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        let binary = TestEnvironment.heraldBinary
        let name = TestEnvironment.uniqueName("shutdown").lowercased()
        let logs = FileManager.default.temporaryDirectory.appendingPathComponent("run-shutdown-\(name)")
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)

        // A database of its own, migrated, reached through the proxy.
        let created = try Subprocess.run(try PipelineFixture.psql(), [serverURL, "-qc", "CREATE DATABASE \(name)"])
        try #require(created.status == 0, "\(created.stderr)")
        var direct = try #require(URLComponents(string: serverURL))
        direct.path = "/\(name)"
        direct.query = nil
        let migrated = try await Subprocess.runDetached(binary, ["migrate", "--database-url", try #require(direct.string)])
        try #require(migrated.status == 0, "\(migrated.stderr)")
        let python = try #require(Subprocess.which("python3"))
        let proxyScript = TestEnvironment.repositoryRoot.appendingPathComponent("Tests/tools/freezing-proxy.py")
        let proxy = try LineProcess(python, [proxyScript.path, direct.host ?? "127.0.0.1", String(direct.port ?? 5432)])
        var proxied = direct
        proxied.host = "127.0.0.1"
        let proxyPort: Int = try #require(Int(proxy.firstLine), "the proxy printed \(proxy.firstLine)")
        proxied.port = proxyPort

        // A broker of its own, with the worker's topics.
        let topics = WorkerEnvironment.topics(name)
        let broker = try LineProcess(binary, ["dev-broker"] + topics.values.sorted().flatMap { ["--topic", "\($0):1"] })
        try #require(broker.firstLine.hasPrefix("bootstrap.servers="), "dev-broker printed \(broker.firstLine)")

        var environment = topics
        let proxiedURL: String = try #require(proxied.string)
        environment["HERALD_DATABASE_URL"] = proxiedURL
        environment["HERALD_KAFKA_BROKERS"] = String(broker.firstLine.dropFirst("bootstrap.servers=".count))
        environment["HERALD_CREDENTIALS_KEY"] = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        environment["HERALD_WORKER_ID"] = "w-\(name)"
        environment["HERALD_KAFKA_GROUP"] = "\(name).workers"
        environment["HERALD_HTTP_PORT"] = "0"
        environment["HERALD_DRAIN_SECONDS"] = "10"
        environment["HERALD_METRICS_INTERVAL_SECONDS"] = "1"
        let worker = try WorkerProcess(binary: binary, id: "w-\(name)", environment: environment, logs: logs)
        let ready = await worker.waitUntilReady(seconds: 60)
        try #require(ready, "no \"worker ready\": \(worker.stderrTail())\n\(worker.stdoutTail())")
        try await Task.sleep(for: .seconds(2))

        broker.signal(SIGUSR1)  // every broker down
        proxy.signal(SIGUSR1)  // PostgreSQL silent
        try await Task.sleep(for: .seconds(2))  // metrics reports queue for the missing broker
        let started = Date()
        let status = await worker.stop(grace: 90)
        let took = Date().timeIntervalSince(started)
        #expect(took < 10 + 3, "exited \(took) s after SIGTERM with HERALD_DRAIN_SECONDS=10:\n\(worker.stdoutTail(lines: 8))")
        #expect(status == 1, "exit status \(status): receipts queued for a broker that went away were not flushed")
        #expect(worker.stdout.contains("\"exit_status\":1") || worker.stdout.contains("shutdown bound passed"), "\(worker.stdoutTail(lines: 8))")
        proxy.signal(SIGTERM)
        broker.signal(SIGTERM)
        _ = try? Subprocess.run(try PipelineFixture.psql(), [serverURL, "-qc", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
    }
}
