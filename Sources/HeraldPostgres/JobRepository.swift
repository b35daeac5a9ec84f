public import HeraldCore

/// Terminal and progress counts of a shard.
public struct ShardCounts: Sendable, Equatable {
    public var sent: Int64
    public var accepted: Int64
    public var unregistered: Int64
    public var failed: Int64
    public var dropped: Int64

    /// Counts (zero by default).
    public init(sent: Int64 = 0, accepted: Int64 = 0, unregistered: Int64 = 0, failed: Int64 = 0, dropped: Int64 = 0) {
        self.sent = sent
        self.accepted = accepted
        self.unregistered = unregistered
        self.failed = failed
        self.dropped = dropped
    }

    var parameters: [String?] { [String(sent), String(accepted), String(unregistered), String(failed), String(dropped)] }
}

/// A shard held under a lease by one worker: the key to checkpoint, read retries and finish.
public struct ShardLease: Sendable, Equatable {
    public var jobID: String
    public var shardNo: Int
    /// The worker instance holding the lease.
    public var holder: String
    /// Where to resume: the last checkpointed id (nil = from the shard's start).
    public var cursor: String?
    /// Counts as of the last checkpoint.
    public var counts: ShardCounts
    /// How many times the shard has been claimed (> 1: resumed after a crash or rebalance).
    public var claims: Int
}

/// What claiming a shard gave.
public enum ShardClaim: Sendable, Equatable {
    /// The caller holds the lease and may process the shard from `lease.cursor`.
    case claimed(ShardLease)
    /// Another worker holds an unexpired lease.
    case heldElsewhere(holder: String, until: Timestamp?)
    /// The shard is finished: never run again.
    case finished
    /// The shard was cancelled.
    case cancelled
}

/// A subscription parked for a retry so the shard's cursor can move past it.
public struct ParkedRetry: Sendable, Equatable {
    public var subscriptionID: String
    /// Attempts made so far.
    public var attempts: Int
    public var nextAttemptAt: Timestamp
    public var lastReason: String?
    /// Set by the database when first parked; ignored when parking.
    public var firstAttemptAt: Timestamp?

    /// A parked retry.
    public init(subscriptionID: String, attempts: Int, nextAttemptAt: Timestamp, lastReason: String?, firstAttemptAt: Timestamp? = nil) {
        self.subscriptionID = subscriptionID
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastReason = lastReason
        self.firstAttemptAt = firstAttemptAt
    }
}

/// `jobs`, `job_shards` and `shard_retries`: idempotent job intake, shard leases and checkpoints.
public struct JobRepository: Sendable {
    /// How long a claim lasts unless renewed by a checkpoint (docs/ARCHITECTURE.md).
    public static let defaultLease: Duration = .seconds(30)

    private let pool: PostgresPool
    private let lease: Duration

    /// A repository using `pool`; `lease` is the shard lease length.
    public init(pool: PostgresPool, lease: Duration = JobRepository.defaultLease) {
        self.pool = pool
        self.lease = lease
    }

    /// Stores a job unless its id is known. Returns true when this call stored it, false for a
    /// replay (which must not fan out again). Not retried on a lost connection: a retry after a
    /// commit whose answer was lost would report the job as a replay.
    public func insert(id: String, appID: String, kind: String, body: String, createdAt: Timestamp,
                       expiresAt: Timestamp? = nil, urgent: Bool = false) async throws(PostgresError) -> Bool {
        let rows = try await pool.query("""
            INSERT INTO jobs (id, app_id, kind, body, created_at, expires_at, urgent)
            VALUES ($1, $2, $3, $4::jsonb, $5::timestamptz, $6::timestamptz, $7::boolean)
            ON CONFLICT (id) DO NOTHING RETURNING 1
            """, [id, appID, kind, body, SQLValue.timestamp(createdAt), expiresAt.map(SQLValue.timestamp), urgent ? "true" : "false"],
            idempotent: false)
        return !rows.rows.isEmpty
    }

    /// The stored job body (JSON text) and state, or nil.
    public func job(id: String) async throws(PostgresError) -> (body: String, state: String, shardCount: Int?)? {
        let rows = try await pool.query("SELECT body::text, state, shard_count FROM jobs WHERE id = $1", [id])
        guard let row = rows.rows.first, let body = row[0], let state = row[1] else { return nil }
        return (body, state, row[2].flatMap { Int($0) })
    }

