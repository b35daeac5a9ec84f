internal import CLibPQ

/// A PostgreSQL connection string (`postgresql://user@host:port/db?sslmode=require` or
/// `host=… dbname=…`), checked by libpq's own parser before any connection is tried.
public struct ConnectionInfo: Sendable, Equatable {
    /// The connection string as given.
    public let string: String
    /// The options libpq read from it (`host`, `port`, `dbname`, `user`, `sslmode`, …).
    public let options: [String: String]

    /// Parses `string` with `PQconninfoParse`; a malformed one is an error that names the problem.
    public init(_ string: String) throws(PostgresError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(string, &errorMessage) else {
            let reason = errorMessage.map { String(cString: $0) } ?? "out of memory"
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(.invalidURL, "invalid database URL: \(reason.trimmingTrailingNewlines)")
        }
        defer { PQconninfoFree(parsed) }
        var options: [String: String] = [:]
        var option = parsed
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                options[String(cString: keyword)] = String(cString: value)
            }
            option += 1
        }
        self.string = string
        self.options = options
    }

    /// A description safe for logs: host, port, database and user, never the password.
    public var redacted: String {
        let host = options["host"] ?? options["hostaddr"] ?? "localhost"
        let port = options["port"] ?? "5432"
        let user = options["user"].map { "\($0)@" } ?? ""
        return "postgresql://\(user)\(host):\(port)/\(options["dbname"] ?? "")"
    }
}

extension String {
    var trimmingTrailingNewlines: String {
        var text = self
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return text
    }
}
