/// Where one message's delivery report goes: the message's opaque in librdkafka, retained
/// until its report (``RDKafkaProducer/produce(_:box:)``).
final class DeliveryBox: Sendable {
    enum Target: Sendable {
        case single(CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>)
        case batch(DeliveryBatch, Int)
    }
    let target: Target
    init(target: Target) { self.target = target }

    func complete(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        switch target {
        case .single(let continuation): continuation.resume(returning: result)
        case .batch(let batch, let index): batch.complete(index, result)
        }
    }
}
