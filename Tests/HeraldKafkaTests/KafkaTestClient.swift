import Foundation
import HeraldKafka
import Testing

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

/// Produces `messages` and requires every one acknowledged; returns the delivery reports.
func produceAll(_ producer: KafkaProducer, _ messages: [KafkaProducerMessage]) async throws -> [KafkaDeliveryReport] {
    var reports: [KafkaDeliveryReport] = []
    reports.reserveCapacity(messages.count)
    // Chunks keep the producer's own queue (and the test's memory) modest.
    var start = 0
    while start < messages.count {
        let chunk = Array(messages[start..<min(messages.count, start + 20_000)])
        for result in await producer.sendAll(chunk) {
            reports.append(try result.get())
        }
        start += chunk.count
    }
    return reports
}

/// The process's resident memory (VmRSS in /proc/self/status), in bytes.
func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return kilobytes * 1024
    }
    return 0
}

/// Waits until `condition` holds or `seconds` pass; returns whether it held.
func waitUntil(seconds: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// The heavy mock-cluster suites, nested here so they run one after another: the memory test
/// reads the whole process's RSS, which a concurrent 100,000-message test would disturb.
@Suite(.serialized, .timeLimit(.minutes(3))) struct KafkaMockClusterIntegration {}
