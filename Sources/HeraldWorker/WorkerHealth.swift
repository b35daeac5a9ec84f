import HeraldPostgres

/// Liveness from heartbeats (pure): each part that must keep turning (every provider event
/// loop, every lane's consumer poll thread, the producer's poll thread) has a counter that moves
/// while it turns, idle or busy. A counter that has not moved for `stall` marks the worker
/// stalled, so `/healthz` fails and the orchestrator restarts it. Work done is not a heartbeat:
/// an idle worker is healthy.
struct HeartbeatMonitor: Sendable {
    private var beats: [String: (count: UInt64, changed: ContinuousClock.Instant)] = [:]

    /// An empty monitor.
    init() {}

    /// Records `count` of the heartbeat `name` read at `now`.
    mutating func observe(_ name: String, count: UInt64, at now: ContinuousClock.Instant) {
        if let last = beats[name], last.count == count { return }
        beats[name] = (count, now)
    }

    /// The heartbeats that have not moved for longer than `stall`, sorted.
    func stalled(at now: ContinuousClock.Instant, after stall: Duration) -> [String] {
        beats.filter { now - $0.value.changed > stall }.map(\.key).sorted()
    }
}

/// What `/readyz` answers (pure). Ready once every lane has completed its first consumer-group
/// join (its assignment may be empty: workers may outnumber partitions) and PostgreSQL answers;
/// the body names what is missing, `kafka` or `db`, never a library's error text.
enum Readiness {
    /// Status and body for the probe.
    static func answer(stopping: Bool, lanesJoined: Int, lanes: Int, databaseAnswers: Bool) -> (status: Int, body: String) {
        if stopping { return (503, "stopping\n") }
        if lanesJoined < lanes { return (503, "kafka\n") }
        if !databaseAnswers { return (503, "db\n") }
        return (200, "ready\n")
    }
}

/// PostgreSQL as `/readyz` sees it: `SELECT 1` on a connection of its own (never queued behind
/// work in the pool), at most once every `freshFor`; while a new check runs, the last answer is
/// given, so a probe never waits on a slow server once one answer is known.
actor DatabaseProbe {
    private let url: String
    private let freshFor: Duration
    private var connection: PostgresConnection?
    private var last: (at: ContinuousClock.Instant, answers: Bool)?
    private var running: Task<Bool, Never>?

    init(url: String, freshFor: Duration = .seconds(2)) {
        self.url = url
        self.freshFor = freshFor
    }

    /// Whether PostgreSQL answered the latest check.
    func answers() async -> Bool {
        if let last, ContinuousClock.now - last.at < freshFor { return last.answers }
        let check: Task<Bool, Never>
        if let running {
            check = running
        } else {
            check = Task { await self.check() }
            running = check
        }
        if let last { return last.answers }
        return await check.value
    }

    private func check() async -> Bool {
        var answers = false
        do {
            let connection: PostgresConnection
            if let open = self.connection {
                connection = open
            } else {
                connection = try await PostgresConnection.connect(url, applicationName: "herald-readyz")
            }
            self.connection = connection
            _ = try await connection.query("SELECT 1")
            answers = true
        } catch {
            await connection?.close()
            connection = nil
        }
        last = (ContinuousClock.now, answers)
        running = nil
        return answers
    }

    func close() async {
        await connection?.close()
        connection = nil
    }
}
