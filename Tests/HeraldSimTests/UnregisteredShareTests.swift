import HeraldSim
import Testing

@Suite struct UnregisteredShareTests {
    @Test func shareOfTokensMatchesTheFraction() {
        let rule = UnregisteredShare(0.1)
        let tokens = (0..<20_000).map { "token-\($0)" }
        let unregistered = tokens.filter(rule.isUnregistered).count
        #expect((1_700...2_300).contains(unregistered))
        #expect(!UnregisteredShare(0).isUnregistered("anything"))
        #expect(UnregisteredShare(1).isUnregistered("anything"))
    }

    @Test func positionIsTheFirstEightBytesOfSHA256() {
        // SHA-256("abc") starts ba7816bf8f01cfea; 0xba7816bf8f01cfea / 2^64 ≈ 0.7283.
        #expect(abs(UnregisteredShare.position(of: "abc") - 0.72840) < 0.0001)
    }
}
