public import HeraldCore

/// A job as the database knows it, with its shards: what `herald jobs show` prints.
public struct JobStatus: Sendable, Equatable {
    /// One shard of the job.
    public struct ShardStatus: Sendable, Equatable {
        public var shardNo: Int
        public var shardCount: Int
        /// `pending`, `running`, `finished` or `cancelled`.
        public var state: String
        /// First subscription id of the range (inclusive).
        public var idFrom: String
        /// End of the range (exclusive); nil for the last shard.
        public var idTo: String?
        /// The last checkpointed subscription id; nil before the first checkpoint.
        public var cursor: String?
        /// Sent and terminal counts as of the last checkpoint.
        public var counts: ShardCounts
        /// The worker holding the lease, if any.
        public var leaseHolder: String?
        public var leaseExpiresAt: Timestamp?
        /// How many times the shard was claimed (more than 1: resumed after a crash or rebalance).
        public var claims: Int
        /// Subscriptions parked in `shard_retries`.
        public var parkedRetries: Int
        public var createdAt: Timestamp?
        public var startedAt: Timestamp?
        public var finishedAt: Timestamp?
        public var checkpointAt: Timestamp?
    }

    public var id: String
    public var appID: String
    public var kind: String
    /// `received`, `scheduled`, `planned`, `running`, `completed`, `cancelled`, `halted` or `expired`.
    public var state: String
    public var urgent: Bool
    public var audienceEstimate: Int64?
    public var shardCount: Int?
    public var createdAt: Timestamp?
    public var receivedAt: Timestamp?
    public var plannedAt: Timestamp?
    public var completedAt: Timestamp?
    public var cancelledAt: Timestamp?
    public var expiresAt: Timestamp?
    /// The job's terminal totals as recorded on its row.
    public var totals: Receipt.Totals
    /// Device events counted on the job (first sightings only): `received`, `confirmed`, `clicked`.
    public var received: Int64 = 0
    public var confirmed: Int64 = 0
    public var clicked: Int64 = 0
    /// The shards, by shard number.
    public var shards: [ShardStatus]

    /// Parked retries over every shard.
    public var parkedRetries: Int { shards.reduce(0) { $0 + $1.parkedRetries } }

    /// The status as a JSON document (snake_case keys, RFC 3339 times, null when unknown).
    public var json: JSONValue {
        func time(_ value: Timestamp?) -> JSONValue { value.map { .string($0.rfc3339) } ?? .null }
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return .object([
            "id": .string(id),
            "app_id": .string(appID),
            "kind": .string(kind),
            "state": .string(state),
            "urgent": .bool(urgent),
            "audience_estimate": audienceEstimate.map { .int($0) } ?? .null,
            "shard_count": shardCount.map { .int($0) } ?? .null,
            "created_at": time(createdAt),
            "received_at": time(receivedAt),
            "planned_at": time(plannedAt),
            "completed_at": time(completedAt),
            "cancelled_at": time(cancelledAt),
            "expires_at": time(expiresAt),
            "totals": .object([
                "accepted": .int(totals.accepted),
                "unregistered": .int(totals.unregistered),
                "failed": .int(totals.failed),
                "dropped": .int(totals.dropped),
            ]),
            "device_events": .object(["received": .int(received), "confirmed": .int(confirmed), "clicked": .int(clicked)]),
            "parked_retries": .int(parkedRetries),
            "shards": .array(shards.map { shard in
                .object([
                    "shard_no": .int(shard.shardNo),
                    "shard_count": .int(shard.shardCount),
                    "state": .string(shard.state),
                    "id_from": .string(shard.idFrom),
                    "id_to": text(shard.idTo),
                    "cursor": text(shard.cursor),
                    "sent": .int(shard.counts.sent),
                    "accepted": .int(shard.counts.accepted),
                    "unregistered": .int(shard.counts.unregistered),
                    "failed": .int(shard.counts.failed),
                    "dropped": .int(shard.counts.dropped),
                    "lease_holder": text(shard.leaseHolder),
                    "lease_expires_at": time(shard.leaseExpiresAt),
                    "claims": .int(shard.claims),
                    "parked_retries": .int(shard.parkedRetries),
                    "created_at": time(shard.createdAt),
                    "started_at": time(shard.startedAt),
                    "finished_at": time(shard.finishedAt),
                    "checkpoint_at": time(shard.checkpointAt),
                ])
            }),
        ])
    }
}

