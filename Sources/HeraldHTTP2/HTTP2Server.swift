internal import CNghttp2
internal import CLinux
import Glibc
public import HeraldCrypto
import Synchronization

/// A socket bound and listening before its server exists, for a caller that must know the port
/// first (the FCM simulator names its port in the credentials its server's TLS is made from).
/// Finding a free port, closing it and binding it again races every other socket on the machine
/// for that port: a client's ephemeral port, another server's. Connections wait in the backlog
/// until an ``HTTP2Server`` takes the socket (``HTTP2Server/Configuration/listener``); one that
/// never does closes it.
public final class HTTP2Listener: Sendable {
    private let fd: Int32
    /// The port it is bound to.
    public let port: Int
    private let adopted = Atomic<Bool>(false)

    /// Binds `host`:`port` (0: any free port) and listens.
    public init(host: String, port: Int = 0) throws(HTTP2Error) {
        (fd, self.port) = try Socket.listen(host: host, port: port)
    }

    /// The socket, for the one server that serves it.
    func adopt() throws(HTTP2Error) -> (fd: Int32, port: Int) {
        guard !adopted.exchange(true, ordering: .acquiringAndReleasing) else {
            throw HTTP2Error(.connectFailed, "the listener on port \(port) is already served")
        }
        return (fd, port)
    }

    deinit {
        if !adopted.load(ordering: .acquiring) { Glibc.close(fd) }
    }
}

/// A request as an ``HTTP2Server`` hands it to its handler.
public final class HTTP2ServerRequest {
    public fileprivate(set) var method = ""
    public fileprivate(set) var path = ""
    public fileprivate(set) var authority = ""
    /// Regular headers (lower-case names), in order.
    public fileprivate(set) var headers: [HeaderField] = []
    public fileprivate(set) var body: [UInt8] = []
    /// The HTTP/2 stream id.
    public let streamID: Int32
    /// The connection it came on (fault injection, per-connection state).
    public unowned let connection: HTTP2ServerConnection
    fileprivate var response: [UInt8] = []
    fileprivate var responseOffset = 0
    fileprivate var answered = false

    fileprivate init(streamID: Int32, connection: HTTP2ServerConnection) {
        self.streamID = streamID
        self.connection = connection
    }

    /// The first header named `name`.
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// Delays the answer by this much (a simulator's added latency).
    public var responseDelayNanoseconds: UInt64 = 0

    /// Answers the request (on the connection's loop; once).
    public func respond(status: Int, headers: [HeaderField] = [], body: [UInt8] = []) {
        if responseDelayNanoseconds > 0 {
            let delay = responseDelayNanoseconds
            responseDelayNanoseconds = 0
            // Held strongly: the client may close the connection before the timer fires, and
            // `connection` is unowned (the answer is then dropped by `respond`'s state check).
            let connection = self.connection
            connection.loop.scheduleTimer(afterNanoseconds: delay) { [self, connection] in
                connection.respond(self, status: status, headers: headers, body: body)
            }
            return
        }
        connection.respond(self, status: status, headers: headers, body: body)
    }

    /// Refuses the stream with RST_STREAM(REFUSED_STREAM): the client may send it again, since
    /// the server did not process it.
    public func refuse() {
        connection.reset(self, errorCode: 7)
    }
}

/// Handles requests on the connection's event loop thread. It may answer later (after a timer)
/// or never (a stalled stream).
public typealias HTTP2RequestHandler = @Sendable (HTTP2ServerRequest) -> Void

