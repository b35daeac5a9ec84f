internal import CRdKafka
import Dispatch
import Synchronization

/// A consumer-group member with at-least-once semantics: automatic commits and automatic offset
/// stores are off, so an offset is stored only when the caller says the message's work is done
/// (``storeOffset(of:)``) and committed when the caller asks (``commit()``).
///
/// Every blocking librdkafka call runs on the consumer's own serial queue, never on Swift's
/// cooperative threads; `messages` polls only when asked for the next message, so a slow caller
/// makes librdkafka's bounded fetch queue fill up rather than Herald's memory.
public final class KafkaConsumer: Sendable {
    private let client: RDKafkaClient
    private let queue: DispatchQueue
    private let closed: Mutex<Bool>

    /// Joins the consumer group `groupID` (new groups start at the earliest offset).
    public init(configuration: KafkaConfiguration, groupID: String) throws(KafkaError) {
        var configuration = configuration
        configuration.properties["group.id"] = groupID
        configuration.properties["enable.auto.commit"] = "false"
        configuration.properties["enable.auto.offset.store"] = "false"
        if configuration.properties["auto.offset.reset"] == nil {
            configuration.properties["auto.offset.reset"] = "earliest"
        }
        let conf = try configuration.makeHandle()
        client = try RDKafkaClient(type: RD_KAFKA_CONSUMER, conf: conf)
        rd_kafka_poll_set_consumer(client.pointer)
        queue = DispatchQueue(label: "herald.kafka.consumer")
        closed = Mutex(false)
    }

    /// Subscribes to `topics` (replacing any earlier subscription).
    public func subscribe(topics: [String]) throws(KafkaError) {
        guard let list = rd_kafka_topic_partition_list_new(Int32(topics.count)) else {
            throw KafkaError(.subscribe, "cannot allocate a topic list")
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics {
            rd_kafka_topic_partition_list_add(list, topic, herald_rdkafka_partition_ua())
        }
        let error = rd_kafka_subscribe(client.pointer, list)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.subscribe, rdkafkaErrorText(error), rdkafkaCode: error.rawValue)
        }
    }

    /// Waits up to `timeoutMilliseconds` for the next message; nil when none arrived in time.
    /// Errors librdkafka reports as events (a broker going away) are transient and skipped;
    /// the rest are thrown.
    public func poll(timeoutMilliseconds: Int32 = 100) async throws(KafkaError) -> KafkaMessage? {
        let client = self.client
        let result: Result<KafkaMessage?, KafkaError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: KafkaConsumer.pollOnce(client, timeoutMilliseconds: timeoutMilliseconds))
            }
        }
        return try result.get()
    }

    private static func pollOnce(_ client: RDKafkaClient, timeoutMilliseconds: Int32) -> Result<KafkaMessage?, KafkaError> {
        guard let raw = rd_kafka_consumer_poll(client.pointer, Int32(timeoutMilliseconds)) else { return .success(nil) }
        defer { rd_kafka_message_destroy(raw) }
        let message = raw.pointee
        if message.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            if message.err == RD_KAFKA_RESP_ERR__PARTITION_EOF || message.err == RD_KAFKA_RESP_ERR__TRANSPORT
                || message.err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN {
                return .success(nil)
            }
            return .failure(KafkaError(.consume, rdkafkaErrorText(message.err), rdkafkaCode: message.err.rawValue))
        }
        let topic = message.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        let key: [UInt8]? = message.key.map { Array(UnsafeRawBufferPointer(start: $0, count: message.key_len)) }
        let value: [UInt8] = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: message.len)) } ?? []
        var headers: [(name: String, value: [UInt8])] = []
        var headerList: OpaquePointer?
        if rd_kafka_message_headers(raw, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            var index = 0
            var name: UnsafePointer<CChar>?
            var valuePointer: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(headerList, index, &name, &valuePointer, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let headerValue = valuePointer.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                headers.append((name: name.map { String(cString: $0) } ?? "", value: headerValue))
                index += 1
            }
        }
        return .success(KafkaMessage(topic: topic, partition: message.partition, offset: message.offset, key: key, value: value, headers: headers))
    }

    /// Marks `message`'s work as done: its offset + 1 is stored and goes out with the next commit.
    public func storeOffset(of message: KafkaMessage) throws(KafkaError) {
        guard let list = rd_kafka_topic_partition_list_new(1) else {
            throw KafkaError(.offsetStore, "cannot allocate a partition list")
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        guard let entry = rd_kafka_topic_partition_list_add(list, message.topic, message.partition) else {
            throw KafkaError(.offsetStore, "cannot add a partition")
        }
        entry.pointee.offset = message.offset + 1
        let error = rd_kafka_offsets_store(client.pointer, list)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.offsetStore, rdkafkaErrorText(error), rdkafkaCode: error.rawValue)
        }
    }

    /// Commits the stored offsets and waits for the broker's answer. Nothing stored is not an error.
    public func commit() async throws(KafkaError) {
        let client = self.client
        let error: rd_kafka_resp_err_t = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: rd_kafka_commit(client.pointer, nil, 0)) }
        }
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR || error == RD_KAFKA_RESP_ERR__NO_OFFSET else {
            let retryable = error == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS || error == RD_KAFKA_RESP_ERR__TRANSPORT
            throw KafkaError(.commit, rdkafkaErrorText(error), rdkafkaCode: error.rawValue, isRetryable: retryable)
        }
    }

    /// Commits what is stored, then leaves the group. Safe to call more than once.
    public func close() async {
        let alreadyClosed = closed.withLock { value in
            defer { value = true }
            return value
        }
        guard !alreadyClosed else { return }
        let client = self.client
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                _ = rd_kafka_commit(client.pointer, nil, 0)
                _ = rd_kafka_consumer_close(client.pointer)
                continuation.resume()
            }
        }
    }
}
