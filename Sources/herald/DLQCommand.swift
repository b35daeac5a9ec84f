import Foundation
import HeraldCore
import HeraldKafka
import HeraldWorker

/// `herald dlq replay`: after a fix, re-produces dead letters' original messages to the topics
/// they came from, with their original keys, so the workers take them again.
///
/// It reads the dead-letter topic from the beginning with a throwaway consumer group (whose
/// offsets move nobody else's) up to the end offsets its partitions had once they were assigned
/// (their high watermarks): exactly what was there when it started, however slow the broker.
/// Dead letters arriving meanwhile are left for the next replay. Should no message come for a
/// minute before those ends it stops with status 69 and names the partitions. When the end
/// offsets cannot be read it falls back to `--idle-seconds` without a message.
enum DLQCommand {
    static let usage = """
    usage: herald dlq replay [--since RFC3339] [--until RFC3339] [--reason-contains TEXT] [--dry-run] [--idle-seconds S] [--brokers B] [--json]
      --since / --until     replay dead letters whose "at" is at or after --since and before --until
      --reason-contains     only those whose reason contains TEXT
      --dry-run             print what would be replayed, produce nothing
      --idle-seconds S      only when the end offsets cannot be read: the end is S seconds without a message (default 3)
      --json                the closing summary (and each --dry-run line) as one JSON object
    """

    /// What a replay did, printed at the end.
    struct Counts {
        var read = 0
        var matched = 0
        var replayed = 0
        var undecodable = 0
        var refused = 0
        var failed = 0
    }

