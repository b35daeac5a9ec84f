import HeraldCore

/// What the numbering check of a live-activity update decided.
public enum LiveActivityMark: Sendable, Equatable {
    /// Send it, with this `aps.timestamp` (never lower than one sent before for the activity).
    case accepted(timestamp: Int64)
    /// Drop it: the current stream already accepted this sequence or a greater one.
    case stale(streamID: String, lastSequence: Int64)
    /// Drop it: the activity has ended.
    case ended
}

/// `live_activities` and its token tables: the per-activity numbering mark (docs/ARCHITECTURE.md), the
/// subscriptions attached to an activity, and push-to-start tokens.
public struct LiveActivityRepository: Sendable {
    private let pool: PostgresPool

    /// A repository using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Checks an update against the activity's mark and moves the mark, in one atomic
    /// statement: on the current stream only a greater sequence wins; another stream replaces
    /// the mark; an ended activity takes nothing more until a `start` (`starting`). `ending`
    /// marks the activity ended. The returned timestamp is the greater of `timestamp` and the
    /// last one sent. `jobID`: the job asking; the same job asking again (a redelivery after a
    /// crash) gets its own acceptance back instead of `stale`.
    public func checkAndSet(appID: String, activityID: String, streamID: String, sequence: Int64,
                            timestamp: Int64, ending: Bool = false, starting: Bool = false, attributesType: String? = nil,
                            jobID: String? = nil) async throws(PostgresError) -> LiveActivityMark {
        let rows = try await pool.query("""
            INSERT INTO live_activities AS a (app_id, activity_id, current_stream_id, last_sequence, last_timestamp,
                                              attributes_type, ended_at, last_job_id)
            VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6, CASE WHEN $7::boolean THEN now() END, $9)
            ON CONFLICT (app_id, activity_id) DO UPDATE
            SET current_stream_id = EXCLUDED.current_stream_id,
                last_sequence = EXCLUDED.last_sequence,
                last_timestamp = GREATEST(COALESCE(a.last_timestamp, 0), EXCLUDED.last_timestamp),
                attributes_type = CASE WHEN $8::boolean THEN COALESCE(EXCLUDED.attributes_type, a.attributes_type)
                                       ELSE COALESCE(a.attributes_type, EXCLUDED.attributes_type) END,
                ended_at = EXCLUDED.ended_at,
                last_job_id = EXCLUDED.last_job_id,
                updated_at = now()
            WHERE ($9::text IS NULL OR a.last_job_id IS DISTINCT FROM $9)
              AND ((a.ended_at IS NULL
                    AND (a.current_stream_id IS DISTINCT FROM EXCLUDED.current_stream_id OR a.last_sequence < EXCLUDED.last_sequence))
                   OR ($8::boolean AND a.ended_at IS NOT NULL))
            RETURNING last_timestamp
            """, [appID, activityID, streamID, String(sequence), String(timestamp), attributesType, ending ? "true" : "false",
                  starting ? "true" : "false", jobID],
            // Not retried: a committed update whose answer was lost would then read as stale
            // (unless a job id is given, which makes the statement idempotent).
            idempotent: jobID != nil)
        if let value = rows.rows.first?.first ?? nil, let stamp = Int64(value) {
            return .accepted(timestamp: stamp)
        }
        let current = try await pool.query("""
            SELECT current_stream_id, last_sequence, ended_at IS NOT NULL, last_job_id, last_timestamp
            FROM live_activities WHERE app_id = $1 AND activity_id = $2
            """, [appID, activityID])
        guard let row = current.rows.first else {
            throw PostgresError(.unexpectedResult, "live activity \(appID)/\(activityID) neither updated nor found")
        }
        if let jobID, row[3] == jobID, let stamp = row[4].flatMap({ Int64($0) }) { return .accepted(timestamp: stamp) }
        if row[2] == "t" { return .ended }
        return .stale(streamID: row[0] ?? "", lastSequence: row[1].flatMap { Int64($0) } ?? 0)
    }

