import Foundation
import HeraldKafka

/// Reads from a consumer until `count` messages came or `seconds` passed.
func consume(_ consumer: KafkaConsumer, count: Int, seconds: Double) async throws -> [KafkaMessage] {
    var messages: [KafkaMessage] = []
    let deadline = Date().addingTimeInterval(seconds)
    while messages.count < count && Date() < deadline {
        if let message = try await consumer.poll(timeoutMilliseconds: 200) {
            messages.append(message)
        }
    }
    return messages
}

/// Settings that make the mock cluster's group rebalances quick (local-services.md).
let fastGroupProperties = ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "topic.metadata.refresh.interval.ms": "1000"]
