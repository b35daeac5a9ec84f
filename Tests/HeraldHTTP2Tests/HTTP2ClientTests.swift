import Foundation
import HeraldCrypto
import HeraldHTTP2
import HeraldTestSupport
import Synchronization
import Testing

/// Per-phase counts (phase = SETTINGS acknowledgements received), kept on the server's loop.
final class PhaseCounters: @unchecked Sendable {
    var requests = 0
    var maxOpen: [Int: Int] = [:]
    var seen: [Int: Int] = [:]
}

/// Counters a test server's handler keeps on its loop thread.
final class ServerCounters: @unchecked Sendable {
    // Touched only on the server's single event loop.
    var held: [HTTP2ServerRequest] = []
    var maxOpen = 0
}

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
        // Larger than every flow-control window's first grant: both directions must flow.
        let big = (0..<300_000).map { UInt8($0 % 251) }
        let echoed = try await client.send(HTTP2Request(path: "/big", body: big))
        #expect(echoed.body == big.reversed())
        client.shutdown()
    }

    /// 600 requests held open by the server at once on a single connection.
    @Test func carriesMoreThanFiveHundredStreamsOnOneConnection() async throws {
        let counters = ServerCounters()
        let peer = try HTTP2TestPeer(maxConcurrentStreams: 1000) { request in
            counters.held.append(request)
            counters.maxOpen = max(counters.maxOpen, request.connection.openStreams)
            if counters.held.count == 600 {
                for held in counters.held { held.respond(status: 200) }
                counters.held.removeAll()
            }
        }
        let client = try peer.client(maxConnections: 1)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<600 {
                group.addTask { try await client.send(HTTP2Request(method: "GET", path: "/hold/\(index)")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.count == 600 && statuses.allSatisfy { $0 == 200 })
        let statistics = await client.statistics()
        #expect(statistics.maxStreamsInFlightOnOneConnection >= 600)
        #expect(statistics.connectionsOpened == 1)
        #expect(counters.maxOpen == 600)
        client.shutdown()
    }

    /// The server starts at 1 stream (as APNs does before a valid token), raises to 40, then
    /// lowers to 8: once the client acknowledged a setting it never has more streams open.
    @Test func honoursChangesOfMaxConcurrentStreams() async throws {
        let counters = PhaseCounters()
        let peer = try HTTP2TestPeer(maxConcurrentStreams: 1000, onConnection: { $0.setMaxConcurrentStreams(1) }) { request in
            let connection = request.connection
            counters.requests += 1
            let phase = min(connection.settingsAcknowledgements, 3)
            counters.maxOpen[phase] = max(counters.maxOpen[phase, default: 0], connection.openStreams)
            counters.seen[phase, default: 0] += 1
            if counters.requests == 1 { connection.setMaxConcurrentStreams(40) }
            if counters.requests == 400 { connection.setMaxConcurrentStreams(8) }
            request.responseDelayNanoseconds = 2_000_000  // let streams pile up
            request.respond(status: 200)
        }
        let client = try peer.client(maxConnections: 1)
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<1000 {
                group.addTask { try await client.send(HTTP2Request(method: "GET", path: "/r/\(index)")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 1000 && results.allSatisfy { $0 == 200 })
        #expect(counters.maxOpen[1, default: 0] <= 1, "initial setting of 1 exceeded: \(counters.maxOpen)")
        #expect(counters.maxOpen[2, default: 0] <= 40 && counters.maxOpen[2, default: 0] > 8, "raise to 40: \(counters.maxOpen)")
        #expect(counters.maxOpen[3, default: 0] <= 8, "lowered to 8: \(counters.maxOpen)")
        #expect(counters.seen[3, default: 0] > 100)
        client.shutdown()
    }

    /// A stream the server never answers fails at its deadline; the connection stays usable.
    @Test func silentStreamTimesOutAtItsDeadline() async throws {
        let peer = try HTTP2TestPeer { request in
            if request.path != "/silent" { request.respond(status: 204) }
        }
        let client = try peer.client()
        let started = Date()
        await #expect {
            try await client.send(HTTP2Request(method: "GET", path: "/silent", timeoutNanoseconds: 300_000_000))
        } throws: { error in
            (error as? HTTP2Error)?.code == .timeout
        }
        let elapsed = Date().timeIntervalSince(started)
        // Not before the deadline; and before the 30 s default, so the request's own deadline
        // fired (the slack is for a loaded machine running every suite at once: 22 s was seen
        // with four other builds running).
        #expect(elapsed >= 0.3 && elapsed < 28, "timed out after \(elapsed) s")
        #expect(try await client.send(HTTP2Request(method: "GET", path: "/ok")).status == 204)
        #expect(await client.statistics().connectionsOpened == 1)
        client.shutdown()
    }

    /// Deadlines read the loop's clock: with the server holding its one stream, a request
    /// waiting for it and the one in flight both fail once the clock passes their ten-minute
    /// deadlines, in well under ten real minutes. The waiting one fails even though the held
    /// stream frees in the same tick: past its deadline, a request is not sent.
    @Test func deadlinesFollowTheLoopClock() async throws {
        let clock = ManualLoopClock()
        let peer = try HTTP2TestPeer(maxConcurrentStreams: 1, clientClock: clock) { request in
            if request.path != "/hold" { request.respond(status: 204) }
        }
        let client = try peer.client()
        let minutes10: UInt64 = 600_000_000_000
        @Sendable func failure(_ path: String) async -> HTTP2Error? {
            do {
                _ = try await client.send(HTTP2Request(method: "GET", path: path, timeoutNanoseconds: minutes10))
                return nil
            } catch {
                return error
            }
        }
        async let held = failure("/hold")
        try await Task.sleep(for: .milliseconds(50))
        async let queued = failure("/queued")
        let started = ContinuousClock.now
        while await client.statistics().waiting < 1, ContinuousClock.now - started < .seconds(20) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let beforeDeadline = await client.statistics()
        #expect(beforeDeadline.inFlight == 1 && beforeDeadline.waiting == 1)
        clock.advance(by: minutes10 + 1)
        client.loop.execute {}
        let (heldError, queuedError) = await (held, queued)
        #expect(queuedError?.message == "no stream became free within the request's deadline")
        #expect(heldError?.code == .timeout)
        #expect(ContinuousClock.now - started < .seconds(60))
        client.shutdown()
    }

    /// The server resets the TCP connection under a request: the request fails as retryable,
    /// and the next request goes over a new connection.
    @Test func droppedConnectionIsReestablished() async throws {
        let peer = try HTTP2TestPeer { request in
            if request.path == "/drop" {
                request.connection.abort()
            } else {
                request.respond(status: 200)
            }
        }
        let client = try peer.client()
        #expect(try await client.send(HTTP2Request(method: "GET", path: "/before")).status == 200)
        await #expect {
            try await client.send(HTTP2Request(method: "GET", path: "/drop"))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.code == .connectionLost && error.isRetryable
        }
        #expect(try await client.send(HTTP2Request(method: "GET", path: "/after")).status == 200)
        let statistics = await client.statistics()
        #expect(statistics.connectionsOpened == 2)
        #expect(statistics.openConnections == 1)
        // The new connection resumed the first one's TLS session.
        #expect(statistics.resumedSessions == 1)
        client.shutdown()
    }

    @Test func refusedConnectionsFailFastAndRetryable() async throws {
        var configuration = HTTP2Client.Configuration(host: "127.0.0.1", port: try TestPorts.free())
        configuration.maxConnections = 1
        let loop = try EventLoop()
        let client = HTTP2Client(configuration: configuration, tls: try TLSContext(client: nil), loop: loop)
        await #expect {
            try await client.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 5_000_000_000))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.code == .connectFailed && error.isRetryable
        }
        client.shutdown()
        loop.shutdown()
    }

    @Test func untrustedServerFailsTheHandshake() async throws {
        let peer = try HTTP2TestPeer { $0.respond(status: 200) }
        var configuration = HTTP2Client.Configuration(host: "127.0.0.1", port: peer.server.port)
        configuration.maxConnections = 1
        // The system trust store does not know the test CA.
        let client = HTTP2Client(configuration: configuration, tls: try TLSContext(client: nil), loop: peer.clientLoop)
        await #expect {
            try await client.send(HTTP2Request(method: "GET", path: "/"))
        } throws: { error in
            (error as? HTTP2Error)?.message.contains("certificate") == true
        }
        client.shutdown()
    }
}