/// Operator actions on jobs (`herald jobs show|cancel|resume`), over `jobs`, `job_shards`,
/// `shard_retries` and the halt columns of `apps`.
public struct JobAdministration: Sendable {
    private let pool: PostgresPool

    /// Administration through `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// The job `jobID` with its shards and parked retries, or nil when there is no such job.
    public func show(jobID: String) async throws(PostgresError) -> JobStatus? {
        let jobs = try await pool.query("""
            SELECT id, app_id, kind, state, urgent, audience_estimate, shard_count,
                   \(utc("created_at")) AS created_at, \(utc("received_at")) AS received_at,
                   \(utc("planned_at")) AS planned_at, \(utc("completed_at")) AS completed_at,
                   \(utc("cancelled_at")) AS cancelled_at, \(utc("expires_at")) AS expires_at,
                   accepted, unregistered, failed, dropped, received, confirmed, clicked
            FROM jobs WHERE id = $1
            """, [jobID])
        guard !jobs.rows.isEmpty else { return nil }
        func job(_ column: String) -> String? { jobs.value(0, column) }
        func jobCount(_ column: String) -> Int64 { job(column).flatMap { Int64($0) } ?? 0 }

        let shards = try await pool.query("""
            SELECT s.shard_no, s.shard_count, s.state, s.id_from, s.id_to, s.cursor,
                   s.sent, s.accepted, s.unregistered, s.failed, s.dropped,
                   s.lease_holder, \(utc("s.lease_expires_at")) AS lease_expires_at, s.claims,
                   (SELECT count(*) FROM shard_retries r WHERE r.job_id = s.job_id AND r.shard_no = s.shard_no) AS parked,
                   \(utc("s.created_at")) AS created_at, \(utc("s.started_at")) AS started_at,
                   \(utc("s.finished_at")) AS finished_at, \(utc("s.checkpoint_at")) AS checkpoint_at
            FROM job_shards s WHERE s.job_id = $1 ORDER BY s.shard_no
            """, [jobID])
        let shardStatuses = shards.rows.indices.map { row in
            func value(_ column: String) -> String? { shards.value(row, column) }
            func count(_ column: String) -> Int64 { value(column).flatMap { Int64($0) } ?? 0 }
            return JobStatus.ShardStatus(
                shardNo: Int(count("shard_no")), shardCount: Int(count("shard_count")), state: value("state") ?? "",
                idFrom: value("id_from") ?? "", idTo: value("id_to"), cursor: value("cursor"),
                counts: ShardCounts(sent: count("sent"), accepted: count("accepted"), unregistered: count("unregistered"),
                                    failed: count("failed"), dropped: count("dropped")),
                leaseHolder: value("lease_holder"), leaseExpiresAt: value("lease_expires_at").flatMap(Timestamp.init(rfc3339:)),
                claims: Int(count("claims")), parkedRetries: Int(count("parked")),
                createdAt: value("created_at").flatMap(Timestamp.init(rfc3339:)),
                startedAt: value("started_at").flatMap(Timestamp.init(rfc3339:)),
                finishedAt: value("finished_at").flatMap(Timestamp.init(rfc3339:)),
                checkpointAt: value("checkpoint_at").flatMap(Timestamp.init(rfc3339:)))
        }
        var status = JobStatus(
            id: job("id") ?? jobID, appID: job("app_id") ?? "", kind: job("kind") ?? "", state: job("state") ?? "",
            urgent: job("urgent") == "t", audienceEstimate: job("audience_estimate").flatMap { Int64($0) },
            shardCount: job("shard_count").flatMap { Int($0) },
            createdAt: job("created_at").flatMap(Timestamp.init(rfc3339:)),
            receivedAt: job("received_at").flatMap(Timestamp.init(rfc3339:)),
            plannedAt: job("planned_at").flatMap(Timestamp.init(rfc3339:)),
            completedAt: job("completed_at").flatMap(Timestamp.init(rfc3339:)),
            cancelledAt: job("cancelled_at").flatMap(Timestamp.init(rfc3339:)),
            expiresAt: job("expires_at").flatMap(Timestamp.init(rfc3339:)),
            totals: Receipt.Totals(accepted: jobCount("accepted"), unregistered: jobCount("unregistered"),
                                   failed: jobCount("failed"), dropped: jobCount("dropped")),
            shards: shardStatuses)
        status.received = jobCount("received")
        status.confirmed = jobCount("confirmed")
        status.clicked = jobCount("clicked")
        return status
    }

