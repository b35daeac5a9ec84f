internal import CRdKafka
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
    private let handle: RDKafkaClient
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
        let conf = try configuration.makeHandle()
        maximumMessageBytes = KafkaConfiguration.value(of: "message.max.bytes", in: conf).flatMap { Int($0) } ?? 1_000_000
        rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
            guard let message, let opaque = message.pointee._private else { return }
            let box = Unmanaged<DeliveryBox>.fromOpaque(opaque).takeRetainedValue()
            let error = message.pointee.err
            if error == RD_KAFKA_RESP_ERR_NO_ERROR {
                let topic = String(cString: rd_kafka_topic_name(message.pointee.rkt))
                box.complete(.success(KafkaDeliveryReport(topic: topic, partition: message.pointee.partition, offset: message.pointee.offset)))
            } else {
                box.complete(.failure(KafkaError(.delivery, rdkafkaErrorText(error), rdkafkaCode: error.rawValue)))
            }
        }
        handle = try RDKafkaClient(type: RD_KAFKA_PRODUCER, conf: conf)
        let stopped = StopFlag()
        self.stopped = stopped
        let client = handle
        let iterations = self.pollCounter
        let room = self.room
        let poller = Thread {
            while !stopped.isSet {
                iterations.tick()
                if rd_kafka_poll(client.pointer, 100) > 0 { room.signal() }
            }
            room.signal()
        }
        poller.name = "herald-kafka-producer-poll"
        poller.start()
    }

    /// librdkafka's fatal error, once one was raised (with idempotence on: a gap or a fencing
    /// the producer cannot repair): from then on it sends nothing, so the process must stop
    /// with an error and be restarted. Nil while all is well.
    public var fatalError: KafkaError? {
        var text = [CChar](repeating: 0, count: 512)
        let code = rd_kafka_fatal_error(handle.pointer, &text, text.count)
        guard code != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(.fatal, "\(rdkafkaErrorText(code)): \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))",
                          rdkafkaCode: code.rawValue)
    }

    /// Raises a fatal error in librdkafka as a broker would (`rd_kafka_test_fatal_error`), so
    /// tests can see what a worker does then.
    public func raiseFatalErrorForTesting(_ reason: String) {
        _ = rd_kafka_test_fatal_error(handle.pointer, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
    }

    /// Sends one message and returns when the broker has acknowledged it.
    /// Throws `.messageTooLarge` or `.invalidMessage` without sending anything, `.produce` when
    /// librdkafka cannot queue it (retryable when its queue is full), `.delivery` when the broker
    /// did not acknowledge it in `message.timeout.ms`.
    public func send(_ message: KafkaProducerMessage) async throws(KafkaError) -> KafkaDeliveryReport {
        let result: Result<KafkaDeliveryReport, KafkaError> = await withCheckedContinuation { continuation in
            let box = DeliveryBox(target: .single(continuation))
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
                    let box = DeliveryBox(target: .batch(batch, index))
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
        let topics = Set(messages.map(\.topic))
        let unknown = knownTopics.withLock { known in topics.subtracting(known) }
        for topic in unknown where !topic.isEmpty && !topic.utf8.contains(0) {
            guard let handle = rd_kafka_topic_new(self.handle.pointer, topic, nil) else { continue }
            var metadata: UnsafePointer<rd_kafka_metadata>?
            if rd_kafka_metadata(self.handle.pointer, 0, handle, &metadata, 5_000) == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata {
                rd_kafka_metadata_destroy(metadata)
            }
            rd_kafka_topic_destroy(handle)
            _ = knownTopics.withLock { $0.insert(topic) }
        }
    }

    /// Hands one message to librdkafka with `box` as its opaque; returns the error when it was
    /// not queued (then `box` was not retained and the caller completes it).
    private func enqueue(_ message: KafkaProducerMessage, box: DeliveryBox, waitWhenFull: Bool) -> KafkaError? {
        if let problem = KafkaProducer.validate(message, maximumBytes: maximumMessageBytes) { return problem }
        while true {
            let headers = KafkaProducer.makeHeaders(message.headers)
            let opaque = Unmanaged.passRetained(box).toOpaque()
            let error = KafkaProducer.produce(handle.pointer, message, headers: headers, opaque: opaque)
            guard let error else { return nil }
            Unmanaged<DeliveryBox>.fromOpaque(opaque).release()
            // On failure the headers stay ours.
            if let headers { rd_kafka_headers_destroy(headers) }
            let code = rd_kafka_error_code(error)
            let text = String(cString: rd_kafka_error_string(error))
            let retriable = rd_kafka_error_is_retriable(error) != 0
            rd_kafka_error_destroy(error)
            if code == RD_KAFKA_RESP_ERR__QUEUE_FULL && waitWhenFull && !stopped.isSet {
                // The poll thread drains delivery reports meanwhile; wait until it has served some.
                room.wait(atMost: .milliseconds(100))
                continue
            }
            if code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE {
                return KafkaError(.messageTooLarge, text, rdkafkaCode: code.rawValue)
            }
            return KafkaError(.produce, text, rdkafkaCode: code.rawValue, isRetryable: retriable || code == RD_KAFKA_RESP_ERR__QUEUE_FULL)
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

    private static func makeHeaders(_ headers: [KafkaHeader]) -> OpaquePointer? {
        guard !headers.isEmpty, let list = rd_kafka_headers_new(headers.count) else { return nil }
        for header in headers {
            let name = Array(header.name.utf8)
            if let value = header.value {
                value.withUnsafeBytes { bytes in
                    name.withUnsafeBufferPointer { nameBytes in
                        nameBytes.withMemoryRebound(to: CChar.self) { namePointer in
                            _ = rd_kafka_header_add(list, namePointer.baseAddress, namePointer.count, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), bytes.count)
                        }
                    }
                }
            } else {
                name.withUnsafeBufferPointer { nameBytes in
                    nameBytes.withMemoryRebound(to: CChar.self) { namePointer in
                        _ = rd_kafka_header_add(list, namePointer.baseAddress, namePointer.count, nil, 0)
                    }
                }
            }
        }
        return list
    }

    private static func produce(_ client: OpaquePointer, _ message: KafkaProducerMessage, headers: OpaquePointer?, opaque: UnsafeMutableRawPointer) -> OpaquePointer? {
        let partition = message.partition ?? herald_rdkafka_partition_ua()
        // A null value is a tombstone; an empty one must still point somewhere so librdkafka
        // sends a zero-length value rather than a null.
        var placeholder: UInt8 = 0
        return withUnsafeMutablePointer(to: &placeholder) { placeholderPointer in
            withOptionalBytes(message.key) { keyPointer, keyCount in
                withOptionalBytes(message.value) { valuePointer, valueCount in
                    let value = message.value == nil ? nil : (valuePointer ?? UnsafeRawPointer(placeholderPointer))
                    return herald_rdkafka_produce(client, message.topic, partition, keyPointer, keyCount, value, valueCount, headers, opaque)
                }
            }
        }
    }

    /// Waits up to `timeoutMilliseconds` for every queued message to be acknowledged; returns
    /// whether the queue drained. The wait runs on a thread of its own.
    public func flush(timeoutMilliseconds: Int32 = 10_000) async -> Bool {
        let client = handle
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: rd_kafka_flush(client.pointer, timeoutMilliseconds) == RD_KAFKA_RESP_ERR_NO_ERROR)
            }
        }
    }

    /// Messages queued in librdkafka and not yet acknowledged or failed.
    public var queuedCount: Int { Int(rd_kafka_outq_len(handle.pointer)) }

    deinit {
        // Whatever is still queued fails its sends with a delivery error when the handle goes;
        // callers that care call `flush` first.
        _ = rd_kafka_flush(handle.pointer, 2_000)
        stopped.set()
        // The poll thread holds its own reference to `handle`, so the handle outlives it.
    }
}

