internal import CRdKafka

/// librdkafka's Admin API on a client handle: CreateTopics. Each call blocks: call it off the
/// cooperative pool.
struct RDKafkaAdmin: Sendable {
    let client: RDKafkaClient

    /// An admin client for the configuration's cluster (a producer handle, as librdkafka's
    /// Admin API asks; it sends nothing).
    init(configuration: KafkaConfiguration) throws(KafkaError) {
        client = try RDKafkaClient(.producer, configuration: RDKafkaConfiguration(configuration))
    }

    /// See ``KafkaAdmin/createTopics(_:timeoutMilliseconds:)``.
    func createTopics(_ topics: [KafkaNewTopic], timeoutMilliseconds: Int32) -> Result<[String: KafkaTopicCreation], KafkaError> {
        // CreateTopics goes to the controller. librdkafka's mock cluster names controller 0 while
        // its brokers are 1…N, and the request would only time out waiting for broker 0: say so
        // at once instead.
        let controller = rd_kafka_controllerid(client.pointer, min(timeoutMilliseconds, 5_000))
        let brokers = (try? client.metadata(allTopics: false, timeoutMilliseconds: min(timeoutMilliseconds, 5_000)).get())?.brokerIDs ?? []
        if !brokers.contains(controller) {
            return .failure(KafkaError(.unsupported, "the cluster names no reachable controller broker (controller id \(controller)), so it cannot create topics; librdkafka's mock cluster never does"))
        }
        var newTopics: [OpaquePointer?] = []
        defer { for topic in newTopics { rd_kafka_NewTopic_destroy(topic) } }
        for topic in topics {
            var errorText = [CChar](repeating: 0, count: 512)
            guard let newTopic = rd_kafka_NewTopic_new(topic.name, topic.partitions, topic.replicationFactor, &errorText, errorText.count) else {
                return .failure(KafkaError(.configuration, "topic \(topic.name): \(rdkafkaString(errorText))"))
            }
            newTopics.append(newTopic)
        }
        guard let options = rd_kafka_AdminOptions_new(client.pointer, RD_KAFKA_ADMIN_OP_CREATETOPICS) else {
            return .failure(KafkaError(.cluster, "rd_kafka_AdminOptions_new failed"))
        }
        defer { rd_kafka_AdminOptions_destroy(options) }
        var errorText = [CChar](repeating: 0, count: 512)
        // The broker waits this long for the topics to be created before it answers.
        _ = rd_kafka_AdminOptions_set_operation_timeout(options, timeoutMilliseconds, &errorText, errorText.count)
        _ = rd_kafka_AdminOptions_set_request_timeout(options, timeoutMilliseconds, &errorText, errorText.count)
        guard let resultQueue = rd_kafka_queue_new(client.pointer) else { return .failure(KafkaError(.cluster, "rd_kafka_queue_new failed")) }
        defer { rd_kafka_queue_destroy(resultQueue) }

        newTopics.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_CreateTopics(client.pointer, buffer.baseAddress, buffer.count, options, resultQueue)
        }
        // A little longer than the request's own timeout, so librdkafka reports the timeout itself.
        guard let event = rd_kafka_queue_poll(resultQueue, timeoutMilliseconds + 5_000) else {
            return .failure(KafkaError(.timeout, "no answer to CreateTopics within \(timeoutMilliseconds) ms", isRetryable: true))
        }
        defer { rd_kafka_event_destroy(event) }
        let requestError = rd_kafka_event_error(event)
        if requestError != RD_KAFKA_RESP_ERR_NO_ERROR {
            let text = rd_kafka_event_error_string(event).map { String(cString: $0) } ?? rdkafkaErrorText(requestError)
            return .failure(RDKafkaAdmin.requestError(requestError, text))
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

    /// The error for a CreateTopics request that failed as a whole.
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
