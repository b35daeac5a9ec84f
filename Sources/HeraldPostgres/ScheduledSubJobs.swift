public import HeraldCore

/// A sub-job to store and release later (docs/SCHEDULING.md): its `jobs` row and its
/// `scheduled_jobs` row are written together.
public struct ScheduledSubJob: Sendable, Equatable {
    /// The derived id (`<job>:tz:3`).
    public var id: String
    /// The job the user sent.
    public var parentID: String
    public var appID: String
    public var kind: String
    /// The sub-job message (JSON text).
    public var body: String
    public var createdAt: Timestamp
    public var expiresAt: Timestamp?
    public var urgent: Bool
    /// When to release it (whole seconds are kept).
    public var dueAt: Timestamp
    /// `send-after`, `local-time`, `quiet-hours` or `best-hour`.
    public var reason: String

    /// A sub-job.
    public init(id: String, parentID: String, appID: String, kind: String, body: String, createdAt: Timestamp,
                expiresAt: Timestamp?, urgent: Bool, dueAt: Timestamp, reason: String) {
        self.id = id
        self.parentID = parentID
        self.appID = appID
        self.kind = kind
        self.body = body
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.urgent = urgent
        self.dueAt = dueAt
        self.reason = reason
    }
}

extension ScheduleRepository {
    /// Stores a sub-job and its release in one transaction. A sub-job id seen before (planning
    /// repeated after a crash) stores nothing, so a release already made is never made twice.
    /// True when stored.
    @discardableResult
    public func schedule(_ subJob: ScheduledSubJob) async throws(PostgresError) -> Bool {
        try await pool.withTransaction { connection throws(PostgresError) -> Bool in
            let inserted = try await connection.query("""
                INSERT INTO jobs (id, app_id, kind, body, created_at, expires_at, urgent, parent_id)
                VALUES ($1, $2, $3, $4::jsonb, $5::timestamptz, $6::timestamptz, $7::boolean, $8)
                ON CONFLICT (id) DO NOTHING RETURNING 1
                """, [subJob.id, subJob.appID, subJob.kind, subJob.body, SQLValue.timestamp(subJob.createdAt),
                      subJob.expiresAt.map(SQLValue.timestamp), subJob.urgent ? "true" : "false", subJob.parentID])
            guard !inserted.rows.isEmpty else { return false }
            try await connection.query("""
                INSERT INTO scheduled_jobs (job_id, app_id, due_at, lane, body, reason)
                VALUES ($1, $2, $3::timestamptz, $4, $5::jsonb, $6)
                ON CONFLICT ON CONSTRAINT scheduled_jobs_release_key DO NOTHING
                """, [subJob.id, subJob.appID, SQLValue.timestamp(Timestamp(seconds: subJob.dueAt.seconds)),
                      subJob.urgent ? "urgent" : "campaign", subJob.body, subJob.reason])
            return true
        }
    }

    /// Records that a job's planning into sub-jobs is done (state `scheduled`), adding
    /// `dropped` subscriptions settled while planning (same-day-only local times that passed).
    public func markScheduled(jobID: String, dropped: Int64) async throws(PostgresError) {
        try await pool.query("""
            UPDATE jobs SET state = 'scheduled', planned_at = COALESCE(planned_at, now()), dropped = dropped + $2::bigint
            WHERE id = $1 AND state IN ('received', 'planned')
            """, [jobID, String(dropped)])
    }

    /// The totals of a scheduled job once planning is done and every sub-job completed (its
    /// own `dropped` plus theirs), else nil.
    public func totalsIfSubJobsDone(parentID: String) async throws(PostgresError) -> Receipt.Totals? {
        let rows = try await pool.query("""
            SELECT p.state, p.completed_at IS NOT NULL, p.dropped,
                   count(c.id) FILTER (WHERE c.completed_at IS NULL),
                   COALESCE(sum(c.accepted), 0), COALESCE(sum(c.unregistered), 0), COALESCE(sum(c.failed), 0), COALESCE(sum(c.dropped), 0)
            FROM jobs p LEFT JOIN jobs c ON c.parent_id = p.id
            WHERE p.id = $1 GROUP BY p.id
            """, [parentID])
        guard let row = rows.rows.first, row[0] == "scheduled" || row[0] == "cancelled", row[1] == "f",
              row[3].flatMap({ Int($0) }) == 0 else { return nil }
        let number = { (index: Int) in row[index].flatMap { Int64($0) } ?? 0 }
        return Receipt.Totals(accepted: number(4), unregistered: number(5), failed: number(6), dropped: number(2) + number(7))
    }

