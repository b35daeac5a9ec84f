/// Where one message's delivery report goes: the message's opaque in librdkafka, retained
/// until its report (``RDKafkaProducer/produce(_:box:)``).
final class DeliveryBox: Sendable {
    enum Target: Sendable {
        case single(CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>)
        case batch(DeliveryBatch, Int)
    }
    let target: Target
    /// The message's topic, for its report (read back from librdkafka, it would be a new string
    /// per message).
    let topic: String
    init(target: Target, topic: String) {
        self.target = target
        self.topic = topic
    }

    func complete(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        switch target {
        case .single(let continuation): continuation.resume(returning: result)
        case .batch(let batch, let index): batch.complete(index, result)
        }
    }
}
