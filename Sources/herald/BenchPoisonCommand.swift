import Foundation
import HeraldCore
import HeraldCrypto
import HeraldKafka
import HeraldPostgres
import HeraldWorker

/// `herald bench poison [--devices N] [--workers W] [--statement-timeout-ms T] [--log-dir DIR] [--json]`:
/// the poison scenario of the failure suite (docs/CHAOS.md). On the whole path on this machine
/// (embedded broker, throwaway PostgreSQL, simulators, W workers) it sends, on each lane, messages
/// that once wedged it, each followed by a good message on the same key, then checks that every
/// good message is handled within 60 s, every poison message is in the dead-letter topic with
/// its cause (or dropped and counted), the workers kept their PIDs and logged nothing fatal, and
/// every consumer group's lag returns to 0.
enum BenchPoisonCommand {
    static let usage = """
        usage: herald bench poison [--devices N] [--workers W] [--statement-timeout-ms T] [--worker-binary PATH]
                                   [--log-dir DIR] [--json]
          --devices N              demo devices (default 100000); the timing-out filter scans them all
          --statement-timeout-ms T the workers' HERALD_DATABASE_STATEMENT_TIMEOUT_MS (default 1000)
          --worker-binary PATH     run the workers from another `herald` build (to show an older one wedging)
        """

    /// What a poison message must lead to.
    enum Expected: Equatable {
        case deadLetter(DeadLetter.Cause)
        /// Dropped and counted in `herald_device_events_dropped_total{reason}`.
        case dropped(String)
    }

    struct Poison {
        let name: String
        let lane: String
        let topic: String
        let key: String
        let value: [UInt8]
        let expected: Expected
    }

    /// A good message and what shows it was handled.
    struct Good {
        enum Done: Equatable {
            /// A `completed` receipt for the job.
            case completed(String)
            /// A device receipt of this stage for (job, subscription).
            case receipt(jobID: String, subscriptionID: String, stage: Receipt.Stage)
        }

