/// One message read from Kafka, copied out of librdkafka's buffers.
public struct KafkaMessage: Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]
    /// Message headers, in order.
    public var headers: [(name: String, value: [UInt8])]

    /// The key as UTF-8 text (nil when absent).
    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }
    /// The value as UTF-8 text.
    public var valueString: String { String(decoding: value, as: UTF8.self) }
}

/// Where a produced message landed.
public struct KafkaDeliveryReport: Sendable, Equatable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
}
