@testable import HeraldHTTP2
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1))) struct HTTP2MessageTests {
    /// A request whose fields are written into its header block lays out the same bytes as the
    /// same request made from an array of fields, over random fields, flags and numbers.
    @Test func writtenHeaderBlockMatchesTheOneMadeFromFields() {
        var generator = TestRandom(state: 19)
        let numbers: [Int64] = [0, 5, 10, -1, 1_800_000_000, .max, .min]
        for round in 0..<500 {
            let suffix = String(repeating: "ab", count: Int(generator.next() % 40))
            var fields: [HeaderField] = []
            for index in 0..<Int(generator.next() % 8) {
                let value = String(repeating: "v", count: Int(generator.next() % 300)) + "\(index)"
                fields.append(HeaderField("x-field-\(index)", value, neverIndex: generator.next() % 2 == 0))
            }
            let number = numbers[round % numbers.count]
            let written = HTTP2Request(pathPrefix: "/3/device/", pathSuffix: suffix, body: [1, 2], timeoutNanoseconds: 7) { writer in
                for field in fields { writer.add(field.name, field.value, neverIndex: field.neverIndex) }
                writer.add("x-number", number)
            }
            let made = HTTP2Request(path: "/3/device/" + suffix, headers: fields + [HeaderField("x-number", String(number))], body: [1, 2],
                                    timeoutNanoseconds: 7)
            #expect(written.encoded.bytes == made.encoded.bytes, "round \(round)")
            #expect(written.path == "/3/device/" + suffix && written.method == "POST" && written.body == [1, 2] && written.timeoutNanoseconds == 7)
            #expect(written.headers == made.headers)
        }
    }

    /// `method`, `path` and `headers` read the header block, and setting one lays it out again
    /// with the other two kept.
    @Test func methodPathAndHeadersReadAndRewriteTheBlock() {
        var request = HTTP2Request(method: "GET", path: "/a", headers: [HeaderField("x-one", "1"), HeaderField("x-id", "secret", neverIndex: true)])
        #expect(request.method == "GET" && request.path == "/a")
        #expect(request.headers == [HeaderField("x-one", "1"), HeaderField("x-id", "secret", neverIndex: true)])
        request.path = "/b"
        request.method = "PUT"
        request.headers.append(HeaderField("x-two", "2"))
        #expect(request.method == "PUT" && request.path == "/b")
        #expect(request.headers.map(\.name) == ["x-one", "x-id", "x-two"])
        #expect(request.encoded.bytes == EncodedHeaderBlock(method: "PUT", path: "/b", headers: request.headers).bytes)
        let empty = HTTP2Request(path: "/")
        #expect(empty.headers.isEmpty && empty.method == "POST")
    }

    /// A written request reaches a server with its path and fields as written.
    @Test func writtenRequestReachesTheServerAsWritten() async throws {
        let seen = SeenHeaders()
        let peer = try HTTP2TestPeer { request in
            seen.fields.withLock { $0 = request.headers }
            request.respond(status: 200, headers: [HeaderField("x-path", request.path)])
        }
        let client = try peer.client()
        let request = HTTP2Request(pathPrefix: "/3/device/", pathSuffix: "abcdef", body: Array("{}".utf8), timeoutNanoseconds: 5_000_000_000) { fields in
            fields.add("apns-id", "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234", neverIndex: true)
            fields.add("apns-priority", 10)
            fields.add("apns-expiration", -42)
        }
        let response = try await client.send(request)
        #expect(response.status == 200 && response.header("x-path") == "/3/device/abcdef")
        let headers = seen.fields.withLock { $0 }
        #expect(headers.first { $0.name == "apns-id" }?.value == "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234")
        #expect(headers.first { $0.name == "apns-priority" }?.value == "10")
        #expect(headers.first { $0.name == "apns-expiration" }?.value == "-42")
        client.shutdown()
    }
}

/// The fields a test server's handler saw last.
final class SeenHeaders: Sendable {
    let fields = Mutex<[HeaderField]>([])
}

/// A reproducible generator for the tests' random cases (xorshift64*).
struct TestRandom {
    var state: UInt64

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}
