import Foundation
import HeraldCrypto
import HeraldHTTP2
import Testing

/// The limits of ``HTTP2ClientLimits`` against peers that break them: a header block over
/// 16 KiB from the test server, and CONTINUATION and SETTINGS floods from a hand-written peer.
/// Each flood has a control one step inside the limit, so a failure is the limit, not the peer.
@Suite(.timeLimit(.minutes(2))) struct HTTP2ClientLimitsTests {
    @Test func aResponseWithHeadersOver16KiBFailsThatRequestAsATransportError() async throws {
        let peer = try HTTP2TestPeer { request in
            let size = request.path == "/huge" ? 20_000 : 8_000
            request.respond(status: 200, headers: [HeaderField("x-padding", String(repeating: "p", count: size))], body: Array("ok".utf8))
        }
        let client = try peer.client()
        #expect(try await client.send(HTTP2Request(method: "GET", path: "/fine")).header("x-padding")?.count == 8_000)
        await #expect {
            try await client.send(HTTP2Request(method: "GET", path: "/huge"))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.code == .headersTooLarge && error.isRetryable
        }
        // Only that stream was reset: the connection serves the next request.
        #expect(try await client.send(HTTP2Request(method: "GET", path: "/again")).status == 200)
        #expect(await client.statistics().connectionsOpened == 1)
        client.shutdown()
    }

    /// `continuations` CONTINUATION frames after the HEADERS of each response.
    private func continuationPeer(_ continuations: Int) throws -> RawHTTP2Peer {
        try RawHTTP2Peer(initial: RawHTTP2Peer.settings(entries: 1)) { stream in
            // `:status: 200` (HPACK index 8), then one `x-a: 1` literal per CONTINUATION.
            var bytes = RawHTTP2Peer.settingsAck + RawHTTP2Peer.frame(type: 0x1, flags: 0x1, stream: stream, payload: [0x88])
            for index in 0..<continuations {
                let last = index == continuations - 1
                bytes += RawHTTP2Peer.frame(type: 0x9, flags: last ? 0x4 : 0, stream: stream, payload: [0x00, 0x03, 0x78, 0x2D, 0x61, 0x01, 0x31])
            }
            return bytes
        }
    }

    private func client(_ peer: RawHTTP2Peer) throws -> HTTP2Client {
        HTTP2Client(configuration: HTTP2Client.Configuration(host: "127.0.0.1", port: peer.port), tls: try TLSContext(client: peer.caFile),
                    loop: try EventLoop())
    }

    @Test func nineContinuationFramesEndTheConnectionEightAreServed() async throws {
        let eight = try continuationPeer(8)
        let fine = try client(eight)
        #expect(try await fine.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 5_000_000_000)).status == 200)
        fine.shutdown()

        let nine = try continuationPeer(9)
        let flooded = try client(nine)
        await #expect {
            // The flood ends the connection as soon as the answer arrives; the deadline only has to
            // outlast a TLS handshake on a loaded machine (3 s did not, once, in CI).
            try await flooded.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 15_000_000_000))
        } throws: { error in
            // The session refuses the 9th frame and the connection is dropped at once.
            (error as? HTTP2Error).map { $0.message.contains("Too many CONTINUATION frames") } ?? false
        }
        flooded.shutdown()
    }

    @Test func aSettingsFrameOf33EntriesEndsTheConnection32AreAccepted() async throws {
        let answer: @Sendable (UInt32) -> [UInt8] = { stream in
            RawHTTP2Peer.settingsAck + RawHTTP2Peer.frame(type: 0x1, flags: 0x5, stream: stream, payload: [0x88])
        }
        let thirtyTwo = try RawHTTP2Peer(initial: RawHTTP2Peer.settings(entries: 32), onRequest: answer)
        let fine = try client(thirtyTwo)
        #expect(try await fine.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 5_000_000_000)).status == 200)
        fine.shutdown()

        let thirtyThree = try RawHTTP2Peer(initial: RawHTTP2Peer.settings(entries: 33), onRequest: answer)
        let flooded = try client(thirtyThree)
        await #expect(throws: HTTP2Error.self) {
            try await flooded.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 3_000_000_000))
        }
        try await Self.waitFor { thirtyThree.framesFromClients.contains { $0.type == 0x7 } }
        flooded.shutdown()
        let goaway = thirtyThree.framesFromClients.first { $0.type == 0x7 }
        // GOAWAY's error code, after the last stream id: ENHANCE_YOUR_CALM (11).
        #expect(goaway.map { Array($0.payload[4..<8]) } == [0, 0, 0, 11], "\(thirtyThree.framesFromClients.map(\.type))")
    }

    /// Waits up to 5 s for `condition` (the client's GOAWAY reaches the peer after the request failed).
    static func waitFor(_ condition: () -> Bool) async throws {
        for _ in 0..<50 where !condition() { try await Task.sleep(for: .milliseconds(100)) }
    }
}
