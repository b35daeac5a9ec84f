import HeraldCrypto
import HeraldHTTP2
import Synchronization
import Testing

/// What a server's handler learns about the connection a request came on.
@Suite(.timeLimit(.minutes(1))) struct HTTP2ServerTests {
    /// Answers with the UID of the connection's client certificate (`none` without one), and
    /// drops the connection on `/drop`.
    private static func peer(served: Served = Served()) throws -> HTTP2TestPeer {
        try HTTP2TestPeer(requestClientCertificates: true) { request in
            served.count.add(1, ordering: .relaxed)
            if request.path == "/drop" { return request.connection.abort() }
            let subject = request.connection.peerCertificateSubject
            request.respond(status: 200, headers: [HeaderField("x-uid", subject?.uid ?? "none"),
                                                   HeaderField("x-cn", subject?.commonName ?? "none")])
        }
    }

    private static func issue(_ bundleID: String, by authority: CertificateAuthority) throws -> IssuedCertificate {
        try CertificateAuthority.issueAPNsClientCertificate(bundleID: bundleID, caCertificatePEM: authority.caCertificatePEM,
                                                            caKeyPEM: authority.caKeyPEM)
    }

    @Test func requestsCarryTheClientCertificatesSubjectAcrossAResumedSession() async throws {
        let peer = try Self.peer()
        let client = try peer.client(certificate: try Self.issue("com.example.app", by: peer.authority))
        let first = try await client.send(HTTP2Request(method: "GET", path: "/"))
        #expect(first.header("x-uid") == "com.example.app")
        #expect(first.header("x-cn") == "Apple Push Services: com.example.app")
        await #expect(throws: HTTP2Error.self) { try await client.send(HTTP2Request(method: "GET", path: "/drop")) }
        let second = try await client.send(HTTP2Request(method: "GET", path: "/"))
        #expect(second.header("x-uid") == "com.example.app")
        let statistics = await client.statistics()
        #expect(statistics.connectionsOpened == 2)
        #expect(statistics.resumedSessions == 1, "the second connection resumed the first one's TLS session")
        client.shutdown()
    }

    @Test func aClientWithoutACertificateIsServedWithNoSubject() async throws {
        let peer = try Self.peer()
        let client = try peer.client()
        let response = try await client.send(HTTP2Request(method: "GET", path: "/"))
        #expect(response.status == 200)
        #expect(response.header("x-uid") == "none")
        client.shutdown()
    }

    /// The server refuses it in the TLS handshake, so no request reaches the handler; the
    /// client sees the connection fail (a TLS 1.3 client learns it after its own handshake is
    /// done: the server's alert, or a reset when the server closed with frames unread).
    @Test func aCertificateFromAnotherAuthorityIsNeverServed() async throws {
        let served = Served()
        let peer = try Self.peer(served: served)
        let client = try peer.client(certificate: try Self.issue("com.example.app", by: try CertificateAuthority.generate()))
        await #expect {
            try await client.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 5_000_000_000))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return [.connectionLost, .tlsHandshakeFailed].contains(error.code)
        }
        #expect(served.count.load(ordering: .relaxed) == 0)
        client.shutdown()
    }

    /// A request on an idle connection is not held behind another connection's backlog: the
    /// server reads `readBudgetBytes` from one connection, then turns to the others. Without the
    /// budget the one loop reads the busy connection until its socket is empty, so the idle
    /// connection's request waits for most of the thousand requests (100 µs of work each).
    /// A port learnt before the server is made stays this process's: bound and listening from
    /// the start, served by one server only.
    @Test func aListenerBoundAheadHoldsItsPortForTheServerThatTakesIt() async throws {
        let listener = try HTTP2Listener(host: "127.0.0.1")
        #expect(listener.port > 0)
        #expect(throws: HTTP2Error.self) { try HTTP2Listener(host: "127.0.0.1", port: listener.port) }
        let peer = try HTTP2TestPeer(listener: listener) { request in request.respond(status: 204, headers: []) }
        #expect(peer.server.port == listener.port)
        let client = try peer.client()
        #expect(try await client.send(HTTP2Request(method: "GET", path: "/")).status == 204)
        client.shutdown()
        var configuration = HTTP2Server.Configuration()
        configuration.listener = listener
        let second = HTTP2Server(configuration: configuration,
                                 tls: try TLSContext(serverCertificatePEM: peer.authority.serverCertificatePEM, keyPEM: peer.authority.serverKeyPEM),
                                 group: peer.serverGroup) { request in request.respond(status: 500, headers: []) }
        #expect(throws: HTTP2Error.self) { try second.start() }
    }

    @Test func anIdleConnectionIsNotHeldBehindAnotherConnectionsBacklog() async throws {
        let backlog = Backlog()
        let peer = try HTTP2TestPeer { request in
            if request.path == "/slow" {
                // The first one holds the server's loop until the idle request is on its socket,
                // so what is read next does not depend on how busy the machine is.
                if backlog.slow.load(ordering: .relaxed) == 0 {
                    backlog.holding.store(true, ordering: .relaxed)
                    let limit = ContinuousClock.now + .seconds(10)
                    while !backlog.go.load(ordering: .relaxed) && ContinuousClock.now < limit {}
                }
                let until = ContinuousClock.now + .microseconds(100)
                while ContinuousClock.now < until {}
                backlog.slow.add(1, ordering: .relaxed)
            } else if request.path == "/idle" {
                backlog.slowBeforeIdle.store(backlog.slow.load(ordering: .relaxed), ordering: .relaxed)
            }
            request.respond(status: 200)
        }
        let busy = try peer.client()
        let idle = try peer.client()
        #expect(try await busy.send(HTTP2Request(method: "GET", path: "/")).status == 200)
        #expect(try await idle.send(HTTP2Request(method: "GET", path: "/")).status == 200)
        let body = [UInt8](repeating: 0x61, count: 1024)
        for _ in 0..<1000 { busy.execute(HTTP2Request(path: "/slow", body: body)) { _ in backlog.answered.add(1, ordering: .relaxed) } }
        while !backlog.holding.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(1)) }
        async let idleAnswer = idle.send(HTTP2Request(method: "GET", path: "/idle"))
        try await Task.sleep(for: .milliseconds(500))
        backlog.go.store(true, ordering: .relaxed)
        #expect(try await idleAnswer.status == 200)
        let before = backlog.slowBeforeIdle.load(ordering: .relaxed)
        #expect(before >= 1 && before < 300, "the idle connection's request was read after \(before) of the busy connection's 1,000")
        while backlog.answered.load(ordering: .relaxed) < 1000 { try await Task.sleep(for: .milliseconds(5)) }
        busy.shutdown()
        idle.shutdown()
    }
}

/// What the backlog test's handler counts, on the server's loop.
private final class Backlog: Sendable {
    let slow = Atomic<Int>(0)
    let slowBeforeIdle = Atomic<Int>(-1)
    let answered = Atomic<Int>(0)
    let holding = Atomic<Bool>(false)
    let go = Atomic<Bool>(false)
}

/// Requests the handler saw.
private final class Served: Sendable {
    let count = Atomic<Int>(0)
}
