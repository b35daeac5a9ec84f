internal import CLibPQ
import Synchronization
import Dispatch
import Glibc

/// One libpq connection. Every libpq call runs on the connection's own serial queue, so blocking
/// never happens on Swift's cooperative threads. Values always travel as parameters
/// (`PQexecParams`), never pasted into SQL text.
public final class PostgresConnection: Sendable {
    private let handle: PGConnectionHandle
    private let queue: DispatchQueue
    private let broken = Mutex(false)
    /// The connection string, parsed.
    public let info: ConnectionInfo

    private init(handle: PGConnectionHandle, info: ConnectionInfo) {
        self.handle = handle
        self.info = info
        self.queue = DispatchQueue(label: "herald.postgres.connection")
    }

    /// Whether the connection was lost (a query failed with `connectionLost`); a pool closes
    /// such a connection instead of reusing it.
    public var isBroken: Bool { broken.withLock { $0 } }

    /// Whether the connection is open and outside any transaction, so a pool may hand it to
    /// the next caller. False after a lost connection or a transaction left open.
    public var isReusable: Bool {
        guard !isBroken else { return false }
        let handle = self.handle
        // Reads two fields of the PGconn; no I/O. On the queue because the handle lives there.
        return queue.sync { handle.isIdle }
    }

    private func record<T>(_ result: Result<T, PostgresError>) throws(PostgresError) -> T {
        if case .failure(let error) = result, error.code == .connectionLost {
            broken.withLock { $0 = true }
        }
        return try result.get()
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

    /// The libpq options the connection was made with (`PQconninfo`), without the password.
    public func options() async -> [String: String] {
        let handle = self.handle
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.options()) }
        }
    }

    /// Runs SQL text that may hold several statements and takes no parameters (migrations, `BEGIN`).
    public func execute(_ sql: String) async throws(PostgresError) {
        let handle = self.handle
        let result: Result<Void, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.execute(sql)) }
        }
        try record(result)
    }

    /// Runs one statement with text parameters (`$1`, `$2`, … ; nil is SQL NULL) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) async throws(PostgresError) -> PostgresRows {
        let handle = self.handle
        let result: Result<PostgresRows, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.query(sql, parameters)) }
        }
        return try record(result)
    }

    /// Runs one statement with text parameters and turns each row into a `T` with `decode`,
    /// straight from libpq's buffer (no intermediate array of strings). `decode` runs on the
    /// connection's queue; returning nil skips the row.
    public func query<T: Sendable>(_ sql: String, _ parameters: [String?],
                                   decode: @escaping @Sendable (PostgresRow) -> T?) async throws(PostgresError) -> [T] {
        let handle = self.handle
        let result: Result<[T], PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.query(sql, parameters, decode: decode)) }
        }
        return try record(result)
    }

    /// Runs `COPY … FROM STDIN` (`sql`) and streams what `produce` writes: it is called on the
    /// connection's queue with an empty buffer to fill, again and again, until it returns false.
    /// Returns the number of rows copied.
    @discardableResult
    public func copyIn(_ sql: String, produce: @escaping @Sendable (inout [UInt8]) -> Bool) async throws(PostgresError) -> Int {
        let handle = self.handle
        let result: Result<Int, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: handle.copyIn(sql, produce: produce)) }
        }
        return try record(result)
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

/// One row of a result, read in place from libpq's buffer (text format). Valid only inside
/// the `decode` closure it is handed to.
public struct PostgresRow {
    private let result: OpaquePointer
    private let row: Int32

    init(result: OpaquePointer, row: Int32) {
        self.result = result
        self.row = row
    }

    /// Whether column `column` is SQL NULL.
    public func isNull(_ column: Int) -> Bool { PQgetisnull(result, row, Int32(column)) == 1 }

    /// Column `column` as text, nil for NULL.
    public func string(_ column: Int) -> String? {
        isNull(column) ? nil : String(cString: PQgetvalue(result, row, Int32(column)))
    }

    /// A boolean column (`t`/`f`); NULL is false.
    public func bool(_ column: Int) -> Bool {
        guard !isNull(column), let value = PQgetvalue(result, row, Int32(column)) else { return false }
        return value.pointee == CChar(UInt8(ascii: "t"))
    }

    /// An integer column, nil for NULL or not an integer.
    public func int64(_ column: Int) -> Int64? {
        guard !isNull(column), let value = PQgetvalue(result, row, Int32(column)) else { return nil }
        var pointer = value
        var negative = false
        if pointer.pointee == CChar(UInt8(ascii: "-")) { negative = true; pointer += 1 }
        var number: Int64 = 0
        var digits = 0
        while pointer.pointee >= CChar(UInt8(ascii: "0")) && pointer.pointee <= CChar(UInt8(ascii: "9")) {
            let (times, overflow1) = number.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(pointer.pointee) - 48)
            if overflow1 || overflow2 { return nil }
            number = sum
            digits += 1
            pointer += 1
        }
        guard digits > 0, pointer.pointee == 0 else { return nil }
        return negative ? -number : number
    }
}

/// Owns a `PGconn`. `@unchecked Sendable`: only ever used from its connection's serial queue
/// (or before that queue exists, while connecting).
final class PGConnectionHandle: @unchecked Sendable {
    private var connection: OpaquePointer?