private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawPointer?, Int) -> R) -> R {
    guard let bytes else { return body(nil, 0) }
    return bytes.withUnsafeBytes { body($0.baseAddress, $0.count) }
}

/// Where one message's delivery report goes.
private final class DeliveryBox: Sendable {
    enum Target: Sendable {
        case single(CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>)
        case batch(DeliveryBatch, Int)
    }
    let target: Target
    init(target: Target) { self.target = target }

    func complete(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        switch target {
        case .single(let continuation): continuation.resume(returning: result)
        case .batch(let batch, let index): batch.complete(index, result)
        }
    }
}

/// The results of a `sendAll`, resumed when the last message is reported.
private final class DeliveryBatch: Sendable {
    private struct State {
        var results: [Result<KafkaDeliveryReport, KafkaError>?]
        var remaining: Int
        var continuation: CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>?
    }
    private let state: Mutex<State>

    init(count: Int, continuation: CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count, continuation: continuation))
    }

    func complete(_ index: Int, _ result: Result<KafkaDeliveryReport, KafkaError>) {
        let finished: (CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>, [Result<KafkaDeliveryReport, KafkaError>])? = state.withLock { state in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            let results = state.results.map { $0 ?? .failure(KafkaError(.delivery, "no delivery report")) }
            return (continuation, results)
        }
        if let (continuation, results) = finished { continuation.resume(returning: results) }
    }
}

/// A flag one thread sets and another polls.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}

/// Wakes a thread waiting for room in librdkafka's queue once the poll thread has served
/// delivery reports. A signal nobody waits for is dropped, so a wait never returns early on a
/// stale one by more than one turn.
final class RoomSignal: Sendable {
    private let waiting = Atomic<Bool>(false)
    private let semaphore = DispatchSemaphore(value: 0)

    func signal() {
        if waiting.exchange(false, ordering: .acquiringAndReleasing) { semaphore.signal() }
    }

    /// Waits for the next signal, or for `limit`.
    func wait(atMost limit: Duration) {
        waiting.store(true, ordering: .releasing)
        if semaphore.wait(timeout: .now() + .nanoseconds(Int(clamping: limit.nanoseconds))) == .timedOut,
           !waiting.exchange(false, ordering: .acquiringAndReleasing) {
            // A signal raced the timeout: take it, so the next wait does not end on it.
            semaphore.wait()
        }
    }
}

/// Turns of a poll thread, read from other threads.
final class PollCounter: Sendable {
    private let turns = Atomic<UInt64>(0)
    func tick() { turns.add(1, ordering: .relaxed) }
    var count: UInt64 { turns.load(ordering: .relaxed) }
}
