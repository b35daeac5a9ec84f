import Foundation
import HeraldKafka
import HeraldTestSupport
import Testing

/// The `herald` binary, run as a user runs it.
@Suite(.timeLimit(.minutes(2))) struct ValidateJobCommandTests {
    static let examples = TestEnvironment.repositoryRoot.appendingPathComponent("schemas/examples")

    static func jobFiles(_ folder: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: examples.appendingPathComponent(folder).path)) ?? []
        return names.filter { $0.hasPrefix("job-") && $0.hasSuffix(".json") }.sorted()
    }

    @Test func versionPrints() throws {
        let result = try Subprocess.run(TestEnvironment.heraldBinary, ["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("herald "))
        // scripts/test stamps the checkout's revision before building (scripts/stamp-revision).
        let head = try Subprocess.run(URL(fileURLWithPath: "/usr/bin/git"), ["-C", TestEnvironment.repositoryRoot.path, "rev-parse", "--short=12", "HEAD"])
        if head.status == 0 {
            let revision = head.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(result.stdout.contains("(revision \(revision)"), "\(result.stdout) does not name HEAD \(revision)")
        }
    }

    @Test(arguments: ValidateJobCommandTests.jobFiles("valid"))
    func acceptsValidJob(name: String) throws {
        let path = Self.examples.appendingPathComponent("valid").appendingPathComponent(name).path
        let result = try Subprocess.run(TestEnvironment.heraldBinary, ["validate-job", path])
        #expect(result.status == 0, "\(name): \(result.stderr)")
    }

    @Test(arguments: ValidateJobCommandTests.jobFiles("invalid"))
    func refusesInvalidJobWithExit65AndTheNamedReason(name: String) throws {
        let file = Self.examples.appendingPathComponent("invalid").appendingPathComponent(name)
        let expected = try String(contentsOf: file.deletingPathExtension().appendingPathExtension("expect"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // Through standard input as well as by path.
        let result = try Subprocess.run(TestEnvironment.heraldBinary, ["validate-job", "-"], input: try Data(contentsOf: file))
        #expect(result.status == 65, "\(name)")
        #expect(result.stderr.contains(expected), "\(name): \(result.stderr)")
    }

    @Test func missingFileAndBadUsage() throws {
        #expect(try Subprocess.run(TestEnvironment.heraldBinary, ["validate-job", "/no/such/file.json"]).status == 66)
        #expect(try Subprocess.run(TestEnvironment.heraldBinary, ["validate-job", "a", "b"]).status == 64)
        #expect(try Subprocess.run(TestEnvironment.heraldBinary, ["no-such-command"]).status == 64)
    }
}

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct MigrateCommandTests {
    /// Five `herald migrate` processes at once on an empty database: one copy of each migration.
    @Test func fiveProcessesAtOnceThenANoOp() async throws {
        let serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        let name = TestEnvironment.uniqueName("herald_cli")
        let psql = try #require(Subprocess.which("psql"))
        #expect(try Subprocess.run(psql, [serverURL, "-qc", "CREATE DATABASE \(name)"]).status == 0)
        let base = serverURL.prefix { $0 != "?" }
        let url = String(base[..<(base.lastIndex(of: "/") ?? base.endIndex)]) + "/" + name

        let results = try await withThrowingTaskGroup(of: Subprocess.Result.self) { group in
            for _ in 0..<5 {
                group.addTask { try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["migrate", "--database-url", url]) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for result in results { #expect(result.status == 0, "\(result.stderr)") }
        let appliedLines = results.flatMap { $0.stdout.split(separator: "\n") }.filter { $0.hasPrefix("applied ") }
        let migrationFiles = try FileManager.default.contentsOfDirectory(atPath: TestEnvironment.repositoryRoot.appendingPathComponent("schemas/sql").path)
            .filter { $0.hasSuffix(".sql") }
        #expect(appliedLines.count == migrationFiles.count)
        #expect(Set(appliedLines).count == migrationFiles.count)

        let count = try Subprocess.run(psql, [url, "-tAc", "SELECT count(*) || '/' || count(DISTINCT version) FROM herald_schema_migrations"])
        #expect(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(migrationFiles.count)/\(migrationFiles.count)")
        let before = try Subprocess.run(psql, [url, "-tAc", "SELECT string_agg(version || '@' || applied_at, ',' ORDER BY version) FROM herald_schema_migrations"]).stdout

        // HERALD_DATABASE_URL works as well as the flag; a second run changes nothing.
        let again = try Subprocess.run(TestEnvironment.heraldBinary, ["migrate"], environment: ["HERALD_DATABASE_URL": url])
        let json = try Subprocess.run(TestEnvironment.heraldBinary, ["migrate", "--json"], environment: ["HERALD_DATABASE_URL": url])
        #expect(json.status == 0, "\(json.stderr)")
        #expect(json.stdout.hasPrefix(#"{"already_applied":"#) && json.stdout.contains(#""applied":[]"#), "\(json.stdout)")
        #expect(again.status == 0)
        #expect(again.stdout.contains("migrations: 0 applied, \(migrationFiles.count) already applied"))
        let after = try Subprocess.run(psql, [url, "-tAc", "SELECT string_agg(version || '@' || applied_at, ',' ORDER BY version) FROM herald_schema_migrations"]).stdout
        #expect(before == after)
        _ = try Subprocess.run(psql, [serverURL, "-qc", "DROP DATABASE \(name) WITH (FORCE)"])
    }

    @Test func clearErrorsWithoutADatabase() throws {
        let missing = try Subprocess.run(TestEnvironment.heraldBinary, ["migrate"], environment: ["HERALD_DATABASE_URL": ""])
        #expect(missing.status == 78)
        #expect(missing.stderr.contains("HERALD_DATABASE_URL"))
        let unreachable = try Subprocess.run(TestEnvironment.heraldBinary, ["migrate", "--database-url", "postgresql://postgres:pw@127.0.0.1:1/x"])
        #expect(unreachable.status == 69)
        #expect(!unreachable.stderr.contains("pw@"))
    }
}

@Suite(.timeLimit(.minutes(1))) struct DevBrokerCommandTests {
    /// Starts `herald dev-broker ARGUMENTS` and returns it with its first line (the bootstrap line).
    private static func start(_ arguments: [String]) throws -> (Process, String) {
        try Subprocess.startReadingFirstLine(TestEnvironment.heraldBinary, ["dev-broker"] + arguments)
    }

    /// `herald dev-broker` prints its bootstrap line, serves kcat, and exits 0 on SIGTERM.
    @Test func printsBootstrapServersAndStopsOnSIGTERM() throws {
        let (process, text) = try Self.start(["--brokers", "2", "--topic", "herald.jobs:6"])
        defer { if process.isRunning { Subprocess.stop(process) } }
        #expect(text.hasPrefix("bootstrap.servers=127.0.0.1:"))
        let servers = text.dropFirst("bootstrap.servers=".count).split(separator: ",")
        #expect(servers.count == 2)
        if let kcat = Subprocess.which("kcat") {
            let metadata = try Subprocess.run(kcat, ["-L", "-b", String(servers[0]), "-t", "herald.jobs", "-J"], timeout: 20)
            #expect(metadata.status == 0)
            // The topic was created with the six partitions asked for.
            #expect(metadata.stdout.components(separatedBy: "\"partition\":").count - 1 == 6)
        }
        #expect(Subprocess.stop(process) == 0)
    }

    /// SIGUSR1 takes every broker down and SIGUSR2 brings them back (the failure suite's outage
    /// for tests outside the process): a message sent meanwhile is acknowledged only once they are
    /// up, nothing sent before is lost, and SIGTERM still stops it with 0.
    @Test func brokersGoDownOnSIGUSR1AndComeBackOnSIGUSR2() async throws {
        let (process, text) = try Self.start(["--brokers", "1", "--topic", "outage:1"])
        defer { if process.isRunning { Subprocess.stop(process) } }
        let servers = String(text.dropFirst("bootstrap.servers=".count))
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: servers, properties: ["message.timeout.ms": "60000"]))
        _ = try await producer.send(topic: "outage", key: "k", value: "before")

        kill(process.processIdentifier, SIGUSR1)
        // Down once it says so (a fixed sleep could end first on a loaded machine).
        let said = try #require(process.standardError as? Pipe)
        var stderr = Data()
        while !String(decoding: stderr, as: UTF8.self).contains("brokers down") {
            let chunk = said.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            stderr.append(chunk)
        }
        #expect(String(decoding: stderr, as: UTF8.self).contains("brokers down"))
        let clock = ContinuousClock()
        let pending = Task { () throws -> (KafkaDeliveryReport, ContinuousClock.Instant) in
            (try await producer.send(topic: "outage", key: "k", value: "during"), clock.now)
        }
        try await Task.sleep(for: .seconds(2))
        #expect(process.isRunning)
        let upAt = clock.now
        kill(process.processIdentifier, SIGUSR2)
        let (report, acknowledgedAt) = try await pending.value
        #expect(acknowledgedAt >= upAt)
        #expect(report.offset == 1)
        #expect(Subprocess.stop(process) == 0)
    }
}
