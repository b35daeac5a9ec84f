/// An error from PostgreSQL or libpq, with the server's SQLSTATE when it sent one.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Code: String, Sendable {
        case invalidURL, connectFailed, queryFailed, connectionLost, migrationChanged, unexpectedResult
        /// A `HERALD_DATABASE_*` setting is missing or invalid.
        case configuration
        /// No pooled connection became free within the wait limit.
        case poolTimeout
        /// The pool was closed.
        case poolClosed
        /// The task was cancelled while waiting.
        case cancelled
        /// Stored credentials could not be decrypted (wrong `HERALD_CREDENTIALS_KEY` or a tampered row).
        case credentials
        /// Another worker took the shard over (its lease had expired).
        case leaseLost
        /// A row the operation needs does not exist.
        case notFound
        /// A row is in a state that rules the operation out (resuming a completed job).
        case invalidState
    }

    public let code: Code
    /// What happened, for people. Never contains a password.
    public let message: String
    /// The five-character SQLSTATE (`23505` unique violation, …), when the server sent one.
    public let sqlState: String?
    /// Whether trying again may succeed (connection loss, serialization failure, deadlock).
    public var isRetryable: Bool {
        if code == .connectFailed || code == .connectionLost || code == .poolTimeout { return true }
        guard let sqlState else { return false }
        return sqlState == "40001" || sqlState == "40P01" || sqlState.hasPrefix("08") || sqlState == "57P01"
    }
    public let file: String
    public let line: Int

    init(_ code: Code, _ message: String, sqlState: String? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.file = file
        self.line = line
    }

    public var description: String {
        if let sqlState { return "PostgresError.\(code.rawValue) [\(sqlState)]: \(message)" }
        return "PostgresError.\(code.rawValue): \(message)"
    }
}
