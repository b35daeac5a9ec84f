internal import CNghttp2
internal import CLinux
import Glibc
import HeraldCrypto

/// The part of an HTTP/2 connection that client and server share: a non-blocking socket, TLS,
/// and an nghttp2 session pumped in both directions. Lives on one event loop; every method runs
/// on that loop's thread. Subclasses (``HTTP2ClientConnection``, ``HTTP2ServerConnection``)
/// create the session and handle streams.
public class HTTP2Transport: EventHandler {
    enum State {
        case connecting
        case handshaking
        case active
        case closed
    }

    let loop: EventLoop
    let fd: Int32
    let tls: TLSStream
    var session: OpaquePointer?
    var state: State
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var writableWanted = false
    private var flushScheduled = false
    private static let readBufferSize = 64 * 1024
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: HTTP2Transport.readBufferSize, alignment: 16)
    /// Set by ``closeAfterFlush()``: once nghttp2 has nothing more to send, half-close and wait
    /// for the peer's EOF, so the last frames (a GOAWAY) are read before the connection ends.
    private var closingGracefully = false
    private var halfClosed = false
    /// When anything was last read or written (monotonic ns), for idle PINGs.
    var lastActivity: UInt64
    /// Bytes one readiness event reads before the loop moves on to its other connections (nil:
    /// everything there is). The rest is read on the loop's next turn: epoll is level-triggered,
    /// and reading stops only when OpenSSL holds nothing decrypted.
    var readBudget: Int?

    init(loop: EventLoop, fd: Int32, tls: TLSStream, connecting: Bool) {
        self.loop = loop
        self.fd = fd
        self.tls = tls
        self.state = connecting ? .connecting : .handshaking
        self.lastActivity = loop.now
    }

    deinit {
        readBuffer.deallocate()
        if let session { nghttp2_session_del(session) }
    }

    /// Registers with the loop (call on the loop).
    func start() {
        loop.register(fd, self, events: EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue)
        writableWanted = true
        if state == .handshaking { driveHandshake() }
    }

    // MARK: subclass hooks

    /// TLS is up and ALPN chose h2; `session` is made next.
    func didCompleteHandshake() {}
    /// Creates `session` once TLS is up and ALPN chose h2.
    func makeSession() throws(HTTP2Error) {}
    /// The connection is ready for streams.
    func didBecomeActive() {}
    /// The connection is gone; fail or retry what it carried. Called once.
    func didClose(_ error: HTTP2Error) {}

    // MARK: events

    func handle(events: UInt32) {
        switch state {
        case .connecting:
            let error = Socket.pendingError(fd)
            if error != 0 {
                close(HTTP2Error(.connectFailed, "connect failed: \(String(cString: strerror(error)))"))
                return
            }
            if events & EPOLLOUT.rawValue != 0 || events & EPOLLIN.rawValue != 0 {
                state = .handshaking
                driveHandshake()
            }
        case .handshaking:
            driveHandshake()
        case .active:
            if events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 {
                readAvailable()
            }
            if state == .active { flush() }
        case .closed:
            break
        }
    }

    private func driveHandshake() {
        do {
            switch try tls.handshake() {
            case .done:
                guard tls.negotiatedProtocol == "h2" else {
                    close(HTTP2Error(.tlsHandshakeFailed, "the peer did not agree to HTTP/2 (ALPN selected \(tls.negotiatedProtocol ?? "nothing"))"))
                    return
                }
                didCompleteHandshake()
                do {
                    try makeSession()
                } catch {
                    close(error)
                    return
                }
                state = .active
                setWritableInterest(false)
                didBecomeActive()
                // Data may have arrived with the last handshake flight.
                readAvailable()
                if state == .active { flush() }
            case .wantRead:
                setWritableInterest(false)
            case .wantWrite:
                setWritableInterest(true)
            case .closed:
                close(HTTP2Error(.tlsHandshakeFailed, "the peer closed the connection during the TLS handshake"))
            }
        } catch {
            close(HTTP2Error(.tlsHandshakeFailed, error.message))
        }
    }

    private func readAvailable() {
        guard let session else { return }
        var read = 0
        while state == .active {
            let progress: TLSStream.Progress
            let count: Int
            do {
                (count, progress) = try tls.read(into: readBuffer)
            } catch {
                close(HTTP2Error(.connectionLost, error.message))
                return
            }
            if count > 0 && halfClosed { continue }  // draining what the peer still sends
            if count > 0 {
                lastActivity = loop.now
                let consumed = nghttp2_session_mem_recv(session, readBuffer.baseAddress?.assumingMemoryBound(to: UInt8.self), count)
                if consumed < 0 {
                    close(HTTP2Error(.protocolError, "HTTP/2 protocol error: \(String(cString: nghttp2_strerror(Int32(consumed))))"))
                    return
                }
                read += count
                if let readBudget, read >= readBudget, tls.pendingBytes == 0 { return }
                continue
            }
            switch progress {
            case .wantRead, .done:
                return
            case .wantWrite:
                setWritableInterest(true)
                return
            case .closed:
                close(HTTP2Error(.connectionLost, "the peer closed the connection"))
                return
            }
        }
    }

    /// Asks for a flush once the loop has handled the current batch (coalesces many submits).
    func scheduleFlush() {
        guard !flushScheduled, state == .active else { return }
        flushScheduled = true
        loop.atEndOfIteration { [self] in
            flushScheduled = false
            if state == .active { flush() }
        }
    }

    /// Moves nghttp2's pending frames into TLS, as far as the socket takes them.
    func flush() {
        guard let session, state == .active else { return }
        while true {
            if outputOffset < output.count {
                let offset = outputOffset
                let result: Result<(Int, TLSStream.Progress), CryptoError> = output.withUnsafeBytes { buffer in
                    Result { () throws(CryptoError) in try tls.write(UnsafeRawBufferPointer(rebasing: buffer[offset...])) }
                }
                let written: Int
                let progress: TLSStream.Progress
                switch result {
                case .success(let value): (written, progress) = value
                case .failure(let error):
                    close(HTTP2Error(.connectionLost, error.message))
                    return
                }
                outputOffset += written
                if written > 0 { lastActivity = loop.now }
                if outputOffset < output.count {
                    if progress == .closed {
                        close(HTTP2Error(.connectionLost, "the peer closed the connection"))
                    } else {
                        setWritableInterest(true)
                    }
                    return
                }
                output.removeAll(keepingCapacity: true)
                outputOffset = 0
            }
            // Gather frames into one buffer so one TLS record carries many small frames.
            while output.count < 64 * 1024 {
                var data: UnsafePointer<UInt8>?
                let length = nghttp2_session_mem_send(session, &data)
                if length < 0 {
                    close(HTTP2Error(.protocolError, "nghttp2: \(String(cString: nghttp2_strerror(Int32(length))))"))
                    return
                }
                guard length > 0, let data else { break }
                output.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            }
            if output.isEmpty {
                setWritableInterest(false)
                // A session that wants nothing more (GOAWAY sent or received, no streams left)
                // ends gracefully too: closing at once could reset the TCP connection while the
                // peer still has our last frames unread.
                if !closingGracefully && nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
                    beginGracefulClose(HTTP2Error(.connectionLost, "the HTTP/2 session ended"), timeoutNanoseconds: 30_000_000_000)
                }
                if closingGracefully && !halfClosed {
                    halfClosed = true
                    tls.shutdown()
                    Glibc.shutdown(fd, Int32(SHUT_WR))
                }
                return
            }
        }
    }

    /// Ends the connection gracefully: sends what nghttp2 still has, half-closes, and closes
    /// when the peer closes its side (or after `timeoutNanoseconds`). Closing at once instead
    /// could reset the TCP connection and lose the final frames the peer has not read.
    func closeAfterFlush(_ error: HTTP2Error, timeoutNanoseconds: UInt64 = 30_000_000_000) {
        guard state == .active, !closingGracefully else { return }
        beginGracefulClose(error, timeoutNanoseconds: timeoutNanoseconds)
        flush()
    }

    private func beginGracefulClose(_ error: HTTP2Error, timeoutNanoseconds: UInt64) {
        closingGracefully = true
        loop.scheduleTimer(afterNanoseconds: timeoutNanoseconds) { [self] in close(error) }
    }

    private func setWritableInterest(_ wanted: Bool) {
        guard wanted != writableWanted, state != .closed else { return }
        writableWanted = wanted
        loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (wanted ? EPOLLOUT.rawValue : 0))
    }

    /// Closes the socket and tells the subclass once. `abort` resets the TCP connection.
    func close(_ error: HTTP2Error, abort: Bool = false) {
        guard state != .closed else { return }
        state = .closed
        loop.unregister(fd)
        if abort {
            Socket.abort(fd)
        } else {
            tls.shutdown()
            Glibc.close(fd)
        }
        didClose(error)
    }
}

