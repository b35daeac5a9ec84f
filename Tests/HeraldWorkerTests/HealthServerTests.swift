import HeraldHTTP2
@testable import HeraldWorker
import HeraldTestSupport
import Testing

/// The worker's health endpoint as a whole: an ``HTTP1Server`` on a loop of its own, its
/// lifecycle and its errors (the server's behaviour is `HTTP1ServerTests`').
@Suite(.timeLimit(.minutes(2))) struct HealthServerTests {
    static func makeServer() -> HealthServer {
        HealthServer(host: "127.0.0.1", port: 0) { path in
            path == "/healthz" ? .init(status: 200, body: "ok\n") : .init(status: 404, body: "not found\n")
        }
    }

    static func exchange(port: Int, _ request: String) async -> PlainHTTP.Answer? {
        await PlainHTTP.exchange(port: port, request)
    }

    @Test func servesOnAnEphemeralPortOfItsOwn() async throws {
        let server = Self.makeServer()
        #expect(server.port == 0)
        try server.start()
        defer { server.stop() }
        #expect(server.port > 0)
        let answer = try #require(await Self.exchange(port: server.port, "GET /healthz HTTP/1.1\r\n\r\n"))
        #expect(answer.status == 200 && answer.body == "ok\n")
    }

    @Test func stopClosesTheListenerAndIsIdempotent() async throws {
        let server = Self.makeServer()
        try server.start()
        let port = server.port
        #expect(await Self.exchange(port: port, "GET /healthz HTTP/1.1\r\n\r\n")?.status == 200)
        server.stop()
        server.stop()
        #expect(await Self.exchange(port: port, "GET /healthz HTTP/1.1\r\n\r\n") == nil)
        #expect(throws: HealthServerError.self) { try server.start() }
    }

    @Test func portInUseIsAClearError() throws {
        let first = Self.makeServer()
        try first.start()
        defer { first.stop() }
        let second = HealthServer(host: "127.0.0.1", port: first.port) { _ in .init(status: 200, body: "") }
        #expect {
            try second.start()
        } throws: { error in
            guard let error = error as? HealthServerError else { return false }
            return error.code == .cannotBind && error.description.contains("127.0.0.1:\(first.port)")
        }
    }

    @Test func aBadPortOrHostIsAClearError() {
        for (host, port) in [("127.0.0.1", 70_000), ("no-such-host.invalid", 0)] {
            let server = HealthServer(host: host, port: port) { _ in .init(status: 200, body: "") }
            #expect {
                try server.start()
            } throws: { error in
                guard let error = error as? HealthServerError else { return false }
                return error.code == .cannotBind && error.description.contains(host)
            }
        }
    }
}