    /// The activity's mark: (stream, last sequence, last timestamp), nil when unknown.
    public func mark(appID: String, activityID: String) async throws(PostgresError) -> (streamID: String?, lastSequence: Int64?, lastTimestamp: Int64?)? {
        let rows = try await pool.query(
            "SELECT current_stream_id, last_sequence, last_timestamp FROM live_activities WHERE app_id = $1 AND activity_id = $2",
            [appID, activityID])
        guard let row = rows.rows.first else { return nil }
        return (row[0], row[1].flatMap { Int64($0) }, row[2].flatMap { Int64($0) })
    }

    // MARK: - The decision of each job

    /// Records what the numbering check decided for job `jobID`, once: a rerun of the job
    /// (after a crash, a rebalance or a resume) reads it back with ``verdict(jobID:)`` instead of
    /// checking again. Returns the verdict stored (the first one wins).
    public func recordVerdict(jobID: String, _ mark: LiveActivityMark) async throws(PostgresError) -> LiveActivityMark {
        let verdict: String
        var timestamp: String?
        switch mark {
        case .accepted(let stamp):
            verdict = "accepted"
            timestamp = String(stamp)
        case .stale: verdict = "stale-sequence"
        case .ended: verdict = "ended"
        }
        try await pool.query("""
            UPDATE jobs SET live_activity_verdict = $2, live_activity_timestamp = $3::bigint
            WHERE id = $1 AND live_activity_verdict IS NULL
            """, [jobID, verdict, timestamp])
        return try await self.verdict(jobID: jobID) ?? mark
    }

    /// The decision recorded for job `jobID`, nil before the check.
    public func verdict(jobID: String) async throws(PostgresError) -> LiveActivityMark? {
        let rows = try await pool.query("SELECT live_activity_verdict, live_activity_timestamp FROM jobs WHERE id = $1", [jobID])
        guard let row = rows.rows.first, let verdict = row[0] else { return nil }
        switch verdict {
        case "accepted": return .accepted(timestamp: row[1].flatMap { Int64($0) } ?? 0)
        case "ended": return .ended
        default: return .stale(streamID: "", lastSequence: 0)
        }
    }

    // MARK: - Who an event goes to

    /// The subscriptions attached to the activity (`activity_tokens` rows not invalidated, of
    /// opted-in subscriptions that are not invalidated), in id order after `cursor`, at most
    /// `limit`. iOS members carry the activity's push token as `token`; Android members their
    /// subscription's current FCM token.
    public func attached(appID: String, activityID: String, after cursor: String?, limit: Int) async throws(PostgresError) -> [AudienceMember] {
        try await attached(appID: appID, activityID: activityID, after: cursor, ids: nil, limit: limit)
    }

    /// The attached subscriptions among `ids` (parked retries resumed after a crash).
    public func attached(appID: String, activityID: String, ids: [String]) async throws(PostgresError) -> [AudienceMember] {
        let valid = ids.filter(SQLValue.isUUID)
        if valid.isEmpty { return [] }
        return try await attached(appID: appID, activityID: activityID, after: nil, ids: valid, limit: valid.count)
    }

    /// How many subscriptions are attached to the activity now.
    public func attachedCount(appID: String, activityID: String) async throws(PostgresError) -> Int {
        let rows = try await pool.query("""
            SELECT count(*) FROM activity_tokens t JOIN subscriptions s ON s.app_id = t.app_id AND s.id = t.subscription_id
            WHERE t.app_id = $1 AND t.activity_id = $2 AND t.invalidated_at IS NULL AND s.opted_in AND s.invalidated_at IS NULL
            """, [appID, activityID])
        return rows.rows.first?.first.flatMap { $0.flatMap { Int($0) } } ?? 0
    }