    /// Cancels the job: running shards notice at their next page and drop the rest of their
    /// audience with `cancelled`; shards waiting for their retries in `scheduled_jobs` (the
    /// job's and its sub-jobs') are made due now, so they run, drop theirs and let the job
    /// complete without waiting out the backoff. Returns false when the job had already
    /// completed or been cancelled (nothing changed); `notFound` when there is no such job.
    public func cancel(jobID: String) async throws(PostgresError) -> Bool {
        let cancelled = try await pool.withTransaction { connection throws(PostgresError) -> Bool in
            let updated = try await connection.query("""
                UPDATE jobs SET state = 'cancelled', cancelled_at = now()
                WHERE id = $1 AND state NOT IN ('completed', 'cancelled')
                """, [jobID])
            guard updated.affected > 0 else { return false }
            // One release per waiting shard, due this second (a shard that waits twice, after
            // a crash, has two rows: the earliest is kept); then the later ones go.
            let waits = "reason = 'retry' AND shard_no >= 0 AND (job_id = $1 OR job_id IN (SELECT id FROM jobs WHERE parent_id = $1))"
            try await connection.query("""
                INSERT INTO scheduled_jobs (job_id, app_id, due_at, lane, body, reason, shard_no)
                SELECT DISTINCT ON (job_id, shard_no) job_id, app_id, date_trunc('second', now()), lane, body, reason, shard_no
                FROM scheduled_jobs WHERE \(waits) AND due_at > date_trunc('second', now())
                ORDER BY job_id, shard_no, due_at
                ON CONFLICT ON CONSTRAINT scheduled_jobs_release_key DO NOTHING
                """, [jobID])
            try await connection.query("DELETE FROM scheduled_jobs WHERE \(waits) AND due_at > date_trunc('second', now())", [jobID])
            return true
        }
        if cancelled { return true }
        let exists = try await pool.query("SELECT 1 FROM jobs WHERE id = $1", [jobID])
        guard !exists.rows.isEmpty else { throw PostgresError(.notFound, "no job \(jobID)") }
        return false
    }

