public import HeraldCore

/// A topic and one of its partitions.
public struct KafkaTopicPartition: Sendable, Hashable, CustomStringConvertible {
    /// The topic name.
    public var topic: String
    /// The partition number.
    public var partition: Int32

    /// Names a partition.
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)/\(partition)" }
}

/// One Kafka message header. Kafka allows a header without a value (nil), distinct from an empty one.
public struct KafkaHeader: Sendable, Hashable {
    /// The header name (non-empty, no NUL byte, when producing).
    public var name: String
    /// The header value; nil for a null header.
    public var value: [UInt8]?

    /// A header with a byte value.
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }

    /// A header with a UTF-8 text value.
    public init(name: String, string: String) {
        self.init(name: name, value: Array(string.utf8))
    }

    /// The value as UTF-8 text (nil for a null header).
    public var valueString: String? { value.map { String(decoding: $0, as: UTF8.self) } }
}

/// One message read from Kafka, copied out of librdkafka's buffers.
public struct KafkaMessage: Sendable {
    /// The topic it was read from.
    public var topic: String
    /// Its partition.
    public var partition: Int32
    /// Its offset in the partition.
    public var offset: Int64
    /// The key, nil when the message has none.
    public var key: [UInt8]?
    /// The value; empty both for an empty value and for a tombstone (see ``isTombstone``).
    public var value: [UInt8]
    /// Whether the value is null (a tombstone on a compacted topic), not merely empty.
    public var isTombstone: Bool
    /// Message headers, in order.
    public var headers: [KafkaHeader]
    /// The message's timestamp: when its producer handed it to its client (the topic's default,
    /// CreateTime) or when the broker appended it (LogAppendTime); nil when there is none.
    public var timestamp: Timestamp?
    /// The consumer assignment the message was read under, so work finishing after its partition
    /// was revoked (and perhaps assigned again) cannot move the new assignment's offsets.
    var assignmentEpoch: UInt64

    /// A message (for tests and for code that builds messages itself).
    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8], isTombstone: Bool = false,
                headers: [KafkaHeader] = [], timestamp: Timestamp? = nil) {
        self.init(topic: topic, partition: partition, offset: offset, key: key, value: value, isTombstone: isTombstone,
                  headers: headers, timestamp: timestamp, assignmentEpoch: 0)
    }

    init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8], isTombstone: Bool,
         headers: [KafkaHeader], timestamp: Timestamp?, assignmentEpoch: UInt64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.isTombstone = isTombstone
        self.headers = headers
        self.timestamp = timestamp
        self.assignmentEpoch = assignmentEpoch
    }

    /// Where the message was read from.
    public var topicPartition: KafkaTopicPartition { KafkaTopicPartition(topic: topic, partition: partition) }
    /// The key as UTF-8 text (nil when absent).
    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }
    /// The value as UTF-8 text.
    public var valueString: String { String(decoding: value, as: UTF8.self) }
    /// The first header named `name`.
    public func header(_ name: String) -> KafkaHeader? { headers.first { $0.name == name } }
}

/// A message to produce.
public struct KafkaProducerMessage: Sendable {
    /// The topic to send to.
    public var topic: String
    /// The partition; nil lets the partitioner choose from the key.
    public var partition: Int32?
    /// The key (decides the partition, and so the order, of keyed messages).
    public var key: [UInt8]?
    /// The value; nil sends a tombstone.
    public var value: [UInt8]?
    /// Headers, in order.
    public var headers: [KafkaHeader]

    /// A message with byte key and value.
    public init(topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
        self.partition = partition
    }

    /// A message with UTF-8 key and value.
    public init(topic: String, key: String?, value: String, headers: [KafkaHeader] = [], partition: Int32? = nil) {
        self.init(topic: topic, key: key.map { Array($0.utf8) }, value: Array(value.utf8), headers: headers, partition: partition)
    }
}

/// Where a produced message landed.
public struct KafkaDeliveryReport: Sendable, Equatable {
    /// The topic.
    public var topic: String
    /// The partition it was written to.
    public var partition: Int32
    /// Its offset there.
    public var offset: Int64
}
