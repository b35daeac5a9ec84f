/// A failure of Herald's FCM machinery itself (signing, the token endpoint, transport), as
/// opposed to FCM's answer about one message (``FCMOutcome``).
public struct FCMError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Equatable {
        /// The service account's key could not be loaded or could not sign.
        case signing
        /// The token endpoint refused the assertion (`invalid_grant`, `invalid_scope`, …):
        /// the credential is at fault, retrying will not help.
        case credentials
        /// The token endpoint failed or answered something unreadable; trying later may work.
        case tokenEndpoint
        /// The request could not be sent (connection, TLS, timeout).
        case transport
    }

    public let code: Code
    /// What happened, for people. Never contains the private key or an access token.
    public let message: String
    /// Whether trying again later may succeed.
    public let isRetryable: Bool
    public let file: String
    public let line: Int

    /// Creates an error.
    public init(_ code: Code, _ message: String, isRetryable: Bool? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.isRetryable = isRetryable ?? (code == .tokenEndpoint || code == .transport)
        self.file = file
        self.line = line
    }

    public static func == (lhs: FCMError, rhs: FCMError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.isRetryable == rhs.isRetryable
    }

    public var description: String { "FCMError.\(code.rawValue): \(message)" }
}
