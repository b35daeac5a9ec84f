import HeraldCore
import HeraldKafka

/// Why a message could not be published, after the retries.
struct PublishError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure (one so far: the broker did not acknowledge everything); the broker's
    /// own error, ``underlying``, tells what kind of refusal.
    struct Code: Sendable, Hashable {
        private let value: Int
        /// Messages were not acknowledged.
        static let unacknowledged = Code(value: 1)
    }

    let code: Code
    /// The last broker error.
    let underlying: KafkaError
    /// Messages that were not acknowledged.
    let unacknowledged: Int
    /// Where the error was raised.
    let file: String
    /// The line where the error was raised.
    let line: Int

    init(underlying: KafkaError, unacknowledged: Int, file: String = #fileID, line: Int = #line) {
        code = .unacknowledged
        self.underlying = underlying
        self.unacknowledged = unacknowledged
        self.file = file
        self.line = line
    }

    var description: String { "\(unacknowledged) message(s) not acknowledged by Kafka: \(underlying)" }
}

/// Everything the worker produces: receipts to the results topic, shard messages, dead letters
/// and re-released jobs. Every call returns only once the broker acknowledged every message
/// (the idempotent producer retries inside librdkafka; failures left after that are retried
/// here with backoff for `retryFor`), because the caller commits or checkpoints right after.
final class ReceiptPublisher: Sendable {
    /// The producer, shared by the worker.
    let producer: KafkaProducer
    /// Topic names.
    let topics: WorkerConfiguration.Topics
    private let retryFor: Duration
    private let log: WorkerLog

    /// A publisher over `producer`.
    init(producer: KafkaProducer, topics: WorkerConfiguration.Topics, log: WorkerLog, retryFor: Duration = .seconds(120)) {
        self.producer = producer
        self.topics = topics
        self.retryFor = retryFor
        self.log = log
    }

    /// Publishes receipts, one JSON object per message: device receipts keyed by subscription
    /// id, job-level events by job id (docs/ARCHITECTURE.md).
    func publish(_ receipts: [Receipt]) async throws(PublishError) {
        try await send(receipts.map { receipt in
            KafkaProducerMessage(topic: topics.results, key: Array(receipt.messageKey.utf8), value: receipt.serializedBytes())
        })
    }

    /// Produces shard messages (key `job_id/shard_no`) to the campaign or urgent shard topic.
    func publish(shards: [Shard], urgent: Bool) async throws(PublishError) {
        let topic = urgent ? topics.shardsUrgent : topics.shards
        try await send(shards.map { shard in
            KafkaProducerMessage(topic: topic, key: Array(shard.messageKey.utf8), value: shard.json.serializedBytes())
        })
    }

    /// Sends and waits for every acknowledgement, retrying the failed ones.
    func send(_ messages: [KafkaProducerMessage]) async throws(PublishError) {
        var pending = messages
        let producer = self.producer
        let log = self.log
        try await withBackoff(Backoff(first: .milliseconds(100), maximum: .seconds(5)), until: .now + retryFor, retryIf: { error, _, delay in
            // A message over the broker's limit will never be taken: no point in waiting.
            guard error.underlying.isRetryable || error.underlying.code != .messageTooLarge else { return false }
            log.warning("Kafka did not acknowledge messages; retrying", [
                "count": .int(error.unacknowledged), "error": .string(error.underlying.description), "retry_in_ms": .int(Int(delay.milliseconds)),
            ])
            return true
        }) { _ async throws(PublishError) in
            guard !pending.isEmpty else { return }
            let results = await producer.sendAll(pending)
            var failed: [KafkaProducerMessage] = []
            var lastError: KafkaError?
            for (message, result) in zip(pending, results) {
                if case .failure(let error) = result {
                    failed.append(message)
                    lastError = error
                }
            }
            pending = failed
            if let lastError { throw PublishError(underlying: lastError, unacknowledged: failed.count) }
        }
    }
}
