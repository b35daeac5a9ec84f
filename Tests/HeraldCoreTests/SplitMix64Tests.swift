import HeraldCore
import Testing

@Suite struct SplitMix64Tests {
    @Test func sameSeedSameSequenceAndKnownFirstValue() {
        var first = SplitMix64(seed: 0)
        var second = SplitMix64(seed: 0)
        // SplitMix64's published first output for seed 0.
        #expect(first.next() == 0xE220_A839_7B1D_CDAF)
        #expect(second.next() == 0xE220_A839_7B1D_CDAF)
        var other = SplitMix64(seed: 1)
        #expect((0..<8).map { _ in first.next() } != (0..<8).map { _ in other.next() })
    }
}
