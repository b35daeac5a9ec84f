/// The identity of a device event for dedupe: (type, job, subscription, action id).
public struct DeviceEventKey: Sendable, Hashable {
    /// `received`, `confirmed` or `clicked`.
    public var type: String
    public var jobID: String
    public var subscriptionID: String
    /// The button of a `clicked` event; empty when none.
    public var actionID: String

    /// A key; the subscription id is lower-cased.
    public init(type: String, jobID: String, subscriptionID: String, actionID: String? = nil) {
        self.type = type
        self.jobID = jobID
        self.subscriptionID = subscriptionID.lowercased()
        self.actionID = actionID ?? ""
    }
}

/// `device_event_seen`: drops device events seen before, a batch per statement.
public struct DeviceEventDedupe: Sendable {
    let pool: PostgresPool

    /// A dedupe using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Records a batch and says, per input, whether it is its first sighting (forward it) or a
    /// repeat (drop it), repeats within the batch included. One statement:
    /// `INSERT … ON CONFLICT DO NOTHING RETURNING`.
    public func firstSightings(_ keys: [DeviceEventKey]) async throws(PostgresError) -> [Bool] {
        if keys.isEmpty { return [] }
        let rows = try await pool.query("""
            INSERT INTO device_event_seen (type, job_id, subscription_id, action_id)
            SELECT t, j, s, a FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[]) AS e(t, j, s, a)
            ON CONFLICT DO NOTHING
            RETURNING type, job_id, subscription_id, action_id
            """, [SQLValue.array(keys.map(\.type)), SQLValue.array(keys.map(\.jobID)),
                  SQLValue.array(keys.map(\.subscriptionID)), SQLValue.array(keys.map(\.actionID))],
            // A retry after a lost answer would call everything a repeat: not retried.
            idempotent: false)
        var inserted = Set<DeviceEventKey>()
        for row in rows.rows {
            guard let type = row[0], let job = row[1], let subscription = row[2] else { continue }
            inserted.insert(DeviceEventKey(type: type, jobID: job, subscriptionID: subscription, actionID: row[3]))
        }
        // Only the first of several equal keys in the batch counts as new.
        return keys.map { inserted.remove($0) != nil }
    }
}
