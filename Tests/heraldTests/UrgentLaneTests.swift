import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldTestSupport
import Synchronization
import Testing

/// The urgent lane under load (issue 10): `herald run` workers, `herald sim`, PostgreSQL and the
/// mock cluster, driven from outside. Prints its figures to stderr (`urgent lane: ...`).
/// The suites that run `herald run` workers, one after another: each loads the machine's cores
/// and measures time, so two at once would spoil each other's figures.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized)
struct HeraldRunEndToEnd {}

extension HeraldRunEndToEnd {
@Suite(.timeLimit(.minutes(10)))
struct UrgentLaneTests {
    @Test func urgentJobsAreAcceptedWithinASecondDuringATwoHundredThousandDeviceCampaign() async throws {
        let world = try await HeraldRunWorld()
        do {
            let latency = try await scenario(world)
            if latency > 1 { FileHandle.standardError.write(Data("urgent lane: logs kept in \(world.directory.path)\n".utf8)) }
            await world.tearDown(keepLogs: latency > 1)
        } catch {
            FileHandle.standardError.write(Data("urgent lane: logs kept in \(world.directory.path)\n".utf8))
            await world.tearDown(keepLogs: true)
            throw error
        }
    }

    /// Returns the urgent jobs' median latency in seconds.
    private func scenario(_ world: HeraldRunWorld) async throws -> Double {
        try await world.seed(devices: 200_000)
        try await world.startWorkers(2)
        let ids = try await world.pool.query("SELECT id::text FROM subscriptions WHERE app_id = 'load' ORDER BY id DESC LIMIT 2").rows.compactMap { $0[0] }
        let warmID = try #require(ids.first)
        let targetID = try #require(ids.last)

        // Warm-up urgent jobs, a second apart, until three in a row are accepted within a second:
        // the urgent topics exist and the lane's group has settled. (A CI run saw the group still
        // rebalancing 10 s after the first warm-up job, with the mock cluster's 5 s rounds, and
        // the measured job waited 21 s for its partition's new owner.)
        var quick = 0
        var warmed = 0
        let settleBy = Date().addingTimeInterval(120)
        while quick < 3 && Date() < settleBy {
            warmed += 1
            let id = "warm\(warmed)"
            let sent = Timestamp.now
            try await world.produce(urgent: true, HeraldRunWorld.job(id: id, audience: #"{"subscription_ids":["\#(warmID)"]}"#, urgent: true), id: id)
            let delivered = try await world.wait(seconds: 30) { world.receipts.terminal(job: id) == 1 }
            let accepted = world.receipts.first(job: id, stage: .accepted)
            if delivered, let accepted, accepted.at.unixMilliseconds - sent.unixMilliseconds <= 1_000 { quick += 1 } else { quick = 0 }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(quick == 3, "the urgent lane did not settle: \(warmed) warm-up jobs in 120 s")

        // The campaign: every device, on the campaign lane.
        try await world.produce(urgent: false, HeraldRunWorld.job(id: "campaign", audience: #"{"all":true}"#, urgent: false), id: "campaign")
        #expect(try await world.wait(seconds: 240) { world.receipts.terminal(job: "campaign") >= 20_000 }, "the campaign did not get going")

        // Three urgent jobs a second apart, each timed from its production to its `accepted`
        // receipt; their median is the figure (one job's time on a shared two-core machine is
        // one sample of a distribution: a CI run once saw a single job at 1.3 s).
        let before = world.receipts.terminal(job: "campaign")
        var latencies: [Double] = []
        for number in 1...3 {
            let id = "code\(number)"
            let produced = Timestamp.now
            try await world.produce(urgent: true, HeraldRunWorld.job(id: id, audience: #"{"subscription_ids":["\#(targetID)"]}"#, urgent: true), id: id)
            #expect(try await world.wait(seconds: 30) { world.receipts.terminal(job: id) == 1 }, "the urgent job \(id) was not delivered within 30 s")
            let accepted = try #require(world.receipts.first(job: id, stage: .accepted))
            #expect(world.receipts.terminal(job: id) == 1 && accepted.subscriptionID == targetID)
            let latency = Double(accepted.at.unixMilliseconds - produced.unixMilliseconds) / 1000
            latencies.append(latency)
            FileHandle.standardError.write(Data("urgent lane: \(id) accepted \(String(format: "%.3f", latency)) s after it was produced (received by a worker \(world.received(job: id, since: produced)) ms after)\n".utf8))
            try await Task.sleep(for: .seconds(1))
        }
        let median = latencies.sorted()[1]
        // Still running afterwards: the urgent jobs did not wait for the campaign to end.
        try await Task.sleep(for: .seconds(1))
        let after = world.receipts.terminal(job: "campaign")
        FileHandle.standardError.write(Data("urgent lane: median \(String(format: "%.3f", median)) s; \(warmed) warm-up jobs; campaign receipts \(before) before, \(after) after, of 200,000\n".utf8))
        #expect(median <= 1.0, "the urgent jobs took \(latencies) s")
        #expect(after > before && after < 200_000, "the campaign was in progress around the urgent jobs")
        return median
    }
}
}

/// One scenario's processes and data: a database, `herald sim`, `herald run` workers and a
/// reader of the results topic, all its own.
final class HeraldRunWorld: @unchecked Sendable {
    // Used from the one test task; the reader task only touches `receipts` (a Mutex).
    let name = TestEnvironment.uniqueName("urgent").lowercased()
    let directory: URL
    let databaseName: String
    let databaseURL: String
    let serverURL: String
    let brokers: String
    let pool: PostgresPool
    let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    let producer: KafkaProducer
    let receipts = RunReceipts()
    var topics: [String: String] = [:]
    var simulator: Process?
    var apnsPort = 0
    var fcmPort = 0
    var workers: [Process] = []
    var reader: Task<Void, Never>?
    let consumer: KafkaConsumer

    struct Failure: Error, CustomStringConvertible { let description: String }

    init() async throws {
        serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        brokers = try TestEnvironment.require(TestEnvironment.kafkaVariable)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-\(name)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        databaseName = name
        let admin = try await PostgresConnection.connect(serverURL)
        try await admin.execute("CREATE DATABASE \(databaseName)")
        await admin.close()
        let info = try ConnectionInfo(serverURL)
        databaseURL = "postgresql://\(info.options["user"] ?? "postgres")@\(info.options["host"] ?? "127.0.0.1"):\(info.options["port"] ?? "5432")/\(databaseName)"
        pool = PostgresPool(PostgresPoolConfiguration(url: databaseURL, size: 2))
        topics = WorkerEnvironment.topics(name)
        producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers))
        var options = KafkaConsumerOptions()
        options.maximumInFlight = 1_000_000
        options.log = { _ in }
        consumer = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers, properties: [
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "topic.metadata.refresh.interval.ms": "1000",
        ]), groupID: "\(name).reader", options: options)
        try consumer.subscribe(topics: [topics["HERALD_TOPIC_RESULTS"] ?? ""])
        let consumer = self.consumer
        let receipts = self.receipts
        reader = Task.detached {
            while !Task.isCancelled {
                guard let message = try? await consumer.poll(timeoutMilliseconds: 200) else { continue }
                if let receipt = try? Receipt.decode(message.value) { receipts.record(receipt) }
                consumer.markProcessed(message)
            }
        }
        let migrated = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["migrate", "--database-url", databaseURL])
        guard migrated.status == 0 else { throw Failure(description: "herald migrate: \(migrated.stderr)") }
        try startSimulator()
    }

    var environment: [String: String] {
        var environment = topics
        environment["HERALD_DATABASE_URL"] = databaseURL
        environment["HERALD_KAFKA_BROKERS"] = brokers
        environment["HERALD_CREDENTIALS_KEY"] = key
        return environment
    }

    func background(_ arguments: [String], label: String, environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = TestEnvironment.heraldBinary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let out = directory.appendingPathComponent("\(label).out")
        let err = directory.appendingPathComponent("\(label).err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    func output(_ label: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent("\(label).out"), encoding: .utf8)) ?? ""
    }

    /// Milliseconds from `since` to the first worker's "job received" line for `job`, or "?" when
    /// no worker logged one: tells the lane's consumption apart from the delivery after it.
    func received(job: String, since: Timestamp) -> String {
        let lines = workers.indices.flatMap { output("worker\($0)").split(separator: "\n") }
        for line in lines where line.contains(#""message":"job received""#) && line.contains(#""job_id":"\#(job)""#) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let time = object["time"] as? String, let at = Timestamp(rfc3339: time) else { continue }
            return String(at.unixMilliseconds - since.unixMilliseconds)
        }
        return "?"
    }

    func startSimulator() throws {
        simulator = try background(["sim", "--state-dir", directory.appendingPathComponent("sim").path], label: "sim")
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let line = output("sim").split(separator: "\n").first(where: { $0.contains("apns_port") }),
               let ready = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
               let apns = ready["apns_port"] as? Int, let fcm = ready["fcm_port"] as? Int {
                apnsPort = apns
                fcmPort = fcm
                return
            }
            usleep(50_000)
        }
        throw Failure(description: "herald sim did not print its ports")
    }

    func seed(devices: Int) async throws {
        let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
            "seed", "--database-url", databaseURL, "--app", "load", "--devices", String(devices),
            "--credentials-from", directory.appendingPathComponent("sim").path,
        ], environment: environment, timeout: 300)
        guard result.status == 0 else { throw Failure(description: "herald seed: \(result.stderr)") }
    }