    /// Records the plan: the job's shards (created idempotently) and its estimate.
    public func plan(jobID: String, ranges: [SubscriptionRange], audienceEstimate: Int) async throws(PostgresError) {
        try await pool.withTransaction(idempotent: true) { connection throws(PostgresError) in
            try await connection.query("""
                INSERT INTO job_shards (job_id, shard_no, shard_count, id_from, id_to)
                SELECT $1, n - 1, $2::integer, f, t
                FROM unnest($3::uuid[], $4::uuid[]) WITH ORDINALITY AS r(f, t, n)
                ON CONFLICT (job_id, shard_no) DO NOTHING
                """, [jobID, String(ranges.count), SQLValue.array(ranges.map { $0.from ?? Shard.minimumID }),
                      SQLValue.array(ranges.map(\.to))])
            try await connection.query("""
                UPDATE jobs SET shard_count = $2::integer, audience_estimate = $3::bigint,
                       state = CASE WHEN state = 'received' THEN 'planned' ELSE state END,
                       planned_at = COALESCE(planned_at, now())
                WHERE id = $1
                """, [jobID, String(ranges.count), String(audienceEstimate)])
        }
    }

    /// Claims shard `shardNo` for `holder` for one lease. Creates the row if planning did not.
    /// Another worker's lease is taken over only once it has expired; a finished or cancelled
    /// shard is never claimed again.
    public func claim(jobID: String, shardNo: Int, shardCount: Int, range: SubscriptionRange,
                      holder: String) async throws(PostgresError) -> ShardClaim {
        let rows = try await pool.query("""
            INSERT INTO job_shards AS s (job_id, shard_no, shard_count, id_from, id_to, state,
                                         lease_holder, lease_expires_at, claims, started_at)
            VALUES ($1, $2::integer, $3::integer, $4::uuid, $5::uuid, 'running',
                    $6, now() + $7::bigint * interval '1 millisecond', 1, now())
            ON CONFLICT (job_id, shard_no) DO UPDATE
            SET state = 'running', lease_holder = EXCLUDED.lease_holder, lease_expires_at = EXCLUDED.lease_expires_at,
                claims = s.claims + 1, started_at = COALESCE(s.started_at, now())
            WHERE s.state IN ('pending', 'running') AND (s.lease_holder IS NULL OR s.lease_expires_at < now())
            RETURNING cursor, sent, accepted, unregistered, failed, dropped, claims
            """, [jobID, String(shardNo), String(shardCount), range.from ?? Shard.minimumID, range.to, holder,
                  String(lease.milliseconds)],
            // Safe to retry: a claim that committed but whose answer was lost is held by us,
            // and the retry then reports it held (by us) rather than processing it twice.
            idempotent: true)
        if let row = rows.rows.first {
            let number = { (index: Int) in row[index].flatMap { Int64($0) } ?? 0 }
            return .claimed(ShardLease(jobID: jobID, shardNo: shardNo, holder: holder, cursor: row[0],
                                       counts: ShardCounts(sent: number(1), accepted: number(2), unregistered: number(3),
                                                           failed: number(4), dropped: number(5)),
                                       claims: Int(number(6))))
        }
        let current = try await pool.query(
            "SELECT state, lease_holder, lease_expires_at FROM job_shards WHERE job_id = $1 AND shard_no = $2::integer",
            [jobID, String(shardNo)])
        guard let row = current.rows.first else {
            throw PostgresError(.unexpectedResult, "shard \(jobID)/\(shardNo) neither claimed nor found")
        }
        switch row[0] {
        case "finished", "dead-lettered": return .finished
        case "cancelled": return .cancelled
        default: return .heldElsewhere(holder: row[1] ?? "", until: row[2].flatMap(SQLValue.timestamp))
        }
    }

