import HeraldKafka
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
