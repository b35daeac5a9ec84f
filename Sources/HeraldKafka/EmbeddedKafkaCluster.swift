/// librdkafka's in-process mock Kafka cluster, for `herald dev`, `herald dev-broker` and tests.
///
/// It listens on 127.0.0.1 ports other processes can use, supports consumer groups, commits and
/// the idempotent producer, and auto-creates topics with 4 partitions. It keeps only about 5 MB
/// per partition and its API is experimental: development and tests only, never production.
public final class EmbeddedKafkaCluster: Sendable {
    private let cluster: RDKafkaMockCluster

    /// `bootstrap.servers` for clients: `127.0.0.1:PORT,…`.
    public let bootstrapServers: String
    /// How many brokers it has (ids 1 through `brokerCount`).
    public let brokerCount: Int

    /// Starts a cluster of `brokers` brokers.
    public init(brokers: Int = 3) throws(KafkaError) {
        guard (1...16).contains(brokers) else {
            throw KafkaError(.cluster, "brokers must be between 1 and 16, not \(brokers)")
        }
        cluster = try RDKafkaMockCluster(brokers: Int32(brokers))
        brokerCount = brokers
        bootstrapServers = cluster.bootstrapServers
    }

    /// Creates `topic` with `partitions` partitions (the mock cluster's Admin API does not work,
    /// so this is the way to get a partition count other than the auto-created 4).
    public func createTopic(_ topic: String, partitions: Int32, replicationFactor: Int32 = 1) throws(KafkaError) {
        try cluster.createTopic(topic, partitions: partitions, replicationFactor: replicationFactor)
    }

    /// Takes broker `id` (1-based) down, as a failure test; its data is kept.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try cluster.setBroker(id, up: false)
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
        try cluster.setBroker(id, up: true)
    }
}
