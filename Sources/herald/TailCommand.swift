import Foundation
import HeraldCore
import HeraldKafka
import HeraldWorker
import Synchronization

/// `herald tail results|metrics|dlq`: follows a topic with a throwaway consumer group and prints
/// one line per message (or the message itself with `--json`).
enum TailCommand {
    static let usage = """
    usage: herald tail results|metrics|dlq [--from-beginning] [--json] [--count N] [--job ID] [--timeout SECONDS] [--brokers B]
    """

    /// Set by SIGINT/SIGTERM; the poll loop checks it between polls. A global because a signal
    /// handler can reach nothing else, and an atomic store is async-signal-safe.
    static let stopRequested = Atomic<Bool>(false)

    static func run(_ arguments: [String]) async -> Int32 {
        guard let what = arguments.first, ["results", "metrics", "dlq"].contains(what) else {
            Console.error("herald tail: name a topic: results, metrics or dlq\n\(usage)")
            return 64
        }
        var options = OptionParser(Array(arguments.dropFirst()), command: "herald tail", usage: usage, flags: ["--from-beginning", "--json"])
        let fromBeginning = options.flag("--from-beginning")
        let json = options.flag("--json")
        let count = options.int("--count", in: 1...Int(Int32.max))
        let jobID = options.string("--job")
        let timeout = options.double("--timeout", in: 0.1...31_536_000)
        let brokers = options.string("--brokers")
        guard options.finish() else { return 64 }
        if jobID != nil && what != "results" {
            Console.error("herald tail: --job filters results only\n\(usage)")
            return 64
        }

        var configuration: KafkaConfiguration
        let topic: String
        do {
            let topics = try CommandEnvironment.topics()
            topic = switch what {
            case "results": topics.results
            case "metrics": topics.metrics
            default: topics.deadLetters
            }
            configuration = try CommandEnvironment.kafka(brokers: brokers)
        } catch {
            Console.error("herald tail: \(error)")
            return 78
        }
        configuration.properties["auto.offset.reset"] = fromBeginning ? "earliest" : "latest"

        installStopHandlers()
        // A group of its own, never joined again: its commits move nobody else's offsets.
        let group = "herald-tail-\(UUID().uuidString.lowercased())"
        let consumer: KafkaConsumer
        do {
            consumer = try KafkaConsumer(configuration: configuration, groupID: group)
            try consumer.subscribe(topics: [topic])
        } catch {
            Console.error("herald tail: cannot consume \(topic): \(error)")
            return error.code == .configuration ? 78 : 69
        }

        var printed = 0
        var lastPrinted = ContinuousClock.now
        var status: Int32 = 0
        while !stopRequested.load(ordering: .relaxed) {
            let message: KafkaMessage?
            do {
                message = try await consumer.poll(timeoutMilliseconds: 200)
            } catch {
                Console.error("herald tail: \(error)")
                status = 69
                break
            }
            if let message {
                // Marked at once: only this throwaway group's offsets move, and the consumer's
                // in-flight budget never fills up.
                consumer.markProcessed(message)
                if let line = render(message, what: what, json: json, jobID: jobID) {
                    print(line)
                    fflush(nil)
                    printed += 1
                    lastPrinted = .now
                    if let count, printed >= count { break }
                }
            }
            if let timeout, ContinuousClock.now - lastPrinted >= .milliseconds(Int64(timeout * 1000)) { break }
        }
        await consumer.close()
        return status
    }

