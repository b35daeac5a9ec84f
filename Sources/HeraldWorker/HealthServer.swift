import Dispatch
import Foundation
import Glibc
import HeraldCore
import Synchronization

/// A tiny plain-HTTP/1.1 server for `/healthz`, `/readyz` and `/metrics` (Prometheus scrapes plain HTTP).
///
/// One dedicated thread accepts, reads and writes with `poll`, so no blocking socket call ever
/// runs on Swift's cooperative threads; each complete request runs the async handler in a task of
/// its own, which hands the answer back to that thread. GET and HEAD only (others get 405), one
/// request per connection (`Connection: close`), request heads up to 8 KiB (431 beyond), a client
/// that sends nothing for 5 s is dropped, and at most 64 connections are open at once (more wait
/// in the listen backlog).
final class HealthServer: Sendable {
    /// What the handler answers for a path.
    struct Response: Sendable {
        /// The HTTP status code (200…599; anything else is sent as 500).
        var status: Int
        /// The `Content-Type` header.
        var contentType: String
        /// The body, sent as UTF-8 (not sent for HEAD; `Content-Length` is always set).
        var body: String

        /// Creates a response.
        init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// The address this server listens on.
    let host: String
    private let requestedPort: Int
    private let handler: @Sendable (_ path: String) async -> Response
    private let limits: HealthServerLimits
    private let lifecycle = Mutex(Lifecycle.idle)

    private enum Lifecycle {
        case idle
        case running(HealthServerLoop, port: Int)
        case stopped(port: Int)
    }

    /// Creates a server for `host`:`port` (`port` 0 = an ephemeral port, see ``port`` after
    /// ``start()``); `handler` answers every GET or HEAD with the path, query string removed,
    /// and is where 404 comes from.
    convenience init(host: String = "0.0.0.0", port: Int, handler: @escaping @Sendable (_ path: String) async -> Response) {
        self.init(host: host, port: port, limits: HealthServerLimits(), handler: handler)
    }

    /// Tests shorten the timeouts through this initializer.
    init(host: String, port: Int, limits: HealthServerLimits, handler: @escaping @Sendable (_ path: String) async -> Response) {
        self.host = host
        self.requestedPort = port
        self.limits = limits
        self.handler = handler
    }

    deinit {
        stop()
    }

    /// The bound port after ``start()`` (the requested one before).
    var port: Int {
        lifecycle.withLock { state in
            switch state {
            case .idle: requestedPort
            case .running(_, let port), .stopped(let port): port
            }
        }
    }

    /// Binds, listens and starts serving on a thread of its own. Throws a ``HealthServerError``
    /// naming the address when it cannot bind (port in use, no permission, bad host), or when
    /// started twice.
    func start() throws {
        try lifecycle.withLock { (state: inout Lifecycle) throws(HealthServerError) in
            guard case .idle = state else {
                throw HealthServerError(code: .alreadyStarted, message: "the health server on \(host):\(requestedPort) was already started")
            }
            let (listenFD, boundPort) = try Self.listen(host: host, port: requestedPort)
            let loop: HealthServerLoop
            do throws(HealthServerError) {
                loop = try HealthServerLoop(listenFD: listenFD, limits: limits, handler: handler)
            } catch {
                close(listenFD)
                throw error
            }
            state = .running(loop, port: boundPort)
            let thread = Thread { loop.run() }
            thread.name = "herald-health-\(boundPort)"
            thread.start()
        }
    }

    /// Closes the listener and every open connection, and waits (briefly) for the server thread
    /// to finish. Idempotent; a handler still running finds nobody to answer.
    func stop() {
        let loop: HealthServerLoop? = lifecycle.withLock { state in
            switch state {
            case .idle:
                state = .stopped(port: requestedPort)
                return nil
            case .running(let loop, let port):
                state = .stopped(port: port)
                return loop
            case .stopped:
                return nil
            }
        }
        guard let loop else { return }
        loop.requestStop()
        // The loop wakes at once; the bound only guards against a wedged thread.
        _ = loop.finished.wait(timeout: .now() + 5)
    }

