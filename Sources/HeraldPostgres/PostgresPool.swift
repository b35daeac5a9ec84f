import HeraldCore
import Foundation
import Synchronization

/// How a `PostgresPool` connects and how long it waits.
public struct PostgresPoolConfiguration: Sendable {
    /// The database URL (`HERALD_DATABASE_URL`), `sslmode` and all.
    public var url: String
    /// Most connections open at once (`HERALD_DATABASE_POOL_SIZE`, default 8).
    public var size: Int
    /// How long `acquire` waits for a free connection before failing with `poolTimeout`
    /// (`HERALD_DATABASE_ACQUIRE_TIMEOUT_MS`, default 10 s).
    public var acquireTimeout: Duration
    /// `statement_timeout` set on every connection (`HERALD_DATABASE_STATEMENT_TIMEOUT_MS`,
    /// default 30 s); 0 disables it.
    public var statementTimeout: Duration
    /// `application_name`, shown in `pg_stat_activity`.
    public var applicationName: String
    /// How long idempotent work (`retryingIfLost`) keeps trying, with backoff, when its
    /// connection is lost or the server refuses connections (a restart, a failover), before the
    /// error reaches the caller. Default 15 s: half a shard lease.
    public var reconnectWindow: Duration = .seconds(15)
    /// `idle_in_transaction_session_timeout` on every connection (default 60 s): a transaction
    /// left open (a bug, a stalled worker) is ended by the server instead of holding its locks
    /// and its connection for good. Herald's own transactions never wait on anything but SQL.
    public var idleInTransactionTimeout: Duration = .seconds(60)

    /// A configuration with the documented defaults.
    public init(url: String, size: Int = 8, acquireTimeout: Duration = .seconds(10),
                statementTimeout: Duration = .seconds(30), applicationName: String = "herald") {
        self.url = url
        self.size = size
        self.acquireTimeout = acquireTimeout
        self.statementTimeout = statementTimeout
        self.applicationName = applicationName
    }

    /// Reads `HERALD_DATABASE_URL`, `HERALD_DATABASE_POOL_SIZE`, `HERALD_DATABASE_ACQUIRE_TIMEOUT_MS`
    /// and `HERALD_DATABASE_STATEMENT_TIMEOUT_MS`; an invalid value is an error naming the variable.
    public static func fromEnvironment(_ environment: [String: String]? = nil,
                                       url: String? = nil) throws(PostgresError) -> PostgresPoolConfiguration {
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard let url = url ?? environment["HERALD_DATABASE_URL"], !url.isEmpty else {
            throw PostgresError(.configuration, "HERALD_DATABASE_URL is not set")
        }
        func integer(_ name: String, _ range: ClosedRange<Int>, _ fallback: Int) throws(PostgresError) -> Int {
            guard let text = environment[name], !text.isEmpty else { return fallback }
            guard let value = Int(text), range.contains(value) else {
                throw PostgresError(.configuration, "\(name) must be an integer in \(range.lowerBound)...\(range.upperBound), got \"\(text.prefix(32))\"")
            }
            return value
        }
        return PostgresPoolConfiguration(
            url: url,
            size: try integer("HERALD_DATABASE_POOL_SIZE", 1...256, 8),
            acquireTimeout: .milliseconds(try integer("HERALD_DATABASE_ACQUIRE_TIMEOUT_MS", 1...3_600_000, 10_000)),
            statementTimeout: .milliseconds(try integer("HERALD_DATABASE_STATEMENT_TIMEOUT_MS", 0...86_400_000, 30_000)))
    }
}

/// The pool's bookkeeping as a synchronous state machine: it decides, the pool acts.
/// Generic so it is tested without a database.
struct PoolStateMachine<Connection, Waiter: Hashable> {
    enum AcquireAction {
        case use(Connection)
        /// Open a new connection for this caller (a slot is already counted).
        case open
        /// Queue the caller until a connection is released or the wait limit passes.
        case wait
        case fail(PostgresError)
    }

    enum ReleaseAction {
        /// Kept idle.
        case keep
        /// Hand the connection to a waiting caller.
        case handOver(Connection, to: Waiter)
        /// Close the connection; nobody needs a replacement.
        case close(Connection)
        /// Close the broken connection and open a replacement for a waiting caller.
        case closeAndOpen(Connection, for: Waiter)
    }

