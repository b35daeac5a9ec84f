import Synchronization

/// The results of a `sendAll`, resumed when the last message is reported.
final class DeliveryBatch: Sendable {
    private struct State {
        var results: [Result<KafkaDeliveryReport, KafkaError>?]
        var remaining: Int
        var continuation: CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>?
    }
    private let state: Mutex<State>

    init(count: Int, continuation: CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count, continuation: continuation))
    }

    func complete(_ index: Int, _ result: Result<KafkaDeliveryReport, KafkaError>) {
        let finished: (CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>, [Result<KafkaDeliveryReport, KafkaError>])? = state.withLock { state in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            let results = state.results.map { $0 ?? .failure(KafkaError(.delivery, "no delivery report")) }
            return (continuation, results)
        }
        if let (continuation, results) = finished { continuation.resume(returning: results) }
    }
}
