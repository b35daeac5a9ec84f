import HeraldCrypto

/// Decides which device tokens a simulator treats as unregistered, so that a seeding tool, a
/// benchmark and the simulator agree without talking to each other: a token is unregistered when
/// the first 8 bytes of the SHA-256 of its text, read as a big-endian unsigned integer and divided
/// by 2^64, fall under `share`.
public struct UnregisteredShare: Sendable, Equatable {
    /// The fraction of tokens that are unregistered, 0...1.
    public let share: Double

    /// Creates the rule; `share` is clamped to 0...1.
    public init(_ share: Double) {
        self.share = min(max(share.isNaN ? 0 : share, 0), 1)
    }

    /// The token's position in [0, 1).
    public static func position(of token: String) -> Double {
        let digest = SHA256.hash(Array(token.utf8))
        var value: UInt64 = 0
        for byte in digest.prefix(8) { value = value << 8 | UInt64(byte) }
        return Double(value) / 18_446_744_073_709_551_616.0
    }

    /// Whether `token` is unregistered under this rule.
    public func isUnregistered(_ token: String) -> Bool {
        share > 0 && UnregisteredShare.position(of: token) < share
    }
}
