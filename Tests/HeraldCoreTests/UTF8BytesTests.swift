import Foundation
import Testing
import HeraldCore

@Suite struct UTF8BytesTests {
    /// Small (inline), large (heap), non-ASCII, empty, and bridged from Foundation: every kind
    /// of string gives the same bytes as its `utf8` view.
    static let strings: [String] = [
        "", "a", "apns-id", String(repeating: "token0123456789abcdef", count: 8), "Grüße, 世界 🎉",
        NSString(string: "from Foundation, long enough to live on the heap").description,
        String("a substring that is long enough to be stored on the heap"[...].dropFirst(2)),
    ]

    @Test(arguments: strings)
    func bytesAreTheStringsUTF8(_ string: String) {
        #expect(string.withUTF8Bytes { Array($0) } == Array(string.utf8))
        var bytes: [UInt8] = [0x7B]
        bytes.appendUTF8(string)
        #expect(bytes == [0x7B] + Array(string.utf8))
    }

    @Test func aThrowingBodyThrowsThrough() {
        struct Stop: Error {}
        #expect(throws: Stop.self) { try "x".withUTF8Bytes { _ in throw Stop() } }
    }
}
