import HeraldCore
import HeraldPostgres
@testable import HeraldWorker
import Testing

@Suite struct DeliveryWatermarkTests {
    /// Subscription ids in increasing order, as an audience page hands them out.
    private static func id(_ index: Int) -> String {
        let digits = String(index)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - digits.count) + digits
    }

    @Test func cursorOnlyPassesAFinishedPrefix() {
        var watermark = DeliveryWatermark()
        #expect(watermark.cursor == nil)
        for index in 0..<3 { watermark.dispatched(Self.id(index)) }
        #expect(watermark.outstanding == 3)
        watermark.resolved(Self.id(0))
        #expect(watermark.cursor == Self.id(0))
        #expect(watermark.outstanding == 2)
        watermark.resolved(Self.id(1))
        watermark.resolved(Self.id(2))
        #expect(watermark.cursor == Self.id(2))
        #expect(watermark.outstanding == 0)
    }

    @Test func outOfOrderCompletionWaitsForTheSlowestBeforeIt() {
        var watermark = DeliveryWatermark()
        for index in 0..<5 { watermark.dispatched(Self.id(index)) }
        // The first send is slow; the others finish. Checkpointing past it would skip it after a crash.
        for index in [4, 2, 1, 3] { watermark.resolved(Self.id(index)) }
        #expect(watermark.cursor == nil)
        #expect(watermark.outstanding == 5)
        watermark.resolved(Self.id(0))
        #expect(watermark.cursor == Self.id(4))
        #expect(watermark.outstanding == 0)

        watermark.dispatched(Self.id(5))
        watermark.dispatched(Self.id(6))
        watermark.resolved(Self.id(6))
        #expect(watermark.cursor == Self.id(4), "the cursor stays at the last finished prefix")
        #expect(watermark.outstanding == 2)
    }

    @Test func repeatedAndUnknownIDsAreIgnored() {
        var watermark = DeliveryWatermark()
        for index in 0..<3 { watermark.dispatched(Self.id(index)) }
        watermark.resolved(Self.id(1))
        watermark.resolved(Self.id(1))
        #expect(watermark.cursor == nil)
        watermark.resolved(Self.id(99))
        watermark.resolved("not-an-id")
        #expect(watermark.cursor == nil)
        #expect(watermark.outstanding == 3)
        watermark.resolved(Self.id(0))
        #expect(watermark.cursor == Self.id(1))
        watermark.resolved(Self.id(0))
        #expect(watermark.cursor == Self.id(1))
        #expect(watermark.outstanding == 1)
    }

    /// Past the compaction point (more than 4,096 passed), positions are renumbered: an
    /// out-of-order completion after it must still land on the right id.
    @Test func cursorIsRightAfterCompaction() {
        var watermark = DeliveryWatermark()
        let count = 10_000
        for index in 0..<count { watermark.dispatched(Self.id(index)) }
        for index in 0...5_000 { watermark.resolved(Self.id(index)) }  // compacts at 5,001 passed
        #expect(watermark.cursor == Self.id(5_000))
        #expect(watermark.outstanding == count - 5_001)
        watermark.resolved(Self.id(7_000))
        watermark.resolved(Self.id(10))  // passed before the compaction: ignored
        #expect(watermark.cursor == Self.id(5_000))
        for index in 5_001..<7_000 { watermark.resolved(Self.id(index)) }
        #expect(watermark.cursor == Self.id(7_000))
        #expect(watermark.outstanding == count - 7_001)
        for index in (7_001..<count).reversed() { watermark.resolved(Self.id(index)) }
        #expect(watermark.cursor == Self.id(count - 1))
        #expect(watermark.outstanding == 0)
    }

    /// A shard's life: 100,000 subscriptions sent through a window of 256 in flight, answers in
    /// random order. After every answer the cursor is exactly the end of the finished prefix
    /// (compaction happens many times along the way), and at the end it is the last id.
    @Test func hundredThousandIDsInRandomOrderThroughAWindowOf256() {
        let count = 100_000
        let window = 256
        let ids = (0..<count).map(Self.id)
        var random = SplitMix64(seed: 20_261_202)
        var watermark = DeliveryWatermark()
        var inFlight: [Int] = []
        var finished = [Bool](repeating: false, count: count)
        var next = 0
        var passed = 0
        var mismatches: [String] = []
        while passed < count {
            while inFlight.count < window, next < count {
                watermark.dispatched(ids[next])
                inFlight.append(next)
                next += 1
            }
            let pick = Int.random(in: 0..<inFlight.count, using: &random)
            inFlight.swapAt(pick, inFlight.count - 1)
            let index = inFlight.removeLast()
            watermark.resolved(ids[index])
            finished[index] = true
            while passed < count, finished[passed] { passed += 1 }
            let expected = passed == 0 ? nil : ids[passed - 1]
            if watermark.cursor != expected || watermark.outstanding != next - passed, mismatches.count < 5 {
                mismatches.append("after \(index): cursor \(watermark.cursor ?? "nil") outstanding \(watermark.outstanding), "
                                  + "expected \(expected ?? "nil") and \(next - passed)")
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
        #expect(watermark.cursor == ids[count - 1])
        #expect(watermark.outstanding == 0)
    }

    /// Outcome counts and invalidations come back only as the cursor passes them, so a
    /// checkpoint's counts cover exactly the subscriptions up to its cursor (a takeover resends
    /// and recounts the rest, and must find them not yet invalidated).
    @Test func settlementsAreHandedBackWhenTheCursorPassesThem() {
        var watermark = DeliveryWatermark()
        for index in 0..<3 { watermark.dispatched(Self.id(index)) }
        let gone = TokenInvalidation(subscriptionID: Self.id(1), reason: "Unregistered")
        #expect(watermark.resolved(Self.id(2), leaving: .init(counts: ShardCounts(accepted: 1))) == .init())
        #expect(watermark.resolved(Self.id(1), leaving: .init(counts: ShardCounts(unregistered: 1), invalidations: [gone])) == .init())
        #expect(watermark.cursor == nil)
        let passed = watermark.resolved(Self.id(0), leaving: .init(counts: ShardCounts(failed: 1)))
        #expect(passed == .init(counts: ShardCounts(accepted: 1, unregistered: 1, failed: 1), invalidations: [gone]))
        #expect(watermark.cursor == Self.id(2))
    }

    /// A parked subscription settling later (its retry accepted, its verdict applied) while the
    /// cursor has not passed it yet waits for the cursor too; once passed, or unknown to this
    /// run (parked by an earlier one), what it leaves is handed back at once.
    @Test func aParkedSubscriptionSettlingLaterWaitsForTheCursorToo() {
        var watermark = DeliveryWatermark()
        for index in 0..<3 { watermark.dispatched(Self.id(index)) }
        #expect(watermark.resolved(Self.id(1)) == .init(), "parked: resolved, nothing counted yet")
        let gone = TokenInvalidation(subscriptionID: Self.id(1), reason: "Unregistered")
        let later = DeliveryWatermark.Settled(counts: ShardCounts(unregistered: 1), invalidations: [gone])
        #expect(watermark.settledLater(Self.id(1), leaving: later) == .init(), "beyond the cursor: held")
        #expect(watermark.settledLater(Self.id(2), leaving: .init(counts: ShardCounts(accepted: 1))) == .init(counts: ShardCounts(accepted: 1)),
                "not resolved yet: not a parked one, handed back")
        let passed = watermark.resolved(Self.id(0), leaving: .init(counts: ShardCounts(accepted: 1)))
        #expect(passed == .init(counts: ShardCounts(accepted: 1, unregistered: 1), invalidations: [gone]))
        #expect(watermark.cursor == Self.id(1))
        let afterwards = DeliveryWatermark.Settled(counts: ShardCounts(failed: 1))
        #expect(watermark.settledLater(Self.id(1), leaving: afterwards) == afterwards, "passed: handed back at once")
        #expect(watermark.settledLater(Self.id(99), leaving: afterwards) == afterwards, "an earlier run's: handed back at once")
        // A repeated resolution neither moves nor loses anything.
        #expect(watermark.resolved(Self.id(1), leaving: afterwards) == afterwards)
        #expect(watermark.resolved(Self.id(2)) == .init())
        #expect(watermark.cursor == Self.id(2) && watermark.outstanding == 0)
    }
}