    func startWorkers(_ count: Int, shardSize: Int = 20_000) async throws {
        // Every topic exists before the workers subscribe: a topic created by its first message
        // (the campaign's first shard) made a group rebalance in mid-measurement, and under a
        // 200,000-device campaign the urgent group took 11 to 28 s to settle (CI and local runs).
        await producer.prepare(topics: Array(topics.values))
        for index in 0..<count {
            var environment = WorkerEnvironment.make(self.environment, apnsPort: apnsPort, fcmPort: fcmPort,
                                                     caFile: directory.appendingPathComponent("sim/ca.pem"),
                                                     id: "w\(index)-\(name)", group: "\(name).workers", httpPort: try TestPorts.free())
            environment["HERALD_SHARD_SIZE"] = String(shardSize)
            // librdkafka's group lines (joins, assignments, revocations), so a kept log shows who
            // held a partition that went unserved; HERALD_TEST_KAFKA_DEBUG widens them (`cgrp,fetch`).
            environment["HERALD_KAFKA_PROPERTY_DEBUG"] = ProcessInfo.processInfo.environment["HERALD_TEST_KAFKA_DEBUG"] ?? "cgrp"
            workers.append(try background(["run"], label: "worker\(index)", environment: environment))
        }
        for index in 0..<count {
            let ready = try await wait(seconds: 60) { self.output("worker\(index)").contains("worker ready") }
            guard ready else { throw Failure(description: "worker \(index) did not get ready") }
        }
    }

