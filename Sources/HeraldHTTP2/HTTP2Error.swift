/// A transport failure, typed so callers can decide to retry (docs/ARCHITECTURE.md: 429, 5xx, connection
/// loss, GOAWAY and REFUSED_STREAM are retryable; the rest are not).
public struct HTTP2Error: Error, Sendable, CustomStringConvertible, Equatable {
    /// What went wrong.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case connectFailed, tlsHandshakeFailed, timeout, protocolError, connectionLost, shutdown, headersTooLarge
            case goaway(retryable: Bool)
            case streamReset(UInt32)
        }
        private let base: Base

        /// TCP connect failed (refused, unreachable, DNS).
        public static let connectFailed = Code(base: .connectFailed)
        /// TLS failed, or ALPN did not select `h2`.
        public static let tlsHandshakeFailed = Code(base: .tlsHandshakeFailed)
        /// The request's deadline passed.
        public static let timeout = Code(base: .timeout)
        /// The server sent GOAWAY; `retryable` when it never processed the request.
        public static func goaway(retryable: Bool) -> Code { Code(base: .goaway(retryable: retryable)) }
        /// The stream was reset with this HTTP/2 error code (REFUSED_STREAM = 7).
        public static func streamReset(_ code: UInt32) -> Code { Code(base: .streamReset(code)) }
        /// The peer broke the protocol, or the connection was lost mid-request.
        public static let protocolError = Code(base: .protocolError)
        /// The connection closed while the request was in flight.
        public static let connectionLost = Code(base: .connectionLost)
        /// The client was shut down.
        public static let shutdown = Code(base: .shutdown)
        /// The response's header block passed ``HTTP2ClientLimits/maxResponseHeaderBytes``: the
        /// stream was reset. A transport fault of a misbehaving peer, retried like one.
        public static let headersTooLarge = Code(base: .headersTooLarge)

        /// Whether this is a GOAWAY, whichever its `retryable`.
        var isGoaway: Bool {
            if case .goaway = base { true } else { false }
        }

        /// See ``HTTP2Error/isRetryable``.
        var isRetryable: Bool {
            switch base {
            case .connectFailed, .timeout, .connectionLost, .headersTooLarge: true
            case .goaway(let retryable): retryable
            case .streamReset(let code): code == 7 || code == 0 || code == 2 || code == 11  // REFUSED_STREAM, NO_ERROR, INTERNAL, ENHANCE_YOUR_CALM
            case .tlsHandshakeFailed, .protocolError, .shutdown: false
            }
        }

        public var description: String {
            switch base {
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

    /// What went wrong.
    public let code: Code
    /// What happened, for people.
    public let message: String
    /// Where the error was raised.
    public let file: String
    /// The line where the error was raised.
    public let line: Int

    /// Whether sending again (on another connection, after a backoff) may succeed.
    public var isRetryable: Bool { code.isRetryable }

    /// Creates an error, recording where it is raised.
    public init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { "HTTP2Error.\(code): \(message)" }

    /// Equal when code and message are: where each was raised is left out, so an error a test
    /// expects equals the one the code under test made.
    public static func == (lhs: HTTP2Error, rhs: HTTP2Error) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }
}
