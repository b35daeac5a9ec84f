public import HeraldCore

/// A provider said a token is no longer valid.
public struct TokenInvalidation: Sendable, Equatable {
    public var subscriptionID: String
    /// Provider reason (`Unregistered`, `BadDeviceToken`, `UNREGISTERED`, …).
    public var reason: String
    /// APNs 410 `timestamp`: when the token stopped being valid. A token registered after it
    /// stays valid. Nil = invalidate regardless.
    public var providerTimestamp: Timestamp?

    /// An invalidation.
    public init(subscriptionID: String, reason: String, providerTimestamp: Timestamp? = nil) {
        self.subscriptionID = subscriptionID.lowercased()
        self.reason = reason
        self.providerTimestamp = providerTimestamp
    }
}

/// `subscriptions` writes Herald makes: token invalidation (never a delete).
public struct SubscriptionRepository: Sendable {
    private let pool: PostgresPool

    /// A repository using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Marks a batch of subscriptions invalid (`invalidated_at`, `invalidated_reason`) in one
    /// statement. Rows are never deleted. Skips subscriptions already invalid and those whose
    /// token was registered after the provider's timestamp. Returns the ids it invalidated.
    /// Idempotent, so retried on a lost connection.
    public func invalidate(appID: String, _ batch: [TokenInvalidation]) async throws(PostgresError) -> [String] {
        guard let statement = SubscriptionRepository.invalidation(appID: appID, batch) else { return [] }
        let rows = try await pool.query(statement.sql, statement.parameters)
        return rows.rows.compactMap { $0.first ?? nil }.sorted()
    }

    /// The statement of ``invalidate(appID:_:)``, nil for nothing to do; shared with
    /// `JobRepository.checkpoint`, which runs it inside a shard's checkpoint transaction.
    static func invalidation(appID: String, _ batch: [TokenInvalidation]) -> (sql: String, parameters: [String?])? {
        let valid = batch.filter { SQLValue.isUUID($0.subscriptionID) }
        if valid.isEmpty { return nil }
        return ("""
            UPDATE subscriptions AS s
            SET invalidated_at = now(), invalidated_reason = u.reason, updated_at = now()
            FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, reason, at)
            WHERE s.app_id = $1 AND s.id = u.id AND s.invalidated_at IS NULL
              AND (u.at IS NULL OR u.at >= s.token_updated_at)
            RETURNING s.id
            """, [appID, SQLValue.array(valid.map(\.subscriptionID)), SQLValue.array(valid.map(\.reason)),
                  SQLValue.array(valid.map { $0.providerTimestamp.map(SQLValue.timestamp) })])
    }
}