        let name: String
        let topic: String
        let key: String
        let value: [UInt8]
        let done: Done
    }

    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald bench poison", usage: usage)
        let devices = options.int("--devices", in: 100...2_000_000) ?? 100_000
        let workers = options.int("--workers", in: 1...8) ?? 2
        let statementTimeout = options.int("--statement-timeout-ms", in: 100...60_000) ?? 1000
        let json = options.flag("--json")
        let logDirectory = options.string("--log-dir")
        let workerBinary = options.string("--worker-binary")
        guard options.finish() else { return 64 }
        let environment = DevEnvironment()
        environment.workerExecutable = workerBinary
        let status: Int32
        do {
            status = try await measure(environment, devices: devices, workers: workers, statementTimeout: statementTimeout,
                                       logDirectory: logDirectory, json: json)
        } catch {
            Console.error("herald bench poison: \(error)")
            status = 69
        }
        await environment.tearDown()
        return status
    }

    private static func measure(_ environment: DevEnvironment, devices: Int, workers: Int, statementTimeout: Int,
                                logDirectory: String?, json: Bool) async throws -> Int32 {
        let started = try await environment.start(devices: devices, iosShare: 0.5, unregisteredShare: 0, workers: workers, quiet: true)
        var workerEnvironment = started.environment
        for (name, value) in ProcessInfo.processInfo.environment where name.hasPrefix("HERALD_") && workerEnvironment[name] == nil {
            workerEnvironment[name] = value
        }
        workerEnvironment["HERALD_DATABASE_STATEMENT_TIMEOUT_MS"] = String(statementTimeout)
        var logs = started.directory
        if let logDirectory {
            logs = URL(fileURLWithPath: logDirectory)
            try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        }
        let topics = environment.topics
        let pool = started.pool
        let subscriptions = try await pool.query("SELECT id::text FROM subscriptions WHERE app_id = 'demo' ORDER BY id LIMIT 200")
            .rows.compactMap { $0.first ?? nil }
        guard subscriptions.count >= 100 else { throw DevPostgres.Failure(description: "too few demo subscriptions: \(subscriptions.count)") }
        let jobs = JobRepository(pool: pool)

        Console.error("herald bench poison: starting \(workers) worker(s) …")
        try await environment.startWorkers(workers, environment: workerEnvironment, directory: logs)
        let pids = environment.workers.map(\.pid)

        let brokers = started.cluster.bootstrapServers
        var readerOptions = KafkaConsumerOptions()
        readerOptions.maximumInFlight = 100_000
        let reader = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers, properties: ["session.timeout.ms": "6000"]),
                                       groupID: "herald-bench-poison-\(getpid())", options: readerOptions)
        try reader.subscribe(topics: [topics.results, topics.deadLetters])
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers))
        let observed = Observed()
        let reading = Task {
            while !Task.isCancelled {
                guard let message = try? await reader.poll(timeoutMilliseconds: 100) else { continue }
                reader.markProcessed(message)
                if message.topic == topics.deadLetters {
                    observed.letter(message.value)
                } else if let receipt = try? Receipt.decode(message.value) {
                    observed.receipt(receipt)
                }
            }
        }

        // Phase 1: the job and shard lanes.
        let (jobPoisons, jobGoods) = jobCases(topics: topics, subscriptions: subscriptions)
        let (shardPoisons, shardGoods) = try await shardCases(topics: topics, subscriptions: subscriptions, jobs: jobs, pool: pool)
        var goodResults: [(Good, Double?)] = []
        goodResults += try await send(poisons: jobPoisons + shardPoisons, goods: jobGoods + shardGoods, producer: producer, observed: observed)
        // Phase 2: device events, for jobs that exist now.
        let (eventPoisons, eventGoods) = eventCases(topics: topics, subscriptions: subscriptions, jobs: jobGoods.map(\.done))
        goodResults += try await send(poisons: eventPoisons, goods: eventGoods, producer: producer, observed: observed)
        let poisons = jobPoisons + shardPoisons + eventPoisons

        // Every poison message in the dead-letter topic (or counted as dropped).
        let dropped = try await droppedEvents(environment: environment, logs: logs, wanted: poisons.filter { $0.expected == .dropped("unknown-job") }.count)
        var poisonRows: [JSONValue] = []
        var poisonOK = true
        let deadline = ContinuousClock.now + .seconds(30)
        for poison in poisons {
            var got: String
            switch poison.expected {
            case .deadLetter:
                var letter = observed.letter(for: poison.value, topic: poison.topic)
                while letter == nil && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(200))
                    letter = observed.letter(for: poison.value, topic: poison.topic)
                }
                got = letter.map { "dead-letter:\($0.cause?.rawValue ?? "none")" } ?? "missing"
            case .dropped(let reason):
                got = dropped >= 1 && observed.letter(for: poison.value, topic: poison.topic) == nil ? "dropped:\(reason)" : "not-dropped"
            }
            let want: String
            switch poison.expected {
            case .deadLetter(let cause): want = "dead-letter:\(cause.rawValue)"
            case .dropped(let reason): want = "dropped:\(reason)"
            }
            poisonOK = poisonOK && got == want
            poisonRows.append(.object(["name": .string(poison.name), "lane": .string(poison.lane), "expected": .string(want),
                                       "got": .string(got), "ok": .bool(got == want)]))
        }
        // A rejected job says so on the results topic; a dead-lettered shard's job still completes.
        let rejected = jobPoisons.filter { observed.hasRejection(key: $0.key) }.map(\.name)
        let timedOutShardJob = "poison-shard-timeout"
        var completedAfterShardLetter = observed.completed(timedOutShardJob)
        let completionDeadline = ContinuousClock.now + .seconds(30)
        while completedAfterShardLetter == nil && ContinuousClock.now < completionDeadline {
            try await Task.sleep(for: .milliseconds(200))
            completedAfterShardLetter = observed.completed(timedOutShardJob)
        }

        // Lag back to 0 on every lane's group, within 30 s (offsets are committed every second).
        let lag = try await groupLag(brokers: brokers, topics: topics, partitions: 4, within: .seconds(30))
        reading.cancel()
        await reading.value
        await reader.close()

        let alive = environment.workers.count == pids.count && environment.workers.allSatisfy(\.isRunning)
            && environment.workers.map(\.pid) == pids
        let fatal = fatalLines(logs: logs)
        let slowest = goodResults.map { $0.1 ?? .infinity }.max() ?? 0
        let goodsOK = goodResults.allSatisfy { ($0.1 ?? .infinity) <= 60 }
        let rejectedOK = Set(rejected) == Set(jobPoisons.filter { $0.name != "job-not-json" }.map(\.name))
        let passed = poisonOK && goodsOK && alive && fatal.isEmpty && lag.values.allSatisfy { $0 == 0 } && rejectedOK
            && completedAfterShardLetter == 1
        let result = JSONValue.object([
            "scenario": .string("poison"),
            "poison": .array(poisonRows),
            "good": .array(goodResults.map { good, seconds in
                .object(["name": .string(good.name), "seconds": seconds.map { .double(($0 * 100).rounded() / 100) } ?? .null,
                         "ok": .bool((seconds ?? .infinity) <= 60)])
            }),
            "slowest_good_seconds": slowest.isFinite ? .double((slowest * 100).rounded() / 100) : .null,
            "rejected_events": .array(rejected.map(JSONValue.string)),
            "dead_lettered_shard_job_completed": completedAfterShardLetter.map { .object(["dead_lettered_shards": .int($0)]) } ?? .null,
            "device_events_dropped": .int(dropped),
            "workers_same_pids": .bool(alive),
            "fatal_lines": .array(fatal.prefix(5).map(JSONValue.string)),
            "lag": .object(lag.mapValues { .int($0) }),
            "passed": .bool(passed),
        ])
        if json {
            print(result.serialized())
        } else {
            for (key, value) in result.objectValue?.sorted(by: { $0.key < $1.key }) ?? [] { print("\(key): \(value.serialized())") }
        }
        return passed ? 0 : 1
    }

    /// Produces every poison message, each followed by its good message on the same key, and
    /// waits (up to 90 s) for every good one; returns how long each took, nil when it never did.
    private static func send(poisons: [Poison], goods: [Good], producer: KafkaProducer, observed: Observed) async throws -> [(Good, Double?)] {
        var messages: [KafkaProducerMessage] = []
        for (poison, good) in zip(poisons, goods) {
            messages.append(KafkaProducerMessage(topic: poison.topic, key: Array(poison.key.utf8), value: poison.value))
            messages.append(KafkaProducerMessage(topic: good.topic, key: Array(good.key.utf8), value: good.value))
        }
        let sent = ContinuousClock.now
        for result in await producer.sendAll(messages) { _ = try result.get() }
        var seconds: [String: Double] = [:]
        let deadline = sent + .seconds(90)
        while seconds.count < goods.count && ContinuousClock.now < deadline {
            for good in goods where seconds[good.name] == nil && observed.isDone(good.done) {
                seconds[good.name] = BenchMeasure.seconds(ContinuousClock.now - sent)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return goods.map { ($0, seconds[$0.name]) }
    }

    // MARK: The cases

    static func job(id: String, app: String = "demo", audience: JSONValue, content: [String: JSONValue] = [:], extra: [String: JSONValue] = [:]) -> JSONValue {
        var body: [String: JSONValue] = ["title": .string("Poison scenario"), "body": .string("Job \(id)")]
        body.merge(content) { $1 }
        var members: [String: JSONValue] = [
            "schema": .string(Job.schemaName), "id": .string(id), "app_id": .string(app), "kind": .string("notification"),
            "created_at": .string(Timestamp.now.rfc3339), "audience": audience, "content": .object(body),
        ]
        members.merge(extra) { $1 }
        return .object(members)
    }

    /// A filter at the limits (256 nodes, 32 costly predicates, at most 100 children a node)
    /// whose every branch is false for every device, so PostgreSQL evaluates all of them (a true
    /// branch would end an `or` early): 16 pairs of "within 20,000 km" and "not within 20,000 km"
    /// of a point (two great-circle distances each for a device with a location) and 188 tag
    /// comparisons (a `jsonb_build_object` each). Measured on these 2-core machines at about
    /// 55 µs a device, so 100,000 devices take ~5 s against the scenario's 1 s statement timeout.
    static var slowFilter: JSONValue {
        var pairs: [JSONValue] = []
        for index in 0..<16 {
            let everywhere = JSONValue.object(["near": .object(["lat": .double(Double(index * 4) - 32), "long": .double(Double(index * 10) - 80),
                                                               "radius_m": .int(20_000_000)])])
            pairs.append(.object(["and": .array([everywhere, .object(["not": everywhere])])]))
        }
        func lookups(_ offset: Int) -> JSONValue {
            .object(["or": .array((0..<94).map { index in
                .object(["tag": .string("t\((offset + index) % 7)"), "op": .string("eq"), "value": .string("no-such-value-\(offset + index)")])
            })])
        }
        return .object(["or": .array([.object(["or": .array(pairs)]), lookups(0), lookups(94)])])
    }

    static func jobCases(topics: WorkerConfiguration.Topics, subscriptions: [String]) -> ([Poison], [Good]) {
        let jobsTopic = topics.jobs
        func good(_ index: Int, _ name: String) -> Good {
            let id = "good-job-\(index)"
            let audience = JSONValue.object(["subscription_ids": .array(subscriptions[(index * 10)..<(index * 10 + 10)].map(JSONValue.string))])
            return Good(name: name, topic: jobsTopic, key: "key-\(name)", value: job(id: id, audience: audience).serializedBytes(), done: .completed(id))
        }
        let all = JSONValue.object(["all": .bool(true)])
        var nul = job(id: "poison-nul-field", audience: all).serializedBytes()
        nul = Array(String(decoding: nul, as: UTF8.self).replacingOccurrences(of: "Poison scenario", with: "Poison\\u0000scenario").utf8)
        let unknownMember = job(id: "poison-nul-member", audience: all, extra: ["x_note": .object(["text": .string("a\u{0}b")])]).serializedBytes()
        let huge = job(id: "poison-huge", audience: all, content: ["body": .string(String(repeating: "h", count: 900_000))]).serializedBytes()
        let cases: [(String, [UInt8], DeadLetter.Cause)] = [
            ("job-nul-field", nul, .invalid),
            ("job-nul-unknown-member", unknownMember, .invalid),
            ("job-900kb", huge, .invalid),
            ("job-not-json", Array("this is not JSON, it is poison".utf8), .invalid),
            ("job-unknown-app", job(id: "poison-unknown-app", app: "no-such-app", audience: all).serializedBytes(), .unknownApp),
            ("job-filter-timeout", job(id: "poison-filter-timeout", audience: .object(["filter": slowFilter])).serializedBytes(), .statementTimeout),
        ]
        var poisons: [Poison] = []
        var goods: [Good] = []
        for (index, (name, value, cause)) in cases.enumerated() {
            poisons.append(Poison(name: name, lane: "jobs", topic: jobsTopic, key: "key-\(name)", value: value, expected: .deadLetter(cause)))
            let followed = good(index, name)
            goods.append(Good(name: "after-\(name)", topic: followed.topic, key: "key-\(name)", value: followed.value, done: followed.done))
        }
        return (poisons, goods)
    }

    static func shardCases(topics: WorkerConfiguration.Topics, subscriptions: [String], jobs: JobRepository,
                           pool: PostgresPool) async throws -> ([Poison], [Good]) {
        func shard(_ jobID: String) -> [UInt8] {
            Shard(jobID: jobID, appID: "demo", shardNo: 0, shardCount: 1, idFrom: Shard.minimumID, idTo: nil, createdAt: .now).json.serializedBytes()
        }
        // A job planned and then deleted (as retention or an operator would), its shard message still in Kafka.
        let gone = "poison-shard-gone"
        _ = try await jobs.insert(id: gone, appID: "demo", kind: "notification",
                                  body: job(id: gone, audience: .object(["all": .bool(true)])).serialized(), createdAt: .now)
        try await jobs.plan(jobID: gone, ranges: [.everything], audienceEstimate: 0)
        try await pool.query("DELETE FROM jobs WHERE id = $1", [gone])
        // A job whose filter times out, planned as if the count had passed: its shard's range query times out.
        let slow = "poison-shard-timeout"
        _ = try await jobs.insert(id: slow, appID: "demo", kind: "notification",
                                  body: job(id: slow, audience: .object(["filter": slowFilter])).serialized(), createdAt: .now)
        try await jobs.plan(jobID: slow, ranges: [.everything], audienceEstimate: 0)
        var goods: [Good] = []
        for (index, name) in ["shard-job-deleted", "shard-range-timeout"].enumerated() {
            let id = "good-shard-\(index)"
            let audience = JSONValue.object(["subscription_ids": .array(subscriptions[(100 + index * 10)..<(110 + index * 10)].map(JSONValue.string))])
            _ = try await jobs.insert(id: id, appID: "demo", kind: "notification", body: job(id: id, audience: audience).serialized(), createdAt: .now)
            try await jobs.plan(jobID: id, ranges: [.everything], audienceEstimate: 10)
            goods.append(Good(name: "after-\(name)", topic: topics.shards, key: "\(name == "shard-job-deleted" ? gone : slow)/0",
                              value: shard(id), done: .completed(id)))
        }
        let poisons = [
            Poison(name: "shard-job-deleted", lane: "shards", topic: topics.shards, key: "\(gone)/0", value: shard(gone), expected: .deadLetter(.unknownJob)),
            Poison(name: "shard-range-timeout", lane: "shards", topic: topics.shards, key: "\(slow)/0", value: shard(slow), expected: .deadLetter(.statementTimeout)),
        ]
        return (poisons, goods)
    }

    static func eventCases(topics: WorkerConfiguration.Topics, subscriptions: [String], jobs: [Good.Done]) -> ([Poison], [Good]) {
        let topic = topics.deviceEvents
        func event(_ type: String, job: String, app: String = "demo", subscription: String, action: String? = nil) -> [UInt8] {
            var members: [String: JSONValue] = [
                "schema": .string(DeviceEvent.schemaName), "type": .string(type), "job_id": .string(job), "app_id": .string(app),
                "subscription_id": .string(subscription), "at": .string(Timestamp.now.rfc3339),
            ]
            if let action { members["action_id"] = .string(action) }
            return JSONValue.object(members).serializedBytes()
        }
        // The good jobs of phase 1 sent to subscriptions[0..<60]: tap each one's first device.
        let goodJobs = jobs.compactMap { done -> String? in
            if case .completed(let id) = done { return id }
            return nil
        }
        var nulEvent = event("clicked", job: goodJobs[0], subscription: subscriptions[0], action: "open")
        nulEvent = Array(String(decoding: nulEvent, as: UTF8.self).replacingOccurrences(of: "\"open\"", with: "\"op\\u0000en\"").utf8)
        let cases: [(String, [UInt8], Expected)] = [
            ("event-nul", nulEvent, .deadLetter(.invalid)),
            ("event-not-a-uuid", event("received", job: goodJobs[1], subscription: "not-a-uuid-at-all"), .deadLetter(.invalid)),
            ("event-unknown-job", event("received", job: "job-that-never-was", subscription: subscriptions[20]), .dropped("unknown-job")),
            ("event-foreign-app", event("clicked", job: goodJobs[3], app: "intruder", subscription: subscriptions[30], action: "open"), .deadLetter(.foreignEvent)),
        ]
        var poisons: [Poison] = []
        var goods: [Good] = []
        for (index, (name, value, expected)) in cases.enumerated() {
            let subscription = subscriptions[index * 10]
            // Keyed by subscription id, as the upstream API keys device events.
            poisons.append(Poison(name: name, lane: "device-events", topic: topic, key: subscription, value: value, expected: expected))
            goods.append(Good(name: "after-\(name)", topic: topic, key: subscription,
                              value: event("confirmed", job: goodJobs[index], subscription: subscription),
                              done: .receipt(jobID: goodJobs[index], subscriptionID: subscription, stage: .confirmed)))
        }
        return (poisons, goods)
    }

    // MARK: Checks

    /// `herald_device_events_dropped_total{reason="unknown-job"}` over the workers, waiting up to
    /// 30 s for `wanted`.
    private static func droppedEvents(environment: DevEnvironment, logs: URL, wanted: Int) async throws -> Int {
        let ports = workerPorts(logs: logs)
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            var total = 0
            for port in ports {
                guard let text = try? await DevHTTP.get(port: port, path: "/metrics") else { continue }
                for line in text.split(separator: "\n") where line.hasPrefix("herald_device_events_dropped_total{reason=\"unknown-job\"}") {
                    total += Int(line.split(separator: " ").last ?? "") ?? 0
                }
            }
            if total >= wanted || ContinuousClock.now > deadline { return total }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// The health ports the workers logged in their `worker ready` lines.
    static func workerPorts(logs: URL) -> [Int] {
        let files = (try? FileManager.default.contentsOfDirectory(at: logs, includingPropertiesForKeys: nil)) ?? []
        return files.filter { $0.lastPathComponent.hasPrefix("worker-") }.compactMap { file in
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where line.contains("\"worker ready\"") {
                if let json = try? JSONValue.parse(String(line)), case .number(let port)? = json["http_port"] { return Int(port.text) }
            }
            return nil
        }
    }

    /// Log lines that say a worker died or gave up: level fatal, a Swift runtime trap, a crash.
    static func fatalLines(logs: URL) -> [String] {
        let files = (try? FileManager.default.contentsOfDirectory(at: logs, includingPropertiesForKeys: nil)) ?? []
        var lines: [String] = []
        for file in files where file.lastPathComponent.hasPrefix("worker-") {
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n")
            where line.contains("\"level\":\"fatal\"") || line.contains("Fatal error") || line.contains("consumer stopped on a fatal error") || line.contains("💣") {
                lines.append(String(line.prefix(300)))
            }
        }
        return lines
    }

    /// Consumer lag of each lane's group, once every partition's committed offset reaches its
    /// end or `within` passes.
    private static func groupLag(brokers: String, topics: WorkerConfiguration.Topics, partitions: Int32, within: Duration) async throws -> [String: Int] {
        let group = "herald-workers"
        let lanes: [(String, [String])] = [
            (group, [topics.jobs]), (group + ".urgent", [topics.jobsUrgent, topics.shardsUrgent]),
            (group + ".shards", [topics.shards]), (group + ".device-events", [topics.deviceEvents]),
        ]
        var lag: [String: Int] = [:]
        let deadline = ContinuousClock.now + within
        for (groupID, laneTopics) in lanes {
            // Never subscribed: reads the group's committed offsets without joining it.
            let probe = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers), groupID: groupID)
            let all = laneTopics.flatMap { topic in (0..<partitions).map { KafkaTopicPartition(topic: topic, partition: $0) } }
            while true {
                let ends = try await probe.watermarks(for: all)
                let committed = try await probe.committedOffsets(for: all)
                let behind = all.reduce(0) { sum, partition in
                    let end = ends[partition]?.high ?? 0
                    let at = max(committed[partition] ?? 0, ends[partition]?.low ?? 0)
                    return sum + Int(max(0, end - at))
                }
                lag[groupID] = behind
                if behind == 0 || ContinuousClock.now > deadline { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            await probe.close()
        }
        return lag
    }
}

/// What the bench read from the results and dead-letter topics.
final class Observed: @unchecked Sendable {
    private let lock = NSLock()
    private var letters: [DeadLetter] = []
    private var completedJobs: [String: Int] = [:]
    private var rejectedJobs: Set<String> = []
    private var deviceReceipts: Set<String> = []

    func letter(_ bytes: [UInt8]) {
        guard let letter = try? DeadLetter.decode(bytes) else { return }
        lock.withLock { letters.append(letter) }
    }

    func receipt(_ receipt: Receipt) {
        lock.withLock {
            switch receipt.stage {
            case .completed: completedJobs[receipt.jobID] = receipt.deadLetteredShards ?? 0
            case .rejected: rejectedJobs.insert(receipt.jobID)
            default:
                if let subscription = receipt.subscriptionID { deviceReceipts.insert("\(receipt.jobID)|\(subscription)|\(receipt.stage.rawValue)") }
            }
        }
    }

    /// The dead letter holding `original` (whole, or by its digest when truncated) from `topic`.
    func letter(for original: [UInt8], topic: String) -> DeadLetter? {
        let digest = Hex.encode(SHA256.hash(original))
        return lock.withLock {
            letters.first { letter in
                letter.source.topic == topic
                    && (letter.originalTruncated ? letter.originalSHA256 == digest && letter.originalSize == original.count : letter.original == original)
            }
        }
    }

    /// The job's `dead_lettered_shards` (0 when none) once it completed.
    func completed(_ jobID: String) -> Int? { lock.withLock { completedJobs[jobID] } }

    /// Whether a `rejected` event arrived for the job a poison case named in its key.
    func hasRejection(key: String) -> Bool {
        let name = key.replacingOccurrences(of: "key-job-", with: "")
        let ids = ["nul-field": "poison-nul-field", "nul-unknown-member": "poison-nul-member", "900kb": "poison-huge",
                   "unknown-app": "poison-unknown-app", "filter-timeout": "poison-filter-timeout"]
        guard let id = ids[name] else { return false }
        return lock.withLock { rejectedJobs.contains(id) }
    }

    func isDone(_ done: BenchPoisonCommand.Good.Done) -> Bool {
        switch done {
        case .completed(let id): return completed(id) != nil
        case .receipt(let job, let subscription, let stage):
            return lock.withLock { deviceReceipts.contains("\(job)|\(subscription)|\(stage.rawValue)") }
        }
    }
}