/// A TLS HTTP/2 server on event loops: enough for the simulators and for tests.
///
/// `@unchecked Sendable`: the listener state is touched only on `loops[0]`'s thread after `start`.
public final class HTTP2Server: @unchecked Sendable {
    /// Server settings.
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 0
        /// SETTINGS_MAX_CONCURRENT_STREAMS announced to clients.
        public var maxConcurrentStreams: UInt32 = 1000
        public var initialWindowSize: UInt32 = 1 << 20
        /// Larger request bodies are refused with RST_STREAM.
        public var maxRequestBodyBytes = 1 << 20
        /// The `date` header's text for a clock reading (seconds since the Unix epoch); nil sends
        /// none. The simulators send IMF-fixdate as Apple's and Google's servers do (`HTTPDate`),
        /// optionally skewed for `herald doctor`'s clock check. Called at most once a second.
        public var dateHeader: (@Sendable (Int64) -> String)?
        /// Bytes read from one connection before the loop turns to its other connections (nil:
        /// all there is). A client with thousands of requests queued on one connection must not
        /// hold a request on another connection behind all of them: a provider's front end
        /// answers an idle connection's request without reading every other connection first.
        public var readBudgetBytes: Int? = 16 * 1024
        /// A socket already listening (``HTTP2Listener``) to serve, instead of binding `host` and
        /// `port` in ``HTTP2Server/start()``.
        public var listener: HTTP2Listener?

        /// Creates a configuration.
        public init(host: String = "127.0.0.1", port: Int = 0) {
            self.host = host
            self.port = port
        }
    }

    public let configuration: Configuration
    private let group: EventLoopGroup
    private let tls: TLSContext
    private let handler: HTTP2RequestHandler
    /// Called on each new connection's loop before it serves (per-connection setup).
    private let onConnection: (@Sendable (HTTP2ServerConnection) -> Void)?
    private var listener: Listener?
    /// The port it listens on (known after ``start()``).
    public private(set) var port = 0

    /// Creates a server; `handler` runs on the loop of the request's connection.
    public init(configuration: Configuration, tls: TLSContext, group: EventLoopGroup,
                onConnection: (@Sendable (HTTP2ServerConnection) -> Void)? = nil, handler: @escaping HTTP2RequestHandler) {
        self.configuration = configuration
        self.tls = tls
        self.group = group
        self.handler = handler
        self.onConnection = onConnection
    }

    /// Binds (or takes the configuration's ``Configuration/listener``) and starts accepting;
    /// returns the port.
    @discardableResult
    public func start() throws(HTTP2Error) -> Int {
        let fd: Int32
        let port: Int
        if let listener = configuration.listener {
            (fd, port) = try listener.adopt()
        } else {
            (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port)
        }
        self.port = port
        let listener = Listener(fd: fd, server: self)
        self.listener = listener
        let loop = group.loops[0]
        loop.execute { loop.register(fd, listener, events: EPOLLIN.rawValue) }
        return port
    }

    /// Stops accepting (connections already open stay until their peers close them).
    public func stop() {
        guard let listener else { return }
        let loop = group.loops[0]
        loop.execute {
            loop.unregister(listener.fd)
            Glibc.close(listener.fd)
        }
        self.listener = nil
    }

    fileprivate func accepted(_ fd: Int32) {
        Socket.setNoDelay(fd)
        let loop = group.next()
        let tls = self.tls
        let configuration = self.configuration
        let handler = self.handler
        let onConnection = self.onConnection
        loop.execute {
            guard let stream = try? TLSStream(context: tls, fileDescriptor: fd, serverName: nil) else {
                Glibc.close(fd)
                return
            }
            let connection = HTTP2ServerConnection(loop: loop, fd: fd, tls: stream, configuration: configuration, handler: handler)
            connection.retainWhileOpen()
            onConnection?(connection)
            if connection.state != .closed { connection.start() }
        }
    }

    /// `@unchecked Sendable`: registered, served and closed on the first loop only.
    private final class Listener: EventHandler, @unchecked Sendable {
        let fd: Int32
        unowned let server: HTTP2Server

        init(fd: Int32, server: HTTP2Server) {
            self.fd = fd
            self.server = server
        }

        func handle(events: UInt32) {
            while true {
                let client = herald_accept_nonblocking(fd)
                guard client >= 0 else { return }
                server.accepted(client)
            }
        }
    }
}

