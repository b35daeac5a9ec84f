/// An error from Kafka or from librdkafka, with librdkafka's error code when there is one.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        enum Base: String, Sendable {
            case configuration, clientCreation, produce, delivery, subscribe, consume, commit, offsetStore, cluster, closed, timeout
            case messageTooLarge, invalidMessage, rebalance, unsupported, fatal
        }
        let base: Base

        /// A property was refused by librdkafka.
        public static let configuration = Code(base: .configuration)
        /// A producer, consumer or mock cluster could not be created.
        public static let clientCreation = Code(base: .clientCreation)
        /// A message could not be queued for sending.
        public static let produce = Code(base: .produce)
        /// A queued message was not acknowledged by the broker.
        public static let delivery = Code(base: .delivery)
        /// Subscribing to topics failed.
        public static let subscribe = Code(base: .subscribe)
        /// Reading messages failed.
        public static let consume = Code(base: .consume)
        /// Committing offsets failed.
        public static let commit = Code(base: .commit)
        /// Storing an offset failed.
        public static let offsetStore = Code(base: .offsetStore)
        /// The embedded cluster refused an operation.
        public static let cluster = Code(base: .cluster)
        /// The client was already closed.
        public static let closed = Code(base: .closed)
        /// An operation did not finish in time.
        public static let timeout = Code(base: .timeout)
        /// A message is larger than `message.max.bytes` allows.
        public static let messageTooLarge = Code(base: .messageTooLarge)
        /// A message is malformed (for example a header with an empty name or a NUL byte in it).
        public static let invalidMessage = Code(base: .invalidMessage)
        /// Taking or releasing partitions in a rebalance failed.
        public static let rebalance = Code(base: .rebalance)
        /// The cluster does not implement the request (the mock cluster and CreateTopics).
        public static let unsupported = Code(base: .unsupported)
        /// librdkafka raised a fatal error (an idempotent producer's guarantee broken, a
        /// consumer fenced): the client can do nothing more and must be replaced.
        public static let fatal = Code(base: .fatal)

        public var description: String { base.rawValue }
    }

    /// What kind of failure.
    public let code: Code
    /// What happened, for people.
    public let message: String
    /// librdkafka's numeric error code, when it gave one.
    public let rdkafkaCode: Int32?
    /// Whether trying again may succeed (librdkafka's own retriable flag, or a transient kind).
    public let isRetryable: Bool
    /// Where the error was raised.
    public let file: String
    /// The line where the error was raised.
    public let line: Int

    init(_ code: Code, _ message: String, rdkafkaCode: Int32? = nil, isRetryable: Bool = false, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.rdkafkaCode = rdkafkaCode
        self.isRetryable = isRetryable
        self.file = file
        self.line = line
    }

    public var description: String {
        "KafkaError.\(code): \(message)"
    }
}