    private static func installStopHandlers() {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber) { _ in TailCommand.stopRequested.store(true, ordering: .relaxed) }
        }
    }

    /// The line for `message`, or nil when `--job` filters it out.
    static func render(_ message: KafkaMessage, what: String, json: Bool, jobID: String?) -> String? {
        do throws(ValidationError) {
            switch what {
            case "results":
                let receipt = try Receipt.decode(message.value)
                if let jobID, receipt.jobID != jobID { return nil }
                return json ? compact(message) : describe(receipt)
            case "metrics":
                let report = try MetricsReport.decode(message.value)
                return json ? compact(message) : describe(report)
            default:
                let letter = try DeadLetter.decode(message.value)
                return json ? compact(message) : describe(letter)
            }
        } catch {
            // Never skip silently and never crash: say what arrived and why it did not decode.
            if jobID != nil { return nil }
            let place = "\(message.topic)/\(message.partition)@\(message.offset)"
            if json {
                return JSONValue.object([
                    "undecodable": .bool(true),
                    "error": .string(error.description),
                    "topic": .string(message.topic),
                    "partition": .int(message.partition),
                    "offset": .int(message.offset),
                    "value_base64": .string(Data(message.value).base64EncodedString()),
                ]).serialized()
            }
            return "undecodable \(place): \(error) value=\(preview(message.value))"
        }
    }

    /// The message re-serialised on one line (it parsed, so this is the same document).
    private static func compact(_ message: KafkaMessage) -> String {
        (try? JSONValue.parse(message.value).serialized()) ?? message.valueString
    }

    static func describe(_ receipt: Receipt) -> String {
        var fields = [receipt.at.rfc3339, receipt.stage.rawValue, "job=\(receipt.jobID)"]
        if let subscription = receipt.subscriptionID { fields.append("sub=\(subscription)") }
        if let platform = receipt.platform { fields.append("platform=\(platform.rawValue)") }
        if let reason = receipt.reason { fields.append("reason=\(reason.rawValue)") }
        if let providerReason = receipt.providerReason { fields.append("provider_reason=\(providerReason)") }
        if let providerID = receipt.providerID { fields.append("provider_id=\(providerID)") }
        if let attempts = receipt.attempts { fields.append("attempts=\(attempts)") }
        if let until = receipt.until { fields.append("until=\(until.rfc3339)") }
        if let action = receipt.actionID { fields.append("action=\(action)") }
        if let provider = receipt.provider { fields.append("provider=\(provider.rawValue)") }
        if let estimate = receipt.audienceEstimate { fields.append("audience_estimate=\(estimate)") }
        if let shards = receipt.shardCount { fields.append("shards=\(shards)") }
        if let totals = receipt.totals {
            fields.append("accepted=\(totals.accepted) unregistered=\(totals.unregistered) failed=\(totals.failed) dropped=\(totals.dropped)")
        }
        return fields.joined(separator: " ")
    }

    static func describe(_ report: MetricsReport) -> String {
        var fields = [report.at.rfc3339, "worker=\(report.workerID)", "window=\(report.windowSeconds)s",
                      "jobs=\(report.jobs.started)/\(report.jobs.finished)", "shards=\(report.shards.started)/\(report.shards.finished)"]
        var outcomes: [String: Int64] = [:]
        for item in report.notifications { outcomes[item.outcome.rawValue, default: 0] += item.count }
        fields += outcomes.keys.sorted().map { "\($0)=\(outcomes[$0] ?? 0)" }
        fields.append("retries=\(report.retries)")
        fields.append("in_flight=\(report.inFlight)")
        for (provider, latency) in report.latencyMilliseconds.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            fields.append("\(provider.rawValue)_p99_ms=\(latency.p99)")
        }
        fields.append("lag=\(report.consumerLag.reduce(0) { $0 + $1.lag })")
        if report.kafkaErrors + report.postgresErrors > 0 {
            fields.append("errors=kafka:\(report.kafkaErrors),postgres:\(report.postgresErrors)")
        }
        return fields.joined(separator: " ")
    }

    static func describe(_ letter: DeadLetter) -> String {
        "\(letter.at.rfc3339) reason=\(quoted(letter.reason)) source=\(letter.source.topic)/\(letter.source.partition)@\(letter.source.offset) original=\(preview(letter.original))"
    }

    /// The first 160 bytes as a JSON string: readable, one line, control bytes escaped.
    private static func preview(_ bytes: [UInt8]) -> String {
        let head = bytes.prefix(160)
        let text = quoted(String(decoding: head, as: UTF8.self))
        return bytes.count > head.count ? "\(text)…(\(bytes.count) bytes)" : text
    }

    private static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        JSONValue.writeString(text, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
