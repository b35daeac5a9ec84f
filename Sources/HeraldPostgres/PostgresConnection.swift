internal import CLibPQ
import Dispatch
import Glibc

/// One libpq connection. Every libpq call runs on the connection's own serial queue, so blocking
/// never happens on Swift's cooperative threads. Values always travel as parameters
/// (`PQexecParams`), never pasted into SQL text.
public final class PostgresConnection: Sendable {
    private let handle: PGConnectionHandle
    private let queue: DispatchQueue
    /// The connection string, parsed.
    public let info: ConnectionInfo

    private init(handle: PGConnectionHandle, info: ConnectionInfo) {
        self.handle = handle
        self.info = info
        self.queue = DispatchQueue(label: "herald.postgres.connection")
    }

    /// Connects to `url`.
    public static func connect(_ url: String, applicationName: String = "herald") async throws(PostgresError) -> PostgresConnection {
        let info = try ConnectionInfo(url)
        let result: Result<PGConnectionHandle, PostgresError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: PGConnectionHandle.open(info, applicationName: applicationName))
            }
        }
        return PostgresConnection(handle: try result.get(), info: info)
    }

    /// Runs SQL text that may hold several statements and takes no parameters (migrations, `BEGIN`).
    public func execute(_ sql: String) async throws(PostgresError) {
        let handle = self.handle
        let result: Result<Void, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.execute(sql)) }
        }
        try result.get()
    }

    /// Runs one statement with text parameters (`$1`, `$2`, … ; nil is SQL NULL) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) async throws(PostgresError) -> PostgresRows {
        let handle = self.handle
        let result: Result<PostgresRows, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.query(sql, parameters)) }
        }
        return try result.get()
    }

    /// Closes the connection (also done when the last reference goes).
    public func close() async {
        let handle = self.handle
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                handle.close()
                continuation.resume()
            }
        }
    }
}

/// The rows of a result, as text (libpq's text format), with column names.
public struct PostgresRows: Sendable {
    /// Column names, in order.
    public let columns: [String]
    /// Each row's values; nil is SQL NULL.
    public let rows: [[String?]]
    /// For INSERT/UPDATE/DELETE: the number of rows affected.
    public let affected: Int

    /// The value of `column` in row `row`, or nil when NULL or absent.
    public func value(_ row: Int, _ column: String) -> String? {
        guard row < rows.count, let index = columns.firstIndex(of: column) else { return nil }
        return rows[row][index]
    }
}

/// Owns a `PGconn`. `@unchecked Sendable`: only ever used from its connection's serial queue
/// (or before that queue exists, while connecting).
final class PGConnectionHandle: @unchecked Sendable {
    private var connection: OpaquePointer?

    private init(connection: OpaquePointer) {
        self.connection = connection
    }

    static func open(_ info: ConnectionInfo, applicationName: String) -> Result<PGConnectionHandle, PostgresError> {
        let keys = ["dbname", "application_name", "connect_timeout"]
        let values = [info.string, applicationName, "10"]
        // expand_dbname = 1: the first dbname value is a full connection string or URL.
        let connection = withCStrings(keys) { keyPointers in
            withCStrings(values) { valuePointers in
                PQconnectdbParams(keyPointers, valuePointers, 1)
            }
        }
        guard let connection else {
            return .failure(PostgresError(.connectFailed, "cannot allocate a connection to \(info.redacted)"))
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let reason = String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines
            PQfinish(connection)
            return .failure(PostgresError(.connectFailed, "cannot connect to \(info.redacted): \(reason)"))
        }
        return .success(PGConnectionHandle(connection: connection))
    }

    func execute(_ sql: String) -> Result<Void, PostgresError> {
        guard let connection else { return .failure(PostgresError(.connectionLost, "connection is closed")) }
        let result = PQexec(connection, sql)
        defer { PQclear(result) }
        return check(result, connection).map { _ in () }
    }

    func query(_ sql: String, _ parameters: [String?]) -> Result<PostgresRows, PostgresError> {
        guard let connection else { return .failure(PostgresError(.connectionLost, "connection is closed")) }
        // Parameters go as separate C strings so values are never part of the SQL text.
        var storage: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.flatMap { strdup($0) } }
        defer { storage.forEach { free($0) } }
        let result = storage.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { values in
                PQexecParams(connection, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
        defer { PQclear(result) }
        return check(result, connection)
    }

    private func check(_ result: OpaquePointer?, _ connection: OpaquePointer) -> Result<PostgresRows, PostgresError> {
        guard let result else {
            let reason = String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines
            return .failure(PostgresError(.connectionLost, reason))
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            break
        default:
            let reason = String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            if PQstatus(connection) != CONNECTION_OK {
                return .failure(PostgresError(.connectionLost, reason, sqlState: state))
            }
            return .failure(PostgresError(.queryFailed, reason, sqlState: state))
        }
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        let columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        var rows: [[String?]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            rows.append((0..<columnCount).map { column in
                PQgetisnull(result, Int32(row), Int32(column)) == 1 ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
            })
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return .success(PostgresRows(columns: columns, rows: rows, affected: affected))
    }

    func close() {
        if let connection { PQfinish(connection) }
        connection = nil
    }

    deinit { close() }
}

private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { $0.map { UnsafePointer($0) } } + [nil])
}
