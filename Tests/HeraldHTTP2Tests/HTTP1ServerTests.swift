import Foundation
import Glibc
@testable import HeraldHTTP2
import HeraldTestSupport
import Testing

/// An ``HTTP1Server`` on a loop of its own, as the worker runs it.
final class TestHTTP1Server: Sendable {
    let server: HTTP1Server
    let port: Int

    init(limits: HTTP1Server.Limits, handler: @escaping HTTP1Server.Handler) throws {
        server = HTTP1Server(loop: try EventLoop(name: "test-http1"), limits: limits, handler: handler)
        port = try server.start(host: "127.0.0.1", port: 0)
    }

    func stop() {
        server.stop()
        server.loop.shutdown()
    }
}

@Suite(.timeLimit(.minutes(2))) struct HTTP1ServerTests {
    typealias Answer = PlainHTTP.Answer

    static func exchange(port: Int, _ request: [UInt8], timeoutSeconds: Int = 60) async -> Answer? {
        await PlainHTTP.exchange(port: port, request, timeoutSeconds: timeoutSeconds)
    }

    static func exchange(port: Int, _ request: String) async -> Answer? {
        await PlainHTTP.exchange(port: port, request)
    }

    static func makeServer(limits: HTTP1Server.Limits = HTTP1Server.Limits()) throws -> TestHTTP1Server {
        try TestHTTP1Server(limits: limits) { path in
            switch path {
            case "/healthz": return .init(status: 200, body: "ok\n")
            case "/slow":
                try? await Task.sleep(for: .milliseconds(20))
                return .init(status: 200, body: "slow\n")
            case "/echo": return .init(status: 200, body: path)
            case "/hang":
                try? await Task.sleep(for: .seconds(3))
                return .init(status: 200, body: "too late\n")
            case "/metrics": return .init(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: "herald_in_flight 3\n")
            default: return .init(status: 404, body: "no such path: \(path)\n")
            }
        }
    }

    @Test func getHealthzAnswersWithBodyAndHeaders() async throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        #expect(server.port > 0)
        let answer = try #require(await Self.exchange(port: server.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(answer.status == 200)
        #expect(answer.body == "ok\n")
        #expect(answer.header("Content-Length") == "3")
        #expect(answer.header("Connection") == "close")
        #expect(answer.header("Content-Type") == "text/plain; charset=utf-8")

        let head = try #require(await Self.exchange(port: server.port, "HEAD /healthz HTTP/1.1\r\n\r\n"))
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "3")
        #expect(head.body == "")

        // The handler sees the path without the query string; absolute-form targets work too.
        let query = try #require(await Self.exchange(port: server.port, "GET /echo?x=1&y=2 HTTP/1.0\r\n\r\n"))
        #expect(query.body == "/echo")
        let absolute = try #require(await Self.exchange(port: server.port, "GET http://localhost:9090/echo?z HTTP/1.1\r\n\r\n"))
        #expect(absolute.body == "/echo")
    }

    @Test func unknownPathIsTheHandlers404AndOtherMethodsAre405() async throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        let missing = try #require(await Self.exchange(port: server.port, "GET /nope HTTP/1.1\r\n\r\n"))
        #expect(missing.status == 404)
        #expect(missing.body == "no such path: /nope\n")

        for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
            let refused = try #require(await Self.exchange(port: server.port, "\(method) /healthz HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"))
            #expect(refused.status == 405, "\(method)")
            #expect(refused.header("Allow") == "GET, HEAD")
            #expect(refused.header("Content-Length").flatMap(Int.init) == refused.body.utf8.count)
        }
    }

    @Test func oversizeHeadIs431() async throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        // A head just under the limit is fine…
        let fits = "GET /healthz HTTP/1.1\r\nX-Pad: " + String(repeating: "a", count: 8000) + "\r\n\r\n"
        #expect(await Self.exchange(port: server.port, fits)?.status == 200)
        // …one over it is refused, whether or not it ever ends.
        let endless = "GET /healthz HTTP/1.1\r\nX-Pad: " + String(repeating: "a", count: 20_000)
        let refused = try #require(await Self.exchange(port: server.port, endless))
        #expect(refused.status == 431)
        let ended = "GET /healthz HTTP/1.1\r\nX-Pad: " + String(repeating: "a", count: 9000) + "\r\n\r\n"
        #expect(await Self.exchange(port: server.port, ended)?.status == 431)
    }

    @Test func garbageDoesNotCrashAndTheServerStillAnswers() async throws {
        // Inputs without a blank line wait for the idle timeout; a short one keeps the test quick.
        var limits = HTTP1Server.Limits()
        limits.idleTimeout = .milliseconds(500)
        let server = try Self.makeServer(limits: limits)
        defer { server.stop() }
        var generator = SystemRandomNumberGenerator()
        var inputs: [[UInt8]] = [
            Array("\r\n\r\n".utf8),
            Array("GET\r\n\r\n".utf8),
            Array("GET  / HTTP/1.1\r\n\r\n".utf8),
            Array("GET / HTTP/9.9\r\n\r\n".utf8),
            Array("GET / SPDY/3\r\n\r\n".utf8),
            Array("GET nopath HTTP/1.1\r\n\r\n".utf8),
            Array("GET http:// HTTP/1.1\r\n\r\n".utf8),
            [0x00, 0xFF, 0xFE, 0x20, 0x2F, 0x20, 0x0A, 0x0A],
            Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8),
            Array("\u{16}\u{03}\u{01}\u{02}\u{00}".utf8), // a TLS ClientHello's start, then EOF
        ]
        for _ in 0..<20 {
            var bytes = (0..<Int.random(in: 1...600, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes += [0x0D, 0x0A, 0x0D, 0x0A]
            inputs.append(bytes)
        }
        for input in inputs {
            let answer = await Self.exchange(port: server.port, input, timeoutSeconds: 10)
            // Either a 4xx/5xx answer or a closed connection; never a handler call, never a crash.
            if let status = answer?.status { #expect((400...599).contains(status), "\(input.prefix(16))") }
        }
        let answer = try #require(await Self.exchange(port: server.port, "GET /healthz HTTP/1.1\r\n\r\n"))
        #expect(answer.status == 200)
        #expect(answer.body == "ok\n")
    }

    @Test func silentClientIsDropped() async throws {
        var limits = HTTP1Server.Limits()
        limits.idleTimeout = .milliseconds(300)
        limits.headTimeout = .seconds(600) // only the idle timeout can close this connection
        let server = try Self.makeServer(limits: limits)
        defer { server.stop() }
        // Sends nothing: the server must close the connection by itself. The client waits up to
        // 60 s and tells the server's close (EOF) from its own timeout, so a loaded machine running
        // every suite at once slows the test down but cannot fail it, and a server that never closes
        // still does.
        let answer = try #require(await Self.exchange(port: server.port, [], timeoutSeconds: 60))
        #expect(answer.bytes.isEmpty)
        #expect(answer.closedByPeer)
        #expect(await Self.exchange(port: server.port, "GET /healthz HTTP/1.1\r\n\r\n")?.status == 200)
    }

    @Test func handlerThatDoesNotAnswerGets503() async throws {
        var limits = HTTP1Server.Limits()
        limits.handlerTimeout = .milliseconds(200)
        let server = try Self.makeServer(limits: limits)
        defer { server.stop() }
        let answer = try #require(await Self.exchange(port: server.port, "GET /hang HTTP/1.1\r\n\r\n"))
        #expect(answer.status == 503)
    }

    @Test func atMost64ConnectionsAreServedAtOnce() async throws {
        // Long idle and head timeouts, so the silent clients keep their slots however slowly a
        // loaded machine runs this test (with the default 5 s they could be dropped meanwhile).
        var limits = HTTP1Server.Limits()
        limits.idleTimeout = .seconds(120)
        limits.headTimeout = .seconds(120)
        let server = try Self.makeServer(limits: limits)
        defer { server.stop() }
        let port = server.port
        // 64 silent clients fill every slot; the 65th waits in the listen backlog, behind them,
        // and is not answered meanwhile.
        let silent: [Int32] = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var fds: [Int32] = []
                for _ in 0..<64 {
                    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                    var address = sockaddr_in()
                    address.sin_family = sa_family_t(AF_INET)
                    address.sin_addr.s_addr = inet_addr("127.0.0.1")
                    address.sin_port = UInt16(port).bigEndian
                    _ = withUnsafePointer(to: &address) { pointer in
                        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                    }
                    fds.append(fd)
                }
                continuation.resume(returning: fds)
            }
        }
        let waiting = await Self.exchange(port: port, Array("GET /healthz HTTP/1.1\r\n\r\n".utf8), timeoutSeconds: 1)
        #expect(waiting?.bytes.isEmpty == true, "answered while 64 connections were open")
        // Once they go away, the server serves again.
        for fd in silent { close(fd) }
        #expect(await Self.exchange(port: port, "GET /healthz HTTP/1.1\r\n\r\n")?.status == 200)
    }

    @Test func hundredConcurrentRequestsAreAllAnswered() async throws {
        let server = try Self.makeServer()
        defer { server.stop() }
        let port = server.port
        let statuses = await withTaskGroup(of: Int?.self) { group in
            for index in 0..<100 {
                group.addTask {
                    await Self.exchange(port: port, index % 2 == 0 ? "GET /slow HTTP/1.1\r\n\r\n" : "GET /healthz HTTP/1.1\r\n\r\n")?.status
                }
            }
            var collected: [Int?] = []
            for await status in group { collected.append(status) }
            return collected
        }
        #expect(statuses.count == 100)
        #expect(statuses.allSatisfy { $0 == 200 })
    }

    @Test func curlGetsMetrics() async throws {
        guard let curl = Subprocess.which("curl") else { return }
        let server = try Self.makeServer()
        defer { server.stop() }
        // The handler runs on Swift's cooperative pool, two threads on these machines, shared
        // with every suite running in parallel: 10 s without an answer was seen under that load.
        let result = try await Subprocess.runDetached(curl, ["-sS", "-i", "--max-time", "40", "http://127.0.0.1:\(server.port)/metrics?from=prometheus"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(result.stdout.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        #expect(result.stdout.hasSuffix("\r\n\r\nherald_in_flight 3\n"))
        let post = try await Subprocess.runDetached(curl, ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "--max-time", "40", "http://127.0.0.1:\(server.port)/healthz"])
        #expect(post.stdout == "405")
    }
}
