import HeraldCore
import HeraldKafka
import HeraldPostgres

/// Takes send jobs off `herald.jobs` (docs/ARCHITECTURE.md): validates them (a malformed job becomes a dead
/// letter, never a crash or an endless retry), records them once by id (a replay never fans out
/// twice), and plans them: a small explicit audience runs here at once as one shard; anything
/// else is split into shards of `shardSize` published to `herald.shards`.
struct JobPlanner: Sendable {
    let context: PipelineContext
    let runner: ShardRunner
    let shardSize: Int
    /// Plans jobs with send_after, local_time, quiet hours or best hour into sub-jobs (issue 10).
    var scheduling: SchedulePlanner?
    let liveActivities: LiveActivityPlanner

    /// A planner; `liveActivities` holds the numbering marks of live activities.
    init(context: PipelineContext, runner: ShardRunner, shardSize: Int, liveActivities: LiveActivityRepository) {
        self.context = context
        self.runner = runner
        self.shardSize = shardSize
        self.liveActivities = LiveActivityPlanner(context: context, runner: runner, repository: liveActivities)
    }

    /// Handles one job message; true when its offset may be committed. A job that fails for
    /// good (``MessageFailure``) is dead-lettered with a `rejected` event, and the lane moves on.
    func handle(_ message: KafkaMessage) async -> Bool {
        let job: Job
        do {
            job = try Job.decode(message.value)
        } catch {
            return await reject(message, job: nil, cause: .invalid, reason: "invalid job: \(error)", attempts: 1)
        }
        switch await MessageRetrier.run(message, context: context, subject: ["job_id": .string(job.id)], { try await plan(job, message: message) }) {
        case .done(let commits):
            return commits
        case .stopped:
            return false
        case .gaveUp(let failure, let cause, let attempts):
            return await reject(message, job: job, cause: cause, reason: "job \(job.id): \(failure.detail)", attempts: attempts)
        }
    }

    /// Dead-letters a job message, with a `rejected` event on the results topic when the job's
    /// id and app are known (from the job, or read from a document that failed validation
    /// elsewhere), so a producer waiting for `completed` learns the end.
    private func reject(_ message: KafkaMessage, job: Job?, cause: DeadLetter.Cause, reason: String, attempts: Int) async -> Bool {
        var receipts: [Receipt] = []
        if let (jobID, appID) = job.map({ ($0.reported.id, $0.appID) }) ?? Self.identity(of: message.value) {
            receipts.append(DeadLetter.rejection(jobID: jobID, appID: appID, cause: cause, attempts: attempts, at: .now))
        }
        return await PipelineDeadLetters.send(message, cause: cause, reason: reason, attempts: attempts, context: context, receipts: receipts)
    }

    /// The job id (its parent's, for a sub-job) and app id of a job document that did not
    /// validate, when both members are there and valid themselves.
    static func identity(of bytes: [UInt8]) -> (jobID: String, appID: String)? {
        // Any size a Kafka message may have: a job refused for its size still names itself.
        guard let document = try? JSONValue.parse(bytes, limits: .init(maxBytes: max(bytes.count, 1))),
              let id = document["parent_id"]?.stringValue ?? document["id"]?.stringValue,
              let app = document["app_id"]?.stringValue,
              Identifiers.jobID.accepts(id), Identifiers.appID.accepts(app) else { return nil }
        return (id, app)
    }

    struct UnknownApp: PermanentMessageError {
        let appID: String
        var cause: DeadLetter.Cause { .unknownApp }
        var description: String { "unknown app \(appID): no row in apps" }
    }

