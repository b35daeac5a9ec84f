import HeraldCore
import HeraldCrypto
import HeraldKafka

/// Dead letters for every lane of the worker (schemas/, `herald.dead-letter.v1`).
enum PipelineDeadLetters {
    /// Parks `message` on the dead-letter topic with its cause, and publishes `receipts` with it
    /// (a job's `rejected` event); true once Kafka has acknowledged them all, false only when
    /// the worker stops first. A letter over the producer's `message.max.bytes` keeps as much
    /// of the original as fits, with the whole one's size and SHA-256, so dead-lettering itself
    /// can never wedge the lane. A broker that does not answer is waited for: no message is
    /// committed before its letter is safe.
    static func send(_ message: KafkaMessage, cause: DeadLetter.Cause, reason: String, attempts: Int,
                     context: PipelineContext, receipts: [Receipt] = []) async -> Bool {
        let whole = DeadLetter(reason: String(reason.prefix(1000)), cause: cause, attempts: attempts,
                               source: .init(topic: message.topic, partition: message.partition, offset: message.offset),
                               original: message.value, at: .now)
        let publisher = context.publisher
        let lane = publisher.topics.lane(of: message.topic)
        // Room for the key and for librdkafka's own accounting besides the value.
        var limit = publisher.producer.maximumMessageBytes - (message.key?.count ?? 0) - 1024
        while true {
            guard let letter = whole.fitting(maxBytes: max(limit, 4096), sha256: { Hex.encode(SHA256.hash($0)) }) else {
                // Unreachable with the 4 KiB floor (the envelope is under 2 KiB): logged, never a crash.
                context.log.error("a dead letter does not fit even without its original", ["lane": .string(lane)])
                return false
            }
            var messages = [KafkaProducerMessage(topic: publisher.topics.deadLetters, key: message.key, value: letter.json.serializedBytes())]
            messages += receipts.map { receipt in
                KafkaProducerMessage(topic: publisher.topics.results, key: Array(receipt.messageKey.utf8), value: receipt.serializedBytes())
            }
            do {
                try await publisher.send(messages)
                context.metrics.deadLettered(lane: lane, cause: cause.rawValue)
                context.log.warning("message dead-lettered", [
                    "lane": .string(lane), "topic": .string(message.topic), "partition": .int(Int(message.partition)),
                    "offset": .int(Int(message.offset)), "cause": .string(cause.rawValue), "attempts": .int(attempts),
                    "original_truncated": .bool(letter.originalTruncated), "reason": .string(String(reason.prefix(300))),
                ])
                return true
            } catch {
                context.metrics.kafkaError()
                if error.underlying.code == .messageTooLarge && limit > 4096 {
                    // The broker's limit is below the producer's: halve what is kept and try again.
                    limit /= 2
                    continue
                }
                context.log.error("could not dead-letter a message; retrying", ["lane": .string(lane), "error": .string(error.description)])
                if context.stop.isSet { return false }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