/// One server-side connection. Exposes the knobs the simulators' fault injection needs.
public final class HTTP2ServerConnection: HTTP2Transport {
    private let configuration: HTTP2Server.Configuration
    private let handler: HTTP2RequestHandler
    private var requests: [Int32: HTTP2ServerRequest] = [:]
    private var selfReference: HTTP2ServerConnection?
    private var closeWhenIdle = false
    /// Requests received on this connection so far.
    public private(set) var requestCount = 0
    /// Per-connection state for the handler (the APNs simulator keeps its token state here).
    public var context: AnyObject?
    /// SETTINGS acknowledgements received from the client (the first acknowledges the initial
    /// SETTINGS; each later one, a change).
    public private(set) var settingsAcknowledgements = 0
    /// Streams open now (requests received and not yet closed).
    public var openStreams: Int { requests.count }
    /// The announced SETTINGS_MAX_CONCURRENT_STREAMS.
    public private(set) var maxConcurrentStreams: UInt32
    /// The subject of the client certificate verified in the TLS handshake (APNs certificate
    /// auth: its UID is the bundle id), set once the handshake is done. Nil when the client sent
    /// none, or the server's TLS context does not ask for one.
    public private(set) var peerCertificateSubject: CertificateSubject?

    init(loop: EventLoop, fd: Int32, tls: TLSStream, configuration: HTTP2Server.Configuration, handler: @escaping HTTP2RequestHandler) {
        self.configuration = configuration
        self.handler = handler
        self.maxConcurrentStreams = configuration.maxConcurrentStreams
        super.init(loop: loop, fd: fd, tls: tls, connecting: false)
        readBudget = configuration.readBudgetBytes
    }

    /// Keeps the connection alive while its socket is open (the loop holds handlers strongly,
    /// but the connection must outlive its own unregistration until `didClose` runs).
    fileprivate func retainWhileOpen() { selfReference = self }

    override func didCompleteHandshake() {
        peerCertificateSubject = tls.verifiedPeerSubject
    }

