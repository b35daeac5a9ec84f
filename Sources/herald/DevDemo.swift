import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldSim
import HeraldWorker

/// `herald dev --demo`: sends a campaign to every demo device and a VoIP push to a few, follows
/// the results and metrics topics with a live progress line, and prints a summary table.
struct DevDemo {
    let brokers: String
    let topics: WorkerConfiguration.Topics
    let pool: PostgresPool
    let simulator: Simulator

    struct JobProgress {
        var name: String
        var kind: String
        var audience: Int64?
        var accepted: Int64 = 0
        var unregistered: Int64 = 0
        var failed: Int64 = 0
        var dropped: Int64 = 0
        var completed: Receipt.Totals?
        var startedAt = ContinuousClock.now
        var firstAcceptedAt: ContinuousClock.Instant?
        var finishedAt: ContinuousClock.Instant?
        var terminal: Int64 { accepted + unregistered + failed + dropped }
    }

    func run(stop: StopSignal, timeoutSeconds: Int, workers: [DevChild]) async -> Int32 {
        let stamp = Timestamp.now
        let suffix = String(stamp.seconds)
        var jobs: [(id: String, name: String, kind: String, body: JSONValue)] = []
        jobs.append(("demo-campaign-\(suffix)", "campaign to every device", "notification", .object([
            "schema": .string(Job.schemaName), "id": .string("demo-campaign-\(suffix)"), "app_id": .string("demo"),
            "kind": .string("notification"), "created_at": .string(stamp.description),
            "audience": .object(["all": .bool(true)]),
            "content": .object([
                "title": .string("Herald demo"), "body": .string("A campaign to every device, delivered by your own workers."),
                "url": .string("https://example.com/demo"),
                "buttons": .array([.object(["id": .string("open"), "text": .string("Open")])]),
            ]),
        ])))
        // A VoIP push to a handful of devices (iOS ones need a PushKit token).
        do {
            let rows = try await pool.query("""
                (SELECT id::text FROM subscriptions WHERE app_id = 'demo' AND platform = 'ios' AND voip_token IS NOT NULL
                   AND opted_in AND invalidated_at IS NULL ORDER BY id LIMIT 5)
                UNION ALL
                (SELECT id::text FROM subscriptions WHERE app_id = 'demo' AND platform = 'android'
                   AND opted_in AND invalidated_at IS NULL ORDER BY id LIMIT 5)
                """)
            let ids = rows.rows.compactMap { $0.first ?? nil }
            if !ids.isEmpty {
                jobs.append(("demo-voip-\(suffix)", "VoIP call to \(ids.count) devices", "voip", .object([
                    "schema": .string(Job.schemaName), "id": .string("demo-voip-\(suffix)"), "app_id": .string("demo"),
                    "kind": .string("voip"), "created_at": .string(stamp.description),
                    "audience": .object(["subscription_ids": .array(ids.map(JSONValue.string))]),
                    "voip": .object(["data": .object(["caller": .string("Ada Lovelace"), "call_id": .string("demo-\(suffix)")]), "ttl_s": .int(30)]),
                    "delivery": .object(["urgent": .bool(true)]),
                ])))
            }
        } catch {
            Console.error("herald dev: cannot pick VoIP devices: \(error)")
        }

        // A live activity: start (to devices holding a push-to-start token, and Android ones),
        // three updates and an end, one after another like a delivery tracker.
        let activity = "demo-delivery-\(suffix)"
        var laDevices: [(id: String, platform: String)] = []
        do {
            let rows = try await pool.query("""
                (SELECT id::text, platform FROM subscriptions WHERE app_id = 'demo' AND platform = 'ios'
                   AND opted_in AND invalidated_at IS NULL ORDER BY id DESC LIMIT 3)
                UNION ALL
                (SELECT id::text, platform FROM subscriptions WHERE app_id = 'demo' AND platform = 'android'
                   AND opted_in AND invalidated_at IS NULL ORDER BY id DESC LIMIT 3)
                """)
            laDevices = rows.rows.compactMap { row in row[0].flatMap { id in row[1].map { (id, $0) } } }
            for device in laDevices where device.platform == "ios" {
                // What the upstream API stores when the app reports its push-to-start token.
                try await pool.query("""
                    INSERT INTO push_to_start_tokens (app_id, subscription_id, attributes_type, token)
                    VALUES ('demo', $1::uuid, 'DeliveryAttributes', encode(sha256(convert_to($1 || ':pts', 'UTF8')), 'hex'))
                    ON CONFLICT DO NOTHING
                    """, [device.id], idempotent: false)
            }
        } catch {
            Console.error("herald dev: cannot prepare the live activity: \(error)")
            laDevices = []
        }
        let laSteps: [LiveActivityStep] = laDevices.isEmpty ? [] : [
            LiveActivityStep(event: "start", sequence: 0, state: ["status": .string("preparing"), "eta_minutes": .int(30)], name: "live activity: start"),
            LiveActivityStep(event: "update", sequence: 1, state: ["status": .string("cooking"), "eta_minutes": .int(20)], name: "live activity: update 1"),
            LiveActivityStep(event: "update", sequence: 2, state: ["status": .string("on the way"), "eta_minutes": .int(10)], name: "live activity: update 2"),
            LiveActivityStep(event: "update", sequence: 3, state: ["status": .string("at the door"), "eta_minutes": .int(1)], name: "live activity: update 3"),
            LiveActivityStep(event: "end", sequence: 4, state: ["status": .string("delivered"), "eta_minutes": .int(0)], name: "live activity: end"),
        ]
        let laAudience = laDevices.map(\.id)

        let producer: KafkaProducer
        let consumer: KafkaConsumer
        do {
            producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers))
            var options = KafkaConsumerOptions()
            options.maximumInFlight = 100_000
            consumer = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: brokers, properties: ["session.timeout.ms": "6000"]),
                                         groupID: "herald-dev-demo-\(suffix)", options: options)
            try consumer.subscribe(topics: [topics.results, topics.metrics])
        } catch {
            Console.error("herald dev: Kafka: \(error)")
            return 69
        }
        var progress: [String: JobProgress] = [:]
        for job in jobs {
            let urgent = job.body["delivery"]?["urgent"] == .bool(true)
            do {
                _ = try await producer.send(topic: urgent ? topics.jobsUrgent : topics.jobs, key: job.id, value: job.body.serialized())
            } catch {
                Console.error("herald dev: could not send \(job.id): \(error)")
                return 69
            }
            progress[job.id] = JobProgress(name: job.name, kind: job.kind)
            print("sent \(job.kind) job \(job.id): \(job.name)")
        }
        for step in laSteps {
            progress[step.jobID(activity)] = JobProgress(name: step.name, kind: "live_activity")
        }
        fflush(nil)
        // The live activity's steps go one after another: the start must have reached the
        // devices before they could report their activity tokens (simulated here, as the
        // upstream API would store them), and then each update in turn.
        let resultsTopic = topics.jobs
        let database = pool
        let iosDevices = laDevices.filter { $0.platform == "ios" }.map(\.id)
        let sequence = Task { () -> String? in
            for step in laSteps {
                let id = step.jobID(activity)
                do {
                    _ = try await producer.send(topic: resultsTopic, key: "demo/\(activity)",
                                                value: step.body(activity: activity, audience: laAudience).serialized())
                } catch {
                    return "could not send \(id): \(error)"
                }
                let deadline = ContinuousClock.now + .seconds(120)
                while ContinuousClock.now < deadline {
                    let done = try? await database.query("SELECT completed_at IS NOT NULL FROM jobs WHERE id = $1", [id])
                    if done?.rows.first?.first == "t" { break }
                    try? await Task.sleep(for: .milliseconds(100))
                }
                if step.event == "start" {
                    for device in iosDevices {
                        _ = try? await database.query("""
                            INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token)
                            VALUES ('demo', $1, $2::uuid, encode(sha256(convert_to($2 || ':activity', 'UTF8')), 'hex'))
                            ON CONFLICT DO NOTHING
                            """, [activity, device], idempotent: false)
                    }
                }
            }
            return nil
        }

        let interactive = isatty(STDOUT_FILENO) == 1
        let started = ContinuousClock.now
        var lastLine = ContinuousClock.now
        var lastTerminal: Int64 = 0
        var p99: [String: Double] = [:]
        var deadLetters = 0
        var status: Int32 = 0
        while true {
            if stop.isSet { status = 130; break }
            if ContinuousClock.now - started > .seconds(timeoutSeconds) {
                Console.error("\nherald dev: the demo did not finish within \(timeoutSeconds) s")
                status = 1
                break
            }
            if let dead = workers.first(where: { !$0.isRunning }) {
                Console.error("\nherald dev: a worker exited (status \(dead.terminationStatus))")
                status = 1
                break
            }
            let message: KafkaMessage?
            do {
                message = try await consumer.poll(timeoutMilliseconds: 100)
            } catch {
                Console.error("herald dev: Kafka: \(error)")
                status = 69
                break
            }
            if let message {
                consumer.markProcessed(message)
                if message.topic == topics.metrics, let report = try? MetricsReport.decode(message.value) {
                    for (provider, latency) in report.latencyMilliseconds { p99[provider.rawValue] = latency.p99 }
                } else if let receipt = try? Receipt.decode(message.value), var job = progress[receipt.jobID] {
                    switch receipt.stage {
                    case .accepted:
                        job.accepted += 1
                        if job.firstAcceptedAt == nil { job.firstAcceptedAt = ContinuousClock.now }
                    case .unregistered: job.unregistered += 1
                    case .failed: job.failed += 1
                    case .dropped: job.dropped += 1
                    case .planned: job.audience = receipt.audienceEstimate
                    case .completed:
                        if job.completed == nil { job.finishedAt = ContinuousClock.now }
                        job.completed = receipt.totals
                    default: deadLetters += 0
                    }
                    progress[receipt.jobID] = job
                }
            }
            let now = ContinuousClock.now
            if now - lastLine >= .seconds(1) {
                let terminal = progress.values.reduce(0) { $0 + $1.terminal }
                let seconds = Double((now - lastLine).components.seconds) + Double((now - lastLine).components.attoseconds) / 1e18
                let rate = Double(terminal - lastTerminal) / max(seconds, 0.001)
                lastTerminal = terminal
                lastLine = now
                let accepted = progress.values.reduce(0) { $0 + $1.accepted }
                let unregistered = progress.values.reduce(0) { $0 + $1.unregistered }
                let failed = progress.values.reduce(0) { $0 + $1.failed }
                let latency = p99.keys.sorted().map { "\($0) p99 \(String(format: "%.1f", p99[$0] ?? 0)) ms" }.joined(separator: ", ")
                let line = String(format: "%8.0f sent/s  accepted %lld  unregistered %lld  failed %lld", rate, accepted, unregistered, failed)
                    + (latency.isEmpty ? "" : "  \(latency)")
                if interactive { print("\r\u{1B}[2K" + line, terminator: "") } else { print(line) }
                fflush(nil)
            }
            if progress.values.allSatisfy({ $0.completed != nil }) { break }
        }
        if interactive { print("") }
        if let problem = await sequence.value {
            Console.error("herald dev: \(problem)")
            status = 1
        }
        await consumer.close()
        _ = await producer.flush()
        printSummary(progress, order: jobs.map(\.id) + laSteps.map { $0.jobID(activity) })
        if status == 0 {
            // The receipts must add up to the totals the workers recorded.
            for (id, job) in progress {
                guard let totals = job.completed, totals.accepted == job.accepted, totals.unregistered == job.unregistered,
                      totals.failed == job.failed, totals.dropped == job.dropped else {
                    Console.error("herald dev: receipts of \(id) do not add up to its completed totals")
                    return 1
                }
            }
            let apns = simulator.apnsStats.snapshot
            let fcm = simulator.fcmStats.snapshot
            print("simulators: APNs accepted \(apns.accepted), FCM accepted \(fcm.accepted), protocol violations \(apns.violations + fcm.violations)")
            print("all receipts are in")
        }
        return status
    }

    private func printSummary(_ progress: [String: JobProgress], order: [String]) {
        // `seconds` from the demo's start; `sending s` from the job's first accepted receipt to
        // its completed event, the time the workers spent on it.
        let header = ["job", "kind", "audience", "accepted", "unregistered", "failed", "dropped", "seconds", "sending s"]
        var rows: [[String]] = [header]
        func seconds(_ from: ContinuousClock.Instant?, _ to: ContinuousClock.Instant?) -> String {
            guard let from, let to else { return "-" }
            let elapsed = to - from
            return String(format: "%.1f", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        for id in order {
            guard let job = progress[id] else { continue }
            rows.append([job.name, job.kind, job.audience.map(String.init) ?? "-", String(job.accepted), String(job.unregistered),
                         String(job.failed), String(job.dropped), seconds(job.startedAt, job.finishedAt),
                         seconds(job.firstAcceptedAt, job.finishedAt)])
        }
        let widths = (0..<header.count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        print("")
        for (index, row) in rows.enumerated() {
            let cells = row.enumerated().map { column, cell in
                column == 0 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }
            print(cells.joined(separator: "  "))
            if index == 0 { print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
        }
        print("")
        fflush(nil)
    }
}

/// One step of the demo's live activity.
struct LiveActivityStep: Sendable {
    let event: String
    let sequence: Int
    let state: [String: JSONValue]
    let name: String

    func jobID(_ activity: String) -> String { "\(activity):\(event):\(sequence)" }

    func body(activity: String, audience: [String]) -> JSONValue {
        var update: [String: JSONValue] = [
            "activity_id": .string(activity), "event": .string(event), "stream_id": .string("demo-session"),
            "sequence": .int(sequence), "content_state": .object(state),
        ]
        var body: [String: JSONValue] = [
            "schema": .string(Job.schemaName), "id": .string(jobID(activity)), "app_id": .string("demo"),
            "kind": .string("live_activity"), "created_at": .string(Timestamp.now.description),
        ]
        if event == "start" {
            update["alert"] = .object(["title": .string("Order confirmed"), "body": .string("Follow it on the Lock Screen.")])
            update["attributes_type"] = .string("DeliveryAttributes")
            update["attributes"] = .object(["restaurant": .string("Pizza Nova")])
            body["audience"] = .object(["subscription_ids": .array(audience.map(JSONValue.string))])
        }
        if event == "end" {
            update["alert"] = .object(["title": .string("Delivered"), "body": .string("Enjoy your meal.")])
        }
        body["live_activity"] = .object(update)
        return .object(body)
    }
}