    /// Checkpoints progress in one transaction: the cursor and counts, the lease renewed, the
    /// subscriptions to retry parked, the retries that were resolved removed, and the tokens
    /// found unregistered invalidated (with the counts that include them: invalidated before
    /// the counts were saved, they would be left out of the audience a takeover resumes, and
    /// so out of the job's totals). Fails with `leaseLost` (writing nothing) when another
    /// worker has taken the shard over.
    public func checkpoint(_ lease: inout ShardLease, cursor: String?, counts: ShardCounts,
                           park: [ParkedRetry] = [], resolved: [String] = [],
                           invalidations: (appID: String, batch: [TokenInvalidation])? = nil) async throws(PostgresError) {
        let current = lease
        let leaseMilliseconds = String(self.lease.milliseconds)
        // Idempotent (absolute counts, upserts, guarded by the holder): run again on a new
        // connection when the server restarts mid-checkpoint, rather than abandon the shard run
        // and resend everything since the previous checkpoint.
        try await pool.withTransaction(idempotent: true) { connection throws(PostgresError) in
            let updated = try await connection.query("""
                UPDATE job_shards
                SET cursor = COALESCE($4::uuid, cursor), sent = $5::bigint, accepted = $6::bigint,
                    unregistered = $7::bigint, failed = $8::bigint, dropped = $9::bigint,
                    lease_expires_at = now() + $10::bigint * interval '1 millisecond', checkpoint_at = now()
                WHERE job_id = $1 AND shard_no = $2::integer AND lease_holder = $3 AND state = 'running'
                """, [current.jobID, String(current.shardNo), current.holder, cursor] + counts.parameters + [leaseMilliseconds])
            guard updated.affected == 1 else {
                throw PostgresError(.leaseLost, "shard \(current.jobID)/\(current.shardNo) is no longer held by \(current.holder)")
            }
            // Resolved rows go first: a subscription whose row was resolved and that is parked
            // again since (a takeover resends what lay beyond the cursor, refused again) keeps its
            // new row. Deleted after the insert, it was left with none, behind the cursor: lost.
            if !resolved.isEmpty {
                try await connection.query(
                    "DELETE FROM shard_retries WHERE job_id = $1 AND shard_no = $2::integer AND subscription_id = ANY($3::uuid[])",
                    [current.jobID, String(current.shardNo), SQLValue.array(resolved)])
            }
            if !park.isEmpty {
                try await connection.query("""
                    INSERT INTO shard_retries (job_id, shard_no, subscription_id, attempts, next_attempt_at, last_reason)
                    SELECT $1, $2::integer, s, a, t, r
                    FROM unnest($3::uuid[], $4::integer[], $5::timestamptz[], $6::text[]) AS p(s, a, t, r)
                    ON CONFLICT (job_id, shard_no, subscription_id) DO UPDATE
                    SET attempts = EXCLUDED.attempts, next_attempt_at = EXCLUDED.next_attempt_at, last_reason = EXCLUDED.last_reason
                    """, [current.jobID, String(current.shardNo),
                          SQLValue.array(park.map(\.subscriptionID)),
                          SQLValue.array(park.map { String($0.attempts) }),
                          SQLValue.array(park.map { SQLValue.timestamp($0.nextAttemptAt) }),
                          SQLValue.array(park.map(\.lastReason))])
            }
            if let invalidations, let statement = SubscriptionRepository.invalidation(appID: invalidations.appID, invalidations.batch) {
                try await connection.query(statement.sql, statement.parameters)
            }
        }
        if let cursor { lease.cursor = cursor }
        lease.counts = counts
    }

    /// Retries of the shard that are due, oldest first (only for the lease holder).
    public func dueRetries(_ lease: ShardLease, limit: Int = 1000) async throws(PostgresError) -> [ParkedRetry] {
        let rows = try await pool.query("""
            SELECT r.subscription_id, r.attempts, r.next_attempt_at, r.last_reason, r.first_attempt_at
            FROM shard_retries r JOIN job_shards s USING (job_id, shard_no)
            WHERE r.job_id = $1 AND r.shard_no = $2::integer AND s.lease_holder = $3 AND r.next_attempt_at <= now()
            ORDER BY r.next_attempt_at LIMIT $4::bigint
            """, [lease.jobID, String(lease.shardNo), lease.holder, String(limit)])
        return rows.rows.compactMap { row in
            guard let id = row[0], let attempts = row[1].flatMap({ Int($0) }), let next = row[2].flatMap(SQLValue.timestamp) else { return nil }
            return ParkedRetry(subscriptionID: id, attempts: attempts, nextAttemptAt: next, lastReason: row[3],
                               firstAttemptAt: row[4].flatMap(SQLValue.timestamp))
        }
    }

