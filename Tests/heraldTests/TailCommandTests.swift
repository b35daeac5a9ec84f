import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `herald tail` against the test broker.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)), .timeLimit(.minutes(2)))
struct TailCommandTests {
    let results = TestEnvironment.uniqueName("cli.results")
    let metrics = TestEnvironment.uniqueName("cli.metrics")
    let dlq = TestEnvironment.uniqueName("cli.dlq")
    let at = Timestamp(seconds: 1_796_234_400)

    private var environment: [String: String] {
        get throws {
            try CommandKafka.environment(["HERALD_TOPIC_RESULTS": results, "HERALD_TOPIC_METRICS": metrics, "HERALD_TOPIC_DLQ": dlq])
        }
    }

    private func tail(_ arguments: [String], timeout: TimeInterval = 60) async throws -> Subprocess.Result {
        try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["tail"] + arguments, environment: try environment, timeout: timeout)
    }

    private func receipt(_ job: String, _ subscription: String, _ stage: Receipt.Stage, reason: Receipt.Reason? = nil) -> (String?, [UInt8]) {
        var receipt = Receipt(jobID: job, appID: "demo", stage: stage, subscriptionID: subscription, platform: .ios, reason: reason, at: at)
        if stage == .accepted { receipt.providerID = "apns-\(subscription.prefix(4))" }
        return (subscription, receipt.json.serializedBytes())
    }

    private func lines(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init)
    }

    @Test func resultsFromTheBeginningAsLinesAndAsJSON() async throws {
        let sub1 = "3f1c1a52-0b6e-4a4e-9a57-9d2b8d0f6a10"
        let sub2 = "3f1c1a52-0b6e-4a4e-9a57-9d2b8d0f6a11"
        let messages = [receipt("job-a", sub1, .accepted), receipt("job-a", sub2, .unregistered, reason: .badDeviceToken)]
        // One partition, so the order read is the order written.
        for message in messages { try await CommandKafka.produce(results, [message]) }

        let text = try await tail(["results", "--from-beginning", "--count", "2"])
        #expect(text.status == 0, "\(text.stderr)")
        let printed = lines(text.stdout).sorted()
        #expect(printed.count == 2)
        #expect(printed.contains { $0.contains("accepted job=job-a sub=\(sub1)") && $0.contains("provider_id=apns-3f1c") })
        #expect(printed.contains { $0.contains("unregistered job=job-a sub=\(sub2)") && $0.contains("reason=bad-device-token") })

        let json = try await tail(["results", "--from-beginning", "--count", "2", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let decoded = try lines(json.stdout).map { try Receipt.decode(Array($0.utf8)) }
        #expect(Set(decoded.map(\.subscriptionID)) == [sub1, sub2])
    }

    @Test func jobFilterShowsOnlyThatJob() async throws {
        try await CommandKafka.produce(results, [
            receipt("job-x", "00000000-0000-0000-0000-000000000001", .accepted),
            receipt("job-y", "00000000-0000-0000-0000-000000000002", .accepted),
            receipt("job-x", "00000000-0000-0000-0000-000000000003", .failed, reason: .retriesExhausted),
            (nil, Array("garbage".utf8)),
        ])
        // The silence timer starts with the process, before the group join (about 3 s on the mock
        // cluster), so it is long enough for a loaded machine; it only ends the read.
        let result = try await tail(["results", "--from-beginning", "--job", "job-x", "--timeout", "15"])
        #expect(result.status == 0, "\(result.stderr)")
        let printed = lines(result.stdout)
        #expect(printed.count == 2, "\(printed)")
        #expect(printed.allSatisfy { $0.contains("job=job-x") })
    }

    @Test func deadLettersMetricsAndUndecodableMessages() async throws {
        let original = Array(#"{"schema":"herald.job.v1","id":"broken"}"#.utf8)
        let letter = DeadLetter(reason: "audience: is required", source: .init(topic: "herald.jobs", partition: 2, offset: 41), original: original, at: at)
        try await CommandKafka.produce(dlq, [(nil, letter.json.serializedBytes()), (nil, Array("not json at all\u{1}".utf8))])
        let dead = try await tail(["dlq", "--from-beginning", "--count", "2"])
        #expect(dead.status == 0, "\(dead.stderr)")
        let deadLines = lines(dead.stdout)
        #expect(deadLines.count == 2)
        #expect(deadLines.contains { $0.contains(#"reason="audience: is required""#) && $0.contains("source=herald.jobs/2@41") && $0.contains(#"\"id\":\"broken\""#) })
        #expect(deadLines.contains { $0.hasPrefix("undecodable \(dlq)/") && $0.contains("not json at all") })

        let deadJSON = try await tail(["dlq", "--from-beginning", "--count", "2", "--json"])
        let documents = try lines(deadJSON.stdout).map { try JSONValue.parse($0) }
        #expect(documents.contains { (try? DeadLetter(json: $0)) == letter })
        #expect(documents.contains { $0["undecodable"] == .bool(true) && $0["value_base64"] == .string(Data("not json at all\u{1}".utf8).base64EncodedString()) })

        var report = MetricsReport(workerID: "worker-7", at: at, windowSeconds: 10)
        report.notifications = [.init(provider: .apns, outcome: .accepted, count: 120), .init(provider: .fcm, outcome: .accepted, count: 30)]
        report.inFlight = 17
        try await CommandKafka.produce(metrics, [(nil, report.json.serializedBytes())])
        let metricsLine = try await tail(["metrics", "--from-beginning", "--count", "1"])
        #expect(metricsLine.status == 0, "\(metricsLine.stderr)")
        #expect(metricsLine.stdout.contains("worker=worker-7"))
        #expect(metricsLine.stdout.contains("accepted=150"))
        #expect(metricsLine.stdout.contains("in_flight=17"))
    }

    @Test func timeoutOfSilenceEndsAnEmptyTailWithStatus0() async throws {
        try await CommandKafka.produce(results, [receipt("job-old", "00000000-0000-0000-0000-000000000001", .accepted)])
        let started = Date()
        // Without --from-beginning the old receipt is not shown.
        let result = try await tail(["results", "--timeout", "2"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(Date().timeIntervalSince(started) < 20)
    }

    @Test func sigtermStopsAFollowingTailWithStatus0() async throws {
        let process = Process()
        process.executableURL = TestEnvironment.heraldBinary
        process.environment = ProcessInfo.processInfo.environment.merging(try environment) { _, new in new }
        try await CommandKafka.produce(results, [receipt("job-live", "00000000-0000-0000-0000-000000000009", .accepted)])
        process.arguments = ["tail", "results", "--from-beginning"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Its first line means it is consuming, with the stop handlers (installed before the
        // consumer) in place, however slowly it started.
        let first = await Task.detached { output.fileHandleForReading.availableData }.value
        #expect(String(decoding: first, as: UTF8.self).contains("job=job-live"))
        #expect(process.isRunning, "follows until stopped")
        #expect(Subprocess.stop(process, grace: 10) == 0)
    }

    /// librdkafka's complaints about an unreachable broker go to standard error: standard output
    /// is the receipts (piped into jq, say) and must stay exactly that.
    @Test func brokerTroubleIsLoggedOnStandardErrorNotAmongTheReceipts() async throws {
        let port = try TestPorts.free()
        let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["tail", "results", "--timeout", "3"],
                                                      environment: ["HERALD_KAFKA_BROKERS": "127.0.0.1:\(port)"], timeout: 60)
        #expect(!result.stdout.contains("librdkafka"), "\(result.stdout.prefix(500))")
        #expect(result.stderr.contains(#""component":"librdkafka""#), "\(result.stderr.prefix(500))")
    }

    @Test func usageAndConfiguration() async throws {
        #expect(try await tail([]).status == 64)
        #expect(try await tail(["shards"]).status == 64)
        #expect(try await tail(["metrics", "--job", "x"]).status == 64, "--job filters results only")
        #expect(try await tail(["results", "--count", "0"]).status == 64)
        let noBrokers = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["tail", "results"], environment: ["HERALD_KAFKA_BROKERS": ""])
        #expect(noBrokers.status == 78)
    }
}