    private func plan(_ job: Job, message: KafkaMessage) async throws -> Bool {
        guard try await context.directory.delivery(appID: job.appID) != nil else { throw UnknownApp(appID: job.appID) }
        let explicit: Bool
        switch job.audience {
        case .subscriptionIDs?, .externalIDs?: explicit = true
        default: explicit = false
        }
        let inserted = try await context.jobs.insert(id: job.id, appID: job.appID, kind: job.kind.rawValue, body: job.document.serialized(),
                                                     createdAt: job.createdAt, expiresAt: job.expiresAt, urgent: job.delivery.urgent)
        var stored = try await context.jobs.storedJob(id: job.id)
        if inserted {
            context.metrics.jobStarted()
            context.log.info("job received", ["job_id": .string(job.id), "app_id": .string(job.appID), "kind": .string(job.kind.rawValue)])
        } else if let current = stored, current.state?.isFinal == true || current.completedAt != nil {
            context.log.info("job already handled; replay ignored", ["job_id": .string(job.id), "state": .string(current.state?.rawValue ?? "unknown")])
            return true
        }
        // The row decides: a replay with other content still runs what was first received.
        let planned: Job
        if !inserted, let body = stored?.body, let first = try? Job(json: try JSONValue.parse(body)) {
            planned = first
        } else {
            planned = job
        }
        if planned.kind == .liveActivity {
            return try await liveActivities.run(planned, stored: stored)
        }
        if let scheduling, try await scheduling.needsScheduling(planned) {
            try await scheduling.plan(planned, state: stored?.state)
            return true
        }
        if explicit {
            let single = Shard(jobID: planned.id, appID: planned.appID, shardNo: 0, shardCount: 1, idFrom: Shard.minimumID, idTo: nil, createdAt: .now)
            if stored?.shardCount == nil {
                // Listed subscription ids each get one terminal receipt, whatever their state.
                let count: Int
                if let listed = ShardPages.listedIDs(planned.audience) {
                    count = listed.count
                } else {
                    count = try await context.audience.count(AudienceQuery(appID: planned.appID, audience: planned.audience ?? .all))
                }
                try await context.jobs.plan(jobID: planned.id, ranges: [.everything], audienceEstimate: count)
                // The planned event is acknowledged while the sends start, so a one-time code
                // does not wait for the broker behind the campaigns' receipts.
                async let announced: Void = publishPlanned(planned, estimate: count, shards: 1)
                let outcome = await runner.run(job: planned, shard: single)
                try await announced
                return try outcome.committingMessage()
            }
            return try await runner.run(job: planned, shard: single).committingMessage()
        }
        if stored?.shardCount == nil {
            let query = AudienceQuery(appID: planned.appID, audience: planned.audience ?? .all)
            let plan = try await context.audience.shardPlan(query, devicesPerShard: shardSize)
            try await context.jobs.plan(jobID: planned.id, ranges: plan.ranges, audienceEstimate: plan.count)
            try await publishPlanned(planned, estimate: plan.count, shards: plan.ranges.count)
            stored = try await context.jobs.storedJob(id: planned.id)
            context.log.info("job planned", ["job_id": .string(planned.id), "audience": .int(plan.count), "shards": .int(plan.ranges.count)])
        }
        // Shards nobody has started: all of them now, or after a crash those whose messages may
        // not have reached Kafka (a repeated shard message is harmless: the lease decides).
        let pending = try await context.jobs.pendingShards(jobID: planned.id, appID: planned.appID)
        if !pending.isEmpty {
            try await context.publisher.publish(shards: pending, urgent: stored?.urgent ?? planned.delivery.urgent)
        }
        if stored?.shardCount == 0 {
            try await runner.completeJobIfDone(planned)
        }
        return true
    }

    private func publishPlanned(_ job: Job, estimate: Int, shards: Int) async throws {
        // A sub-job's plan is internal (its parent reported `planned` when it was scheduled),
        // except the `:sa` sub-job of a send_after job, which plans the whole audience.
        guard job.reportsPlan else { return }
        var receipt = Receipt(jobID: job.reported.id, appID: job.appID, stage: .planned, at: .now)
        receipt.audienceEstimate = Int64(estimate)
        receipt.shardCount = shards
        try await context.publisher.publish([receipt])
    }
}
