internal import CRdKafka
import Foundation
import Synchronization

/// An idempotent Kafka producer whose `send` returns once the broker has acknowledged the message.
///
/// librdkafka's delivery reports are served by a dedicated polling thread, never on Swift's
/// cooperative threads. Each `send` hands librdkafka a retained box as the message's opaque and
/// gets its continuation back in the delivery-report callback.
public final class KafkaProducer: Sendable {
    private let handle: RDKafkaClient
    private let stopped: StopFlag

    /// Starts a producer. `enable.idempotence=true`, `acks=all` and lz4 compression are set
    /// unless the configuration says otherwise.
    public init(configuration: KafkaConfiguration) throws(KafkaError) {
        var configuration = configuration
        for (name, value) in ["enable.idempotence": "true", "acks": "all", "compression.codec": "lz4", "linger.ms": "5"]
        where configuration.properties[name] == nil {
            configuration.properties[name] = value
        }
        let conf = try configuration.makeHandle()
        rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
            guard let message, let opaque = message.pointee._private else { return }
            let box = Unmanaged<DeliveryBox>.fromOpaque(opaque).takeRetainedValue()
            let error = message.pointee.err
            if error == RD_KAFKA_RESP_ERR_NO_ERROR {
                let topic = String(cString: rd_kafka_topic_name(message.pointee.rkt))
                box.continuation.resume(returning: KafkaDeliveryReport(topic: topic, partition: message.pointee.partition, offset: message.pointee.offset))
            } else {
                box.continuation.resume(throwing: KafkaError(.delivery, rdkafkaErrorText(error), rdkafkaCode: error.rawValue))
            }
        }
        handle = try RDKafkaClient(type: RD_KAFKA_PRODUCER, conf: conf)
        let stopped = StopFlag()
        self.stopped = stopped
        let client = handle
        let poller = Thread {
            while !stopped.isSet {
                rd_kafka_poll(client.pointer, 100)
            }
        }
        poller.name = "herald-kafka-producer-poll"
        poller.start()
    }

    /// Sends one message and returns when the broker has acknowledged it.
    public func send(topic: String, key: [UInt8]?, value: [UInt8], partition: Int32? = nil) async throws(KafkaError) -> KafkaDeliveryReport {
        do {
            return try await withCheckedThrowingContinuation { continuation in
                let box = DeliveryBox(continuation: continuation)
                let opaque = Unmanaged.passRetained(box).toOpaque()
                let error: OpaquePointer? = value.withUnsafeBytes { valueBytes in
                    if let key {
                        return key.withUnsafeBytes { keyBytes in
                            herald_rdkafka_produce(handle.pointer, topic, partition ?? herald_rdkafka_partition_ua(),
                                                   keyBytes.baseAddress, keyBytes.count, valueBytes.baseAddress, valueBytes.count, nil, opaque)
                        }
                    }
                    return herald_rdkafka_produce(handle.pointer, topic, partition ?? herald_rdkafka_partition_ua(),
                                                  nil, 0, valueBytes.baseAddress, valueBytes.count, nil, opaque)
                }
                if let error {
                    Unmanaged<DeliveryBox>.fromOpaque(opaque).release()
                    let code = rd_kafka_error_code(error)
                    let retryable = rd_kafka_error_is_retriable(error) != 0 || code == RD_KAFKA_RESP_ERR__QUEUE_FULL
                    let text = String(cString: rd_kafka_error_string(error))
                    rd_kafka_error_destroy(error)
                    continuation.resume(throwing: KafkaError(.produce, text, rdkafkaCode: code.rawValue, isRetryable: retryable))
                }
            }
        } catch let error as KafkaError {
            throw error
        } catch {
            throw KafkaError(.produce, "\(error)")
        }
    }

    /// Sends one message with UTF-8 key and value.
    public func send(topic: String, key: String?, value: String) async throws(KafkaError) -> KafkaDeliveryReport {
        try await send(topic: topic, key: key.map { Array($0.utf8) }, value: Array(value.utf8))
    }

    /// Waits up to `timeoutMilliseconds` for every queued message to be acknowledged; returns
    /// whether the queue drained. Blocking: call it from a thread of your own or at shutdown.
    public func flush(timeoutMilliseconds: Int32 = 10_000) -> Bool {
        rd_kafka_flush(handle.pointer, timeoutMilliseconds) == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    deinit {
        _ = rd_kafka_flush(handle.pointer, 5_000)
        stopped.set()
        // The poll thread holds its own reference to `handle`, so the handle outlives it.
    }
}

/// The continuation of one `send`, carried through librdkafka as the message's opaque.
private final class DeliveryBox {
    let continuation: CheckedContinuation<KafkaDeliveryReport, any Error>
    init(continuation: CheckedContinuation<KafkaDeliveryReport, any Error>) {
        self.continuation = continuation
    }
}

/// Owns an `rd_kafka_t` and destroys it.
///
/// `@unchecked Sendable`: librdkafka's `rd_kafka_t` is thread-safe for the calls Herald makes
/// on it (poll, produce, commit, offsets_store from any thread), and the pointer never changes.
final class RDKafkaClient: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Creates the client; takes ownership of `conf` on success and destroys it on failure.
    init(type: rd_kafka_type_t, conf: OpaquePointer) throws(KafkaError) {
        var errorText = [CChar](repeating: 0, count: 512)
        guard let client = rd_kafka_new(type, conf, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(conf)
            let reason = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw KafkaError(.clientCreation, reason)
        }
        pointer = client
    }

    deinit {
        rd_kafka_destroy(pointer)
    }
}

/// A flag one thread sets and another polls.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
