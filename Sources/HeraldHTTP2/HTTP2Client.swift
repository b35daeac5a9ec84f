import Dispatch
import Glibc
public import HeraldCrypto

/// A pool of HTTP/2 connections to one origin (host, port, TLS credential), on one event loop.
///
/// Requests go to a ready connection with a free stream (never more than the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, which may change at any time); when every connection is
/// saturated the pool opens another, up to `maxConnections`, and otherwise the request waits,
/// bounded by its deadline. Requests the server never processed (REFUSED_STREAM, above a
/// GOAWAY's last stream id) are sent again transparently; requests that may have been processed
/// fail with a retryable error, so the caller decides. Failed connects back off exponentially
/// with jitter.
///
/// `@unchecked Sendable`: all mutable state is touched only on `loop`'s thread; public methods
/// hop there.
public final class HTTP2Client: @unchecked Sendable, HTTP2ClientConnectionOwner {
    /// Pool settings.
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// TLS server name (SNI and certificate check); defaults to `host`.
        public var serverName: String?
        public var maxConnections: Int = 4
        public var connectTimeoutNanoseconds: UInt64 = 10_000_000_000
        /// Idle time before a PING (APNs: about an hour; connections stay open for hours).
        public var pingIntervalNanoseconds: UInt64 = 3_600_000_000_000
        public var pingTimeoutNanoseconds: UInt64 = 20_000_000_000
        /// The most transparent resends of one request.
        public var maxTransparentRetries = 8
        /// Flow-control window per stream (the connection's is 16 times this).
        public var initialWindowSize: UInt32 = 1 << 20
        public var reconnectBaseNanoseconds: UInt64 = 100_000_000
        public var reconnectMaxNanoseconds: UInt64 = 30_000_000_000

