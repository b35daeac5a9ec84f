public import HeraldCore

/// `job_throttles`: the token bucket of a job with `delivery.throttle_per_minute`, shared by
/// every shard on every worker (schemas/sql/README.md, 0007).
public struct ThrottleRepository: Sendable {
    let pool: PostgresPool

    /// A repository using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// What one take gave.
    public struct Grant: Sendable, Equatable {
        /// Tokens granted (whole sends).
        public var granted: Int
        /// Tokens left in the bucket after the grant (fractional).
        public var remaining: Double
    }

    /// Takes up to `wanted` tokens from `jobID`'s bucket (created full on first use, refilled at
    /// `perMinute / 60` a second up to `capacity`). `now` is PostgreSQL's clock when nil, so all
    /// workers measure the refill on one clock.
    public func take(jobID: String, perMinute: Int64, capacity: Double, wanted: Int, now: Timestamp? = nil) async throws(PostgresError) -> Grant {
        let at = now.map(SQLValue.timestamp)
        try await pool.query("""
            INSERT INTO job_throttles (job_id, per_minute, tokens, capacity, refilled_at)
            VALUES ($1, $2::bigint, $3::float8, $3::float8, COALESCE($4::timestamptz, clock_timestamp()))
            ON CONFLICT (job_id) DO NOTHING
            """, [jobID, String(perMinute), String(max(1, capacity)), at])
        let rows = try await pool.query("""
            WITH current AS (
                SELECT t.job_id, n.now,
                       LEAST(t.capacity, t.tokens + GREATEST(0, EXTRACT(EPOCH FROM (n.now - t.refilled_at)))::float8 * t.per_minute / 60.0) AS available
                FROM job_throttles t, (SELECT COALESCE($3::timestamptz, clock_timestamp()) AS now) n
                WHERE t.job_id = $1 FOR UPDATE OF t
            ), given AS (
                SELECT job_id, now, available, floor(LEAST(available, $2::float8)) AS granted FROM current
            )
            UPDATE job_throttles j SET tokens = g.available - g.granted, refilled_at = GREATEST(j.refilled_at, g.now)
            FROM given g WHERE j.job_id = g.job_id
            RETURNING g.granted, g.available - g.granted
            """, [jobID, String(max(0, wanted)), at])
        guard let row = rows.rows.first, let granted = row[0].flatMap({ Double($0) }), let remaining = row[1].flatMap({ Double($0) }) else {
            throw PostgresError(.unexpectedResult, "no token bucket for job \(jobID)")
        }
        return Grant(granted: Int(granted), remaining: remaining)
    }

    /// Puts `tokens` a shard took but did not use back (up to the capacity).
    public func giveBack(jobID: String, tokens: Int) async throws(PostgresError) {
        guard tokens > 0 else { return }
        try await pool.query("UPDATE job_throttles SET tokens = LEAST(capacity, tokens + $2::float8) WHERE job_id = $1",
                             [jobID, String(tokens)])
    }

    /// The app's own provider ceilings (`apps.apns_rate_per_minute`, `fcm_rate_per_minute`):
    /// nil where the app has none (the worker's default applies), 0 for no ceiling.
    public func providerCeilings(appID: String) async throws(PostgresError) -> (apns: Int64?, fcm: Int64?) {
        let rows = try await pool.query("SELECT apns_rate_per_minute, fcm_rate_per_minute FROM apps WHERE id = $1", [appID])
        guard let row = rows.rows.first else { return (nil, nil) }
        return (row[0].flatMap { Int64($0) }, row[1].flatMap { Int64($0) })
    }
}
