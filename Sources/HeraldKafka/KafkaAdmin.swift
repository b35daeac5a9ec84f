internal import CRdKafka
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
    private let handle: RDKafkaClient
    private let queue = DispatchQueue(label: "herald.kafka.admin")

    /// An admin client for the configuration's cluster (a producer handle, as librdkafka's
    /// Admin API asks; it sends nothing).
    public init(configuration: KafkaConfiguration) throws(KafkaError) {
        handle = try RDKafkaClient(type: RD_KAFKA_PRODUCER, conf: try configuration.makeHandle())
    }

    /// What the cluster says about itself: its brokers and every topic with its partition count
    /// (internal topics such as `__consumer_offsets` included).
    public func metadata(timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError) -> KafkaClusterMetadata {
        let client = handle
        let result: Result<KafkaClusterMetadata, KafkaError> = await withCheckedContinuation { continuation in
            queue.async {
                var metadata: UnsafePointer<rd_kafka_metadata>?
                let error = rd_kafka_metadata(client.pointer, 1, nil, &metadata, Int32(timeoutMilliseconds))
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                    continuation.resume(returning: .failure(KafkaError(.cluster, "cannot read the cluster's topics: \(rdkafkaErrorText(error))",
                                                                       rdkafkaCode: error.rawValue, isRetryable: true)))
                    return
                }
                defer { rd_kafka_metadata_destroy(metadata) }
                var topics: [String: Int] = [:]
                let list = UnsafeBufferPointer(start: metadata.pointee.topics, count: Int(metadata.pointee.topic_cnt))
                for topic in list where topic.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                    guard let name = topic.topic else { continue }
                    topics[String(cString: name)] = Int(topic.partition_cnt)
                }
                continuation.resume(returning: .success(KafkaClusterMetadata(brokers: Int(metadata.pointee.broker_cnt), topics: topics)))
            }
        }
        return try result.get()
    }

    /// Creates `topics` with one CreateTopics request and waits up to `timeoutMilliseconds` for
    /// the controller's answer. Per-topic outcomes come back by name; a topic that exists is
    /// ``KafkaTopicCreation/alreadyExists``, not an error. Throws when the request as a whole
    /// fails: `.unsupported` when the cluster does not implement CreateTopics (the mock
    /// cluster), `.timeout`, or `.cluster`.
    public func createTopics(_ topics: [KafkaNewTopic], timeoutMilliseconds: Int32 = 30_000) async throws(KafkaError) -> [String: KafkaTopicCreation] {
        if topics.isEmpty { return [:] }
        let client = handle
        let result: Result<[String: KafkaTopicCreation], KafkaError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: KafkaAdmin.create(client.pointer, topics, timeoutMilliseconds: timeoutMilliseconds))
            }
        }
        return try result.get()
    }

    /// The blocking part of ``createTopics(_:timeoutMilliseconds:)``; runs on the admin queue.
    private static func create(_ client: OpaquePointer, _ topics: [KafkaNewTopic], timeoutMilliseconds: Int32) -> Result<[String: KafkaTopicCreation], KafkaError> {
        // CreateTopics goes to the controller. librdkafka's mock cluster names controller 0 while
        // its brokers are 1…N, and the request would only time out waiting for broker 0: say so
        // at once instead.
        let controller = rd_kafka_controllerid(client, min(timeoutMilliseconds, 5_000))
        if !KafkaAdmin.brokerIDs(client, timeoutMilliseconds: min(timeoutMilliseconds, 5_000)).contains(controller) {
            return .failure(KafkaError(.unsupported, "the cluster names no reachable controller broker (controller id \(controller)), so it cannot create topics; librdkafka's mock cluster never does"))
        }
        var newTopics: [OpaquePointer?] = []
        defer { for topic in newTopics { rd_kafka_NewTopic_destroy(topic) } }
        for topic in topics {
            var errorText = [CChar](repeating: 0, count: 512)
            guard let newTopic = rd_kafka_NewTopic_new(topic.name, topic.partitions, topic.replicationFactor, &errorText, errorText.count) else {
                let reason = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                return .failure(KafkaError(.configuration, "topic \(topic.name): \(reason)"))
            }
            newTopics.append(newTopic)
        }
        guard let options = rd_kafka_AdminOptions_new(client, RD_KAFKA_ADMIN_OP_CREATETOPICS) else {
            return .failure(KafkaError(.cluster, "rd_kafka_AdminOptions_new failed"))
        }
        defer { rd_kafka_AdminOptions_destroy(options) }
        var errorText = [CChar](repeating: 0, count: 512)
        // The broker waits this long for the topics to be created before it answers.
        _ = rd_kafka_AdminOptions_set_operation_timeout(options, timeoutMilliseconds, &errorText, errorText.count)
        _ = rd_kafka_AdminOptions_set_request_timeout(options, timeoutMilliseconds, &errorText, errorText.count)
        guard let resultQueue = rd_kafka_queue_new(client) else { return .failure(KafkaError(.cluster, "rd_kafka_queue_new failed")) }
        defer { rd_kafka_queue_destroy(resultQueue) }

        newTopics.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_CreateTopics(client, buffer.baseAddress, buffer.count, options, resultQueue)
        }
        // A little longer than the request's own timeout, so librdkafka reports the timeout itself.
        guard let event = rd_kafka_queue_poll(resultQueue, timeoutMilliseconds + 5_000) else {
            return .failure(KafkaError(.timeout, "no answer to CreateTopics within \(timeoutMilliseconds) ms", isRetryable: true))
        }
        defer { rd_kafka_event_destroy(event) }
        let requestError = rd_kafka_event_error(event)
        if requestError != RD_KAFKA_RESP_ERR_NO_ERROR {
            let text = rd_kafka_event_error_string(event).map { String(cString: $0) } ?? rdkafkaErrorText(requestError)
            return .failure(KafkaAdmin.requestError(requestError, text))
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else {
            return .failure(KafkaError(.cluster, "CreateTopics answered with an unexpected event"))
        }
        var count = 0
        guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return .success([:]) }
        var outcomes: [String: KafkaTopicCreation] = [:]
        for index in 0..<count {
            guard let topicResult = results[index] else { continue }
            let name = String(cString: rd_kafka_topic_result_name(topicResult))
            let error = rd_kafka_topic_result_error(topicResult)
            switch error {
            case RD_KAFKA_RESP_ERR_NO_ERROR: outcomes[name] = .created
            case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS: outcomes[name] = .alreadyExists
            default:
                let text = rd_kafka_topic_result_error_string(topicResult).map { String(cString: $0) } ?? rdkafkaErrorText(error)
                outcomes[name] = .failed(code: error.rawValue, message: text)
            }
        }
        return .success(outcomes)
    }

    /// The ids of the cluster's brokers (empty when metadata cannot be read).
    private static func brokerIDs(_ client: OpaquePointer, timeoutMilliseconds: Int32) -> Set<Int32> {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        guard rd_kafka_metadata(client, 0, nil, &metadata, timeoutMilliseconds) == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { return [] }
        defer { rd_kafka_metadata_destroy(metadata) }
        return Set(UnsafeBufferPointer(start: metadata.pointee.brokers, count: Int(metadata.pointee.broker_cnt)).map(\.id))
    }

    static func requestError(_ error: rd_kafka_resp_err_t, _ text: String) -> KafkaError {
        switch error {
        case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE, RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION, RD_KAFKA_RESP_ERR_INVALID_REQUEST:
            KafkaError(.unsupported, "the cluster does not support CreateTopics (\(text))", rdkafkaCode: error.rawValue)
        case RD_KAFKA_RESP_ERR__TIMED_OUT:
            KafkaError(.timeout, "CreateTopics timed out (\(text))", rdkafkaCode: error.rawValue, isRetryable: true)
        default:
            KafkaError(.cluster, "CreateTopics failed: \(text)", rdkafkaCode: error.rawValue)
        }
    }
}
