import Dispatch
import Foundation
import HeraldCore
import Synchronization

/// An idempotent Kafka producer whose `send` returns once the broker has acknowledged the message.
///
/// librdkafka's delivery reports are served by a dedicated polling thread, never on Swift's
/// cooperative threads. Each message carries a retained box as its opaque, and the
/// delivery-report callback resumes the waiting `send` (or fills in its batch) from it.
public final class KafkaProducer: Sendable {
    private let client: RDKafkaProducer
    private let stopped: StopFlag
    /// Batches wait here for room when librdkafka's queue is full (that wait blocks).
    private let enqueueQueue = DispatchQueue(label: "herald.kafka.producer.enqueue")
    /// Topics whose metadata a batch already fetched (see `prepareTopics`).
    private let knownTopics = Mutex<Set<String>>([])
    /// Turns of the poll thread so far (about every 100 ms, idle or not): a liveness heartbeat.
    public var pollIterations: UInt64 { pollCounter.count }
    private let pollCounter = PollCounter()
    /// Signalled by the poll thread after it served delivery reports while a batch waits for
    /// room in librdkafka's queue.
    private let room = RoomSignal()
    /// `message.max.bytes` as configured (key, value and headers together), to refuse oversized
    /// messages before librdkafka does.
    public let maximumMessageBytes: Int

    /// Herald's producer defaults, each applied unless the configuration sets the property:
    /// idempotence on (which implies `acks=all`), lz4 compression and 5 ms of batching.
    public static let defaultProperties = ["enable.idempotence": "true", "acks": "all", "compression.codec": "lz4", "linger.ms": "5"]

    /// Starts a producer with ``defaultProperties`` under the configuration's own.
    public init(configuration: KafkaConfiguration) throws(KafkaError) {
        var configuration = configuration
        for (name, value) in KafkaProducer.defaultProperties where configuration.properties[name] == nil {
            configuration.properties[name] = value
        }
        let client = try RDKafkaProducer(configuration: configuration)
        self.client = client
        maximumMessageBytes = client.maximumMessageBytes ?? 1_000_000
        let stopped = StopFlag()
        self.stopped = stopped
        let iterations = self.pollCounter
        let room = self.room
        let poller = Thread {
            while !stopped.isSet {
                iterations.tick()
                if client.poll(timeoutMilliseconds: 100) > 0 { room.signal() }
            }
            room.signal()
        }
        poller.name = "herald-kafka-producer-poll"
        poller.start()
    }

    /// librdkafka's fatal error, once one was raised (with idempotence on: a gap or a fencing
    /// the producer cannot repair): from then on it sends nothing, so the process must stop
    /// with an error and be restarted. Nil while all is well.
    public var fatalError: KafkaError? { client.fatalError }

    /// Raises a fatal error in librdkafka as a broker would (a sequence gap), so tests can see
    /// what a worker does then.
    public func raiseFatalErrorForTesting(_ reason: String) {
        client.raiseFatalErrorForTesting(reason)
    }

    /// Sends one message and returns when the broker has acknowledged it.
    /// Throws `.messageTooLarge` or `.invalidMessage` without sending anything, `.produce` when
    /// librdkafka cannot queue it (retryable when its queue is full), `.delivery` when the broker
    /// did not acknowledge it in `message.timeout.ms`.
    public func send(_ message: KafkaProducerMessage) async throws(KafkaError) -> KafkaDeliveryReport {
        let result: Result<KafkaDeliveryReport, KafkaError> = await withCheckedContinuation { continuation in
            let box = DeliveryBox(target: .single(continuation), topic: message.topic)
            if let error = enqueue(message, box: box, waitWhenFull: false) {
                box.complete(.failure(error))
            }
        }
        return try result.get()
    }

    /// Sends one message with byte key and value.
    public func send(topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil) async throws(KafkaError) -> KafkaDeliveryReport {
        try await send(KafkaProducerMessage(topic: topic, key: key, value: value, headers: headers, partition: partition))
    }

    /// Sends one message with UTF-8 key and value.
    public func send(topic: String, key: String?, value: String, headers: [KafkaHeader] = []) async throws(KafkaError) -> KafkaDeliveryReport {
        try await send(KafkaProducerMessage(topic: topic, key: key, value: value, headers: headers))
    }

