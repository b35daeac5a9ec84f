import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `examples/python/produce_job.py` (docs/PRODUCING.md), run as a producing team would run it,
/// with confluent-kafka from PyPI (its wheel bundles librdkafka), against the test broker and a
/// `herald run` worker: a plain JSON job, and one written by Confluent's JSON Schema serializer
/// through confluent-kafka's `mock://` schema registry, each produced and followed to
/// `completed`. Then `herald validate` reads a framed job from a file.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized, .timeLimit(.minutes(5)))
struct ProducerExampleTests {
    static let example = TestEnvironment.repositoryRoot.appendingPathComponent("examples/python/produce_job.py")

    static func python() throws -> URL {
        guard let python = Subprocess.which("python3") else { throw PipelineFixture.Failure("python3 is not on PATH (scripts/setup installs it)") }
        let probe = try Subprocess.run(python, ["-c", "import confluent_kafka.schema_registry.json_schema"])
        guard probe.status == 0 else {
            throw PipelineFixture.Failure("confluent-kafka[schemaregistry,json] is not installed for \(python.path) (scripts/setup installs it): \(probe.stderr.suffix(300))")
        }
        return python
    }

    @Test func thePythonExampleProducesPlainAndConfluentFramedJobsAndSeesThemComplete() async throws {
        let python = try Self.python()
        try await withFixture("producer") { fixture in
            _ = try fixture.startSimulator()
            _ = try await fixture.seed(app: "e2e", devices: 50)
            try await fixture.startWorkers(1)
            for (name, extra) in [("plain", [String]()), ("framed", ["--schema-registry", "mock://herald-test"])] {
                let job = "e2e-py-\(name)"
                let result = try await Subprocess.runDetached(python, [
                    Self.example.path, "--brokers", fixture.services.brokers, "--app", "e2e", "--job-id", job,
                    "--jobs-topic", fixture.topics["HERALD_TOPIC_JOBS"] ?? "", "--results-topic", fixture.topics["HERALD_TOPIC_RESULTS"] ?? "",
                    "--timeout", "120",
                ] + extra, timeout: 180)
                #expect(result.status == 0, "\(name): exit \(result.status)\nstdout: \(result.stdout.suffix(600))\nstderr: \(result.stderr.suffix(1200))")
                #expect(result.stdout.contains("completed: {"), "\(name): \(result.stdout.suffix(400))")
                // Herald's own reader of the results topic sees the same event (it may lag the example's).
                _ = try await fixture.wait(seconds: 30) { !fixture.results.events(job: job, stage: .completed).isEmpty }
                let completed = fixture.results.events(job: job, stage: .completed)
                #expect(completed.count == 1 && completed.first?.totals?.accepted ?? 0 > 0, "\(name): \(completed.map(\.json.serializedString))")
            }
            try await expectCleanStop(fixture)
        }
    }

    @Test func heraldValidateReadsAJobTheSerializerFramed() async throws {
        let python = try Self.python()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(TestEnvironment.uniqueName("framed"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("job.bin")
        // The example's own serializer path, called as a library.
        let script = """
            import importlib.util, sys
            spec = importlib.util.spec_from_file_location("example", sys.argv[1])
            example = importlib.util.module_from_spec(spec); spec.loader.exec_module(example)
            value = example.serialize(example.job_document("framed-1", "shop", "Hi"), "herald.jobs", "mock://herald-validate")
            assert value[0] == 0, value[:8]
            open(sys.argv[2], "wb").write(value)
            """
        let written = try Subprocess.run(python, ["-c", script, Self.example.path, file.path])
        try #require(written.status == 0, "serializer: \(written.stderr.suffix(800))")
        let bytes = try Data(contentsOf: file)
        #expect(bytes.first == 0 && bytes.count > 5, "a Confluent header before the JSON")
        for command in ["validate-job", "validate"] {
            let result = try Subprocess.run(TestEnvironment.heraldBinary, [command, file.path])
            #expect(result.status == 0, "herald \(command): \(result.status) \(result.stderr)")
        }
    }
}