    private init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// libpq options Herald sets unless the URL sets them.
    static let defaultOptions: [(key: String, value: String)] = [
        ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "30000"),
    ]

    /// The options the connection was made with (`PQconninfo`), passwords left out.
    func options() -> [String: String] {
        guard let connection, let info = PQconninfo(connection) else { return [:] }
        defer { PQconninfoFree(info) }
        var options: [String: String] = [:]
        var entry = info
        while let keyword = entry.pointee.keyword {
            let name = String(cString: keyword)
            if name != "password", let value = entry.pointee.val { options[name] = String(cString: value) }
            entry += 1
        }
        return options
    }

    static func open(_ info: ConnectionInfo, applicationName: String) -> Result<PGConnectionHandle, PostgresError> {
        // Before dbname, so the URL's own values win. TCP keepalives and tcp_user_timeout make
        // a half-open connection (a failed-over server, a dropped NAT entry) fail within about
        // 30 s instead of the kernel's 15 minutes of retransmissions.
        let keys = Self.defaultOptions.map(\.key) + ["dbname", "application_name", "connect_timeout"]
        let values = Self.defaultOptions.map(\.value) + [info.string, applicationName, "10"]
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
        if let refused = Self.refuseNUL(parameters) { return .failure(refused) }
        let result = execParams(connection, sql, parameters)
        defer { PQclear(result) }
        return check(result, connection)
    }

    /// A C string ends at its first NUL, so a parameter holding U+0000 would reach the server
    /// cut short, silently. Such a statement is refused instead, with the SQLSTATE PostgreSQL
    /// itself gives a NUL in text (22021, character not in repertoire): a permanent failure of
    /// the statement, never a retry.
    static func refuseNUL(_ parameters: [String?]) -> PostgresError? {
        for (index, parameter) in parameters.enumerated() {
            guard let parameter, parameter.utf8.contains(0) else { continue }
            return PostgresError(.queryFailed, "parameter $\(index + 1) contains U+0000 (a NUL byte), which PostgreSQL text cannot hold",
                                 sqlState: "22021")
        }
        return nil
    }

    /// Runs one statement with text parameters. Parameters go as separate C strings, so values
    /// are never part of the SQL text.
    private func execParams(_ connection: OpaquePointer, _ sql: String, _ parameters: [String?]) -> OpaquePointer? {
        var storage: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.flatMap { strdup($0) } }
        defer { storage.forEach { free($0) } }
        return storage.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { values in
                PQexecParams(connection, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
    }

    private func check(_ result: OpaquePointer?, _ connection: OpaquePointer, collectRows: Bool = true) -> Result<PostgresRows, PostgresError> {
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
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        guard collectRows else { return .success(PostgresRows(columns: [], rows: [], affected: affected)) }
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
        return .success(PostgresRows(columns: columns, rows: rows, affected: affected))
    }

    var isIdle: Bool {
        guard let connection else { return false }
        return PQstatus(connection) == CONNECTION_OK && PQtransactionStatus(connection) == PQTRANS_IDLE
    }

    func query<T>(_ sql: String, _ parameters: [String?], decode: (PostgresRow) -> T?) -> Result<[T], PostgresError> {
        guard let connection else { return .failure(PostgresError(.connectionLost, "connection is closed")) }
        if let refused = Self.refuseNUL(parameters) { return .failure(refused) }
        let result = execParams(connection, sql, parameters)
        defer { PQclear(result) }
        if case .failure(let error) = check(result, connection, collectRows: false) { return .failure(error) }
        guard let result else { return .success([]) }
        let rowCount = Int(PQntuples(result))
        var values: [T] = []
        values.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            if let value = decode(PostgresRow(result: result, row: Int32(row))) { values.append(value) }
        }
        return .success(values)
    }

    func copyIn(_ sql: String, produce: (inout [UInt8]) -> Bool) -> Result<Int, PostgresError> {
        guard let connection else { return .failure(PostgresError(.connectionLost, "connection is closed")) }
        let start = PQexec(connection, sql)
        let status = PQresultStatus(start)
        if status != PGRES_COPY_IN {
            defer { PQclear(start) }
            if case .failure(let error) = check(start, connection, collectRows: false) { return .failure(error) }
            return .failure(PostgresError(.unexpectedResult, "not a COPY FROM STDIN statement"))
        }
        PQclear(start)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 20)
        var failure: String?
        while true {
            buffer.removeAll(keepingCapacity: true)
            let more = produce(&buffer)
            if !buffer.isEmpty {
                let sent = buffer.withUnsafeBufferPointer { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
                }
                if sent != 1 {
                    failure = String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines
                    break
                }
            }
            if !more { break }
        }
        if PQputCopyEnd(connection, nil) != 1, failure == nil {
            failure = String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines
        }
        var outcome: Result<Int, PostgresError> = .failure(PostgresError(.connectionLost, failure ?? "COPY ended without a result"))
        // Drain every result so the connection is ready for the next statement.
        while let result = PQgetResult(connection) {
            switch check(result, connection, collectRows: false) {
            case .success(let rows): outcome = .success(rows.affected)
            case .failure(let error): outcome = .failure(error)
            }
            PQclear(result)
        }
        return outcome
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