    /// Parked retries of a shard (any state), for inspection.
    public func parkedCount(jobID: String, shardNo: Int) async throws(PostgresError) -> Int {
        let rows = try await pool.query("SELECT count(*) FROM shard_retries WHERE job_id = $1 AND shard_no = $2::integer",
                                        [jobID, String(shardNo)])
        return rows.rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
    }

    /// Marks the shard finished with its final counts and releases the lease; `leaseLost` if
    /// another worker holds it. A finished shard is never claimed again.
    public func finish(_ lease: ShardLease, counts: ShardCounts) async throws(PostgresError) {
        let updated = try await pool.query("""
            UPDATE job_shards
            SET state = 'finished', finished_at = now(), lease_holder = NULL, lease_expires_at = NULL,
                sent = $4::bigint, accepted = $5::bigint, unregistered = $6::bigint, failed = $7::bigint, dropped = $8::bigint
            WHERE job_id = $1 AND shard_no = $2::integer AND lease_holder = $3 AND state = 'running'
              AND NOT EXISTS (SELECT 1 FROM shard_retries r WHERE r.job_id = $1 AND r.shard_no = $2::integer)
            """, [lease.jobID, String(lease.shardNo), lease.holder] + counts.parameters, idempotent: false)
        guard updated.affected == 1 else {
            // A shard with parked retries left is not finished, whatever its run believes: the
            // run fails and is tried again, and the retry loads them.
            let left = try await pool.query("SELECT count(*) FROM shard_retries WHERE job_id = $1 AND shard_no = $2::integer",
                                            [lease.jobID, String(lease.shardNo)]).rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
            if left > 0 {
                throw PostgresError(.invalidState, "shard \(lease.jobID)/\(lease.shardNo) cannot finish: \(left) parked retries are left")
            }
            throw PostgresError(.leaseLost, "shard \(lease.jobID)/\(lease.shardNo) is no longer held by \(lease.holder)")
        }
    }
}

// MARK: - What the pipeline needs besides claiming and checkpointing

/// A job's row, as the pipeline reads it back.
public struct StoredJob: Sendable, Equatable {
    /// The validated job document as stored (JSON text).
    public var body: String
    /// The job's state; nil for one this build does not know (written by a newer worker).
    public var state: JobState?
    public var shardCount: Int?
    public var urgent: Bool
    /// Set once the `completed` event was recorded.
    public var completedAt: Timestamp?
}

extension JobRepository {
    /// The job's row, or nil when unknown.
    public func storedJob(id: String) async throws(PostgresError) -> StoredJob? {
        let rows = try await pool.query("SELECT body::text, state, shard_count, urgent, completed_at FROM jobs WHERE id = $1", [id])
        guard let row = rows.rows.first, let body = row[0], let state = row[1] else { return nil }
        return StoredJob(body: body, state: JobState(rawValue: state), shardCount: row[2].flatMap { Int($0) }, urgent: row[3] == "t",
                         completedAt: row[4].flatMap(SQLValue.timestamp))
    }

    /// The job's state alone (the shard runner reads it every page, to notice a cancellation).
    /// Nil for an unknown job, or a state this build does not know (written by a newer worker).
    public func state(jobID: String) async throws(PostgresError) -> JobState? {
        let rows = try await pool.query("SELECT state FROM jobs WHERE id = $1", [jobID])
        return (rows.rows.first?.first ?? nil).flatMap(JobState.init(rawValue:))
    }

    /// Moves the job to `state` when it is in one of `from` (a no-op otherwise).
    public func setState(jobID: String, to state: JobState, from: [JobState]) async throws(PostgresError) {
        try await pool.query("UPDATE jobs SET state = $2 WHERE id = $1 AND state = ANY($3::text[])",
                             [jobID, state.rawValue, SQLValue.array(from.map(\.rawValue))])
    }

    /// Gives the shard up without finishing it (shutdown, or every remaining subscription parked
    /// behind a halted provider): another claim may take it at once instead of waiting for the
    /// lease to lapse. False when the lease was no longer ours.
    @discardableResult
    public func release(_ lease: ShardLease) async throws(PostgresError) -> Bool {
        let updated = try await pool.query("""
            UPDATE job_shards SET lease_holder = NULL, lease_expires_at = NULL
            WHERE job_id = $1 AND shard_no = $2::integer AND lease_holder = $3 AND state = 'running'
            """, [lease.jobID, String(lease.shardNo), lease.holder])
        return updated.affected == 1
    }

