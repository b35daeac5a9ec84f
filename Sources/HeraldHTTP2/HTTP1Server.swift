internal import CLinux
import Dispatch
import Glibc
import HeraldCore
import Synchronization

/// A plain-HTTP/1.1 server on an ``EventLoop``, for probes and scrapes (`/healthz`, `/readyz`,
/// `/metrics`: Prometheus and kubelets speak plain HTTP).
///
/// Give it a loop of its own, never a provider pool's: a busy provider connection must not starve
/// a probe. Sockets, timers and the request parser (``HTTP1Message``) are the loop's and this
/// module's; each complete request runs the async handler in a task of its own, which hands the
/// answer back to the loop, so nothing blocking ever runs on Swift's cooperative threads.
///
/// GET and HEAD only (405 otherwise), one request per connection (`Connection: close`), request
/// heads up to ``Limits/maxHeadBytes`` (431 beyond), a client silent for ``Limits/idleTimeout``
/// or slower than ``Limits/headTimeout`` is dropped, a handler slower than
/// ``Limits/handlerTimeout`` gets a 503 sent for it, and at most ``Limits/maxConnections`` are
/// open at once (more wait in the listen backlog).
///
/// `@unchecked Sendable`: the listener and the connections are touched only on `loop`'s thread;
/// what other threads call goes through `state`'s Mutex.
public final class HTTP1Server: @unchecked Sendable {
    /// Limits and timeouts; tests shorten the timeouts.
    public struct Limits: Sendable {
        /// Largest request head; beyond it the answer is 431.
        public var maxHeadBytes = 8 * 1024
        /// Most connections open at once; more wait in the listen backlog.
        public var maxConnections = 64
        /// A client silent this long while sending its request is dropped.
        public var idleTimeout: Duration = .seconds(5)
        /// The whole request head must arrive within this (a client dribbling a byte every few
        /// seconds would otherwise hold a connection for hours).
        public var headTimeout: Duration = .seconds(10)
        /// A handler that has not answered by then gets a 503 sent for it.
        public var handlerTimeout: Duration = .seconds(30)
        /// A client that reads nothing of the answer for this long is dropped.
        public var writeTimeout: Duration = .seconds(5)
        /// After answering, unread input is drained this long before closing, so closing with
        /// unread bytes does not reset the connection and lose the answer.
        public var lingerTimeout: Duration = .seconds(2)

        public init() {}
    }

    /// Answers a GET or HEAD for `path` (query string removed).
    public typealias Handler = @Sendable (_ path: String) async -> HTTP1Response

    private enum State {
        case idle
        case listening(fd: Int32)
        case stopped
    }

    public let loop: EventLoop
    let limits: Limits
    let handler: Handler
    private let state = Mutex(State.idle)

    // loop thread only
    private var listenFD: Int32 = -1
    private var listenerRegistered = false
    private var acceptPaused = false
    private var closed = false
    private var connections: [Int32: HTTP1ServerConnection] = [:]
    /// Read buffer shared by the connections (one loop thread).
    var scratch = [UInt8](repeating: 0, count: 4096)

    public init(loop: EventLoop, limits: Limits = Limits(), handler: @escaping Handler) {
        self.loop = loop
        self.limits = limits
        self.handler = handler
    }

    deinit {
        stop()
    }

