import HeraldHTTP2
import Synchronization
import Testing

/// Requests gathered and handed to their pools together, against real TLS HTTP/2 servers.
@Suite(.timeLimit(.minutes(1))) struct HTTP2SubmissionsTests {
    /// Paths in the order a server saw them (its handler runs on the server's one loop).
    final class Seen: Sendable {
        let paths = Mutex<[String]>([])
    }

    /// Waits for `count` answers posted to `answers`.
    static func collect(_ count: Int, from answers: AsyncStream<(String, Int)>) async -> [String: Int] {
        var statuses: [String: Int] = [:]
        for await (path, status) in answers {
            statuses[path] = status
            if statuses.count == count { break }
        }
        return statuses
    }

    @Test func nothingIsSentUntilSubmitThenEveryRequestOnceInOrderPerPool() async throws {
        let seenA = Seen(), seenB = Seen()
        let peerA = try HTTP2TestPeer { request in
            seenA.paths.withLock { $0.append(request.path) }
            request.respond(status: 200)
        }
        let peerB = try HTTP2TestPeer { request in
            seenB.paths.withLock { $0.append(request.path) }
            request.respond(status: 202)
        }
        let clientA = try peerA.client(), clientB = try peerB.client()
        // Both pools connected first, so the order below is the order of the streams.
        _ = try await clientA.send(HTTP2Request(method: "GET", path: "/warm"))
        _ = try await clientB.send(HTTP2Request(method: "GET", path: "/warm"))

        let (answers, continuation) = AsyncStream.makeStream(of: (String, Int).self)
        let submissions = HTTP2Submissions()
        for index in 0..<200 {
            let client = index % 3 == 0 ? clientB : clientA
            let path = "/\(index)"
            submissions.add(HTTP2Request(method: "GET", path: path), to: client) { result in
                continuation.yield((path, (try? result.get().status) ?? -1))
            }
        }
        #expect(submissions.count == 200)
        // Given every chance to leak out, none has.
        try await Task.sleep(for: .milliseconds(200))
        #expect(seenA.paths.withLock { $0 } == ["/warm"])
        #expect(seenB.paths.withLock { $0 } == ["/warm"])

        submissions.submit()
        #expect(submissions.count == 0)
        let statuses = await Self.collect(200, from: answers)
        #expect(statuses.count == 200)
        for index in 0..<200 { #expect(statuses["/\(index)"] == (index % 3 == 0 ? 202 : 200)) }
        #expect(seenA.paths.withLock { Array($0.dropFirst()) } == (0..<200).filter { $0 % 3 != 0 }.map { "/\($0)" })
        #expect(seenB.paths.withLock { Array($0.dropFirst()) } == (0..<200).filter { $0 % 3 == 0 }.map { "/\($0)" })

        // Submitting again sends nothing twice.
        submissions.submit()
        try await Task.sleep(for: .milliseconds(100))
        #expect(seenA.paths.withLock { $0.count } == 1 + 133)
        clientA.shutdown()
        clientB.shutdown()
    }

    @Test func aBatchBeyondThePoolsStreamsWaitsAndTimesOutAsSingleRequestsDo() async throws {
        let peer = try HTTP2TestPeer(maxConcurrentStreams: 10) { request in
            if request.path != "/never" { request.respond(status: 200) }
        }
        let client = try peer.client { $0.maxConnections = 1 }
        let (answers, continuation) = AsyncStream.makeStream(of: (String, Int).self)
        let submissions = HTTP2Submissions()
        var request = HTTP2Request(method: "GET", path: "/never")
        request.timeoutNanoseconds = 300_000_000
        submissions.add(request, to: client) { result in
            if case .failure(let error) = result { continuation.yield(("/never", error.code == .timeout ? 408 : -1)) }
        }
        for index in 0..<100 {
            submissions.add(HTTP2Request(method: "GET", path: "/\(index)"), to: client) { result in
                continuation.yield(("/\(index)", (try? result.get().status) ?? -1))
            }
        }
        submissions.submit()
        let statuses = await Self.collect(101, from: answers)
        #expect(statuses["/never"] == 408)
        #expect((0..<100).allSatisfy { statuses["/\($0)"] == 200 })
        client.shutdown()
    }
}
