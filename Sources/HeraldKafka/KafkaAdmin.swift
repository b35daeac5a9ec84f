import Foundation

/// A topic to create: name, partition count and replication factor.
public struct KafkaNewTopic: Sendable, Hashable {
    public var name: String
    public var partitions: Int32
    public var replicationFactor: Int32

    /// Describes a topic to create.
    public init(name: String, partitions: Int32, replicationFactor: Int32) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
    }
}

/// The brokers and topics of a cluster, from a metadata request.
public struct KafkaClusterMetadata: Sendable, Equatable {
    /// How many brokers the cluster has.
    public var brokers: Int
    /// Every topic and its partition count.
    public var topics: [String: Int]
}

/// What became of one topic in ``KafkaAdmin/createTopics(_:timeoutMilliseconds:)``.
public enum KafkaTopicCreation: Sendable, Equatable {
    /// The broker created it.
    case created
    /// It was there already (left as it is, whatever its partition count).
    case alreadyExists
    /// The broker refused it; librdkafka's code and text.
    case failed(code: Int32, message: String)
}

/// librdkafka's Admin API and cluster metadata: which topics exist, and creating topics.
///
/// Each call blocks in librdkafka (a metadata request, or waiting for the admin result on a
/// queue), so it runs on a dispatch queue of its own, never on Swift's cooperative threads.
/// librdkafka's mock cluster (`herald dev-broker`, librdkafka 2.0) answers metadata but names no
/// controller and implements no CreateTopics: there ``createTopics(_:timeoutMilliseconds:)``
/// throws a `.unsupported` error, and topics are auto-created on first use or made with
/// `herald dev-broker --topic`.
public final class KafkaAdmin: Sendable {
    private let admin: RDKafkaAdmin
    private let queue = DispatchQueue(label: "herald.kafka.admin")

    /// An admin client for the configuration's cluster (a producer handle, as librdkafka's
    /// Admin API asks; it sends nothing).
    public init(configuration: KafkaConfiguration) throws(KafkaError) {
        admin = try RDKafkaAdmin(configuration: configuration)
    }

    /// What the cluster says about itself: its brokers and every topic with its partition count
    /// (internal topics such as `__consumer_offsets` included).
    public func metadata(timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError) -> KafkaClusterMetadata {
        let client = admin.client
        let metadata = try await onQueue { client.metadata(allTopics: true, timeoutMilliseconds: timeoutMilliseconds) }
            .mapError { KafkaError(.cluster, "cannot read the cluster's topics: \($0.message)", rdkafkaCode: $0.rdkafkaCode, isRetryable: true) }
            .get()
        return KafkaClusterMetadata(brokers: metadata.brokerIDs.count, topics: metadata.topics)
    }

    /// Creates `topics` with one CreateTopics request and waits up to `timeoutMilliseconds` for
    /// the controller's answer. Per-topic outcomes come back by name; a topic that exists is
    /// ``KafkaTopicCreation/alreadyExists``, not an error. Throws when the request as a whole
    /// fails: `.unsupported` when the cluster does not implement CreateTopics (the mock
    /// cluster), `.timeout`, or `.cluster`.
    public func createTopics(_ topics: [KafkaNewTopic], timeoutMilliseconds: Int32 = 30_000) async throws(KafkaError) -> [String: KafkaTopicCreation] {
        if topics.isEmpty { return [:] }
        let admin = self.admin
        return try await onQueue { admin.createTopics(topics, timeoutMilliseconds: timeoutMilliseconds) }.get()
    }

    /// Runs a blocking librdkafka request on the admin queue, never on the cooperative pool.
    private func onQueue<Value: Sendable>(_ request: @escaping @Sendable () -> Result<Value, KafkaError>) async -> Result<Value, KafkaError> {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: request()) }
        }
    }
}