    /// Binds `host`:`port` (0 picks a free port) and starts serving; returns the bound port.
    public func start(host: String, port: Int) throws(HTTP2Error) -> Int {
        guard (0...65535).contains(port) else {
            throw HTTP2Error(.connectFailed, "cannot listen on \(host):\(port): the port must be 0…65535")
        }
        let (fd, boundPort) = try Socket.listen(host: host, port: port, backlog: 128)
        let started = state.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .listening(fd: fd)
            return true
        }
        guard started else {
            Glibc.close(fd)
            throw HTTP2Error(.protocolError, "the server on \(host):\(port) was already started")
        }
        loop.execute { [self] in
            guard !closed else { return }
            listenFD = fd
            updateListener()
        }
        return boundPort
    }

    /// Stops taking connections at once (the listener is shut down before this returns, however
    /// late a loaded machine runs the loop), then closes every connection on the loop and waits
    /// (at most 5 s) for that. Idempotent; a handler still running finds nobody to answer.
    public func stop() {
        let wasListening = state.withLock { state -> Bool in
            defer { state = .stopped }
            guard case .listening(let fd) = state else { return false }
            // The loop closes the descriptor; shutdown(2) refuses new clients meanwhile.
            _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
            return true
        }
        guard wasListening else { return }
        if loop.inEventLoop {
            closeEverything()
            return
        }
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            closeEverything()
            done.signal()
        }
        _ = done.wait(timeout: .now() + 5)
    }

    // MARK: loop thread

    private func closeEverything() {
        closed = true
        if listenFD >= 0 {
            if listenerRegistered { loop.unregister(listenFD) }
            listenerRegistered = false
            Glibc.close(listenFD)
            listenFD = -1
        }
        for connection in Array(connections.values) { connection.close() }
    }

    /// Polls the listener only while there is room and descriptors to accept with.
    private func updateListener() {
        let wanted = !closed && listenFD >= 0 && !acceptPaused && connections.count < limits.maxConnections
        guard wanted != listenerRegistered else { return }
        listenerRegistered = wanted
        if wanted {
            loop.register(listenFD, Listener(server: self), events: EPOLLIN.rawValue)
        } else {
            loop.unregister(listenFD)
        }
    }

    fileprivate func acceptAll() {
        while !closed && connections.count < limits.maxConnections {
            let fd = herald_accept_nonblocking(listenFD)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: the listener stays readable, so stop polling it for a
                    // moment instead of spinning.
                    acceptPaused = true
                    updateListener()
                    loop.scheduleTimer(afterNanoseconds: 100_000_000) { [self] in
                        acceptPaused = false
                        updateListener()
                    }
                    return
                default:
                    return  // EAGAIN: nobody else is waiting (or the listener was shut down).
                }
            }
            let connection = HTTP1ServerConnection(fd: fd, server: self)
            connections[fd] = connection
            connection.start()
        }
        updateListener()
    }

    func connectionClosed(_ fd: Int32) {
        connections[fd] = nil
        updateListener()
    }

    func deadline(after duration: Duration) -> UInt64 {
        let (sum, overflow) = loop.now.addingReportingOverflow(UInt64(max(0, duration.nanoseconds)))
        return overflow ? .max : sum
    }

    /// `@unchecked Sendable`: registered and called on the loop only.
    private final class Listener: EventHandler, @unchecked Sendable {
        unowned let server: HTTP1Server

        init(server: HTTP1Server) { self.server = server }

        func handle(events: UInt32) { server.acceptAll() }
    }
}

/// One client of an ``HTTP1Server``: read a head, wait for the handler, write, linger, close.
/// Touched only on the server's loop.
final class HTTP1ServerConnection: EventHandler, @unchecked Sendable {
    private enum Phase {
        case reading
        case handling
        case writing
        case draining
        case closed
    }

    let fd: Int32
    private weak var server: HTTP1Server?
    private let loop: EventLoop
    private var phase = Phase.reading
    private var registered = false
    private var input: [UInt8] = []
    private var output: [UInt8] = []
    private var written = 0
    private var deadline: UInt64 = 0
    private var headDeadline: UInt64 = 0
    /// The time of the earliest deadline timer still pending, if any.
    private var timerAt: UInt64?

    init(fd: Int32, server: HTTP1Server) {
        self.fd = fd
        self.server = server
        self.loop = server.loop
    }

