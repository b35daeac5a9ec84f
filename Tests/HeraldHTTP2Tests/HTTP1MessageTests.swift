@testable import HeraldHTTP2
import Testing

@Suite struct HTTP1MessageTests {
    @Test func requestLineParsing() {
        func parse(_ text: String) -> HTTP1Message.Request { HTTP1Message.parse(head: Array(text.utf8)[...]) }
        #expect(parse("GET /a?b#c HTTP/1.1\r\n\r\n") == .get(path: "/a", head: false))
        #expect(parse("HEAD / HTTP/1.0\n\n") == .get(path: "/", head: true))
        #expect(parse("GET https://h/x/y HTTP/1.1\r\n\r\n") == .get(path: "/x/y", head: false))
        #expect(parse("GET https://h?q HTTP/1.1\r\n\r\n") == .get(path: "/", head: false))
        if case .reject(let status, _) = parse("POST / HTTP/1.1\r\n\r\n") { #expect(status == 405) } else { Issue.record("POST accepted") }
        if case .reject(let status, _) = parse("GET / HTTP/2\r\n\r\n") { #expect(status == 505) } else { Issue.record("HTTP/2 accepted") }
        if case .reject(let status, _) = parse("GET /\r\n\r\n") { #expect(status == 400) } else { Issue.record("HTTP/0.9 accepted") }
        #expect(HTTP1Message.headEnd(Array("GET / HTTP/1.1\r\nA: b\r\n\r\nbody".utf8), from: 0) == 24)
        #expect(HTTP1Message.headEnd(Array("GET / HTTP/1.1\r\nA: b\r\n".utf8), from: 0) == nil)
    }

    @Test func answersCarryLengthCloseAndNoInjectedHeaders() {
        let text = String(decoding: HTTP1Message.encode(HTTP1Response(status: 200, contentType: "text/plain\r\nX-Evil: 1", body: "ok\n"), includeBody: true), as: UTF8.self)
        #expect(text == "HTTP/1.1 200 OK\r\nContent-Type: text/plainX-Evil: 1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        let head = String(decoding: HTTP1Message.encode(HTTP1Response(status: 405, body: "no\n"), includeBody: false), as: UTF8.self)
        #expect(head.hasSuffix("Content-Length: 3\r\nAllow: GET, HEAD\r\nConnection: close\r\n\r\n"))
        #expect(String(decoding: HTTP1Message.encode(HTTP1Response(status: 42, body: ""), includeBody: true), as: UTF8.self).hasPrefix("HTTP/1.1 500 "))
    }
}
