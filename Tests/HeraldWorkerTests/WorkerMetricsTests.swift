import HeraldCore
@testable import HeraldWorker
import Testing

@Suite(.timeLimit(.minutes(2))) struct WorkerMetricsTests {
    /// One sample line of the exposition format.
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// A strict little parser for the text format: every non-comment line must be
    /// `name{label="value",…} number`, and every sample's family must have HELP and TYPE first.
    static func parse(_ text: String) throws -> [Sample] {
        struct Malformed: Error, CustomStringConvertible {
            var line: String
            var description: String { "malformed line: \(line)" }
        }
        var samples: [Sample] = []
        var helped: Set<String> = []
        var typed: [String: String] = [:]
        #expect(text.hasSuffix("\n"))
        // Split by scalar: "\r\n" is a single Character, which a Character split would not cut.
        for raw in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            let line = String(String.UnicodeScalarView(raw))
            if line.hasPrefix("# HELP ") {
                let rest = line.dropFirst(7)
                guard let space = rest.firstIndex(of: " ") else { throw Malformed(line: line) }
                helped.insert(String(rest[..<space]))
                continue
            }
            if line.hasPrefix("# TYPE ") {
                let fields = line.dropFirst(7).split(separator: " ")
                guard fields.count == 2, ["counter", "gauge", "histogram", "summary", "untyped"].contains(String(fields[1])) else {
                    throw Malformed(line: line)
                }
                typed[String(fields[0])] = String(fields[1])
                continue
            }
            guard !line.hasPrefix("#") else { continue }
            var scalars = Substring(line).unicodeScalars[...]
            var name = ""
            while let first = scalars.first, ("0"..."9").contains(first) || ("a"..."z").contains(first) || ("A"..."Z").contains(first) || first == "_" || first == ":" {
                name.unicodeScalars.append(first)
                scalars = scalars.dropFirst()
            }
            guard !name.isEmpty, let firstName = name.unicodeScalars.first, !("0"..."9").contains(firstName) else { throw Malformed(line: line) }
            var labels: [String: String] = [:]
            if scalars.first == "{" {
                scalars = scalars.dropFirst()
                while scalars.first != "}" {
                    var label = ""
                    while let first = scalars.first, first != "=" {
                        guard ("a"..."z").contains(first) || ("A"..."Z").contains(first) || first == "_" || ("0"..."9").contains(first) else { throw Malformed(line: line) }
                        label.unicodeScalars.append(first)
                        scalars = scalars.dropFirst()
                    }
                    guard !label.isEmpty, scalars.first == "=" else { throw Malformed(line: line) }
                    scalars = scalars.dropFirst()
                    guard scalars.first == "\"" else { throw Malformed(line: line) }
                    scalars = scalars.dropFirst()
                    var value = ""
                    while true {
                        guard let first = scalars.first else { throw Malformed(line: line) }
                        scalars = scalars.dropFirst()
                        if first == "\"" { break }
                        if first == "\\" {
                            guard let escaped = scalars.first else { throw Malformed(line: line) }
                            scalars = scalars.dropFirst()
                            switch escaped {
                            case "\\": value += "\\"
                            case "\"": value += "\""
                            case "n": value += "\n"
                            default: throw Malformed(line: line)
                            }
                        } else {
                            value.unicodeScalars.append(first)
                        }
                    }
                    labels[label] = value
                    if scalars.first == "," { scalars = scalars.dropFirst() } else if scalars.first != "}" { throw Malformed(line: line) }
                }
                scalars = scalars.dropFirst()
            }
            guard scalars.first == " " else { throw Malformed(line: line) }
            let valueText = String(String.UnicodeScalarView(scalars.dropFirst()))
            let value: Double
            switch valueText {
            case "+Inf": value = .infinity
            case "-Inf": value = -.infinity
            case "NaN": value = .nan
            default:
                guard let parsed = Double(valueText) else { throw Malformed(line: line) }
                value = parsed
            }
            var family = name
            for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && typed[String(name.dropLast(suffix.count))] == "histogram" {
                family = String(name.dropLast(suffix.count))
            }
            guard helped.contains(family), typed[family] != nil else { throw Malformed(line: "no HELP/TYPE before: \(line)") }
            samples.append(Sample(name: name, labels: labels, value: value))
        }
        return samples
    }

    static func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    @Test func countersAddUp() throws {
        let metrics = WorkerMetrics(workerID: "w-1")
        metrics.notification(provider: "apns", outcome: "accepted")
        metrics.notification(provider: "apns", outcome: "accepted", count: 41)
        metrics.notification(provider: "fcm", outcome: "unregistered", count: 3)
        metrics.notification(provider: "fcm", outcome: "retried")
        for _ in 0..<3 { metrics.jobStarted() }
        metrics.jobFinished()
        for _ in 0..<5 { metrics.shardStarted() }
        for _ in 0..<4 { metrics.shardFinished() }
        metrics.deadLettered(lane: "jobs", cause: "invalid")
        metrics.deadLettered(lane: "jobs", cause: "invalid")
        metrics.deadLettered(lane: "shards", cause: "statement-timeout")
        metrics.setOldestUnprocessed(lane: "jobs", seconds: 12.5)
        metrics.setOldestUnprocessed(lane: "shards", seconds: 0)
        metrics.deviceEventDropped(reason: "unknown-job")
        metrics.deviceEvent(type: "received")
        metrics.deviceEvent(type: "received")
        metrics.deviceEvent(type: "clicked")
        metrics.kafkaError()
        metrics.postgresError()
        metrics.postgresError()
        metrics.setRebalances(2)
        metrics.setRebalances(1)
        metrics.adjustInFlight(10)
        metrics.adjustInFlight(-3)
        metrics.setOpenConnections(provider: "apns", 4)
        metrics.setOpenConnections(provider: "apns", 2)

        let snapshot = metrics.snapshot()
        #expect(snapshot.workerID == "w-1")
        #expect(snapshot.notifications(provider: "apns", outcome: "accepted") == 42)
        #expect(snapshot.notifications(provider: "fcm", outcome: "unregistered") == 3)
        #expect(snapshot.notifications(provider: "fcm", outcome: "retried") == 1)
        #expect(snapshot.notifications(provider: "apns", outcome: "halted") == 0)
        #expect(snapshot.jobsStarted == 3 && snapshot.jobsFinished == 1)
        #expect(snapshot.shardsStarted == 5 && snapshot.shardsFinished == 4)
        #expect(snapshot.deadLetters == 3)
        #expect(snapshot.deviceEvents == ["received": 2, "confirmed": 0, "clicked": 1])
        #expect(snapshot.kafkaErrors == 1 && snapshot.postgresErrors == 2 && snapshot.rebalances == 2, "a counter never goes back")
        #expect(snapshot.inFlight == 7)
        #expect(snapshot.openConnections == ["apns": 2, "fcm": 0])

        let samples = try Self.parse(metrics.prometheusText())
        #expect(Self.value(samples, "herald_notifications_total", ["provider": "apns", "outcome": "accepted"]) == 42)
        #expect(Self.value(samples, "herald_notifications_total", ["provider": "fcm", "outcome": "unregistered"]) == 3)
        #expect(Self.value(samples, "herald_jobs_started_total") == 3)
        #expect(Self.value(samples, "herald_jobs_finished_total", ["state": "completed"]) == 1)
        #expect(Self.value(samples, "herald_shards_started_total") == 5)
        #expect(Self.value(samples, "herald_shards_finished_total") == 4)
        #expect(Self.value(samples, "herald_dead_letters_total", ["lane": "jobs", "cause": "invalid"]) == 2)
        #expect(Self.value(samples, "herald_dead_letters_total", ["lane": "shards", "cause": "statement-timeout"]) == 1)
        #expect(Self.value(samples, "herald_oldest_unprocessed_seconds", ["lane": "jobs"]) == 12.5)
        #expect(Self.value(samples, "herald_oldest_unprocessed_seconds", ["lane": "shards"]) == 0)
        #expect(Self.value(samples, "herald_device_events_dropped_total", ["reason": "unknown-job"]) == 1)
        #expect(Self.value(samples, "herald_device_events_total", ["type": "received"]) == 2)
        #expect(Self.value(samples, "herald_kafka_errors_total") == 1)
        #expect(Self.value(samples, "herald_postgres_errors_total") == 2)
        #expect(Self.value(samples, "herald_rebalances_total") == 2)
        #expect(Self.value(samples, "herald_in_flight") == 7)
        #expect(Self.value(samples, "herald_open_connections", ["provider": "apns"]) == 2)
        // A fresh worker shows zeros for the known series, so dashboards and rate() see them at once.
        let fresh = try Self.parse(WorkerMetrics(workerID: "w-2").prometheusText())
        #expect(Self.value(fresh, "herald_notifications_total", ["provider": "fcm", "outcome": "halted"]) == 0)
        #expect(Self.value(fresh, "herald_send_duration_seconds_count", ["provider": "apns"]) == 0)
    }

    @Test func histogramBucketsAreCumulativeWithRightCountAndSum() throws {
        let metrics = WorkerMetrics(workerID: "w")
        let observations: [Double] = [0.0005, 0.001, 0.002, 0.02, 0.02, 0.3, 0.7, 3, 12, -1]
        for seconds in observations { metrics.sendDuration(provider: "apns", seconds: seconds) }
        metrics.sendDuration(provider: "apns", seconds: .nan)
        metrics.sendDuration(provider: "fcm", seconds: 0.05)

        let histogram = try #require(metrics.snapshot().sendDurations["apns"])
        #expect(histogram.count == 10)
        // -1 counts as 0; NaN is ignored.
        #expect(abs(histogram.sum - (observations.reduce(0, +) + 1)) < 1e-9)

        let samples = try Self.parse(metrics.prometheusText())
        let expected: [(String, Double)] = [
            ("0.001", 3), ("0.0025", 4), ("0.005", 4), ("0.01", 4), ("0.025", 6), ("0.05", 6), ("0.1", 6),
            ("0.25", 6), ("0.5", 7), ("1", 8), ("2.5", 8), ("5", 9), ("10", 9), ("+Inf", 10),
        ]
        let buckets = samples.filter { $0.name == "herald_send_duration_seconds_bucket" && $0.labels["provider"] == "apns" }
        #expect(buckets.map { $0.labels["le"] ?? "" } == expected.map(\.0))
        #expect(buckets.map(\.value) == expected.map(\.1))
        #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0.value <= $1.value })
        #expect(Self.value(samples, "herald_send_duration_seconds_count", ["provider": "apns"]) == 10)
        let sum = try #require(Self.value(samples, "herald_send_duration_seconds_sum", ["provider": "apns"]))
        #expect(abs(sum - histogram.sum) < 1e-9)
        #expect(Self.value(samples, "herald_send_duration_seconds_bucket", ["provider": "fcm", "le": "0.05"]) == 1)
        #expect(Self.value(samples, "herald_send_duration_seconds_bucket", ["provider": "fcm", "le": "0.025"]) == 0)
    }

    @Test func percentileEstimatesAreSensible() throws {
        let metrics = WorkerMetrics(workerID: "w")
        #expect(metrics.snapshot().sendDurationPercentiles["apns"] == WorkerMetrics.Percentiles(p50: nil, p90: nil, p99: nil))
        // 1,000 sends spread evenly over 0–100 ms: true p50 = 50 ms, p90 = 90 ms, p99 = 99 ms.
        for index in 1...1000 { metrics.sendDuration(provider: "apns", seconds: Double(index) / 10_000) }
        // FCM: everything slower than the last bound.
        for _ in 0..<10 { metrics.sendDuration(provider: "fcm", seconds: 30) }
        let snapshot = metrics.snapshot()
        let apns = try #require(snapshot.sendDurationPercentiles["apns"])
        let p50 = try #require(apns.p50), p90 = try #require(apns.p90), p99 = try #require(apns.p99)
        // The estimate lands in the bucket that holds the true value, and the order holds.
        #expect(p50 > 0.025 && p50 <= 0.05)
        #expect(p90 > 0.05 && p90 <= 0.1)
        #expect(p99 > 0.05 && p99 <= 0.1)
        #expect(p50 < p90 && p90 < p99)
        #expect(abs(p90 - 0.09) < 0.01)
        #expect(snapshot.sendDurationPercentiles["fcm"]?.p99 == 10)

        var single = WorkerMetrics.Histogram()
        single.observe(0.003)
        #expect(single.p50.map { $0 > 0.0025 && $0 <= 0.005 } == true)
    }

    @Test func textFormatParsesAndEscapesLabelValues() throws {
        let metrics = WorkerMetrics(workerID: "w")
        let awkward = "we\"ird\\pro\nvider\r\nx"
        metrics.notification(provider: awkward, outcome: "accepted", count: 2)
        metrics.sendDuration(provider: awkward, seconds: 0.2)
        metrics.deviceEvent(type: "opened")
        let text = metrics.prometheusText()
        let samples = try Self.parse(text)
        #expect(Self.value(samples, "herald_notifications_total", ["provider": awkward, "outcome": "accepted"]) == 2)
        #expect(Self.value(samples, "herald_device_events_total", ["type": "opened"]) == 1)

        let families = [
            ("herald_notifications_total", "counter"), ("herald_send_duration_seconds", "histogram"),
            ("herald_jobs_started_total", "counter"), ("herald_jobs_finished_total", "counter"),
            ("herald_shards_started_total", "counter"), ("herald_shards_finished_total", "counter"),
            ("herald_dead_letters_total", "counter"), ("herald_device_events_total", "counter"),
            ("herald_kafka_errors_total", "counter"), ("herald_postgres_errors_total", "counter"),
            ("herald_rebalances_total", "counter"), ("herald_in_flight", "gauge"), ("herald_open_connections", "gauge"),
        ]
        for (name, type) in families {
            #expect(text.contains("# TYPE \(name) \(type)\n"), "missing TYPE for \(name)")
            #expect(text.contains("# HELP \(name) "), "missing HELP for \(name)")
        }
    }

    @Test func snapshotJSONCarriesTheFigures() throws {
        let metrics = WorkerMetrics(workerID: "w-9")
        metrics.notification(provider: "fcm", outcome: "failed", count: 5)
        metrics.sendDuration(provider: "fcm", seconds: 0.04)
        let json = metrics.snapshot().json()
        #expect(json["worker_id"] == .string("w-9"))
        #expect(json["notifications"]?["fcm"]?["failed"] == .int(5))
        #expect(json["send_duration"]?["fcm"]?["count"] == .int(1))
        #expect(json["send_duration"]?["apns"]?["p50_seconds"] == .null)
    }

    @Test func concurrentIncrementsAreExact() async {
        let metrics = WorkerMetrics(workerID: "w")
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<10_000 {
                        metrics.notification(provider: task % 2 == 0 ? "apns" : "fcm", outcome: "accepted")
                        metrics.sendDuration(provider: "apns", seconds: Double(index % 100) / 1000)
                        metrics.adjustInFlight(1)
                        metrics.adjustInFlight(-1)
                        metrics.jobStarted()
                    }
                }
            }
        }
        let snapshot = metrics.snapshot()
        #expect(snapshot.notifications(provider: "apns", outcome: "accepted") + snapshot.notifications(provider: "fcm", outcome: "accepted") == 80_000)
        #expect(snapshot.notifications(provider: "apns", outcome: "accepted") == 40_000)
        #expect(snapshot.sendDurations["apns"]?.count == 80_000)
        #expect(snapshot.sendDurations["apns"]?.cumulativeCounts.last == 80_000)
        #expect(snapshot.jobsStarted == 80_000)
        #expect(snapshot.inFlight == 0)
    }

    @Test func attemptsAreCountedApartFromOutcomesAndJobsByFinalState() throws {
        let metrics = WorkerMetrics(workerID: "w-1")
        metrics.sendAttempt(provider: "fcm", result: DeliveryOutcome.retryable(providerReason: "429", retryAfterSeconds: 1, quotaExceeded: false).attemptResult)
        metrics.sendAttempt(provider: "fcm", result: DeliveryOutcome.retryable(providerReason: "503", retryAfterSeconds: nil, quotaExceeded: false).attemptResult)
        metrics.sendAttempt(provider: "fcm", result: DeliveryOutcome.accepted(providerID: "m").attemptResult)
        metrics.sendAttempt(provider: "apns", result: DeliveryOutcome.credentialFault(providerReason: "InvalidProviderToken").attemptResult)
        metrics.jobFinished(state: "completed")
        metrics.jobFinished(state: "cancelled")
        metrics.jobFinished(state: "completed")
        let samples = try Self.parse(metrics.prometheusText())
        #expect(Self.value(samples, "herald_send_attempts_total", ["provider": "fcm", "result": "retryable"]) == 2)
        #expect(Self.value(samples, "herald_send_attempts_total", ["provider": "fcm", "result": "accepted"]) == 1)
        #expect(Self.value(samples, "herald_send_attempts_total", ["provider": "apns", "result": "credentials"]) == 1)
        #expect(Self.value(samples, "herald_jobs_finished_total", ["state": "completed"]) == 2)
        #expect(Self.value(samples, "herald_jobs_finished_total", ["state": "cancelled"]) == 1)
        #expect(metrics.snapshot().jobsFinished == 3)
    }

    /// Final outcomes carry their receipt reason in a series of their own, whose label values
    /// come from `Receipt.Reason` alone (bounded); the outcome totals are unchanged by it.
    @Test func reasonsAreCountedBesideOutcomes() throws {
        let metrics = WorkerMetrics(workerID: "w-1")
        metrics.notification(provider: "apns", outcome: "unregistered", reason: .badDeviceToken)
        metrics.notification(provider: "apns", outcome: "unregistered", reason: .badDeviceToken)
        metrics.notification(provider: "fcm", outcome: "failed", reason: .retriesExhausted)
        metrics.notification(provider: "fcm", outcome: "dropped", reason: .optedOut, count: 3)
        metrics.notification(provider: "fcm", outcome: "accepted")
        let samples = try Self.parse(metrics.prometheusText())
        #expect(Self.value(samples, "herald_notification_reasons_total", ["provider": "apns", "outcome": "unregistered", "reason": "bad-device-token"]) == 2)
        #expect(Self.value(samples, "herald_notification_reasons_total", ["provider": "fcm", "outcome": "failed", "reason": "retries-exhausted"]) == 1)
        #expect(Self.value(samples, "herald_notification_reasons_total", ["provider": "fcm", "outcome": "dropped", "reason": "opted-out"]) == 3)
        #expect(Self.value(samples, "herald_notifications_total", ["provider": "fcm", "outcome": "dropped"]) == 3)
        let reasons = Set(samples.filter { $0.name == "herald_notification_reasons_total" }.compactMap { $0.labels["reason"] })
        #expect(reasons.isSubset(of: Set(Receipt.Reason.allCases.map(\.rawValue))) && reasons.count == 3)
    }

    @Test func thePoolGaugesAppearOnceSet() throws {
        let metrics = WorkerMetrics(workerID: "w-1")
        #expect(!metrics.prometheusText().contains("herald_postgres_pool"))
        metrics.setDatabasePool(inUse: 3, idle: 5, waiting: 2)
        let samples = try Self.parse(metrics.prometheusText())
        #expect(Self.value(samples, "herald_postgres_pool_connections", ["state": "in_use"]) == 3)
        #expect(Self.value(samples, "herald_postgres_pool_connections", ["state": "idle"]) == 5)
        #expect(Self.value(samples, "herald_postgres_pool_waiting") == 2)
    }

    @Test func theBacklogGaugesAppearOnceRead() throws {
        let metrics = WorkerMetrics(workerID: "w-1")
        #expect(!metrics.prometheusText().contains("herald_parked_retries"))
        metrics.setBacklog(haltedApps: 1, parkedRetries: 250, scheduledDue: 3, scheduledWaiting: 40)
        let samples = try Self.parse(metrics.prometheusText())
        #expect(Self.value(samples, "herald_halted_apps") == 1 && Self.value(samples, "herald_parked_retries") == 250)
        #expect(Self.value(samples, "herald_scheduled_backlog", ["state": "due"]) == 3)
        #expect(Self.value(samples, "herald_scheduled_backlog", ["state": "waiting"]) == 40)
        metrics.setConsumerLag(lane: "urgent", 0)
        metrics.setConsumerLag(lane: "shards", 12)
        let lagged = try Self.parse(metrics.prometheusText())
        #expect(Self.value(lagged, "herald_consumer_lag", ["lane": "urgent"]) == 0 && Self.value(lagged, "herald_consumer_lag", ["lane": "shards"]) == 12)
    }
}