    /// Resumes a job after its app's credentials were fixed, in one transaction: clears the app's
    /// APNs and FCM halts, makes the job's retries parked by a halt due now, sets a `halted` job
    /// back to `running`, and returns the shards that are neither finished nor cancelled, for the
    /// caller to produce to the shards topic again. `notFound` for an unknown job;
    /// `invalidState` for a completed or cancelled one.
    public func resume(jobID: String) async throws(PostgresError) -> [Shard] {
        try await pool.withTransaction(idempotent: true) { connection throws(PostgresError) -> [Shard] in
            // FOR UPDATE: a concurrent cancel either happens before (and is refused here) or waits.
            let jobs = try await connection.query("SELECT app_id, state FROM jobs WHERE id = $1 FOR UPDATE", [jobID])
            guard let appID = jobs.value(0, "app_id"), let state = jobs.value(0, "state") else {
                throw PostgresError(.notFound, "no job \(jobID)")
            }
            guard state != "completed" && state != "cancelled" else {
                throw PostgresError(.invalidState, "job \(jobID) is \(state): there is nothing to resume")
            }
            try await connection.query("""
                UPDATE apps SET apns_halted_reason = NULL, apns_halted_at = NULL,
                                fcm_halted_reason = NULL, fcm_halted_at = NULL, updated_at = now()
                WHERE id = $1 AND (apns_halted_reason IS NOT NULL OR apns_halted_at IS NOT NULL
                                   OR fcm_halted_reason IS NOT NULL OR fcm_halted_at IS NOT NULL)
                """, [appID])
            try await connection.query("""
                UPDATE shard_retries SET next_attempt_at = now()
                WHERE job_id = $1 AND last_reason LIKE 'halted%'
                """, [jobID])
            try await connection.query("UPDATE jobs SET state = 'running' WHERE id = $1 AND state = 'halted'", [jobID])
            let shards = try await connection.query("""
                SELECT shard_no, shard_count, id_from, id_to, \(utc("created_at")) AS created_at
                FROM job_shards WHERE job_id = $1 AND state NOT IN ('finished', 'cancelled')
                ORDER BY shard_no
                """, [jobID])
            var result: [Shard] = []
            for row in shards.rows.indices {
                guard let shardNo = shards.value(row, "shard_no").flatMap({ Int($0) }),
                      let shardCount = shards.value(row, "shard_count").flatMap({ Int($0) }),
                      let idFrom = shards.value(row, "id_from"),
                      let createdAt = shards.value(row, "created_at").flatMap(Timestamp.init(rfc3339:)) else {
                    throw PostgresError(.unexpectedResult, "shard row \(row) of job \(jobID) is incomplete")
                }
                result.append(Shard(jobID: jobID, appID: appID, shardNo: shardNo, shardCount: shardCount,
                                    idFrom: idFrom, idTo: shards.value(row, "id_to"), createdAt: createdAt))
            }
            return result
        }
    }

    /// The shards to run again because their job expired while they waited behind a halted
    /// provider: unfinished, not claimed by a live lease, of a job neither completed nor
    /// cancelled whose `expires_at` has passed and that holds retries parked by a halt. No shard
    /// runs while its app is halted, so without this nothing would ever settle those
    /// subscriptions; run again, the shard drops each one as `expired` and the job completes.
    /// At most `limit` shards, with whether their job is urgent.
    public func expiredHaltedShards(limit: Int = 500) async throws(PostgresError) -> [(shard: Shard, urgent: Bool)] {
        let rows = try await pool.query("""
            SELECT s.job_id, j.app_id, j.urgent, s.shard_no, s.shard_count, s.id_from, s.id_to, \(utc("s.created_at")) AS created_at
            FROM jobs j JOIN job_shards s ON s.job_id = j.id
            WHERE j.expires_at <= now() AND j.completed_at IS NULL AND j.state NOT IN ('completed', 'cancelled')
              AND s.state IN ('pending', 'running') AND (s.lease_expires_at IS NULL OR s.lease_expires_at < now())
              AND EXISTS (SELECT 1 FROM shard_retries r
                          WHERE r.job_id = s.job_id AND r.shard_no = s.shard_no AND r.last_reason LIKE 'halted%')
            ORDER BY j.expires_at, s.job_id, s.shard_no
            LIMIT $1::bigint
            """, [String(max(1, limit))])
        var result: [(shard: Shard, urgent: Bool)] = []
        for row in rows.rows.indices {
            guard let jobID = rows.value(row, "job_id"), let appID = rows.value(row, "app_id"),
                  let shardNo = rows.value(row, "shard_no").flatMap({ Int($0) }),
                  let shardCount = rows.value(row, "shard_count").flatMap({ Int($0) }),
                  let idFrom = rows.value(row, "id_from"),
                  let createdAt = rows.value(row, "created_at").flatMap(Timestamp.init(rfc3339:)) else {
                throw PostgresError(.unexpectedResult, "shard row \(row) of an expired halted job is incomplete")
            }
            result.append((Shard(jobID: jobID, appID: appID, shardNo: shardNo, shardCount: shardCount, idFrom: idFrom,
                                 idTo: rows.value(row, "id_to"), createdAt: createdAt), rows.value(row, "urgent") == "t"))
        }
        return result
    }

