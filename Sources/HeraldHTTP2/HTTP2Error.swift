/// A transport failure, typed so callers can decide to retry (DESIGN §4: 429, 5xx, connection
/// loss, GOAWAY and REFUSED_STREAM are retryable; the rest are not).
public struct HTTP2Error: Error, Sendable, CustomStringConvertible, Equatable {
    /// What went wrong.
    public enum Code: Sendable, Equatable, CustomStringConvertible {
        /// TCP connect failed (refused, unreachable, DNS).
        case connectFailed
        /// TLS failed, or ALPN did not select `h2`.
        case tlsHandshakeFailed
        /// The request's deadline passed.
        case timeout
        /// The server sent GOAWAY; `retryable` when it never processed the request.
        case goaway(retryable: Bool)
        /// The stream was reset with this HTTP/2 error code (REFUSED_STREAM = 7).
        case streamReset(UInt32)
        /// The peer broke the protocol, or the connection was lost mid-request.
        case protocolError
        /// The connection closed while the request was in flight.
        case connectionLost
        /// The client was shut down.
        case shutdown
        /// The response's header block passed ``HTTP2ClientLimits/maxResponseHeaderBytes``: the
        /// stream was reset. A transport fault of a misbehaving peer, retried like one.
        case headersTooLarge

        public var description: String {
            switch self {
            case .connectFailed: "connectFailed"
            case .tlsHandshakeFailed: "tlsHandshakeFailed"
            case .timeout: "timeout"
            case .goaway(let retryable): "goaway(retryable: \(retryable))"
            case .streamReset(let code): "streamReset(\(code))"
            case .protocolError: "protocolError"
            case .connectionLost: "connectionLost"
            case .shutdown: "shutdown"
            case .headersTooLarge: "headersTooLarge"
            }
        }
    }

    public let code: Code
    /// What happened, for people.
    public let message: String

    /// Whether sending again (on another connection, after a backoff) may succeed.
    public var isRetryable: Bool {
        switch code {
        case .connectFailed, .timeout, .connectionLost, .headersTooLarge: true
        case .goaway(let retryable): retryable
        case .streamReset(let code): code == 7 || code == 0 || code == 2 || code == 11  // REFUSED_STREAM, NO_ERROR, INTERNAL, ENHANCE_YOUR_CALM
        case .tlsHandshakeFailed, .protocolError, .shutdown: false
        }
    }

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "HTTP2Error.\(code): \(message)" }
}
