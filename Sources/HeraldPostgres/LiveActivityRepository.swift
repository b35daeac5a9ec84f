/// What the numbering check of a live-activity update decided.
public enum LiveActivityMark: Sendable, Equatable {
    /// Send it, with this `aps.timestamp` (never lower than one sent before for the activity).
    case accepted(timestamp: Int64)
    /// Drop it: the current stream already accepted this sequence or a greater one.
    case stale(streamID: String, lastSequence: Int64)
    /// Drop it: the activity has ended.
    case ended
}

/// `live_activities`: the per-activity numbering mark (DESIGN §4).
public struct LiveActivityRepository: Sendable {
    private let pool: PostgresPool

    /// A repository using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Checks an update against the activity's mark and moves the mark, in one atomic
    /// statement: on the current stream only a greater sequence wins; another stream replaces
    /// the mark; an ended activity takes nothing more. `ending` marks the activity ended.
    /// The returned timestamp is the greater of `timestamp` and the last one sent.
    public func checkAndSet(appID: String, activityID: String, streamID: String, sequence: Int64,
                            timestamp: Int64, ending: Bool = false, attributesType: String? = nil) async throws(PostgresError) -> LiveActivityMark {
        let rows = try await pool.query("""
            INSERT INTO live_activities AS a (app_id, activity_id, current_stream_id, last_sequence, last_timestamp,
                                              attributes_type, ended_at)
            VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6, CASE WHEN $7::boolean THEN now() END)
            ON CONFLICT (app_id, activity_id) DO UPDATE
            SET current_stream_id = EXCLUDED.current_stream_id,
                last_sequence = EXCLUDED.last_sequence,
                last_timestamp = GREATEST(COALESCE(a.last_timestamp, 0), EXCLUDED.last_timestamp),
                attributes_type = COALESCE(a.attributes_type, EXCLUDED.attributes_type),
                ended_at = EXCLUDED.ended_at,
                updated_at = now()
            WHERE a.ended_at IS NULL
              AND (a.current_stream_id IS DISTINCT FROM EXCLUDED.current_stream_id OR a.last_sequence < EXCLUDED.last_sequence)
            RETURNING last_timestamp
            """, [appID, activityID, streamID, String(sequence), String(timestamp), attributesType, ending ? "true" : "false"],
            // Not retried: a committed update whose answer was lost would then read as stale.
            idempotent: false)
        if let value = rows.rows.first?.first ?? nil, let stamp = Int64(value) {
            return .accepted(timestamp: stamp)
        }
        let current = try await pool.query(
            "SELECT current_stream_id, last_sequence, ended_at IS NOT NULL FROM live_activities WHERE app_id = $1 AND activity_id = $2",
            [appID, activityID])
        guard let row = current.rows.first else {
            throw PostgresError(.unexpectedResult, "live activity \(appID)/\(activityID) neither updated nor found")
        }
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
}
