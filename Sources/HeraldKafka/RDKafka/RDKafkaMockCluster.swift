internal import CRdKafka

/// Owns an `rd_kafka_mock_cluster_t` and the client handle it lives in. `@unchecked Sendable`:
/// the mock cluster serialises calls on its own thread, and the pointer never changes.
/// It keeps its host client alive, so the cluster is always destroyed before the client.
final class RDKafkaMockCluster: @unchecked Sendable {
    let pointer: OpaquePointer
    let host: RDKafkaClient

    /// Starts a cluster of `brokers` brokers (ids 1 through `brokers`).
    init(brokers: Int32) throws(KafkaError) {
        // The mock cluster lives inside a client handle; a producer with logging quietened hosts it.
        host = try RDKafkaClient(.producer, configuration: RDKafkaConfiguration(properties: ["log_level": "3"]))
        guard let mock = rd_kafka_mock_cluster_new(host.pointer, brokers) else {
            throw KafkaError(.clientCreation, "rd_kafka_mock_cluster_new failed")
        }
        pointer = mock
    }

    /// `bootstrap.servers` for clients: `127.0.0.1:PORT,…`.
    var bootstrapServers: String { String(cString: rd_kafka_mock_cluster_bootstraps(pointer)) }

    /// See ``EmbeddedKafkaCluster/createTopic(_:partitions:replicationFactor:)``.
    func createTopic(_ topic: String, partitions: Int32, replicationFactor: Int32) throws(KafkaError) {
        let error = rd_kafka_mock_topic_create(pointer, topic, partitions, replicationFactor)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.cluster, "create topic \(topic): \(rdkafkaErrorText(error))", rdkafkaCode: error.rawValue)
        }
    }

    /// Takes broker `id` down (its data is kept) or brings it back up.
    func setBroker(_ id: Int32, up: Bool) throws(KafkaError) {
        let error = up ? rd_kafka_mock_broker_set_up(pointer, id) : rd_kafka_mock_broker_set_down(pointer, id)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.cluster, "broker \(id) \(up ? "up" : "down"): \(rdkafkaErrorText(error))", rdkafkaCode: error.rawValue)
        }
    }

    deinit { rd_kafka_mock_cluster_destroy(pointer) }
}
