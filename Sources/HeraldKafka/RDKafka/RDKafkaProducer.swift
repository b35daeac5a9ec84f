internal import CRdKafka

/// A producer handle: queues messages with a ``DeliveryBox`` as their opaque, serves their
/// delivery reports (which complete the boxes), flushes, and reports a fatal error.
struct RDKafkaProducer: Sendable {
    let client: RDKafkaClient
    /// `message.max.bytes` as librdkafka reads the configuration (nil if it cannot be read).
    let maximumMessageBytes: Int?

    /// Why a message was not queued.
    enum Refusal {
        /// librdkafka's queue is full (`queue.buffering.max.messages`); the error is retryable.
        case queueFull(KafkaError)
        /// Anything else: `.messageTooLarge`, or `.produce` (retryable when librdkafka says so).
        case refused(KafkaError)
    }

    init(configuration: KafkaConfiguration) throws(KafkaError) {
        let conf = try RDKafkaConfiguration(configuration)
        maximumMessageBytes = conf.value(of: "message.max.bytes").flatMap { Int($0) }
        rd_kafka_conf_set_dr_msg_cb(conf.pointer) { _, message, _ in
            guard let message, let opaque = message.pointee._private else { return }
            let box = Unmanaged<DeliveryBox>.fromOpaque(opaque).takeRetainedValue()
            let error = message.pointee.err
            if error == RD_KAFKA_RESP_ERR_NO_ERROR {
                box.complete(.success(KafkaDeliveryReport(topic: box.topic, partition: message.pointee.partition, offset: message.pointee.offset)))
            } else {
                box.complete(.failure(KafkaError(.delivery, rdkafkaErrorText(error), rdkafkaCode: error.rawValue)))
            }
        }
        client = try RDKafkaClient(.producer, configuration: conf)
    }

    /// Hands one message to librdkafka, which copies it, with `box` retained as its opaque until
    /// the delivery report. On a refusal `box` is not retained and the caller completes it.
    func produce(_ message: KafkaProducerMessage, box: DeliveryBox) -> Refusal? {
        let headers = RDKafkaProducer.makeHeaders(message.headers)
        let opaque = Unmanaged.passRetained(box).toOpaque()
        guard let error = RDKafkaProducer.produce(client.pointer, message, headers: headers, opaque: opaque) else { return nil }
        Unmanaged<DeliveryBox>.fromOpaque(opaque).release()
        // On failure the headers stay ours.
        if let headers { rd_kafka_headers_destroy(headers) }
        let code = rd_kafka_error_code(error)
        let text = String(cString: rd_kafka_error_string(error))
        let retriable = rd_kafka_error_is_retriable(error) != 0
        rd_kafka_error_destroy(error)
        switch code {
        case RD_KAFKA_RESP_ERR__QUEUE_FULL:
            return .queueFull(KafkaError(.produce, text, rdkafkaCode: code.rawValue, isRetryable: true))
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
            return .refused(KafkaError(.messageTooLarge, text, rdkafkaCode: code.rawValue))
        default:
            return .refused(KafkaError(.produce, text, rdkafkaCode: code.rawValue, isRetryable: retriable))
        }
    }

    /// Asks the cluster for `topic`'s metadata (see ``KafkaProducer/prepare(topics:)``). False
    /// only when librdkafka cannot make a handle for the name; an unanswered request is true.
    /// Blocks: call it off the cooperative pool.
    func fetchMetadata(of topic: String, timeoutMilliseconds: Int32) -> Bool {
        client.metadata(of: topic, timeoutMilliseconds: timeoutMilliseconds) != nil
    }

    /// Serves delivery reports, waiting up to `timeoutMilliseconds` for one; returns how many
    /// events were served.
    func poll(timeoutMilliseconds: Int32) -> Int {
        Int(rd_kafka_poll(client.pointer, timeoutMilliseconds))
    }

    /// Waits up to `timeoutMilliseconds` for every queued message to be acknowledged or failed;
    /// returns whether the queue drained. Blocks: call it off the cooperative pool.
    func flush(timeoutMilliseconds: Int32) -> Bool {
        rd_kafka_flush(client.pointer, timeoutMilliseconds) == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Messages (and requests) queued in librdkafka and not yet done.
    var queuedCount: Int { Int(rd_kafka_outq_len(client.pointer)) }

    /// See ``KafkaProducer/fatalError``.
    var fatalError: KafkaError? {
        var text = [CChar](repeating: 0, count: 512)
        let code = rd_kafka_fatal_error(client.pointer, &text, text.count)
        guard code != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(.fatal, "\(rdkafkaErrorText(code)): \(rdkafkaString(text))", rdkafkaCode: code.rawValue)
    }

    /// Raises a fatal error as a broker would (an out-of-order sequence number), for tests.
    func raiseFatalErrorForTesting(_ reason: String) {
        _ = rd_kafka_test_fatal_error(client.pointer, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
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
        // withCString reads a native string in place; passing the String itself as a
        // `const char *` would copy it into a new array for every message.
        return message.topic.withCString { topic in
            withUnsafeMutablePointer(to: &placeholder) { placeholderPointer in
                withOptionalBytes(message.key) { keyPointer, keyCount in
                    withOptionalBytes(message.value) { valuePointer, valueCount in
                        let value = message.value == nil ? nil : (valuePointer ?? UnsafeRawPointer(placeholderPointer))
                        return herald_rdkafka_produce(client, topic, partition, keyPointer, keyCount, value, valueCount, headers, opaque)
                    }
                }
            }
        }
    }
}

private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawPointer?, Int) -> R) -> R {
    guard let bytes else { return body(nil, 0) }
    return bytes.withUnsafeBytes { body($0.baseAddress, $0.count) }
}