    /// Cluster-wide backlog figures for the workers' gauges: apps halted on a provider, retries
    /// parked in `shard_retries`, and `scheduled_jobs` rows due now and waiting for later.
    public func backlog() async throws(PostgresError) -> (haltedApps: Int, parkedRetries: Int, scheduledDue: Int, scheduledWaiting: Int) {
        let rows = try await pool.query("""
            SELECT (SELECT count(*) FROM apps WHERE apns_halted_reason IS NOT NULL OR fcm_halted_reason IS NOT NULL)::text,
                   (SELECT count(*) FROM shard_retries)::text,
                   (SELECT count(*) FROM scheduled_jobs WHERE due_at <= now())::text,
                   (SELECT count(*) FROM scheduled_jobs WHERE due_at > now())::text
            """)
        let row = rows.rows.first ?? []
        func number(_ index: Int) -> Int { row.count > index ? row[index].flatMap { Int($0) } ?? 0 : 0 }
        return (number(0), number(1), number(2), number(3))
    }

    /// One line of `herald jobs list`.
    public struct Listing: Sendable, Equatable {
        public var id: String
        public var appID: String
        public var kind: String
        public var state: String
        public var urgent: Bool
        public var receivedAt: Timestamp?
        public var completedAt: Timestamp?
        public var audienceEstimate: Int64?
        public var totals: Receipt.Totals
    }

    /// The jobs users sent (not the sub-jobs Herald derives), newest first: of `appID` and in
    /// `state` when given, at most `limit`.
    public func list(appID: String? = nil, state: String? = nil, limit: Int = 50) async throws(PostgresError) -> [Listing] {
        let rows = try await pool.query("""
            SELECT id, app_id, kind, state, urgent::text, \(utc("received_at")) AS received_at, \(utc("completed_at")) AS completed_at,
                   audience_estimate::text, accepted::text, unregistered::text, failed::text, dropped::text
            FROM jobs
            WHERE parent_id IS NULL AND ($1::text IS NULL OR app_id = $1) AND ($2::text IS NULL OR state = $2)
            ORDER BY received_at DESC, id
            LIMIT $3::bigint
            """, [appID, state, String(max(1, min(limit, 10_000)))])
        return rows.rows.indices.compactMap { row in
            guard let id = rows.value(row, "id"), let app = rows.value(row, "app_id"), let kind = rows.value(row, "kind"),
                  let state = rows.value(row, "state") else { return nil }
            func count(_ column: String) -> Int64 { rows.value(row, column).flatMap { Int64($0) } ?? 0 }
            return Listing(id: id, appID: app, kind: kind, state: state, urgent: rows.value(row, "urgent") == "true",
                           receivedAt: rows.value(row, "received_at").flatMap(Timestamp.init(rfc3339:)),
                           completedAt: rows.value(row, "completed_at").flatMap(Timestamp.init(rfc3339:)),
                           audienceEstimate: rows.value(row, "audience_estimate").flatMap { Int64($0) },
                           totals: Receipt.Totals(accepted: count("accepted"), unregistered: count("unregistered"),
                                                  failed: count("failed"), dropped: count("dropped")))
        }
    }

    /// A `timestamptz` column as RFC 3339 in UTC, whatever the session's time zone and DateStyle.
    private func utc(_ column: String) -> String {
        "to_char(\(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    }
}