    private func attached(appID: String, activityID: String, after cursor: String?, ids: [String]?, limit: Int) async throws(PostgresError) -> [AudienceMember] {
        let sql = """
            SELECT s.id, s.platform, CASE WHEN s.platform = 'ios' THEN t.token ELSE s.token END, s.sandbox, s.sdk, s.language,
                   s.time_zone, s.voip_token, s.provider
            FROM activity_tokens t JOIN subscriptions s ON s.app_id = t.app_id AND s.id = t.subscription_id
            WHERE t.app_id = $1 AND t.activity_id = $2 AND t.invalidated_at IS NULL AND s.opted_in AND s.invalidated_at IS NULL
              AND ($3::uuid IS NULL OR s.id > $3::uuid) AND ($5::uuid[] IS NULL OR s.id = ANY($5::uuid[]))
            ORDER BY s.id
            LIMIT $4::integer
            """
        let parameters: [String?] = [appID, activityID, cursor, String(max(1, limit)), ids.map { SQLValue.array($0) }]
        return try await pool.withConnection(retryingIfLost: true) { connection throws(PostgresError) in
            try await connection.query(sql, parameters, decode: AudienceMember.decode)
        }
    }

    /// Push-to-start tokens for `attributesType` of the subscriptions among `ids` (id → token).
    public func pushToStartTokens(appID: String, attributesType: String, ids: [String]) async throws(PostgresError) -> [String: String] {
        let valid = ids.filter(SQLValue.isUUID)
        if valid.isEmpty { return [:] }
        let rows = try await pool.query("""
            SELECT subscription_id::text, token FROM push_to_start_tokens
            WHERE app_id = $1 AND attributes_type = $2 AND subscription_id = ANY($3::uuid[]) AND invalidated_at IS NULL
            """, [appID, attributesType, SQLValue.array(valid)])
        var tokens: [String: String] = [:]
        for row in rows.rows {
            if let id = row[0], let token = row[1] { tokens[id] = token }
        }
        return tokens
    }

    /// Attaches Android subscriptions a `start` went to, so the activity's updates reach them
    /// (`activity_tokens` rows holding their FCM token). Creates the activity row if needed.
    public func attachAndroid(appID: String, activityID: String, _ members: [(id: String, token: String)]) async throws(PostgresError) {
        let valid = members.filter { SQLValue.isUUID($0.id) && !$0.token.isEmpty }
        if valid.isEmpty { return }
        try await pool.query("INSERT INTO live_activities (app_id, activity_id) VALUES ($1, $2) ON CONFLICT (app_id, activity_id) DO NOTHING",
                             [appID, activityID])
        try await pool.query("""
            INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token)
            SELECT $1, $2, u.id, u.token FROM unnest($3::uuid[], $4::text[]) AS u(id, token)
            ON CONFLICT (app_id, activity_id, subscription_id) DO UPDATE SET token = EXCLUDED.token, invalidated_at = NULL, updated_at = now()
            """, [appID, activityID, SQLValue.array(valid.map(\.id)), SQLValue.array(valid.map(\.token))])
    }

    /// Marks activity push tokens invalid (an unregistered answer): the token only, never its
    /// subscription. Returns how many rows changed.
    @discardableResult
    public func invalidateActivityTokens(appID: String, activityID: String, subscriptionIDs: [String]) async throws(PostgresError) -> Int {
        let valid = subscriptionIDs.filter(SQLValue.isUUID)
        if valid.isEmpty { return 0 }
        let rows = try await pool.query("""
            UPDATE activity_tokens SET invalidated_at = now(), updated_at = now()
            WHERE app_id = $1 AND activity_id = $2 AND subscription_id = ANY($3::uuid[]) AND invalidated_at IS NULL
            """, [appID, activityID, SQLValue.array(valid)])
        return rows.affected
    }

    /// Marks push-to-start tokens invalid (an unregistered answer to a start): the token only.
    @discardableResult
    public func invalidatePushToStartTokens(appID: String, attributesType: String, subscriptionIDs: [String]) async throws(PostgresError) -> Int {
        let valid = subscriptionIDs.filter(SQLValue.isUUID)
        if valid.isEmpty { return 0 }
        let rows = try await pool.query("""
            UPDATE push_to_start_tokens SET invalidated_at = now(), updated_at = now()
            WHERE app_id = $1 AND attributes_type = $2 AND subscription_id = ANY($3::uuid[]) AND invalidated_at IS NULL
            """, [appID, attributesType, SQLValue.array(valid)])
        return rows.affected
    }
}