    /// Every parked retry of the shard, due or not (read when a shard is resumed), in keyset
    /// pages of `pageSize`: all of them, however many (a cut-off list would leave the rest
    /// behind the cursor, never sent again). `HERALD_SHARD_SIZE` bounds how many there can be.
    public func parkedRetries(_ lease: ShardLease, pageSize: Int = 10_000) async throws(PostgresError) -> [ParkedRetry] {
        var parked: [ParkedRetry] = []
        var after = Shard.minimumID
        var first = true
        while true {
            let rows = try await pool.query("""
                SELECT subscription_id, attempts, next_attempt_at, last_reason, first_attempt_at FROM shard_retries
                WHERE job_id = $1 AND shard_no = $2::integer AND ($5::boolean OR subscription_id > $3::uuid)
                ORDER BY subscription_id LIMIT $4::bigint
                """, [lease.jobID, String(lease.shardNo), after, String(pageSize), first ? "true" : "false"])
            first = false
            for row in rows.rows {
                guard let id = row[0], let attempts = row[1].flatMap({ Int($0) }), let next = row[2].flatMap(SQLValue.timestamp) else { continue }
                parked.append(ParkedRetry(subscriptionID: id, attempts: attempts, nextAttemptAt: next, lastReason: row[3],
                                          firstAttemptAt: row[4].flatMap(SQLValue.timestamp)))
            }
            guard rows.rows.count == pageSize, let last = rows.rows.last?.first ?? nil else { return parked }
            after = last
        }
    }

    public func pendingShards(jobID: String, appID: String) async throws(PostgresError) -> [Shard] {
        let rows = try await pool.query("""
            SELECT shard_no, shard_count, id_from, id_to, created_at FROM job_shards
            WHERE job_id = $1 AND state = 'pending' ORDER BY shard_no
            """, [jobID])
        return rows.rows.compactMap { row in
            guard let number = row[0].flatMap({ Int($0) }), let count = row[1].flatMap({ Int($0) }), let from = row[2],
                  let created = row[4].flatMap(SQLValue.timestamp) else { return nil }
            return Shard(jobID: jobID, appID: appID, shardNo: number, shardCount: count, idFrom: from, idTo: row[3], createdAt: created)
        }
    }

    /// The job's totals when every planned shard is finished, else nil. Read after a shard's
    /// `finish` committed, so of two shards finishing at once the later one sees both.
    public func totalsIfFinished(jobID: String) async throws(PostgresError) -> Receipt.Totals? {
        try await completion(jobID: jobID)?.totals
    }

    /// The job's totals and its dead-lettered shards when every planned shard is finished or
    /// dead-lettered, else nil.
    public func completion(jobID: String) async throws(PostgresError) -> (totals: Receipt.Totals, deadLetteredShards: Int)? {
        let rows = try await pool.query("""
            SELECT j.shard_count, count(s.shard_no), count(s.shard_no) FILTER (WHERE s.state IN ('finished', 'dead-lettered')),
                   COALESCE(sum(s.accepted), 0), COALESCE(sum(s.unregistered), 0), COALESCE(sum(s.failed), 0), COALESCE(sum(s.dropped), 0),
                   count(s.shard_no) FILTER (WHERE s.state = 'dead-lettered')
            FROM jobs j LEFT JOIN job_shards s ON s.job_id = j.id
            WHERE j.id = $1 GROUP BY j.shard_count
            """, [jobID])
        guard let row = rows.rows.first, let planned = row[0].flatMap({ Int($0) }),
              let all = row[1].flatMap({ Int($0) }), let finished = row[2].flatMap({ Int($0) }),
              all == planned, finished == planned else { return nil }
        let number = { (index: Int) in row[index].flatMap { Int64($0) } ?? 0 }
        return (Receipt.Totals(accepted: number(3), unregistered: number(4), failed: number(5), dropped: number(6)), Int(number(7)))
    }

