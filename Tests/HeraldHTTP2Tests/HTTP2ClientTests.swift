import Foundation
import HeraldCrypto
import HeraldHTTP2
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(2))) struct HTTP2ClientTests {
    @Test func roundTripsRequestsWithBodies() async throws {
        let peer = try HTTP2TestPeer { request in
            request.respond(status: 200, headers: [HeaderField("x-path", request.path)], body: request.body.reversed())
        }
        let client = try peer.client()
        let response = try await client.send(HTTP2Request(path: "/echo", headers: [HeaderField("content-type", "text/plain")], body: Array("hello".utf8)))
        #expect(response.status == 200)
        #expect(response.header("x-path") == "/echo")
        #expect(String(decoding: response.body, as: UTF8.self) == "olleh")
        let big = (0..<300_000).map { UInt8($0 % 251) }
        let echoed = try await client.send(HTTP2Request(path: "/big", body: big))
        #expect(echoed.body == big.reversed())
        client.shutdown()
    }
}