    /// Sends many messages at once and returns when every one is acknowledged or failed, with one
    /// result per message in order. When librdkafka's queue is full it waits for room (on a queue
    /// of its own) instead of failing, so a batch may be larger than `queue.buffering.max.messages`.
    public func sendAll(_ messages: [KafkaProducerMessage]) async -> [Result<KafkaDeliveryReport, KafkaError>] {
        guard !messages.isEmpty else { return [] }
        return await withCheckedContinuation { continuation in
            let batch = DeliveryBatch(count: messages.count, continuation: continuation)
            enqueueQueue.async { [self] in
                prepareTopics(messages)
                for (index, message) in messages.enumerated() {
                    let box = DeliveryBox(target: .batch(batch, index), topic: message.topic)
                    if let error = enqueue(message, box: box, waitWhenFull: true) {
                        box.complete(.failure(error))
                    }
                }
            }
        }
    }

    /// Fetches the metadata of `topics` now (a broker that auto-creates topics, such as the mock
    /// cluster, creates them): consumers subscribed to them then see every partition from the
    /// start instead of rebalancing when the first message creates the topic.
    public func prepare(topics: [String]) async {
        let messages = topics.map { KafkaProducerMessage(topic: $0, key: [], value: []) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            enqueueQueue.async {
                self.prepareTopics(messages)
                continuation.resume()
            }
        }
    }

    /// Fetches the metadata of topics this producer has not sent to yet, before a batch is
    /// queued: a batch queued for a topic librdkafka knows nothing about waits about a second
    /// (its periodic topic scan) before the first message goes out. Blocking; on `enqueueQueue`.
    private func prepareTopics(_ messages: [KafkaProducerMessage]) {
        // A batch goes to one topic or a few: gathered by comparison, not by hashing each
        // message's topic.
        var topics: [String] = []
        for message in messages where !topics.contains(message.topic) { topics.append(message.topic) }
        let unknown = knownTopics.withLock { known in topics.filter { !known.contains($0) } }
        for topic in unknown where !topic.isEmpty && !topic.utf8.contains(0) {
            guard client.fetchMetadata(of: topic, timeoutMilliseconds: 5_000) else { continue }
            _ = knownTopics.withLock { $0.insert(topic) }
        }
    }

    /// Hands one message to librdkafka with `box` as its opaque; returns the error when it was
    /// not queued (then `box` was not retained and the caller completes it).
    private func enqueue(_ message: KafkaProducerMessage, box: DeliveryBox, waitWhenFull: Bool) -> KafkaError? {
        if let problem = KafkaProducer.validate(message, maximumBytes: maximumMessageBytes) { return problem }
        while true {
            switch client.produce(message, box: box) {
            case nil:
                return nil
            case .queueFull(let error)?:
                guard waitWhenFull && !stopped.isSet else { return error }
                // The poll thread drains delivery reports meanwhile; wait until it has served some.
                room.wait(atMost: .milliseconds(100))
            case .refused(let error)?:
                return error
            }
        }
    }

    /// Checks what librdkafka would otherwise accept and the broker refuse, or crash on.
    static func validate(_ message: KafkaProducerMessage, maximumBytes: Int) -> KafkaError? {
        if message.topic.isEmpty || message.topic.utf8.contains(0) {
            return KafkaError(.invalidMessage, "topic name is empty or contains a NUL byte")
        }
        for header in message.headers where header.name.isEmpty || header.name.utf8.contains(0) {
            return KafkaError(.invalidMessage, "header name \(header.name.debugDescription) is empty or contains a NUL byte")
        }
        let size = (message.key?.count ?? 0) + (message.value?.count ?? 0)
            + message.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
        if size > maximumBytes {
            return KafkaError(.messageTooLarge, "message of \(size) bytes exceeds message.max.bytes (\(maximumBytes))")
        }
        return nil
    }

    /// Waits up to `timeoutMilliseconds` for every queued message to be acknowledged; returns
    /// whether the queue drained. The wait runs on a thread of its own.
    public func flush(timeoutMilliseconds: Int32 = 10_000) async -> Bool {
        let client = self.client
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: client.flush(timeoutMilliseconds: timeoutMilliseconds))
            }
        }
    }

    /// Messages queued in librdkafka and not yet acknowledged or failed.
    public var queuedCount: Int { client.queuedCount }

    deinit {
        // Whatever is still queued fails its sends with a delivery error when the handle goes;
        // callers that care call `flush` first.
        _ = client.flush(timeoutMilliseconds: 2_000)
        stopped.set()
        // The poll thread holds its own reference to `client`, so the handle outlives it.
    }
}

/// A flag one thread sets and another polls.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}

/// Turns of a poll thread, read from other threads.
final class PollCounter: Sendable {
    private let turns = Atomic<UInt64>(0)
    func tick() { turns.add(1, ordering: .relaxed) }
    var count: UInt64 { turns.load(ordering: .relaxed) }
}