    /// Marks a shard dead-lettered: its run failed for good. The counts stay what its last
    /// checkpoint saved; its parked retries are removed (their subscriptions get no receipt,
    /// like the rest of its range). Creates the row when the shard was never claimed, and
    /// leaves a finished or cancelled shard as it is.
    public func abandonShard(jobID: String, shardNo: Int, shardCount: Int, range: SubscriptionRange) async throws(PostgresError) {
        try await pool.withTransaction { connection throws(PostgresError) in
            try await connection.query("""
                INSERT INTO job_shards AS s (job_id, shard_no, shard_count, id_from, id_to, state, finished_at)
                VALUES ($1, $2::integer, $3::integer, $4::uuid, $5::uuid, 'dead-lettered', now())
                ON CONFLICT (job_id, shard_no) DO UPDATE
                SET state = 'dead-lettered', finished_at = now(), lease_holder = NULL, lease_expires_at = NULL
                WHERE s.state IN ('pending', 'running')
                """, [jobID, String(shardNo), String(shardCount), range.from ?? Shard.minimumID, range.to])
            try await connection.query("DELETE FROM shard_retries WHERE job_id = $1 AND shard_no = $2::integer", [jobID, String(shardNo)])
        }
    }

    /// Records the job complete with `totals` (state `completed` unless it was cancelled). True
    /// for the one call that recorded it.
    @discardableResult
    public func markCompleted(jobID: String, totals: Receipt.Totals) async throws(PostgresError) -> Bool {
        let updated = try await pool.query("""
            UPDATE jobs SET state = CASE WHEN state = 'cancelled' THEN state ELSE 'completed' END, completed_at = now(),
                   accepted = $2::bigint, unregistered = $3::bigint, failed = $4::bigint, dropped = $5::bigint
            WHERE id = $1 AND completed_at IS NULL
            """, [jobID, String(totals.accepted), String(totals.unregistered), String(totals.failed), String(totals.dropped)],
            idempotent: true)
        return updated.affected == 1
    }
}

extension AudienceResolver {
    /// Every id of an explicit `subscription_ids` audience, in the order given (the caller sorts):
    /// a subscription that can be sent to as a member; one opted out or invalidated as a member
    /// with `unavailable` = `opted-out`; an id of no subscription of `appID` (deleted, never
    /// registered, another app's) as a placeholder with `unavailable` = `unknown-subscription`.
    /// So each listed id gets exactly one terminal receipt.
    public func listedMembers(appID: String, ids: [String]) async throws(PostgresError) -> [AudienceMember] {
        let valid = ids.filter(SQLValue.isUUID)
        var found: [String: AudienceMember] = [:]
        if !valid.isEmpty {
            let sql = "SELECT \(AudienceMember.columns), opted_in AND invalidated_at IS NULL FROM subscriptions WHERE app_id = $1 AND id = ANY($2::uuid[])"
            let parameters: [String?] = [appID, SQLValue.array(valid)]
            let rows = try await pool.withConnection(retryingIfLost: true) { connection throws(PostgresError) in
                try await connection.query(sql, parameters, decode: { row -> AudienceMember? in
                    guard var member = AudienceMember.decode(row) else { return nil }
                    if !row.bool(9) { member.unavailable = .optedOut }
                    return member
                })
            }
            for member in rows { found[member.id] = member }
        }
        return ids.map { id in
            if let member = found[id.lowercased()] { return member }
            var ghost = AudienceMember(id: id.lowercased(), platform: .ios, token: "", sandbox: false, sdk: false,
                                       language: nil, timeZone: nil, voipToken: nil)
            ghost.unavailable = .unknownSubscription
            return ghost
        }
    }

    /// The subscriptions among `ids` of `appID`, for parked retries being resumed. They were in
    /// the audience when the job started, so they are read whatever their state now (a retry of a
    /// since-invalidated token gets the same answer and the same receipt again); ids missing from
    /// the answer were deleted.
    public func members(appID: String, ids: [String]) async throws(PostgresError) -> [AudienceMember] {
        let valid = ids.filter(SQLValue.isUUID)
        if valid.isEmpty { return [] }
        let sql = "SELECT \(AudienceMember.columns) FROM subscriptions WHERE app_id = $1 AND id = ANY($2::uuid[]) ORDER BY id"
        let parameters: [String?] = [appID, SQLValue.array(valid)]
        return try await pool.withConnection(retryingIfLost: true) { connection throws(PostgresError) in
            try await connection.query(sql, parameters, decode: AudienceMember.decode)
        }
    }
}