        /// Creates a configuration.
        public init(host: String, port: Int, serverName: String? = nil) {
            self.host = host
            self.port = port
            self.serverName = serverName
        }
    }

    /// Figures for metrics and tests.
    public struct Statistics: Sendable, Equatable {
        public var openConnections = 0
        public var connectionsOpened = 0
        public var connectFailures = 0
        public var transparentRetries = 0
        /// Connections whose TLS handshake resumed an earlier session.
        public var resumedSessions = 0
        public var inFlight = 0
        public var waiting = 0
        /// The highest number of streams in flight on one connection seen so far.
        public var maxStreamsInFlightOnOneConnection = 0
    }

    public let configuration: Configuration
    public let loop: EventLoop
    private let tls: TLSContext

    // loop thread only
    private var connections: [HTTP2ClientConnection] = []
    private var connecting = 0
    private var waiting: [PendingRequest] = []
    private var waitingHead = 0
    private var consecutiveConnectFailures = 0
    private var reconnectNotBefore: UInt64 = 0
    private var statistics = Statistics()
    private var sweepTimer: UInt64?
    private var isShutdown = false
    private var resolvedAddress: [UInt8]?
    /// The last TLS session, offered to the next connection (resumption).
    private var tlsSession: TLSSession?

    /// Creates a pool; connections open on demand.
    public init(configuration: Configuration, tls: TLSContext, loop: EventLoop) {
        self.configuration = configuration
        self.tls = tls
        self.loop = loop
    }

    // MARK: public API (any thread)

    /// Sends `request`; `completion` runs on the pool's event loop.
    public func execute(_ request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void) {
        if loop.inEventLoop {
            executeOnLoop(request, completion: completion)
        } else {
            loop.execute { self.executeOnLoop(request, completion: completion) }
        }
    }

    /// Sends `request` and waits for the answer.
    public func send(_ request: HTTP2Request) async throws(HTTP2Error) -> HTTP2Response {
        let result: Result<HTTP2Response, HTTP2Error> = await withCheckedContinuation { continuation in
            execute(request) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Current figures.
    public func statistics() async -> Statistics {
        await withCheckedContinuation { continuation in
            loop.execute { continuation.resume(returning: self.currentStatistics()) }
        }
    }

    /// Closes every connection after its streams finish; waiting requests fail.
    public func shutdown() {
        loop.execute {
            self.isShutdown = true
            if let sweepTimer = self.sweepTimer { self.loop.cancelTimer(sweepTimer) }
            self.failWaiting(HTTP2Error(.shutdown, "the client was shut down"))
            self.connections.forEach { $0.drain() }
        }
    }

    // MARK: loop thread

    /// Sends `request` from the loop's own thread (the fast path for closed-loop load).
    public func executeOnLoop(_ request: HTTP2Request, completion: @escaping (Result<HTTP2Response, HTTP2Error>) -> Void) {
        guard !isShutdown else {
            completion(.failure(HTTP2Error(.shutdown, "the client was shut down")))
            return
        }
        let pending = PendingRequest(request: request, deadline: loop.now + request.timeoutNanoseconds, completion: completion)
        dispatch(pending, front: false)
        startSweeping()
    }

    func currentStatistics() -> Statistics {
        var result = statistics
        result.openConnections = connections.filter { $0.state != .closed }.count
        result.inFlight = connections.reduce(0) { $0 + $1.inFlight }
        result.waiting = waiting.count - waitingHead
        return result
    }

    private func dispatch(_ request: PendingRequest, front: Bool) {
        if waiting.count == waitingHead, let connection = connectionWithCapacity() {
            connection.submit(request)
            noteInFlight(connection)
            return
        }
        if front {
            if waitingHead > 0 {
                waitingHead -= 1
                waiting[waitingHead] = request
            } else {
                waiting.insert(request, at: 0)
            }
        } else {
            waiting.append(request)
        }
        openConnectionIfNeeded()
    }

    private func connectionWithCapacity() -> HTTP2ClientConnection? {
        var best: HTTP2ClientConnection?
        for connection in connections where connection.hasCapacity {
            if let current = best, current.inFlight <= connection.inFlight { continue }
            best = connection
        }
        return best
    }

    private func noteInFlight(_ connection: HTTP2ClientConnection) {
        if connection.inFlight > statistics.maxStreamsInFlightOnOneConnection {
            statistics.maxStreamsInFlightOnOneConnection = connection.inFlight
        }
    }

    private func drainWaiting() {
        while waitingHead < waiting.count, let connection = connectionWithCapacity() {
            let request = waiting[waitingHead]
            waitingHead += 1
            if request.completed { continue }
            connection.submit(request)
            noteInFlight(connection)
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 4096 {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    private func openConnectionIfNeeded() {
        guard !isShutdown else { return }
        let live = connections.filter { $0.state != .closed && !$0.goingAway }
        // Open another only when every live connection is saturated.
        guard live.allSatisfy({ !$0.hasCapacity }), connecting == 0, live.count < configuration.maxConnections else { return }
        let now = loop.now
        if now < reconnectNotBefore {
            connecting += 1
            loop.scheduleTimer(afterNanoseconds: reconnectNotBefore - now) { [self] in
                connecting -= 1
                openConnectionIfNeeded()
            }
            return
        }
        connecting += 1
        if let resolvedAddress {
            connect(to: resolvedAddress)
            return
        }
        let host = configuration.host
        let port = configuration.port
        DispatchQueue.global().async {
            let result = Result { () throws(HTTP2Error) in try Socket.resolve(host, port: port) }
            self.loop.execute {
                switch result {
                case .success(let address):
                    self.resolvedAddress = address
                    self.connect(to: address)
                case .failure(let error):
                    self.connecting -= 1
                    self.connectFailed(error)
                }
            }
        }
    }

    private func connect(to address: [UInt8]) {
        do throws(HTTP2Error) {
            let fd = try Socket.connect(address: address)
            let stream: TLSStream
            do {
                stream = try TLSStream(context: tls, fileDescriptor: fd, serverName: configuration.serverName ?? configuration.host)
                if let tlsSession { stream.resume(tlsSession) }
            } catch {
                close(fd)
                throw HTTP2Error(.tlsHandshakeFailed, error.message)
            }
            let authority = configuration.port == 443 ? configuration.host : "\(configuration.host):\(configuration.port)"
            let connection = HTTP2ClientConnection(loop: loop, fd: fd, tls: stream, authority: authority,
                                                   initialWindowSize: configuration.initialWindowSize)
            connection.owner = self
            connections.append(connection)
            statistics.connectionsOpened += 1
            connection.start()
            let timeout = configuration.connectTimeoutNanoseconds
            loop.scheduleTimer(afterNanoseconds: timeout) { [weak connection] in
                guard let connection, !connection.ready, connection.state != .closed else { return }
                connection.close(HTTP2Error(.connectFailed, "no HTTP/2 connection within \(timeout / 1_000_000) ms"))
            }
        } catch {
            connecting -= 1
            connectFailed(error)
        }
    }

    private func connectFailed(_ error: HTTP2Error) {
        statistics.connectFailures += 1
        consecutiveConnectFailures += 1
        resolvedAddress = nil  // an uncached lookup before the next connect, as Apple asks
        let exponent = min(consecutiveConnectFailures - 1, 20)
        let base = min(configuration.reconnectMaxNanoseconds, configuration.reconnectBaseNanoseconds << UInt64(exponent))
        let jittered = UInt64(Double(base) * Double.random(in: 0.5...1.5))
        reconnectNotBefore = loop.now + jittered
        // With no connection at all, the waiting requests learn now rather than at their deadline.
        if !connections.contains(where: { $0.state != .closed }) {
            failWaiting(error)
        }
    }

    private func failWaiting(_ error: HTTP2Error) {
        let failed = waiting[waitingHead...]
        waiting.removeAll()
        waitingHead = 0
        for request in failed { request.finish(.failure(error)) }
    }

    private func startSweeping() {
        guard sweepTimer == nil, !isShutdown else { return }
        sweepTimer = loop.scheduleTimer(afterNanoseconds: 50_000_000) { [self] in
            sweepTimer = nil
            sweep()
        }
    }

    private func sweep() {
        let now = loop.now
        for connection in connections {
            connection.sweep(now: now, pingIntervalNanoseconds: configuration.pingIntervalNanoseconds,
                             pingTimeoutNanoseconds: configuration.pingTimeoutNanoseconds)
        }
        var kept: [PendingRequest] = []
        for request in waiting[waitingHead...] {
            if request.completed { continue }
            if request.deadline <= now {
                request.finish(.failure(HTTP2Error(.timeout, "no stream became free within the request's deadline")))
            } else {
                kept.append(request)
            }
        }
        waiting = kept
        waitingHead = 0
        if !connections.isEmpty || !waiting.isEmpty { startSweeping() }
    }

    // MARK: HTTP2ClientConnectionOwner

    func connectionBecameReady(_ connection: HTTP2ClientConnection) {
        connecting -= 1
        if connection.tls.resumed { statistics.resumedSessions += 1 }
        tlsSession = connection.tls.session
        consecutiveConnectFailures = 0
        reconnectNotBefore = 0
        drainWaiting()
        if waitingHead < waiting.count { openConnectionIfNeeded() }
    }

    func connectionHasCapacity(_ connection: HTTP2ClientConnection) {
        drainWaiting()
    }

    func retry(_ requests: [PendingRequest]) {
        for request in requests.reversed() {
            request.retries += 1
            statistics.transparentRetries += 1
            if request.retries > configuration.maxTransparentRetries {
                request.finish(.failure(HTTP2Error(.streamReset(7), "refused \(request.retries) times")))
            } else {
                dispatch(request, front: true)
            }
        }
    }

    func connectionClosed(_ connection: HTTP2ClientConnection, error: HTTP2Error, wasReady: Bool) {
        connections.removeAll { $0 === connection }
        if !wasReady {
            connecting -= 1
            connectFailed(error)
        }
        if waitingHead < waiting.count { openConnectionIfNeeded() }
    }
}
