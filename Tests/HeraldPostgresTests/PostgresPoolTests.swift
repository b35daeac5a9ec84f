@testable import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct PoolStateMachineTests {
    @Test func opensUpToCapacityThenQueuesInOrder() {
        var machine = PoolStateMachine<String, Int>(capacity: 2)
        guard case .open = machine.acquire(1), case .open = machine.acquire(2) else { Issue.record("expected two opens"); return }
        guard case .wait = machine.acquire(3), case .wait = machine.acquire(4) else { Issue.record("expected waits"); return }
        #expect(machine.open == 2)
        guard case .handOver("a", to: 3) = machine.release("a", reusable: true) else { Issue.record("first waiter first"); return }
        let abandoned = machine.abandon(4)
        let again = machine.abandon(4)
        #expect(abandoned && !again)
        guard case .keep = machine.release("b", reusable: true) else { Issue.record("kept idle"); return }
        guard case .use("b") = machine.acquire(5) else { Issue.record("idle reused"); return }
    }

    @Test func brokenConnectionIsReplacedForAWaiter() {
        var machine = PoolStateMachine<String, Int>(capacity: 1)
        _ = machine.acquire(1)
        _ = machine.acquire(2)
        guard case .closeAndOpen("a", for: 2) = machine.release("a", reusable: false) else { Issue.record("replacement expected"); return }
        #expect(machine.open == 1)
        guard case .close("b") = machine.release("b", reusable: false) else { Issue.record("close expected"); return }
        #expect(machine.open == 0)
        let closed = machine.close()
        #expect(closed.idle.isEmpty)
        guard case .fail(let error) = machine.acquire(3) else { Issue.record("closed pool refuses"); return }
        #expect(error.code == .poolClosed)
    }

    @Test func failedOpenFreesTheSlotForTheNextWaiter() {
        var machine = PoolStateMachine<String, Int>(capacity: 1)
        _ = machine.acquire(1)
        _ = machine.acquire(2)
        let next = machine.openFailed()
        #expect(next == 2)
        #expect(machine.open == 1)
        let none = machine.openFailed()
        #expect(none == nil)
        #expect(machine.open == 0)
    }

    @Test func configurationFromEnvironmentNamesTheBadVariable() throws {
        let configuration = try PostgresPoolConfiguration.fromEnvironment(
            ["HERALD_DATABASE_URL": "postgresql://h/db", "HERALD_DATABASE_POOL_SIZE": "3"])
        #expect(configuration.size == 3)
        #expect(configuration.statementTimeout == .seconds(30))
        #expect {
            try PostgresPoolConfiguration.fromEnvironment(["HERALD_DATABASE_URL": "x", "HERALD_DATABASE_POOL_SIZE": "0"])
        } throws: { error in
            (error as? PostgresError)?.message.contains("HERALD_DATABASE_POOL_SIZE") == true
        }
    }
}

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct PostgresPoolTests {
    private var serverURL: String { get throws { try TestEnvironment.require(TestEnvironment.databaseVariable) } }

    @Test func usageCountsConnectionsInUseIdleAndWaiters() async throws {
        let pool = PostgresPool(PostgresPoolConfiguration(url: try serverURL, size: 1, acquireTimeout: .seconds(10)))
        #expect(pool.usage == (0, 0, 0))
        let held = try await pool.acquire()
        #expect(pool.usage == (1, 0, 0))
        let waiter = Task { try await pool.query("SELECT 1") }
        let deadline = ContinuousClock.now + .seconds(5)
        while pool.usage.waiting == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(pool.usage == (1, 0, 1), "one caller queued behind the held connection")
        pool.release(held)
        _ = try await waiter.value
        #expect(pool.usage == (0, 1, 0))
        await pool.close()
    }

    @Test func connectionsDetectAHalfOpenPeerAndEndIdleTransactions() async throws {
        let pool = PostgresPool(PostgresPoolConfiguration(url: try serverURL, size: 1))
        let connection = try await pool.acquire()
        let options = await connection.options()
        // About 10 + 3 × 5 s of keepalives, and 30 s for unacknowledged data, not 15 minutes.
        #expect(options["keepalives"] == "1" && options["keepalives_idle"] == "10" && options["keepalives_interval"] == "5"
                && options["keepalives_count"] == "3" && options["tcp_user_timeout"] == "30000", "\(options)")
        #expect(try await connection.query("SHOW idle_in_transaction_session_timeout").rows == [["1min"]])
        pool.release(connection)
        await pool.close()
        // The URL's own values win.
        let separator = try serverURL.contains("?") ? "&" : "?"
        let tuned = try await PostgresConnection.connect(try serverURL + separator + "keepalives_idle=60&tcp_user_timeout=5000")
        let tunedOptions = await tuned.options()
        #expect(tunedOptions["keepalives_idle"] == "60" && tunedOptions["tcp_user_timeout"] == "5000" && tunedOptions["keepalives_count"] == "3")
        await tuned.close()
    }

    @Test func waitsForAFreeConnectionAndTimesOut() async throws {
        let pool = PostgresPool(PostgresPoolConfiguration(url: try serverURL, size: 2, acquireTimeout: .milliseconds(300)))
        let first = try await pool.acquire()
        let second = try await pool.acquire()
        #expect(pool.openConnections == 2)
        let clock = ContinuousClock()
        let started = clock.now
        await #expect {
            _ = try await pool.acquire()
        } throws: { error in
            (error as? PostgresError)?.code == .poolTimeout
        }
        #expect(clock.now - started >= .milliseconds(250))
        pool.release(first)
        pool.release(second)
        await pool.close()

        // A waiter gets the connection released while it waits (a pool that waits long, so a
        // late wake-up on a loaded machine cannot turn the hand-over into a timeout).
        let patient = PostgresPool(PostgresPoolConfiguration(url: try serverURL, size: 1, acquireTimeout: .seconds(30)))
        let held = try await patient.acquire()
        async let waiter = patient.acquire()
        try await Task.sleep(for: .milliseconds(50))
        patient.release(held)
        let handed = try await waiter
        #expect(handed === held)
        #expect(patient.openConnections == 1)
        patient.release(handed)
        await patient.close()
    }

    @Test func lostConnectionIsReplacedAndOnlySafeWorkRetried() async throws {
        let pool = PostgresPool(PostgresPoolConfiguration(url: try serverURL, size: 1))
        let admin = try await PostgresConnection.connect(try serverURL)
        let pid = try #require(try await pool.query("SELECT pg_backend_pid()").rows.first?.first ?? nil)
        try await admin.query("SELECT pg_terminate_backend($1::integer)", [pid])
        try await Task.sleep(for: .milliseconds(100))
        // A read is retried on a new connection.
        let newPID = try #require(try await pool.query("SELECT pg_backend_pid()").rows.first?.first ?? nil)
        #expect(newPID != pid)
        // A non-idempotent statement is not retried: the caller sees the loss.
        try await admin.query("SELECT pg_terminate_backend($1::integer)", [newPID])
        try await Task.sleep(for: .milliseconds(100))
        await #expect {
            try await pool.query("SELECT pg_backend_pid()", idempotent: false)
        } throws: { error in
            (error as? PostgresError)?.code == .connectionLost
        }
        // …and the broken connection was replaced.
        let third = try #require(try await pool.query("SELECT pg_backend_pid()").rows.first?.first ?? nil)
        #expect(third != newPID)
        #expect(pool.openConnections == 1)
        await admin.close()
        await pool.close()
    }

    @Test func idempotentWorkOutlastsEveryPooledConnectionBeingBroken() async throws {
        // What a server restart does: every pooled connection is gone at once. Idempotent work
        // finds the broken ones one by one and runs on a new connection; it does not fail.
        let pool = PostgresPool(PostgresPoolConfiguration(url: try serverURL, size: 4))
        let admin = try await PostgresConnection.connect(try serverURL)
        var pids: [String] = []
        var held: [PostgresConnection] = []
        for _ in 0..<4 {
            let connection = try await pool.acquire()
            held.append(connection)
            pids.append(try #require(try await connection.query("SELECT pg_backend_pid()").rows.first?.first ?? nil))
        }
        for connection in held { pool.release(connection) }
        for pid in pids { try await admin.query("SELECT pg_terminate_backend($1::integer)", [pid]) }
        try await Task.sleep(for: .milliseconds(200))
        let value = try await pool.withTransaction(idempotent: true) { connection throws(PostgresError) in
            try await connection.query("SELECT pg_backend_pid()").rows.first?.first ?? nil
        }
        #expect(value != nil && !pids.contains(value ?? ""))
        await admin.close()
        await pool.close()
    }

    @Test func transactionsCommitOrRollBackAndStatementTimeoutApplies() async throws {
        let database = try await TestDatabase.create()
        // 1 s: enough that the setup statements never hit it on a loaded CI machine (200 ms did,
        // once, for CREATE TABLE), short enough that pg_sleep(3) always does.
        let pool = PostgresPool(PostgresPoolConfiguration(url: database.url, size: 1, statementTimeout: .seconds(1)))
        try await pool.query("CREATE TABLE t (v int)", idempotent: false)
        try await pool.withTransaction { connection throws(PostgresError) in
            try await connection.query("INSERT INTO t VALUES (1)")
        }
        await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection throws(PostgresError) in
                try await connection.query("INSERT INTO t VALUES (2)")
                try await connection.query("SELECT 1/0")
            }
        }
        #expect(try await pool.query("SELECT array_agg(v)::text FROM t").rows == [["{1}"]])
        await #expect {
            try await pool.query("SELECT pg_sleep(3)")
        } throws: { error in
            (error as? PostgresError)?.sqlState == "57014"
        }
        // The same (only) connection is still usable afterwards.
        #expect(try await pool.query("SELECT 7").rows == [["7"]])
        await pool.close()
        await database.drop()
    }
}
