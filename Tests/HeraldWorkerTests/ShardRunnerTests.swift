import HeraldCore
@testable import HeraldWorker
import Testing

@Suite struct ShardRunnerTests {
    private let now = Timestamp(seconds: 1_800_000_000, nanoseconds: 400_000_000)

    @Test func aShardHeldElsewhereComesBackOnceTheLeaseCanHaveLapsed() {
        // A crashed holder's lease lapses in up to 30 s: back the second after it.
        #expect(ShardRunner.requeueTime(leaseUntil: Timestamp(seconds: now.seconds + 27, nanoseconds: 900_000_000), now: now).seconds == now.seconds + 28)
        // A lease about to lapse, or already lapsed: not sooner than 5 s, so a message cannot bounce.
        #expect(ShardRunner.requeueTime(leaseUntil: Timestamp(seconds: now.seconds + 1), now: now).seconds == now.seconds + 5)
        #expect(ShardRunner.requeueTime(leaseUntil: Timestamp(seconds: now.seconds - 60), now: now).seconds == now.seconds + 5)
        #expect(ShardRunner.requeueTime(leaseUntil: nil, now: now).seconds == now.seconds + 5)
    }
}