    let capacity: Int
    private(set) var idle: [Connection] = []
    /// Connections open or being opened (idle + lent out + opening).
    private(set) var open = 0
    private(set) var waiters: [Waiter] = []
    private(set) var closed = false

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    mutating func acquire(_ waiter: Waiter) -> AcquireAction {
        if closed { return .fail(PostgresError(.poolClosed, "the connection pool is closed")) }
        if let connection = idle.popLast() { return .use(connection) }
        if open < capacity {
            open += 1
            return .open
        }
        waiters.append(waiter)
        return .wait
    }

    /// A caller stopped waiting (time limit, cancellation). True when it was still queued.
    mutating func abandon(_ waiter: Waiter) -> Bool {
        guard let index = waiters.firstIndex(of: waiter) else { return false }
        waiters.remove(at: index)
        return true
    }

    mutating func release(_ connection: Connection, reusable: Bool) -> ReleaseAction {
        if reusable && !closed {
            if !waiters.isEmpty { return .handOver(connection, to: waiters.removeFirst()) }
            idle.append(connection)
            return .keep
        }
        open -= 1
        if !closed, !waiters.isEmpty {
            open += 1
            return .closeAndOpen(connection, for: waiters.removeFirst())
        }
        return .close(connection)
    }

    /// Opening a connection failed: its slot is free again. Returns a waiter to open for, if any.
    mutating func openFailed() -> Waiter? {
        open -= 1
        if !closed, !waiters.isEmpty {
            open += 1
            return waiters.removeFirst()
        }
        return nil
    }

    /// Closes the pool: returns the idle connections to close and the waiters to fail.
    mutating func close() -> (idle: [Connection], waiters: [Waiter]) {
        closed = true
        let result = (idle, waiters)
        open -= idle.count
        idle = []
        waiters = []
        return result
    }
}

/// A bounded pool of `PostgresConnection`s. Callers wait (up to the configured limit) when all
/// are lent out. A connection that broke is closed and replaced; work is retried on a fresh
/// connection only when the caller says it is safe (reads, idempotent writes).
public final class PostgresPool: Sendable {
    /// The configuration the pool was made with.
    public let configuration: PostgresPoolConfiguration

    private typealias Waiting = CheckedContinuation<Result<PostgresConnection, PostgresError>, Never>

    private struct State {
        var machine: PoolStateMachine<PostgresConnection, UInt64>
        var waiting: [UInt64: Waiting] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    /// A pool; connections are opened on demand.
    public init(_ configuration: PostgresPoolConfiguration) {
        self.configuration = configuration
        self.state = Mutex(State(machine: PoolStateMachine(capacity: configuration.size)))
    }

    /// Connections currently open (idle + lent out + being opened).
    public var openConnections: Int { state.withLock { $0.machine.open } }

    /// Right now: connections lent out (or being opened), idle, and callers waiting for one.
    public var usage: (inUse: Int, idle: Int, waiting: Int) {
        state.withLock { state in
            (state.machine.open - state.machine.idle.count, state.machine.idle.count, state.machine.waiters.count)
        }
    }