    static func run(_ arguments: [String]) async -> Int32 {
        guard arguments.first == "replay" else {
            Console.error("herald dlq: the action is replay\n\(usage)")
            return 64
        }
        var options = OptionParser(Array(arguments.dropFirst()), command: "herald dlq replay", usage: usage, flags: ["--dry-run", "--json"])
        let json = options.flag("--json")
        let sinceText = options.string("--since")
        let untilText = options.string("--until")
        let reasonContains = options.string("--reason-contains")
        let dryRun = options.flag("--dry-run")
        let idleSeconds = options.double("--idle-seconds", in: 0.2...600) ?? 3
        let brokers = options.string("--brokers")
        guard options.finish() else { return 64 }
        var since: Timestamp?
        var until: Timestamp?
        for (flag, text) in [("--since", sinceText), ("--until", untilText)] {
            guard let text else { continue }
            guard let time = Timestamp(rfc3339: text) else {
                Console.error("herald dlq replay: \(flag) takes an RFC 3339 time (2026-01-31T12:00:00Z), not \(text)")
                return 64
            }
            if flag == "--since" { since = time } else { until = time }
        }

        let topics: WorkerConfiguration.Topics
        var configuration: KafkaConfiguration
        do {
            topics = try CommandEnvironment.topics()
            configuration = try CommandEnvironment.kafka(brokers: brokers)
        } catch {
            Console.error("herald dlq replay: \(error)")
            return 78
        }
        configuration.properties["auto.offset.reset"] = "earliest"

        let consumer: KafkaConsumer
        let producer: KafkaProducer?
        do {
            consumer = try KafkaConsumer(configuration: configuration, groupID: "herald-dlq-replay-\(UUID().uuidString.lowercased())")
            try consumer.subscribe(topics: [topics.deadLetters])
            producer = dryRun ? nil : try KafkaProducer(configuration: configuration)
        } catch {
            Console.error("herald dlq replay: cannot read \(topics.deadLetters): \(error)")
            return error.code == .configuration ? 78 : 69
        }

        var counts = Counts()
        var pending: [KafkaProducerMessage] = []
        var status: Int32 = 0
        let clock = ContinuousClock()
        let started = clock.now
        var quietSince: ContinuousClock.Instant?
        // What was read, and the partitions' ends once assigned (for good without them when
        // they cannot be read).
        var progress = PartitionEnds()
        var endsUnknown = false
        var lastProgress = clock.now
        let stallLimit = Duration.seconds(max(60, idleSeconds))
        func flush() async {
            guard let producer, !pending.isEmpty else { return }
            for result in await producer.sendAll(pending) {
                switch result {
                case .success: counts.replayed += 1
                case .failure(let error):
                    counts.failed += 1
                    if counts.failed <= 10 { Console.error("herald dlq replay: not acknowledged: \(error)") }
                }
            }
            pending.removeAll(keepingCapacity: true)
        }

        while true {
            // The ends are taken once the partitions are assigned, and checked before each poll,
            // so dead letters streaming in beyond them cannot keep it reading.
            if progress.ends == nil && !endsUnknown && !consumer.assignment.isEmpty {
                do {
                    progress.setEnds(try await consumer.watermarks(for: Array(consumer.assignment)))
                } catch {
                    endsUnknown = true
                    Console.error("herald dlq replay: cannot read the end offsets of \(topics.deadLetters) (\(error)); the end is \(idleSeconds) s without a message")
                }
            }
            if progress.isComplete { break }
            let message: KafkaMessage?
            do {
                message = try await consumer.poll(timeoutMilliseconds: 200)
            } catch {
                Console.error("herald dlq replay: \(error)")
                status = 69
                break
            }
            guard let message else {
                // The quiet time counts from the assignment: joining the group takes a while.
                if consumer.assignment.isEmpty {
                    if clock.now - started > .seconds(30) {
                        Console.error("herald dlq replay: no partition of \(topics.deadLetters) was assigned within 30 s (does the topic exist?)")
                        break
                    }
                    lastProgress = clock.now
                    continue
                }
                if progress.ends != nil {
                    if clock.now - lastProgress >= stallLimit {
                        let left = progress.unfinished.map { "\($0.partition) at \($0.reached.map(String.init) ?? "start") of \($0.end)" }
                        Console.error("herald dlq replay: no message for \(Int(stallLimit.components.seconds)) s before the end of \(left.joined(separator: ", ")); stopped")
                        status = 69
                        break
                    }
                    continue
                }
                let quiet = quietSince ?? clock.now
                quietSince = quiet
                if clock.now - quiet >= .milliseconds(Int64(idleSeconds * 1000)) { break }
                continue
            }
            quietSince = nil
            lastProgress = clock.now
            consumer.markProcessed(message)
            // Arrived after the start: left for the next replay.
            guard progress.contains(message) else { continue }
            progress.read(message)
            counts.read += 1
            let letter: DeadLetter
            do {
                letter = try DeadLetter.decode(message.value)
            } catch {
                counts.undecodable += 1
                Console.error("herald dlq replay: skipped \(message.topic)/\(message.partition)@\(message.offset): not a dead letter (\(error))")
                continue
            }
            if let since, letter.at < since { continue }
            if let until, !(letter.at < until) { continue }
            if let reasonContains, !letter.reason.contains(reasonContains) { continue }
            counts.matched += 1
            // A dead letter naming the dead-letter topic as its source would only come back.
            guard letter.source.topic != topics.deadLetters, !letter.source.topic.isEmpty else {
                counts.refused += 1
                Console.error("herald dlq replay: skipped \(message.partition)@\(message.offset): its source is \(letter.source.topic)")
                continue
            }
            // Only the start of the original is kept: replaying it would produce a different message.
            if letter.originalTruncated {
                counts.refused += 1
                Console.error("herald dlq replay: refused \(message.partition)@\(message.offset) (from \(letter.source.topic)/\(letter.source.partition)@\(letter.source.offset)): "
                    + "its original was truncated (\(letter.original.count) of \(letter.originalSize ?? 0) bytes kept, sha256 \(letter.originalSHA256 ?? "-"))")
                continue
            }
            if dryRun {
                let key = message.key.map { String(decoding: $0, as: UTF8.self) } ?? "-"
                if json {
                    print(JSONValue.object([
                        "would_replay": .string("\(letter.source.topic)/\(letter.source.partition)@\(letter.source.offset)"),
                        "at": .string(letter.at.rfc3339), "key": .string(key), "bytes": .int(letter.original.count), "reason": .string(letter.reason),
                    ]).serialized())
                    continue
                }
                print("would replay \(letter.at.rfc3339) \(letter.source.topic)/\(letter.source.partition)@\(letter.source.offset) key=\(key) bytes=\(letter.original.count) reason=\(AppsCommand.quoted(letter.reason))")
                continue
            }
            pending.append(KafkaProducerMessage(topic: letter.source.topic, key: message.key, value: letter.original))
            if pending.count >= 1_000 { await flush() }
        }
        await flush()
        await consumer.close()
        if json {
            print(JSONValue.object([
                "dry_run": .bool(dryRun), "read": .int(counts.read), "matched": .int(counts.matched), "replayed": .int(counts.replayed),
                "failed": .int(counts.failed), "refused": .int(counts.refused), "undecodable": .int(counts.undecodable),
            ]).serialized())
        } else if dryRun {
            print("read \(counts.read) dead letters: \(counts.matched) match, \(counts.matched - counts.refused) would be replayed, \(counts.undecodable) undecodable")
        } else {
            print("read \(counts.read) dead letters: \(counts.matched) match, replayed \(counts.replayed), failed \(counts.failed), refused \(counts.refused), undecodable \(counts.undecodable)")
        }
        if counts.failed > 0 { status = 69 }
        return status
    }
}