    /// The app's default zone (subscriptions without a `time_zone`), or nil for an unknown app.
    public func defaultTimeZone(appID: String) async throws(PostgresError) -> String? {
        try await appTiming(appID: appID)?.zone
    }

    /// The app's scheduling defaults: its zone and its quiet hours; nil for an unknown app.
    public func appTiming(appID: String) async throws(PostgresError) -> (zone: String, quietHours: AppQuietHours)? {
        let rows = try await pool.query(
            "SELECT default_time_zone, quiet_start::text, quiet_end::text, respect_quiet_hours FROM apps WHERE id = $1", [appID])
        guard let row = rows.rows.first else { return nil }
        var quiet = AppQuietHours(respectByDefault: row[3] == "t")
        if let start = row[1].flatMap(Self.minutes), let end = row[2].flatMap(Self.minutes) {
            quiet.window = QuietWindow(startMinutes: start, endMinutes: end)
        }
        return (row[0] ?? "UTC", quiet)
    }

    /// One keyset page of the audience's scheduling facts (zone, quiet window, histogram), in id
    /// order after `cursor`.
    public func timingPage(_ query: AudienceQuery, after cursor: String?, limit: Int) async throws(PostgresError) -> [SubscriptionTiming] {
        var parameters = SQLParameters(query.parameters)
        var sql = """
            SELECT id, platform, time_zone, quiet_start::text, quiet_end::text, activity_histogram::text, quiet_hours_disabled
            FROM subscriptions WHERE \(query.condition)
            """
        if let cursor { sql += " AND id > \(parameters.bind(cursor))::uuid" }
        sql += " ORDER BY id LIMIT \(parameters.bind(String(max(1, limit))))::bigint"
        let rows = try await pool.query(sql, parameters.values)
        return rows.rows.compactMap { row in
            guard let id = row[0] else { return nil }
            var quiet: QuietWindow?
            if let start = row[3].flatMap(Self.minutes), let end = row[4].flatMap(Self.minutes) {
                quiet = QuietWindow(startMinutes: start, endMinutes: end)
            }
            let histogram = row[5].map { text in
                text.trimmingPrefix("{").split(separator: "}").first.map { $0.split(separator: ",").compactMap { Int($0) } } ?? []
            }
            return SubscriptionTiming(id: id, platform: row[1].flatMap(Platform.init(rawValue:)), timeZone: row[2], quiet: quiet,
                                      histogram: histogram?.count == 24 ? histogram : nil, quietDisabled: row[6] == "t")
        }
    }

    /// `HH:MM[:SS]` → minutes after midnight.
    static func minutes(_ text: String) -> Int? {
        let parts = text.split(separator: ":")
        guard parts.count >= 2, let hours = Int(parts[0]), let minutes = Int(parts[1]), (0..<24).contains(hours), (0..<60).contains(minutes) else { return nil }
        return hours * 60 + minutes
    }
}

extension ScheduleRepository {
    /// Records that `workerID` is alive and returns how many workers were seen in the last 30 s.
    public func heartbeat(workerID: String) async throws(PostgresError) -> Int {
        try await pool.query("""
            INSERT INTO worker_heartbeats (worker_id, seen_at) VALUES ($1, now())
            ON CONFLICT (worker_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
            """, [workerID])
        // Workers that left a day ago are forgotten.
        try await pool.query("DELETE FROM worker_heartbeats WHERE seen_at < now() - interval '1 day'")
        let rows = try await pool.query("SELECT count(*) FROM worker_heartbeats WHERE seen_at > now() - interval '30 seconds'")
        return rows.rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 1
    }
}