    /// Borrows a connection; give it back with `release`. Prefer `withConnection`.
    public func acquire() async throws(PostgresError) -> PostgresConnection {
        if Task.isCancelled { throw PostgresError(.cancelled, "cancelled before acquiring a database connection") }
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        let result: Result<PostgresConnection, PostgresError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiting) in
                let action = state.withLock { state in
                    let action = state.machine.acquire(id)
                    if case .wait = action { state.waiting[id] = continuation }
                    return action
                }
                switch action {
                case .use(let connection):
                    continuation.resume(returning: .success(connection))
                case .open:
                    openConnection(for: continuation)
                case .wait:
                    let limit = configuration.acquireTimeout
                    Task { [weak self] in
                        try? await Task.sleep(for: limit)
                        self?.stopWaiting(id, PostgresError(.poolTimeout, "no database connection free within \(limit) (pool size \(self?.configuration.size ?? 0))"))
                    }
                case .fail(let error):
                    continuation.resume(returning: .failure(error))
                }
            }
        } onCancel: {
            stopWaiting(id, PostgresError(.cancelled, "cancelled while waiting for a database connection"))
        }
        return try result.get()
    }

    /// Gives a connection back. A broken one, or one left inside a transaction, is closed.
    public func release(_ connection: PostgresConnection) {
        let reusable = connection.isReusable
        let action = state.withLock { $0.machine.release(connection, reusable: reusable) }
        switch action {
        case .keep:
            break
        case .handOver(let connection, let waiter):
            let continuation = state.withLock { $0.waiting.removeValue(forKey: waiter) }
            continuation?.resume(returning: .success(connection))
        case .close(let connection):
            Task { await connection.close() }
        case .closeAndOpen(let connection, let waiter):
            Task { await connection.close() }
            if let continuation = state.withLock({ $0.waiting.removeValue(forKey: waiter) }) {
                openConnection(for: continuation)
            }
        }
    }

    /// Runs `body` with a borrowed connection. When the connection is lost, or no connection can
    /// be made, and `retryingIfLost` is true (reads, idempotent writes only), runs it again on a
    /// new one: at once the first time (another pooled connection may be fine), then with
    /// backoff until ``PostgresPoolConfiguration/reconnectWindow`` has passed, so a server
    /// restart costs a pause rather than an error. (The idle connections a restart broke are
    /// found one by one.)
    public func withConnection<T>(retryingIfLost: Bool = false,
                                  _ body: (PostgresConnection) async throws(PostgresError) -> T) async throws(PostgresError) -> T {
        let clock = ContinuousClock()
        let deadline = clock.now + configuration.reconnectWindow
        var backoff = Backoff(first: .milliseconds(100), maximum: .seconds(2))
        var attempt = 0
        func mayRetry() async -> Bool {
            guard retryingIfLost, !Task.isCancelled else { return false }
            if attempt == 1 { return true }
            guard clock.now + backoff.upcoming < deadline else { return false }
            try? await Task.sleep(for: backoff.next())
            return true
        }
        while true {
            attempt += 1
            let connection: PostgresConnection
            do throws(PostgresError) {
                connection = try await acquire()
            } catch {
                if error.code == .connectFailed, await mayRetry() { continue }
                throw error
            }
            do throws(PostgresError) {
                let value = try await body(connection)
                release(connection)
                return value
            } catch {
                let lost = connection.isBroken
                release(connection)
                if lost, await mayRetry() { continue }
                throw error
            }
        }
    }

    /// Runs `body` inside `BEGIN … COMMIT`, rolling back when it throws. With `idempotent`, a
    /// transaction whose connection was lost is run again from the start on a new connection.
    public func withTransaction<T>(idempotent: Bool = false,
                                   _ body: (PostgresConnection) async throws(PostgresError) -> T) async throws(PostgresError) -> T {
        try await withConnection(retryingIfLost: idempotent) { connection throws(PostgresError) -> T in
            try await connection.execute("BEGIN")
            do throws(PostgresError) {
                let value = try await body(connection)
                try await connection.execute("COMMIT")
                return value
            } catch {
                if !connection.isBroken { try? await connection.execute("ROLLBACK") }
                throw error
            }
        }
    }

    /// Runs one read-only or idempotent statement, retried once on a new connection if the
    /// connection was lost.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = [], idempotent: Bool = true) async throws(PostgresError) -> PostgresRows {
        try await withConnection(retryingIfLost: idempotent) { connection throws(PostgresError) in
            try await connection.query(sql, parameters)
        }
    }

    /// Closes idle connections and fails waiting callers; lent-out connections close when released.
    public func close() async {
        let (idle, waiters) = state.withLock { $0.machine.close() }
        for waiter in waiters {
            state.withLock { $0.waiting.removeValue(forKey: waiter) }?
                .resume(returning: .failure(PostgresError(.poolClosed, "the connection pool is closed")))
        }
        for connection in idle { await connection.close() }
    }

    private func stopWaiting(_ id: UInt64, _ error: PostgresError) {
        let continuation = state.withLock { state -> Waiting? in
            guard state.machine.abandon(id) else { return nil }
            return state.waiting.removeValue(forKey: id)
        }
        continuation?.resume(returning: .failure(error))
    }

    private func openConnection(for continuation: Waiting) {
        let configuration = self.configuration
        Task {
            do throws(PostgresError) {
                let connection = try await PostgresConnection.connect(configuration.url, applicationName: configuration.applicationName)
                // Timestamps are read back as ISO text in UTC (SQLValue.timestamp), whatever the
                // server's defaults.
                try await connection.query("""
                    SELECT set_config('statement_timeout', $1, false), set_config('idle_in_transaction_session_timeout', $2, false),
                           set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO', false)
                    """, [String(configuration.statementTimeout.milliseconds), String(configuration.idleInTransactionTimeout.milliseconds)])
                continuation.resume(returning: .success(connection))
            } catch {
                continuation.resume(returning: .failure(error))
                let next = state.withLock { state -> Waiting? in
                    guard let waiter = state.machine.openFailed() else { return nil }
                    return state.waiting.removeValue(forKey: waiter)
                }
                if let next { openConnection(for: next) }
            }
        }
    }
}
