import HeraldKafka
import Synchronization

/// One consumer and how its messages are run: `ordered` lanes run messages with the same key one
/// after another (a live activity's updates), others run them as they come; at most
/// `concurrency` at once, and the consumer pauses its partitions when that many are in hand.
final class Lane: Sendable {
    let name: String
    let consumer: KafkaConsumer
    let concurrency: Int
    let ordered: Bool
    let log: WorkerLog
    let inHand = InHandMessages()
    /// Messages being handled now.
    let busy = BusyCount()

    init(name: String, groupID: String, topics: [String], concurrency: Int, ordered: Bool,
         configuration: KafkaConfiguration, log: WorkerLog) throws(KafkaError) {
        var options = KafkaConsumerOptions()
        options.maximumInFlight = concurrency + 2
        options.resumeAtOrBelow = concurrency
        options.log = { message in log.warning(message, ["component": .string("kafka"), "lane": .string(name)]) }
        consumer = try KafkaConsumer(configuration: configuration, groupID: groupID, options: options)
        try consumer.subscribe(topics: topics)
        self.name = name
        self.concurrency = concurrency
        self.ordered = ordered
        self.log = log
    }

    func run(stop: StopSignal, fatal: FirstFatalError, handler: @escaping @Sendable (KafkaMessage) async -> Bool) async {
        let consumer = self.consumer
        let busy = self.busy
        let ordered = self.ordered
        let inHand = self.inHand
        // Noted on arrival, before a message waits behind another of its key, so a wedged key
        // shows in `herald_oldest_unprocessed_seconds` before lag alerts fire.
        let arriving = consumer.messages.map { message in
            inHand.arrived(message)
            return message
        }
        do {
            try await KeyOrderedRunner.run(arriving, maximumConcurrency: concurrency,
                                           key: { message in ordered ? message.key.map { $0 } : nil }) { message in
                defer { inHand.finished(message) }
                // After a stop request nothing new starts; the message is read again later.
                if stop.isSet { return }
                busy.adjust(1)
                defer { busy.adjust(-1) }
                if await handler(message) { consumer.markProcessed(message) }
            }
        } catch {
            log.error("consumer stopped on a fatal error", ["lane": .string(name), "error": .string("\(error)")])
            fatal.record("lane \(name): \(error)")
            stop.set()
        }
    }
}

/// A lane as a service: runs its messages until its consumer closes; after the stop request,
/// lets the work in hand end (checkpoint) until `workInHand` past the request, then closes the
/// consumer, committing what is done, which ends the messages.
struct LaneService: Service {
    let lane: Lane
    let fatal: FirstFatalError
    let workInHand: Duration
    let handler: @Sendable (KafkaMessage) async -> Bool

    var name: String { "lane-\(lane.name)" }

    func run(stop: StopSignal) async {
        let lane = self.lane
        let workInHand = self.workInHand
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await lane.run(stop: stop, fatal: fatal, handler: handler) }
            group.addTask {
                await stop.wait()
                guard !Task.isCancelled else { return }
                _ = await returnsWithin(max(.zero, workInHand - stop.elapsed)) { await lane.busy.idle() }
                await lane.consumer.close()
            }
        }
    }
}

/// The messages a lane has read and not finished, with when each arrived.
final class InHandMessages: Sendable {
    private struct Position: Hashable {
        let topic: String
        let partition: Int32
        let offset: Int64
    }

    private let arrivals = Mutex<[Position: ContinuousClock.Instant]>([:])

    func arrived(_ message: KafkaMessage) {
        let position = Position(topic: message.topic, partition: message.partition, offset: message.offset)
        arrivals.withLock { $0[position] = $0[position] ?? .now }
    }

    func finished(_ message: KafkaMessage) {
        _ = arrivals.withLock { $0.removeValue(forKey: Position(topic: message.topic, partition: message.partition, offset: message.offset)) }
    }

    /// Seconds the oldest message in hand has waited; 0 when none.
    func oldestSeconds(now: ContinuousClock.Instant = .now) -> Double {
        guard let oldest = arrivals.withLock({ $0.values.min() }) else { return 0 }
        let waited = now - oldest
        return Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
    }
}

/// The heartbeat monitor shared by the watchdog and `/healthz`.
final class HeartbeatBoard: Sendable {
    private let monitor = Mutex(HeartbeatMonitor())
    func update<T>(_ body: (inout HeartbeatMonitor) -> T) -> T { monitor.withLock { body(&$0) } }
}

/// The first fatal error the worker met (later ones are logged, not kept).
final class FirstFatalError: Sendable {
    private let error = Mutex<String?>(nil)
    func record(_ description: String) { error.withLock { $0 = $0 ?? description } }
    var first: String? { error.withLock { $0 } }
}

/// Messages a lane is handling right now (its stop waits for zero).
final class BusyCount: Sendable {
    private let count = AsyncCondition(0)
    var value: Int { count.value }
    func adjust(_ delta: Int) { count.update { $0 += delta } }
    /// Returns once nothing is being handled (or the task is cancelled).
    func idle() async { await count.wait { $0 <= 0 } }
}
