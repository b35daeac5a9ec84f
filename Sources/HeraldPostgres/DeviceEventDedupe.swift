public import HeraldCore

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

/// Who owns what a device event names: the app of its job and of its subscription (nil when
/// there is no such row), and the subscription's platform.
public struct DeviceEventOwners: Sendable, Equatable {
    public var jobAppID: String?
    public var subscriptionAppID: String?
    public var platform: Platform?

    /// Owners as read.
    public init(jobAppID: String?, subscriptionAppID: String?, platform: Platform?) {
        self.jobAppID = jobAppID
        self.subscriptionAppID = subscriptionAppID
        self.platform = platform
    }
}

extension DeviceEventDedupe {
    /// The apps owning the job and the subscription an event names, in one statement.
    public func owners(jobID: String, subscriptionID: String) async throws(PostgresError) -> DeviceEventOwners {
        let rows = try await pool.query("""
            SELECT (SELECT app_id FROM jobs WHERE id = $1), s.app_id, s.platform
            FROM (SELECT 1) AS one LEFT JOIN subscriptions s ON s.id = $2::uuid
            """, [jobID, subscriptionID.lowercased()], idempotent: true)
        let row = rows.rows.first
        return DeviceEventOwners(jobAppID: row?[0] ?? nil, subscriptionAppID: row?[1] ?? nil,
                                 platform: (row?[2] ?? nil).flatMap(Platform.init(rawValue:)))
    }

    /// Whether the event was recorded before (a repeat, to drop).
    public func seen(_ key: DeviceEventKey) async throws(PostgresError) -> Bool {
        let rows = try await pool.query("""
            SELECT 1 FROM device_event_seen WHERE type = $1 AND job_id = $2 AND subscription_id = $3::uuid AND action_id = $4
            """, [key.type, key.jobID, key.subscriptionID, key.actionID], idempotent: true)
        return !rows.rows.isEmpty
    }

    /// Records an event already forwarded: its dedupe row, and its count on the job (matched on
    /// the job id and the app id), in one short transaction that waits for nothing else. True
    /// when this call recorded it; false when it was recorded before (then nothing is counted).
    /// The caller publishes first and records after, so no transaction is open while the
    /// broker is waited for; a crash between the two publishes the receipt again on
    /// redelivery, under the same receipt id.
    @discardableResult
    public func record(_ key: DeviceEventKey, appID: String) async throws(PostgresError) -> Bool {
        let column: String
        switch key.type {
        case "received": column = "received"
        case "confirmed": column = "confirmed"
        default: column = "clicked"
        }
        return try await pool.withTransaction { connection throws(PostgresError) -> Bool in
            let inserted = try await connection.query("""
                INSERT INTO device_event_seen (type, job_id, subscription_id, action_id) VALUES ($1, $2, $3::uuid, $4)
                ON CONFLICT DO NOTHING RETURNING 1
                """, [key.type, key.jobID, key.subscriptionID, key.actionID])
            guard !inserted.rows.isEmpty else { return false }
            try await connection.query("UPDATE jobs SET \(column) = \(column) + 1 WHERE id = $1 AND app_id = $2", [key.jobID, appID])
            return true
        }
    }
}
