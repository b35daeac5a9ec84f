import HeraldCore
import HeraldKafka
import Testing

@Suite struct OffsetTrackerTests {
    @Test func inOrderCompletionMovesTheCommittableOffsetEachTime() {
        var tracker = PartitionOffsetTracker()
        for offset in Int64(0)..<5 { do { let value = tracker.delivered(offset); #expect(value) } }
        #expect(tracker.committable == nil)
        do { let value = tracker.finished(0); #expect(value == 1) }
        do { let value = tracker.finished(1); #expect(value == 2) }
        #expect(tracker.committable == 2)
        #expect(tracker.unfinishedCount == 3)
    }

    @Test func aLaterMessageFinishingFirstNeverMovesPastAnUnfinishedOne() {
        var tracker = PartitionOffsetTracker()
        for offset in Int64(10)..<20 { tracker.delivered(offset) }
        // 19 down to 11 finish; 10 is still being worked on.
        for offset in (Int64(11)..<20).reversed() { do { let value = tracker.finished(offset); #expect(value == nil) } }
        #expect(tracker.committable == nil)
        #expect(tracker.unfinishedCount == 1)
        #expect(tracker.outstandingCount == 10)
        // 10 finishes: the whole run is released at once.
        do { let value = tracker.finished(10); #expect(value == 20) }
        #expect(tracker.outstandingCount == 0)
    }

    @Test func gapsInOffsetsAndAHoleInTheMiddle() {
        var tracker = PartitionOffsetTracker()
        for offset: Int64 in [3, 7, 8, 15, 16] { tracker.delivered(offset) }
        do { let value = tracker.finished(3); #expect(value == 4) }
        do { let value = tracker.finished(15); #expect(value == nil) }
        do { let value = tracker.finished(16); #expect(value == nil) }
        do { let value = tracker.finished(7); #expect(value == 8) }
        #expect(tracker.committable == 8) // 8 still unfinished: 15 and 16 wait behind it
        do { let value = tracker.finished(8); #expect(value == 17) }
    }

    @Test func unknownDuplicateAndStaleFinishesAreIgnored() {
        var tracker = PartitionOffsetTracker()
        for offset in Int64(0)..<3 { tracker.delivered(offset) }
        do { let value = tracker.finished(42); #expect(value == nil) }   // never delivered
        do { let value = tracker.finished(2); #expect(value == nil) }
        do { let value = tracker.finished(2); #expect(value == nil) }    // twice
        do { let value = tracker.finished(0); #expect(value == 1) }
        do { let value = tracker.finished(0); #expect(value == nil) }    // already released
        do { let value = tracker.finished(1); #expect(value == 3) }
        do { let value = tracker.delivered(2); #expect(!value) }         // behind the committable offset
        do { let value = tracker.delivered(3); #expect(value) }
    }

    @Test func manyMessagesInRandomCompletionOrder() {
        var tracker = PartitionOffsetTracker()
        let count: Int64 = 5_000
        for offset in 0..<count { tracker.delivered(offset) }
        var order = Array(0..<count)
        var generator = SplitMix64(seed: 7)
        order.shuffle(using: &generator)
        var lowestUnfinished: Int64 = 0
        var done = Set<Int64>()
        for offset in order {
            _ = tracker.finished(offset)
            done.insert(offset)
            while done.contains(lowestUnfinished) { lowestUnfinished += 1 }
            // The committable offset is exactly the lowest unfinished one, never past it.
            #expect(tracker.committable == (lowestUnfinished == 0 ? nil : lowestUnfinished))
        }
        #expect(tracker.committable == count)
    }

    @Test func resumingAfterKnownProcessedWork() {
        var tracker = OffsetTracker()
        let partition = KafkaTopicPartition(topic: "t", partition: 0)
        tracker.resume(partition, after: 500)
        #expect(tracker.committable == [partition: 500])
        let early = tracker.delivered(partition, offset: 499)
        #expect(!early)
        tracker.delivered(partition, offset: 500)
        tracker.delivered(partition, offset: 501)
        let moved = tracker.finished(partition, offset: 501)
        #expect(moved == nil)
        #expect(tracker.committable == [partition: 500])
        let released = tracker.finished(partition, offset: 500)
        #expect(released == 502)
    }

    @Test func trackerOverPartitionsForgetsRevokedOnes() {
        var tracker = OffsetTracker()
        let p0 = KafkaTopicPartition(topic: "t", partition: 0)
        let p1 = KafkaTopicPartition(topic: "t", partition: 1)
        tracker.delivered(p0, offset: 0)
        tracker.delivered(p1, offset: 0)
        tracker.delivered(p1, offset: 1)
        do { let value = tracker.finished(p1, offset: 0); #expect(value == 1) }
        #expect(tracker.committable == [p1: 1])
        #expect(tracker.unfinishedCount == 2)
        #expect(tracker.unfinishedCount(in: [p1]) == 1)
        tracker.remove([p1])
        do { let value = tracker.finished(p1, offset: 1); #expect(value == nil) }
        #expect(tracker.committable.isEmpty)
        #expect(tracker.unfinishedCount == 1)
    }
}

