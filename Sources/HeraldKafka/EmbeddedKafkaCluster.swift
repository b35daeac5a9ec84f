internal import CRdKafka

/// librdkafka's in-process mock Kafka cluster, for `herald dev`, `herald dev-broker` and tests.
///
/// It listens on 127.0.0.1 ports other processes can use, supports consumer groups, commits and
/// the idempotent producer, and auto-creates topics with 4 partitions. It keeps only about 5 MB
/// per partition and its API is experimental: development and tests only, never production.
public final class EmbeddedKafkaCluster: Sendable {
    private let host: RDKafkaClient
    private let cluster: MockClusterHandle

    /// `bootstrap.servers` for clients: `127.0.0.1:PORT,…`.
    public let bootstrapServers: String
    /// How many brokers it has (ids 1 through `brokerCount`).
    public let brokerCount: Int

    /// Starts a cluster of `brokers` brokers.
    public init(brokers: Int = 3) throws(KafkaError) {
        guard (1...16).contains(brokers) else {
            throw KafkaError(.cluster, "brokers must be between 1 and 16, not \(brokers)")
        }
        // The mock cluster lives inside a client handle; a producer with logging quietened hosts it.
        let conf = try KafkaConfiguration(bootstrapServers: "", properties: ["log_level": "3"]).makeHandleWithoutBootstrap()
        host = try RDKafkaClient(type: RD_KAFKA_PRODUCER, conf: conf)
        guard let mock = rd_kafka_mock_cluster_new(host.pointer, Int32(brokers)) else {
            throw KafkaError(.clientCreation, "rd_kafka_mock_cluster_new failed")
        }
        cluster = MockClusterHandle(pointer: mock, host: host)
        brokerCount = brokers
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(mock))
    }

    /// Creates `topic` with `partitions` partitions (the mock cluster's Admin API does not work,
    /// so this is the way to get a partition count other than the auto-created 4).
    public func createTopic(_ topic: String, partitions: Int32, replicationFactor: Int32 = 1) throws(KafkaError) {
        let error = rd_kafka_mock_topic_create(cluster.pointer, topic, partitions, replicationFactor)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.cluster, "create topic \(topic): \(rdkafkaErrorText(error))", rdkafkaCode: error.rawValue)
        }
    }

    /// Takes broker `id` (1-based) down, as a failure test; its data is kept.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        let error = rd_kafka_mock_broker_set_down(cluster.pointer, id)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.cluster, "broker \(id) down: \(rdkafkaErrorText(error))", rdkafkaCode: error.rawValue)
        }
    }

    /// Takes every broker down: clients lose their connections and cannot reconnect until
    /// ``setBrokersUp()``; the data is kept.
    public func setBrokersDown() throws(KafkaError) {
        for id in 1...Int32(brokerCount) { try setBrokerDown(id) }
    }

    /// Brings every broker back up.
    public func setBrokersUp() throws(KafkaError) {
        for id in 1...Int32(brokerCount) { try setBrokerUp(id) }
    }

    /// Brings broker `id` back up.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        let error = rd_kafka_mock_broker_set_up(cluster.pointer, id)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.cluster, "broker \(id) up: \(rdkafkaErrorText(error))", rdkafkaCode: error.rawValue)
        }
    }
}

/// Owns an `rd_kafka_mock_cluster_t`. `@unchecked Sendable`: the mock cluster serialises calls on
/// its own thread, and the pointer never changes.
/// It keeps its host client alive, so the cluster is always destroyed before the client.
final class MockClusterHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    let host: RDKafkaClient
    init(pointer: OpaquePointer, host: RDKafkaClient) {
        self.pointer = pointer
        self.host = host
    }
    deinit { rd_kafka_mock_cluster_destroy(pointer) }
}

extension KafkaConfiguration {
    /// A configuration object without `bootstrap.servers` (for the mock cluster's host handle).
    func makeHandleWithoutBootstrap() throws(KafkaError) -> OpaquePointer {
        var copy = self
        copy.properties.removeValue(forKey: "bootstrap.servers")
        return try copy.makeHandle()
    }
}