    /// Accepted deliveries per Unix second, both simulators together (`GET /_sim/stats`).
    func acceptedPerSecond() async throws -> [Int64: Int] {
        var total: [Int64: Int] = [:]
        for port in [apnsPort, fcmPort] {
            let result = try await Subprocess.runDetached(URL(fileURLWithPath: "/usr/bin/curl"), [
                "-sS", "--http2", "--cacert", directory.appendingPathComponent("sim/ca.pem").path, "https://127.0.0.1:\(port)/_sim/stats",
            ], timeout: 60)
            guard result.status == 0, let counts = try JSONValue.parse(result.stdout)["accepted_per_second"]?.objectValue else {
                throw Failure(description: "GET /_sim/stats on \(port): \(result.stderr)")
            }
            for (second, count) in counts {
                if let second = Int64(second), case .number(let number) = count, let value = Int(number.text) { total[second, default: 0] += value }
            }
        }
        return total
    }

    static func job(id: String, audience: String, urgent: Bool) -> String {
        """
        {"schema":"herald.job.v1","id":"\(id)","app_id":"load","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
        "audience":\(audience),"content":{"title":"Code","body":"\(id)"},"delivery":{"urgent":\(urgent)}}
        """
    }

    func produce(urgent: Bool, _ json: String, id: String) async throws {
        let topic = topics[urgent ? "HERALD_TOPIC_JOBS_URGENT" : "HERALD_TOPIC_JOBS"] ?? ""
        for result in await producer.sendAll([KafkaProducerMessage(topic: topic, key: Array(id.utf8), value: Array(json.utf8))]) {
            _ = try result.get()
        }
    }

    func wait(seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }

    func tearDown(keepLogs: Bool) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in workers {
                group.addTask { await withCheckedContinuation { continuation in
                    Thread.detachNewThread { Subprocess.stop(worker, grace: 20); continuation.resume() }
                } }
            }
        }
        if let simulator { Subprocess.stop(simulator) }
        reader?.cancel()
        _ = await reader?.value
        await consumer.close()
        _ = await producer.flush(timeoutMilliseconds: 2000)
        await pool.close()
        if let admin = try? await PostgresConnection.connect(serverURL) {
            try? await admin.execute("DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)")
            await admin.close()
        }
        if !keepLogs { try? FileManager.default.removeItem(at: directory) }
    }
}

/// Receipts read from the results topic.
final class RunReceipts: Sendable {
    private let state = Mutex<(terminal: [String: Set<String>], receipts: [String: [Receipt]])>(([:], [:]))

    func record(_ receipt: Receipt) {
        state.withLock { state in
            if receipt.stage.isTerminal, let subscription = receipt.subscriptionID {
                state.terminal[receipt.jobID, default: []].insert(subscription)
            }
            if receipt.jobID != "campaign" { state.receipts[receipt.jobID, default: []].append(receipt) }
        }
    }

    func terminal(job: String) -> Int { state.withLock { $0.terminal[job]?.count ?? 0 } }

    func first(job: String, stage: Receipt.Stage) -> Receipt? {
        state.withLock { $0.receipts[job]?.first { $0.stage == stage } }
    }

    /// Every receipt of `job` (not kept for the job named `campaign`).
    func all(job: String) -> [Receipt] { state.withLock { $0.receipts[job] ?? [] } }

    /// The job ids receipts were seen for.
    func jobs() -> Set<String> { state.withLock { Set($0.receipts.keys).union($0.terminal.keys) } }
}