    private static func listen(host: String, port: Int) throws(HealthServerError) -> (fd: Int32, port: Int) {
        func failure(_ what: String, _ code: Int32) -> HealthServerError {
            HealthServerError(code: .cannotBind, message: "cannot listen on \(host):\(port): \(what): \(String(cString: strerror(code)))")
        }
        guard (0...65535).contains(port) else {
            throw HealthServerError(code: .cannotBind, message: "cannot listen on \(host):\(port): the port must be 0…65535")
        }
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let info = result else {
            throw HealthServerError(code: .cannotBind, message: "cannot listen on \(host):\(port): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(result) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket", errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            let code = errno
            close(fd)
            throw failure("bind", code)
        }
        guard Glibc.listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw failure("listen", code)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard named else {
            let code = errno
            close(fd)
            throw failure("getsockname", code)
        }
        // sin_port and sin6_port sit at the same offset.
        let boundPort = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        return (fd, boundPort)
    }
}

/// Why a ``HealthServer`` could not start.
struct HealthServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    struct Code: Sendable, Hashable {
        private let value: Int
        /// Binding or listening failed (the message says why and where).
        static let cannotBind = Code(value: 1)
        /// ``HealthServer/start()`` was called twice, or after ``HealthServer/stop()``.
        static let alreadyStarted = Code(value: 2)
        /// The wake-up pipe could not be made (out of file descriptors).
        static let resources = Code(value: 3)
    }

    /// What went wrong.
    let code: Code
    /// A message for people, naming the address.
    let message: String
    /// Starting again will not help without a change (another port, a free one, more descriptors).
    var isRetryable: Bool { false }
    /// The message.
    var description: String { message }
}

/// Limits and timeouts of a ``HealthServer``; tests shorten the timeouts.
struct HealthServerLimits: Sendable {
    /// Largest request head; beyond it the answer is 431.
    var maxHeadBytes = 8 * 1024
    /// Most connections open at once; more wait in the listen backlog.
    var maxConnections = 64
    /// A client silent this long while sending its request is dropped.
    var idleTimeout: Duration = .seconds(5)
    /// The whole request head must arrive within this (a client dribbling a byte every few
    /// seconds would otherwise hold a connection for hours).
    var headTimeout: Duration = .seconds(10)
    /// A handler that has not answered by then gets a 503 sent for it.
    var handlerTimeout: Duration = .seconds(30)
    /// A client that reads nothing of the answer for this long is dropped.
    var writeTimeout: Duration = .seconds(5)
    /// After answering, unread input is drained this long before closing, so closing with unread
    /// bytes does not reset the connection and lose the answer.
    var lingerTimeout: Duration = .seconds(2)
}

/// The server's thread: a `poll` loop over the listener, a wake-up pipe and the connections.
///
/// `@unchecked Sendable`: `connections` and `nextID` are touched only on the loop thread (inside
/// ``run()``); what other threads call (``post(_:_:)``, ``requestStop()``) goes through `mailbox`'s
/// Mutex, and the file descriptors are constants closed by the loop thread only.
final class HealthServerLoop: @unchecked Sendable {
    private struct Mailbox {
        var answers: [(id: UInt64, bytes: [UInt8])] = []
        var stopRequested = false
        var closed = false
    }

    private enum Phase {
        case reading
        case handling
        case writing
        case draining
    }

    private struct Connection {
        let fd: Int32
        var phase: Phase = .reading
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        var deadline: ContinuousClock.Instant
        let headDeadline: ContinuousClock.Instant
    }

    let finished = DispatchSemaphore(value: 0)
    private let listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let limits: HealthServerLimits
    private let handler: @Sendable (_ path: String) async -> HealthServer.Response
    private let mailbox = Mutex(Mailbox())
    private let clock = ContinuousClock()
    private var connections: [UInt64: Connection] = [:]
    private var nextID: UInt64 = 0
    private var acceptPausedUntil: ContinuousClock.Instant?

    init(listenFD: Int32, limits: HealthServerLimits, handler: @escaping @Sendable (_ path: String) async -> HealthServer.Response) throws(HealthServerError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw HealthServerError(code: .resources, message: "cannot make the health server's wake-up pipe: \(String(cString: strerror(errno)))")
        }
        // Glibc's Swift module does not export pipe2.
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        self.listenFD = listenFD
        self.wakeRead = fds[0]
        self.wakeWrite = fds[1]
        self.limits = limits
        self.handler = handler
    }

    /// Hands a handler's encoded answer for connection `id` to the loop (any thread).
    func post(_ id: UInt64, _ bytes: [UInt8]) {
        mailbox.withLock { box in
            guard !box.closed else { return }
            box.answers.append((id, bytes))
            wakeLocked()
        }
    }

    /// Asks the loop to close everything and end (any thread). The listener stops taking
    /// connections before this returns (a `shutdown`, so the descriptor stays the loop's to close):
    /// a stopped server refuses connections however late a loaded machine runs the loop thread.
    func requestStop() {
        mailbox.withLock { box in
            guard !box.closed else { return }
            box.stopRequested = true
            _ = shutdown(listenFD, Int32(SHUT_RDWR))
            wakeLocked()
        }
    }

