import Foundation
import Glibc
@testable import HeraldWorker
import HeraldTestSupport
import Testing

@Suite(.timeLimit(.minutes(2))) struct HealthServerTests {
    /// A raw answer and the parts a test looks at.
    struct Answer {
        var bytes: [UInt8]
        var text: String { String(decoding: bytes, as: UTF8.self) }
        var status: Int? {
            let line = text.prefix { $0 != "\r" && $0 != "\n" }.split(separator: " ")
            return line.count >= 2 && line[0].hasPrefix("HTTP/1.1") ? Int(line[1]) : nil
        }
        var body: String {
            guard let range = text.range(of: "\r\n\r\n") else { return "" }
            return String(text[range.upperBound...])
        }
        func header(_ name: String) -> String? {
            for line in text.components(separatedBy: "\r\n").dropFirst() {
                if line.isEmpty { break }
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
            }
            return nil
        }
    }

    /// Connects to 127.0.0.1:`port` on a thread of its own (blocking calls stay off the
    /// cooperative pool, which the server's handler tasks need), sends `request`, and reads to
    /// EOF. Nil when the connection is refused.
    static func exchange(port: Int, _ request: [UInt8], timeoutSeconds: Int = 10) async -> Answer? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: blockingExchange(port: port, request, timeoutSeconds: timeoutSeconds))
            }
        }
    }

    static func exchange(port: Int, _ request: String) async -> Answer? {
        await exchange(port: port, Array(request.utf8))
    }

    private static func blockingExchange(port: Int, _ request: [UInt8], timeoutSeconds: Int) -> Answer? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return nil }
        var offset = 0
        while offset < request.count {
            let sent = request.withUnsafeBytes { send(fd, $0.baseAddress.map { $0 + offset }, request.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { break } // the server may answer (431) and stop reading early
            offset += sent
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return Answer(bytes: received)
    }

    static func makeServer(limits: HealthServerLimits = HealthServerLimits()) -> HealthServer {
        HealthServer(host: "127.0.0.1", port: 0, limits: limits) { path in
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
        let server = Self.makeServer()
        try server.start()
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
        let server = Self.makeServer()
        try server.start()
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
        let server = Self.makeServer()
        try server.start()
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
        var limits = HealthServerLimits()
        limits.idleTimeout = .milliseconds(500)
        let server = Self.makeServer(limits: limits)
        try server.start()
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
        var limits = HealthServerLimits()
        limits.idleTimeout = .milliseconds(300)
        let server = Self.makeServer(limits: limits)
        try server.start()
        defer { server.stop() }
        let started = ContinuousClock.now
        // Sends nothing: the server must close the connection by itself (the client would wait 30 s;
        // the bound is loose for a loaded machine running every suite at once).
        let answer = try #require(await Self.exchange(port: server.port, [], timeoutSeconds: 30))
        #expect(answer.bytes.isEmpty)
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(await Self.exchange(port: server.port, "GET /healthz HTTP/1.1\r\n\r\n")?.status == 200)
    }

    @Test func handlerThatDoesNotAnswerGets503() async throws {
        var limits = HealthServerLimits()
        limits.handlerTimeout = .milliseconds(200)
        let server = Self.makeServer(limits: limits)
        try server.start()
        defer { server.stop() }
        let answer = try #require(await Self.exchange(port: server.port, "GET /hang HTTP/1.1\r\n\r\n"))
        #expect(answer.status == 503)
    }

    @Test func atMost64ConnectionsAreServedAtOnce() async throws {
        // Long idle and head timeouts, so the silent clients keep their slots however slowly a
        // loaded machine runs this test (with the default 5 s they could be dropped meanwhile).
        var limits = HealthServerLimits()
        limits.idleTimeout = .seconds(120)
        limits.headTimeout = .seconds(120)
        let server = Self.makeServer(limits: limits)
        try server.start()
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
        let server = Self.makeServer()
        try server.start()
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
        let server = Self.makeServer()
        try server.start()
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
        do {
            try second.start()
            Issue.record("a second server bound port \(first.port)")
        } catch let error as HealthServerError {
            #expect(error.code == .cannotBind)
            #expect(error.description.contains("127.0.0.1:\(first.port)"))
        }
    }

    @Test func requestLineParsing() {
        func parse(_ text: String) -> HealthServerLoop.Request { HealthServerLoop.parse(head: Array(text.utf8)[...]) }
        #expect(parse("GET /a?b#c HTTP/1.1\r\n\r\n") == .get(path: "/a", head: false))
        #expect(parse("HEAD / HTTP/1.0\n\n") == .get(path: "/", head: true))
        #expect(parse("GET https://h/x/y HTTP/1.1\r\n\r\n") == .get(path: "/x/y", head: false))
        #expect(parse("GET https://h?q HTTP/1.1\r\n\r\n") == .get(path: "/", head: false))
        if case .reject(let status, _) = parse("POST / HTTP/1.1\r\n\r\n") { #expect(status == 405) } else { Issue.record("POST accepted") }
        if case .reject(let status, _) = parse("GET / HTTP/2\r\n\r\n") { #expect(status == 505) } else { Issue.record("HTTP/2 accepted") }
        if case .reject(let status, _) = parse("GET /\r\n\r\n") { #expect(status == 400) } else { Issue.record("HTTP/0.9 accepted") }
        #expect(HealthServerLoop.headEnd(Array("GET / HTTP/1.1\r\nA: b\r\n\r\nbody".utf8), from: 0) == 24)
        #expect(HealthServerLoop.headEnd(Array("GET / HTTP/1.1\r\nA: b\r\n".utf8), from: 0) == nil)
    }
}
