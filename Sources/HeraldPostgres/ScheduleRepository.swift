public import HeraldCore

/// One row of `scheduled_jobs`: a job (or shard) message to produce at `dueAt`.
public struct ScheduledRelease: Sendable, Equatable {
    public var id: Int64
    public var jobID: String
    public var appID: String
    public var dueAt: Timestamp
    /// `campaign` or `urgent` (a job message); `shards` or `shards-urgent` (a shard message).
    public var lane: String
    /// The message to produce (JSON text).
    public var body: String
    /// `send-after`, `local-time`, `quiet-hours`, `best-hour` or `retry`.
    public var reason: String
    /// The shard of a shard message (lanes `shards`, `shards-urgent`); nil for a job message.
    public var shardNo: Int?

    /// A release.
    public init(id: Int64, jobID: String, appID: String, dueAt: Timestamp, lane: String, body: String, reason: String, shardNo: Int? = nil) {
        self.id = id
        self.jobID = jobID
        self.appID = appID
        self.dueAt = dueAt
        self.lane = lane
        self.body = body
        self.reason = reason
        self.shardNo = shardNo
    }
}

/// `scheduled_jobs`: releases stored idempotently, claimed for a while by one scheduler
/// (`claim`, `claimed_until`), produced with no transaction open, and deleted once acknowledged.
public struct ScheduleRepository: Sendable {
    let pool: PostgresPool

    /// A repository using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Stores a job release unless the same (job, reason, due second) is stored; true when stored.
    /// `dueAt` is rounded down to whole seconds. (A shard's wait: ``scheduleRetryWait``.)
    @discardableResult
    public func schedule(jobID: String, appID: String, dueAt: Timestamp, lane: String, body: String,
                         reason: String) async throws(PostgresError) -> Bool {
        let rows = try await pool.query("""
            INSERT INTO scheduled_jobs (job_id, app_id, due_at, lane, body, reason)
            VALUES ($1, $2, $3::timestamptz, $4, $5::jsonb, $6)
            ON CONFLICT ON CONSTRAINT scheduled_jobs_release_key DO NOTHING RETURNING id
            """, [jobID, appID, SQLValue.timestamp(Timestamp(seconds: dueAt.seconds)), lane, body, reason],
            // Safe to repeat: the release key makes a second insert of the same row a no-op.
            idempotent: true)
        return !rows.rows.isEmpty
    }

    /// Stores the wait of shard `shardNo` of job `jobID` for its retries: its shard message
    /// `body`, to be produced to `lane` (`shards` or `shards-urgent`) at `dueAt` (whole seconds,
    /// rounded down). In one transaction that first reads `reportedJobID` (the job the user sent,
    /// whose row `herald jobs cancel` updates) `FOR SHARE`: when it is cancelled the wait is due
    /// now, and a cancel committed meanwhile waits for this and then finds the row to make due.
    /// The same key again updates the row rather than doing nothing, and clears a scheduler's
    /// claim on it: a wait meeting the row a scheduler is producing right now is then not deleted
    /// with it but produced again, never swallowed. Returns the due time stored.
    @discardableResult
    public func scheduleRetryWait(jobID: String, reportedJobID: String, appID: String, shardNo: Int, dueAt: Timestamp,
                                  lane: String, body: String) async throws(PostgresError) -> Timestamp {
        try await pool.withTransaction(idempotent: true) { connection throws(PostgresError) -> Timestamp in
            let state = try await connection.query("SELECT state FROM jobs WHERE id = $1 FOR SHARE", [reportedJobID]).value(0, "state")
            let due = state == "cancelled" ? Timestamp(seconds: Timestamp.now.seconds) : Timestamp(seconds: dueAt.seconds)
            try await connection.query("""
                INSERT INTO scheduled_jobs (job_id, app_id, due_at, lane, body, reason, shard_no)
                VALUES ($1, $2, $3::timestamptz, $4, $5::jsonb, 'retry', $6::integer)
                ON CONFLICT ON CONSTRAINT scheduled_jobs_release_key DO UPDATE SET body = EXCLUDED.body, claim = NULL, claimed_until = NULL
                """, [jobID, appID, SQLValue.timestamp(due), lane, body, String(shardNo)])
            return due
        }
    }

    /// Claims up to `limit` due releases (`due_at <= now`, oldest first; `now` is the caller's
    /// clock, PostgreSQL's when nil) that no other scheduler holds, for `claimFor`, in one
    /// statement; hands them to `produce` with no transaction open (it waits for the broker);
    /// then deletes those `produce` returns (acknowledged) whose claim is still this one, and
    /// gives the others back. Returns how many were deleted. A scheduler that dies mid-round
    /// leaves its claims to expire; another then produces those rows again (a release produced
    /// twice is harmless: the job id and the shard lease decide).
    @discardableResult
    public func releaseDue(limit: Int = 100, now: Timestamp? = nil, claimFor: Duration = .seconds(180),
                           _ produce: ([ScheduledRelease]) async -> [Int64]) async throws(PostgresError) -> Int {
        let claim = Self.claimToken()
        let rows = try await pool.query("""
            UPDATE scheduled_jobs s SET claim = $3, claimed_until = now() + $4::bigint * interval '1 millisecond'
            FROM (SELECT id FROM scheduled_jobs
                  WHERE due_at <= COALESCE($2::timestamptz, now()) AND (claimed_until IS NULL OR claimed_until < now())
                  ORDER BY due_at, id LIMIT $1::bigint FOR UPDATE SKIP LOCKED) due
            WHERE s.id = due.id
            RETURNING s.id, s.job_id, s.app_id, s.due_at, s.lane, s.body::text, s.reason, s.shard_no
            """, [String(limit), now.map(SQLValue.timestamp), claim, String(claimFor.milliseconds)],
            // A retry after a lost answer would find these rows claimed by a token it never saw.
            idempotent: false)
        let releases = rows.rows.compactMap { row -> ScheduledRelease? in
            guard let id = row[0].flatMap({ Int64($0) }), let job = row[1], let app = row[2],
                  let due = row[3].flatMap(SQLValue.timestamp), let lane = row[4], let body = row[5], let reason = row[6] else { return nil }
            let shard = row[7].flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil }
            return ScheduledRelease(id: id, jobID: job, appID: app, dueAt: due, lane: lane, body: body, reason: reason, shardNo: shard)
        }.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
        if releases.isEmpty { return 0 }
        let done = Set(await produce(releases))
        let left = releases.map(\.id).filter { !done.contains($0) }
        var deleted = 0
        if !done.isEmpty {
            deleted = try await pool.query("DELETE FROM scheduled_jobs WHERE id = ANY($1::bigint[]) AND claim = $2",
                                           [SQLValue.array(done.map(String.init)), claim], idempotent: true).affected
        }
        if !left.isEmpty {
            try await pool.query("UPDATE scheduled_jobs SET claim = NULL, claimed_until = NULL WHERE id = ANY($1::bigint[]) AND claim = $2",
                                 [SQLValue.array(left.map(String.init)), claim], idempotent: true)
        }
        return deleted
    }

    /// A token no other round of any scheduler uses.
    static func claimToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next() as UInt32, radix: 16) }.joined(separator: "-")
    }
}