    func start() {
        guard let server else { return }
        headDeadline = server.deadline(after: server.limits.headTimeout)
        setDeadline(min(server.deadline(after: server.limits.idleTimeout), headDeadline))
        watch(EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    }

    func handle(events: UInt32) {
        switch phase {
        case .reading: receive()
        case .writing: flush()
        case .draining: drain()
        case .handling, .closed: break
        }
    }

    /// The handler's answer (on the loop).
    func answer(_ bytes: [UInt8]) {
        guard phase == .handling else { return }  // timed out (503 sent) or closed meanwhile
        write(bytes)
    }

    func close() {
        guard phase != .closed else { return }
        phase = .closed
        if registered { loop.unregister(fd) }
        registered = false
        server?.connectionClosed(fd)
        Glibc.close(fd)
    }

    // MARK: phases

    private func receive() {
        guard let server else { return close() }
        let count = recv(fd, &server.scratch, server.scratch.count, 0)
        if count == 0 { return close() }  // gone before finishing its request
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            return close()
        }
        let searchFrom = max(0, input.count - 3)
        input.append(contentsOf: server.scratch[0..<count])
        setDeadline(min(server.deadline(after: server.limits.idleTimeout), headDeadline))
        if let end = HTTP1Message.headEnd(input, from: searchFrom), end <= server.limits.maxHeadBytes {
            dispatch(head: input[0..<end], server: server)
        } else if input.count > server.limits.maxHeadBytes {
            respond(HTTP1Response(status: 431, body: "request head larger than \(server.limits.maxHeadBytes) bytes\n"), includeBody: true)
        }
    }

    private func dispatch(head: ArraySlice<UInt8>, server: HTTP1Server) {
        switch HTTP1Message.parse(head: head) {
        case .reject(let status, let body):
            respond(HTTP1Response(status: status, body: body), includeBody: true)
        case .get(let path, let isHead):
            phase = .handling
            input = []
            // Nothing to read while the handler runs; a hang-up is noticed when writing.
            unwatch()
            setDeadline(server.deadline(after: server.limits.handlerTimeout))
            let handler = server.handler
            let loop = self.loop
            Task.detached { [self] in
                let bytes = HTTP1Message.encode(await handler(path), includeBody: !isHead)
                loop.execute { self.answer(bytes) }
            }
        }
    }

    private func respond(_ response: HTTP1Response, includeBody: Bool) {
        write(HTTP1Message.encode(response, includeBody: includeBody))
    }

    private func write(_ bytes: [UInt8]) {
        guard let server else { return close() }
        phase = .writing
        input = []
        output = bytes
        written = 0
        setDeadline(server.deadline(after: server.limits.writeTimeout))
        watch(EPOLLOUT.rawValue)
        flush()
    }

    private func flush() {
        guard let server else { return close() }
        while written < output.count {
            let sent = output.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress.map { $0 + written }, buffer.count - written, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                return close()
            }
            written += sent
            setDeadline(server.deadline(after: server.limits.writeTimeout))
        }
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        phase = .draining
        output = []
        setDeadline(server.deadline(after: server.limits.lingerTimeout))
        watch(EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    }

    private func drain() {
        guard let server else { return close() }
        while true {
            let count = recv(fd, &server.scratch, server.scratch.count, 0)
            if count > 0 { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if count < 0 && errno == EINTR { continue }
            return close()
        }
    }

    // MARK: the loop

    private func watch(_ events: UInt32) {
        if registered {
            loop.modify(fd, events: events)
        } else {
            loop.register(fd, self, events: events)
            registered = true
        }
    }

    private func unwatch() {
        guard registered else { return }
        loop.unregister(fd)
        registered = false
    }

    /// Moves the deadline; one timer is pending at a time, and a timer that fires before the
    /// (moved) deadline sets the next.
    private func setDeadline(_ time: UInt64) {
        deadline = time
        if let timerAt, timerAt <= time { return }
        arm(at: time)
    }

    private func arm(at time: UInt64) {
        timerAt = time
        loop.scheduleTimer(at: time) { [self] in
            guard phase != .closed, timerAt == time else { return }
            timerAt = nil
            if loop.now >= deadline {
                expire()
            } else {
                arm(at: deadline)
            }
        }
    }

    private func expire() {
        if phase == .handling {
            respond(HTTP1Response(status: 503, body: "the handler did not answer in time\n"), includeBody: true)
        } else {
            close()
        }
    }
}
