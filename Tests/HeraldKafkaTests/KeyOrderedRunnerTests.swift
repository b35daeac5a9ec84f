import HeraldKafka
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct KeyOrderedRunnerTests {
    @Test func sameKeyRunsInOrderOneAtATimeWhileKeysRunConcurrently() async throws {
        let items = (0..<2_000).map { (key: "k\($0 % 20)", index: $0) }
        let log = Mutex<[String: [Int]]>([:])
        let running = Mutex<(perKey: [String: Int], total: Int, maxTotal: Int, overlapSameKey: Int)>(([:], 0, 0, 0))
        try await KeyOrderedRunner.run(AsyncStreamOf(items), maximumConcurrency: 8, key: { $0.key }) { item in
            running.withLock { state in
                state.perKey[item.key, default: 0] += 1
                if state.perKey[item.key]! > 1 { state.overlapSameKey += 1 }
                state.total += 1
                state.maxTotal = max(state.maxTotal, state.total)
            }
            // Later items of a key finish faster, which would reorder them without the runner.
            if item.index % 3 == 0 { try? await Task.sleep(for: .microseconds(200)) } else { await Task.yield() }
            log.withLock { $0[item.key, default: []].append(item.index) }
            running.withLock { state in
                state.perKey[item.key]! -= 1
                state.total -= 1
            }
        }
        let result = log.withLock { $0 }
        #expect(result.count == 20)
        for (key, indices) in result {
            #expect(indices == items.filter { $0.key == key }.map(\.index), "key \(key) out of order")
        }
        let stats = running.withLock { $0 }
        #expect(stats.overlapSameKey == 0)
        #expect(stats.maxTotal <= 8)
        #expect(stats.maxTotal > 1, "different keys never ran concurrently")
    }

    @Test(.timeLimit(.minutes(1))) func consumerMessagesKeepPerKeyOrderThroughTheRunner() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1)
        let topic = TestEnvironment.uniqueName("keyed")
        try cluster.createTopic(topic, partitions: 2)
        let configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: fastGroupProperties)
        let producer = try KafkaProducer(configuration: configuration)
        let total = 600
        _ = try await produceAll(producer, (0..<total).map { KafkaProducerMessage(topic: topic, key: "activity-\($0 % 12)", value: String($0)) })
        let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("g"))
        try consumer.subscribe(topics: [topic])
        let log = Mutex<(byKey: [String: [Int]], count: Int)>(([:], 0))
        let run = Task {
            try await KeyOrderedRunner.run(consumer.messages, maximumConcurrency: 6, key: { $0.keyString }) { message in
                // Uneven work, so a key's later update would overtake an earlier one if run concurrently.
                if let value = Int(message.valueString), value % 5 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
                log.withLock { state in
                    state.byKey[message.keyString ?? "", default: []].append(Int(message.valueString) ?? -1)
                    state.count += 1
                }
                consumer.markProcessed(message)
            }
        }
        #expect(await waitUntil(seconds: 30) { log.withLock { $0.count } >= total })
        await consumer.close() // ends the sequence, so the runner returns
        try await run.value
        let result = log.withLock { $0 }
        #expect(result.count == total)
        for key in 0..<12 {
            #expect(result.byKey["activity-\(key)"] == Array(stride(from: key, to: total, by: 12)), "activity-\(key) out of order")
        }
        #expect(consumer.statistics.processed == total)
    }

    @Test func itemsWithoutAKeyAllRun() async throws {
        let count = Mutex(0)
        try await KeyOrderedRunner.run(AsyncStreamOf(Array(0..<500)), maximumConcurrency: 4, key: { _ -> String? in nil }) { _ in
            count.withLock { $0 += 1 }
        }
        #expect(count.withLock { $0 } == 500)
    }
}

/// An async sequence over an array, for feeding the runner.
struct AsyncStreamOf<Element: Sendable>: AsyncSequence, Sendable {
    let elements: [Element]
    init(_ elements: [Element]) { self.elements = elements }
    struct AsyncIterator: AsyncIteratorProtocol {
        var index = 0
        let elements: [Element]
        mutating func next() async -> Element? {
            guard index < elements.count else { return nil }
            defer { index += 1 }
            return elements[index]
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(elements: elements) }
}
