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
/// The decisions are ``HTTP2PoolStateMachine``'s; this class performs them: it opens and closes
/// connections, submits streams, runs timers on the loop's clock and completes requests.
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
        /// Connections attempted (a refused or timed-out one counts too).
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
    private var machine: HTTP2PoolStateMachine<PendingRequest>
    private var connections: [HTTP2PoolStateMachine<PendingRequest>.ConnectionID: HTTP2ClientConnection] = [:]
    private var resumedSessions = 0
    private var resolvedAddress: [UInt8]?
    /// The last TLS session, offered to the next connection (resumption).
    private var tlsSession: TLSSession?

    /// Creates a pool; connections open on demand.
    public init(configuration: Configuration, tls: TLSContext, loop: EventLoop) {
        self.configuration = configuration
        self.tls = tls
        self.loop = loop
        machine = HTTP2PoolStateMachine(configuration: .init(
            maxConnections: max(1, configuration.maxConnections), connectTimeout: configuration.connectTimeoutNanoseconds,
            reconnectBase: configuration.reconnectBaseNanoseconds, reconnectMax: configuration.reconnectMaxNanoseconds,
            maxTransparentRetries: configuration.maxTransparentRetries))
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

    /// A request and what to call with its answer, for a batch sent with one hop onto the loop.
    public struct Submission: Sendable {
        public var request: HTTP2Request
        public var completion: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void

        public init(request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void) {
            self.request = request
            self.completion = completion
        }
    }

    /// Sends every request of `batch` as ``execute(_:completion:)`` does, in order, with one hop
    /// onto the pool's event loop for all of them (``HTTP2Submissions``).
    public func execute(_ batch: [Submission]) {
        // By index: `for item in batch` copies each submission out (a retain of every part of
        // its request, and of its completion).
        if loop.inEventLoop {
            for index in batch.indices { executeOnLoop(batch[index].request, completion: batch[index].completion) }
        } else {
            loop.execute { for index in batch.indices { self.executeOnLoop(batch[index].request, completion: batch[index].completion) } }
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
        loop.execute { self.perform(self.machine.shutdown()) }
    }

    // MARK: loop thread

    /// Sends `request` from the loop's own thread (the fast path for closed-loop load).
    public func executeOnLoop(_ request: HTTP2Request, completion: @escaping (Result<HTTP2Response, HTTP2Error>) -> Void) {
        let now = loop.now
        let pending = PendingRequest(request: request, deadline: now + request.timeoutNanoseconds, completion: completion)
        switch machine.execute(pending, now: now) {
        case .submit(let id):
            submit(pending, on: id)
        case .wait(let connection, let tickAt):
            if let connection { perform(connection) }
            if let tickAt { scheduleTick(at: tickAt) }
        case .fail(let error):
            pending.finish(.failure(error))
        }
    }

    func currentStatistics() -> Statistics {
        var result = Statistics()
        let counters = machine.counters
        result.openConnections = machine.openConnections
        result.connectionsOpened = counters.connectionsOpened
        result.connectFailures = counters.connectFailures
        result.transparentRetries = counters.transparentRetries
        result.resumedSessions = resumedSessions
        result.inFlight = machine.inFlight
        result.waiting = machine.waitingCount
        result.maxStreamsInFlightOnOneConnection = counters.maxStreamsInFlightOnOneConnection
        return result
    }

    private func submit(_ request: PendingRequest, on id: HTTP2PoolStateMachine<PendingRequest>.ConnectionID) {
        guard let connection = connections[id] else {
            // The machine hands out only connections that reported ready, which are here until
            // they report closed; this guards the invariant rather than trusting it.
            request.finish(.failure(HTTP2Error(.connectionLost, "the pool's connection \(id) is gone")))
            return
        }
        connection.submit(request)
    }

    private func perform(_ action: HTTP2PoolStateMachine<PendingRequest>.Action) {
        for (request, id) in action.submit { submit(request, on: id) }
        for (request, error) in action.fail { request.finish(.failure(error)) }
        for connection in action.connections { perform(connection) }
        if let tickAt = action.tickAt { scheduleTick(at: tickAt) }
    }

    private func perform(_ action: HTTP2PoolStateMachine<PendingRequest>.ConnectionAction) {
        switch action {
        case .open(let id, let freshLookup, let timeoutAt):
            if freshLookup { resolvedAddress = nil }  // an uncached lookup, as Apple asks after a failure
            loop.scheduleTimer(at: timeoutAt) { [self] in
                perform(machine.connectTimedOut(id, now: loop.now, jitter: Self.jitter()))
            }
            open(id)
        case .reconnectAt(let deadline):
            loop.scheduleTimer(at: deadline) { [self] in perform(machine.reconnectDue(now: loop.now)) }
        case .close(let id, let error):
            connections[id]?.close(error)
        }
    }

    private func scheduleTick(at deadline: UInt64) {
        loop.scheduleTimer(at: deadline) { [self] in
            let now = loop.now
            let tick = machine.tick(now: now)
            for request in tick.expired {
                request.finish(.failure(HTTP2Error(.timeout, "no stream became free within the request's deadline")))
            }
            for id in tick.sweep {
                connections[id]?.sweep(now: now, pingIntervalNanoseconds: configuration.pingIntervalNanoseconds,
                                       pingTimeoutNanoseconds: configuration.pingTimeoutNanoseconds)
            }
            if let next = tick.nextAt { scheduleTick(at: next) }
        }
    }

    private static func jitter() -> Double { Double.random(in: 0.5...1.5) }

    private func open(_ id: HTTP2PoolStateMachine<PendingRequest>.ConnectionID) {
        if let resolvedAddress {
            connect(id, to: resolvedAddress)
            return
        }
        let host = configuration.host
        let port = configuration.port
        DispatchQueue.global().async {
            let result = Result { () throws(HTTP2Error) in try Socket.resolve(host, port: port) }
            self.loop.execute {
                // The connect timeout or a shutdown may have given up on this connection meanwhile.
                guard self.machine.isOpening(id) else { return }
                switch result {
                case .success(let address):
                    self.resolvedAddress = address
                    self.connect(id, to: address)
                case .failure(let error):
                    self.perform(self.machine.connectionClosed(id, error: error, now: self.loop.now, jitter: Self.jitter()))
                }
            }
        }
    }

    private func connect(_ id: HTTP2PoolStateMachine<PendingRequest>.ConnectionID, to address: [UInt8]) {
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
            let connection = HTTP2ClientConnection(loop: loop, poolID: id, fd: fd, tls: stream, authority: authority,
                                                   initialWindowSize: configuration.initialWindowSize)
            connection.owner = self
            connections[id] = connection
            connection.start()
        } catch {
            perform(machine.connectionClosed(id, error: error, now: loop.now, jitter: Self.jitter()))
        }
    }

    // MARK: HTTP2ClientConnectionOwner

    func connectionBecameReady(_ connection: HTTP2ClientConnection, maxStreams: Int) {
        if connection.tls.resumed { resumedSessions += 1 }
        tlsSession = connection.tls.session
        perform(machine.connectionReady(connection.poolID, maxStreams: maxStreams, now: loop.now))
    }

    func connectionMaxStreamsChanged(_ connection: HTTP2ClientConnection, maxStreams: Int) {
        perform(machine.maxStreamsChanged(connection.poolID, to: maxStreams))
    }

    func connectionGoingAway(_ connection: HTTP2ClientConnection) {
        perform(machine.connectionGoingAway(connection.poolID, now: loop.now))
    }

    func streamEnded(on connection: HTTP2ClientConnection) {
        switch machine.streamEnded(on: connection.poolID) {
        case .none:
            break
        case .submit(let request, let id):
            submit(request, on: id)
        case .close(let id, let error):
            connections[id]?.close(error)
        }
    }

    func retry(_ requests: [PendingRequest]) {
        perform(machine.requeue(requests, now: loop.now))
    }

    func connectionClosed(_ connection: HTTP2ClientConnection, error: HTTP2Error, neverProcessed: [PendingRequest]) {
        connections[connection.poolID] = nil
        perform(machine.connectionClosed(connection.poolID, error: error, now: loop.now, jitter: Self.jitter()))
        if !neverProcessed.isEmpty { retry(neverProcessed) }
    }
}