    override func makeSession() throws(HTTP2Error) {
        let callbacks = try NGHTTP2Callbacks { callbacks in
            nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ServerConnection.self), let frame,
                      frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                      frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
                let streamID = frame.pointee.hd.stream_id
                connection.requests[streamID] = HTTP2ServerRequest(streamID: streamID, connection: connection)
                return 0
            }
            nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ServerConnection.self), let frame, let name, let value,
                      let request = connection.requests[frame.pointee.hd.stream_id] else { return 0 }
                let headerName = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
                let headerValue = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
                switch headerName {
                case ":method": request.method = headerValue
                case ":path": request.path = headerValue
                case ":authority": request.authority = headerValue
                case ":scheme": break
                default: request.headers.append(HeaderField(headerName, headerValue))
                }
                return 0
            }
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { session, _, streamID, data, length, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ServerConnection.self), let data,
                      let request = connection.requests[streamID] else { return 0 }
                if request.body.count + length > connection.configuration.maxRequestBodyBytes {
                    _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_REFUSED_STREAM.rawValue))
                    connection.requests[streamID] = nil
                    return 0
                }
                request.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
                return 0
            }
            nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ServerConnection.self), let frame else { return 0 }
                let type = frame.pointee.hd.type
                if type == UInt8(NGHTTP2_SETTINGS.rawValue), frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
                    connection.settingsAcknowledgements += 1
                }
                let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
                if endStream, type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
                   let request = connection.requests[frame.pointee.hd.stream_id] {
                    connection.requestCount += 1
                    connection.handler(request)
                }
                return 0
            }
            nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ServerConnection.self) else { return 0 }
                connection.requests[streamID] = nil
                if connection.closeWhenIdle && connection.requests.isEmpty {
                    connection.loop.atEndOfIteration { [connection] in
                        connection.closeAfterFlush(HTTP2Error(.goaway(retryable: true), "closed after GOAWAY"))
                    }
                }
                return 0
            }
        }
        var session: OpaquePointer?
        guard nghttp2_session_server_new(&session, callbacks.pointer, opaque) == 0, let session else {
            throw HTTP2Error(.protocolError, "nghttp2_session_server_new failed")
        }
        self.session = session
        _ = HTTP2Settings.submit(session, [(HTTP2Settings.maxConcurrentStreams, maxConcurrentStreams),
                                           (HTTP2Settings.initialWindowSize, configuration.initialWindowSize)])
        _ = nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: Int(configuration.initialWindowSize) * 16))
    }

    fileprivate func respond(_ request: HTTP2ServerRequest, status: Int, headers: [HeaderField], body: [UInt8]) {
        guard !request.answered, state == .active, let session, requests[request.streamID] === request else { return }
        request.answered = true
        request.response = body
        var fields = [HeaderField(":status", String(status))]
        fields.append(contentsOf: headers)
        if let date = currentDate() { fields.append(HeaderField("date", date)) }
        if !body.isEmpty { fields.append(HeaderField("content-length", String(body.count))) }
        _ = try? withNVs(fields) { (nvs: UnsafeMutableBufferPointer<nghttp2_nv>) throws(HPACKError) -> Int32 in
            if body.isEmpty {
                return nghttp2_submit_response(session, request.streamID, nvs.baseAddress, nvs.count, nil)
            }
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, streamID, buffer, length, flags, _, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ServerConnection.self), let buffer, let flags,
                      let request = connection.requests[streamID] else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
                let count = min(request.response.count - request.responseOffset, length)
                request.response.withUnsafeBytes { bytes in
                    if let base = bytes.baseAddress {
                        buffer.update(from: base.advanced(by: request.responseOffset).assumingMemoryBound(to: UInt8.self), count: count)
                    }
                }
                request.responseOffset += count
                if request.responseOffset == request.response.count { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
                return count
            }
            return nghttp2_submit_response(session, request.streamID, nvs.baseAddress, nvs.count, &provider)
        }
        scheduleFlush()
    }

    /// The `date` header's text, formatted once a second.
    private var dateCache: (second: Int64, text: String) = (.min, "")
    private func currentDate() -> String? {
        guard let dateHeader = configuration.dateHeader else { return nil }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let second = Int64(now.tv_sec)
        if second != dateCache.second { dateCache = (second, dateHeader(second)) }
        return dateCache.text
    }

    fileprivate func reset(_ request: HTTP2ServerRequest, errorCode: UInt32) {
        guard !request.answered, state == .active, let session else { return }
        request.answered = true
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), request.streamID, errorCode)
        scheduleFlush()
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS (APNs lowers it to 1 before the first
    /// valid token and after rejections).
    public func setMaxConcurrentStreams(_ value: UInt32) {
        guard value != maxConcurrentStreams else { return }
        guard let session else {
            // Before the session exists: the first SETTINGS frame will carry it.
            maxConcurrentStreams = value
            return
        }
        maxConcurrentStreams = value
        _ = HTTP2Settings.submit(session, [(HTTP2Settings.maxConcurrentStreams, value)])
        scheduleFlush()
    }

    /// Sends GOAWAY: streams up to `lastStreamID` are still answered, later ones are refused,
    /// and the connection closes once the accepted ones are done. `debugData` is APNs's
    /// `{"reason": …}` JSON.
    public func goAway(lastStreamID: Int32, errorCode: UInt32 = 0, debugData: [UInt8] = []) {
        guard let session, !closeWhenIdle else { return }
        closeWhenIdle = true
        _ = debugData.withUnsafeBufferPointer { buffer in
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, errorCode, buffer.baseAddress, buffer.count)
        }
        scheduleFlush()
        let pending = requests.keys.filter { $0 <= lastStreamID }
        if pending.isEmpty {
            loop.atEndOfIteration { [self] in
                closeAfterFlush(HTTP2Error(.goaway(retryable: true), "closed after GOAWAY"))
            }
        }
    }

    /// Whether the connection is gone.
    public var isClosed: Bool { state == .closed }

    /// Drops the TCP connection with a reset, in-flight streams and all.
    public func abort() {
        close(HTTP2Error(.connectionLost, "aborted by the server"), abort: true)
    }

    override func didClose(_ error: HTTP2Error) {
        requests.removeAll()
        selfReference = nil
    }
}