    // Called with the mailbox locked, so the loop cannot close `wakeWrite` meanwhile (and a late
    // handler never writes into a descriptor number reused by someone else).
    private func wakeLocked() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1) // EAGAIN: the pipe is full, so the loop is awake anyway.
    }

    /// The loop; returns after ``requestStop()`` with every descriptor closed.
    func run() {
        var pollFDs: [pollfd] = []
        var pollIDs: [UInt64] = []
        var scratch = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = clock.now
            pollFDs.removeAll(keepingCapacity: true)
            pollIDs.removeAll(keepingCapacity: true)
            pollFDs.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            if let paused = acceptPausedUntil, paused <= now { acceptPausedUntil = nil }
            let listening = connections.count < limits.maxConnections && acceptPausedUntil == nil
            if listening { pollFDs.append(pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)) }
            var earliest = acceptPausedUntil ?? now.advanced(by: .seconds(1))
            for (id, connection) in connections {
                earliest = min(earliest, connection.deadline)
                let events: Int16
                switch connection.phase {
                case .reading, .draining: events = Int16(POLLIN)
                case .writing: events = Int16(POLLOUT)
                case .handling: continue
                }
                pollFDs.append(pollfd(fd: connection.fd, events: events, revents: 0))
                pollIDs.append(id)
            }
            let timeout = max(0, min(1000, now.duration(to: earliest).milliseconds + 1))
            let ready = poll(&pollFDs, nfds_t(pollFDs.count), Int32(timeout))
            if ready < 0 && errno != EINTR {
                // Only EFAULT/EINVAL/ENOMEM are possible here; back off rather than spin.
                usleep(10_000)
            }

            if pollFDs[0].revents != 0 {
                while read(wakeRead, &scratch, scratch.count) > 0 {}
            }
            let (answers, stop) = mailbox.withLock { box in
                defer { box.answers.removeAll() }
                return (box.answers, box.stopRequested)
            }
            if stop { break }
            for answer in answers {
                guard var connection = connections[answer.id], connection.phase == .handling else { continue }
                connection.output = answer.bytes
                connection.phase = .writing
                connection.deadline = clock.now.advanced(by: limits.writeTimeout)
                connections[answer.id] = connection
                flush(answer.id)
            }

            if ready > 0 {
                var index = 1
                if listening {
                    if pollFDs[1].revents != 0 { acceptAll() }
                    index = 2
                }
                for (offset, id) in pollIDs.enumerated() where pollFDs[index + offset].revents != 0 {
                    guard let connection = connections[id] else { continue }
                    switch connection.phase {
                    case .reading: receive(id, &scratch)
                    case .writing: flush(id)
                    case .draining: drain(id, &scratch)
                    case .handling: break
                    }
                }
            }
            expire()
        }
        shutDown()
    }

    private func acceptAll() {
        while connections.count < limits.maxConnections {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: the listener stays readable, so stop polling it for a
                    // moment instead of spinning.
                    acceptPausedUntil = clock.now.advanced(by: .milliseconds(100))
                    return
                default: return // EAGAIN: nobody else is waiting.
                }
            }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let now = clock.now
            nextID &+= 1
            connections[nextID] = Connection(fd: fd, deadline: now.advanced(by: limits.idleTimeout), headDeadline: now.advanced(by: limits.headTimeout))
        }
    }

    private func receive(_ id: UInt64, _ scratch: inout [UInt8]) {
        guard var connection = connections[id] else { return }
        let count = recv(connection.fd, &scratch, scratch.count, 0)
        if count == 0 {
            return closeConnection(id) // gone before finishing its request
        }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            return closeConnection(id)
        }
        let searchFrom = max(0, connection.input.count - 3)
        connection.input.append(contentsOf: scratch[0..<count])
        connection.deadline = min(clock.now.advanced(by: limits.idleTimeout), connection.headDeadline)
        connections[id] = connection
        if let end = Self.headEnd(connection.input, from: searchFrom), end <= limits.maxHeadBytes {
            dispatch(id, head: connection.input[0..<end])
        } else if connection.input.count > limits.maxHeadBytes {
            respondDirectly(id, status: 431, body: "request head larger than \(limits.maxHeadBytes) bytes\n")
        }
    }

    /// The index just past the blank line ending the head (CRLF CRLF, or bare LF LF as some
    /// hand-typed clients send).
    static func headEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index < bytes.count {
            if bytes[index] == 0x0A {
                if index + 1 < bytes.count, bytes[index + 1] == 0x0A { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A { return index + 3 }
            }
            index += 1
        }
        return nil
    }

    /// What a request line asks for.
    enum Request: Equatable {
        case get(path: String, head: Bool)
        case reject(status: Int, body: String)
    }

    /// Reads the request line of a complete head; never traps on any bytes.
    static func parse(head: ArraySlice<UInt8>) -> Request {
        let lineEnd = head.firstIndex(of: 0x0A) ?? head.endIndex
        var line = head[head.startIndex..<lineEnd]
        if line.last == 0x0D { line = line.dropLast() }
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else {
            return .reject(status: 400, body: "malformed request line\n")
        }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = String(decoding: parts[1], as: UTF8.self)
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version.hasPrefix("HTTP/") else { return .reject(status: 400, body: "not an HTTP request\n") }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .reject(status: 505, body: "only HTTP/1.0 and HTTP/1.1\n")
        }
        guard method == "GET" || method == "HEAD" else { return .reject(status: 405, body: "only GET and HEAD\n") }
        var path = Substring(target)
        if !path.hasPrefix("/") {
            // Absolute form (`GET http://host/metrics`), which proxies send.
            guard let scheme = path.range(of: "://") else { return .reject(status: 400, body: "bad request target\n") }
            let afterAuthority = path[scheme.upperBound...]
            path = afterAuthority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }).map { afterAuthority[$0...] } ?? "/"
            if !path.hasPrefix("/") { path = "/" + path }
        }
        if let cut = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<cut] }
        if path.isEmpty { path = "/" }
        return .get(path: String(path), head: method == "HEAD")
    }

    private func dispatch(_ id: UInt64, head: ArraySlice<UInt8>) {
        switch Self.parse(head: head) {
        case .reject(let status, let body):
            respondDirectly(id, status: status, body: body)
        case .get(let path, let isHead):
            guard var connection = connections[id] else { return }
            connection.phase = .handling
            connection.input = []
            connection.deadline = clock.now.advanced(by: limits.handlerTimeout)
            connections[id] = connection
            let handler = handler
            Task.detached { [self] in
                let response = await handler(path)
                post(id, Self.encode(response, includeBody: !isHead))
            }
        }
    }

    private func respondDirectly(_ id: UInt64, status: Int, body: String) {
        guard var connection = connections[id] else { return }
        connection.phase = .writing
        connection.input = []
        connection.output = Self.encode(HealthServer.Response(status: status, body: body), includeBody: true)
        connection.written = 0
        connection.deadline = clock.now.advanced(by: limits.writeTimeout)
        connections[id] = connection
        flush(id)
    }

    private func flush(_ id: UInt64) {
        guard var connection = connections[id] else { return }
        while connection.written < connection.output.count {
            let sent = connection.output.withUnsafeBytes { buffer in
                send(connection.fd, buffer.baseAddress.map { $0 + connection.written }, buffer.count - connection.written, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                return closeConnection(id)
            }
            connection.written += sent
            connection.deadline = clock.now.advanced(by: limits.writeTimeout)
        }
        if connection.written >= connection.output.count {
            _ = shutdown(connection.fd, Int32(SHUT_WR))
            connection.phase = .draining
            connection.output = []
            connection.deadline = clock.now.advanced(by: limits.lingerTimeout)
        }
        connections[id] = connection
    }

    private func drain(_ id: UInt64, _ scratch: inout [UInt8]) {
        guard let connection = connections[id] else { return }
        let count = recv(connection.fd, &scratch, scratch.count, 0)
        if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            closeConnection(id)
        }
    }

    private func expire() {
        let now = clock.now
        for (id, connection) in connections where connection.deadline <= now {
            if connection.phase == .handling {
                respondDirectly(id, status: 503, body: "the handler did not answer in time\n")
            } else {
                closeConnection(id)
            }
        }
    }

    private func closeConnection(_ id: UInt64) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        close(connection.fd)
    }

    private func shutDown() {
        for id in Array(connections.keys) { closeConnection(id) }
        mailbox.withLock { box in
            box.closed = true
            box.answers.removeAll()
            // Closed under the lock: requestStop's shutdown never meets a reused descriptor number.
            close(listenFD)
            close(wakeWrite)
        }
        close(wakeRead)
        finished.signal()
    }

    static func encode(_ response: HealthServer.Response, includeBody: Bool) -> [UInt8] {
        let status = (200...599).contains(response.status) ? response.status : 500
        // A handler's content type must not be able to add headers.
        let contentType = String(response.contentType.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }.map(Character.init))
        let body = Array(response.body.utf8)
        var head = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        head += "Content-Type: \(contentType)\r\n"
        head += "Content-Length: \(body.count)\r\n"
        if status == 405 { head += "Allow: GET, HEAD\r\n" }
        head += "Connection: close\r\n\r\n"
        var bytes = Array(head.utf8)
        if includeBody { bytes += body }
        return bytes
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: status < 400 ? "OK" : "Error"
        }
    }
}