/// Converts `self` for nghttp2's `user_data`, and back.
extension HTTP2Transport {
    var opaque: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from<T: HTTP2Transport>(_ pointer: UnsafeMutableRawPointer?, as type: T.Type) -> T? {
        guard let pointer else { return nil }
        return Unmanaged<T>.fromOpaque(pointer).takeUnretainedValue()
    }
}

/// Owns an `nghttp2_session_callbacks`.
final class NGHTTP2Callbacks {
    let pointer: OpaquePointer

    init(_ configure: (OpaquePointer) -> Void) throws(HTTP2Error) {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTP2Error(.protocolError, "nghttp2_session_callbacks_new failed")
        }
        pointer = callbacks
        configure(callbacks)
    }

    deinit { nghttp2_session_callbacks_del(pointer) }
}

/// What a client session accepts from a server, set explicitly rather than left to the
/// nghttp2 build's defaults: a provider, a proxy or a man in the middle must not be able to
/// make a worker buffer or process without bound (CONTINUATION and SETTINGS floods, CVE-2024-28182,
/// a rapid-reset storm, an endless header block).
public enum HTTP2ClientLimits {
    /// CONTINUATION frames after one HEADERS frame.
    public static let maxContinuations = 8
    /// Entries in one SETTINGS frame.
    public static let maxSettingsEntries = 32
    /// RST_STREAM frames: a burst, then so many a second.
    public static let streamResetBurst: UInt64 = 1000
    public static let streamResetsPerSecond: UInt64 = 33
    /// Bytes of one response's header block (names, values and 32 bytes each, as
    /// SETTINGS_MAX_HEADER_LIST_SIZE counts them), also advertised in that setting. Provider
    /// answers carry a few hundred.
    public static let maxResponseHeaderBytes = 16 * 1024

    /// An `nghttp2_option` with these limits; the caller deletes it after creating the session.
    static func makeOption() throws(HTTP2Error) -> OpaquePointer {
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw HTTP2Error(.protocolError, "nghttp2_option_new failed") }
        nghttp2_option_set_max_continuations(option, maxContinuations)
        nghttp2_option_set_max_settings(option, maxSettingsEntries)
        nghttp2_option_set_stream_reset_rate_limit(option, streamResetBurst, streamResetsPerSecond)
        return option
    }
}

/// HTTP/2 SETTINGS helpers.
enum HTTP2Settings {
    static func submit(_ session: OpaquePointer, _ settings: [(Int32, UInt32)]) -> Int32 {
        var entries = settings.map { nghttp2_settings_entry(settings_id: $0.0, value: $0.1) }
        return nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
    }

    static let maxConcurrentStreams = Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue)
    static let initialWindowSize = Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue)
    static let enablePush = Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue)
    static let maxHeaderListSize = Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue)
}
