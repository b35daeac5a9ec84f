import HeraldKafka
import Testing

/// Reading partitions up to the ends they had at one moment.
struct PartitionEndsTests {
    let p0 = KafkaTopicPartition(topic: "dlq", partition: 0)
    let p1 = KafkaTopicPartition(topic: "dlq", partition: 1)
    let p2 = KafkaTopicPartition(topic: "dlq", partition: 2)

    func message(_ partition: Int32, _ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: "dlq", partition: partition, offset: offset, key: nil, value: [])
    }

    @Test func completeOnceEveryPartitionIsReadToItsEnd() {
        // p0 holds 0..<3, p1 holds 5..<7 (older ones deleted by retention), p2 is empty.
        var ends = PartitionEnds()
        #expect(!ends.isComplete && ends.unfinished.isEmpty, "not complete before the ends are known")
        ends.setEnds([p0: .init(low: 0, high: 3), p1: .init(low: 5, high: 7), p2: .init(low: 4, high: 4)])
        #expect(!ends.isComplete)
        #expect(ends.unfinished.map(\.partition) == [p0, p1])
        #expect(ends.unfinished.map(\.reached) == [nil, nil] && ends.unfinished.map(\.end) == [3, 7])
        for offset in Int64(0)..<3 { ends.read(message(0, offset)) }
        #expect(ends.unfinished.map(\.partition) == [p1])
        ends.read(message(1, 5))
        #expect(ends.unfinished.first?.reached == 6)
        ends.read(message(1, 6))
        #expect(ends.isComplete)
    }

    @Test func laterMessagesAndUnknownPartitionsAreOutside() {
        var ends = PartitionEnds()
        #expect(ends.contains(message(1, 99)), "anything is inside while the ends are not known")
        ends.setEnds([p0: .init(low: 0, high: 3)])
        ends.setEnds([p0: .init(low: 0, high: 9)])
        #expect(ends.contains(message(0, 2)))
        #expect(!ends.contains(message(0, 3)), "arrived after the ends were taken (the first ends stay)")
        #expect(!ends.contains(message(1, 0)), "a partition the ends do not know")
    }

    @Test func whatWasReadBeforeTheEndsWereKnownCounts() {
        var ends = PartitionEnds()
        for offset in Int64(0)..<4 { ends.read(message(0, offset)) }
        ends.setEnds([p0: .init(low: 0, high: 4), p1: .init(low: 0, high: 1)])
        #expect(ends.unfinished.map(\.partition) == [p1])
        ends.read(message(1, 0))
        #expect(ends.isComplete)
        // A repeat of an older message (a rebalance) does not move the position back.
        ends.read(message(0, 1))
        #expect(ends.isComplete)
    }
}
