public import HeraldCore
public import HeraldKafka
public import HeraldPostgres

/// Takes send jobs off `herald.jobs` (DESIGN §1): validates them (a malformed job becomes a dead
/// letter, never a crash or an endless retry), records them once by id (a replay never fans out
/// twice), and plans them: a small explicit audience runs here at once as one shard; anything
/// else is split into shards of `shardSize` published to `herald.shards`.
public struct JobPlanner: Sendable {
    let context: PipelineContext
    let runner: ShardRunner
    let shardSize: Int

    /// A planner.
    public init(context: PipelineContext, runner: ShardRunner, shardSize: Int) {
        self.context = context
        self.runner = runner
        self.shardSize = shardSize
    }

    /// Handles one job message; true when its offset may be committed.
    public func handle(_ message: KafkaMessage) async -> Bool {
        let job: Job
        do {
            job = try Job.decode(message.value)
        } catch {
            return await deadLetter(message, reason: "invalid job: \(error)")
        }
        if job.kind == .liveActivity {
            return await deadLetter(message, reason: "live_activity jobs are not delivered by this version of Herald yet")
        }
        var delay = Duration.seconds(1)
        while true {
            do {
                return try await plan(job, message: message)
            } catch let problem as UnknownApp {
                return await deadLetter(message, reason: problem.description)
            } catch {
                if context.stop.isSet { return false }
                if error is PostgresError { context.metrics.postgresError() } else { context.metrics.kafkaError() }
                context.log.error("planning failed; retrying", [
                    "job_id": .string(job.id), "error": .string("\(error)"), "retry_in_ms": .int(Int(delay.milliseconds)),
                ])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(30))
            }
        }
    }

    struct UnknownApp: Error, CustomStringConvertible {
        let appID: String
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
        } else if let current = stored, ["completed", "cancelled", "expired"].contains(current.state) || current.completedAt != nil {
            context.log.info("job already handled; replay ignored", ["job_id": .string(job.id), "state": .string(current.state)])
            return true
        }
        // The row decides: a replay with other content still runs what was first received.
        let planned: Job
        if !inserted, let body = stored?.body, let first = try? Job(json: try JSONValue.parse(body)) {
            planned = first
        } else {
            planned = job
        }
        if explicit {
            let single = Shard(jobID: planned.id, appID: planned.appID, shardNo: 0, shardCount: 1, idFrom: Shard.minimumID, idTo: nil, createdAt: .now)
            if stored?.shardCount == nil {
                let query = AudienceQuery(appID: planned.appID, audience: planned.audience ?? .all)
                let count = try await context.audience.count(query)
                try await context.jobs.plan(jobID: planned.id, ranges: [.everything], audienceEstimate: count)
                try await publishPlanned(planned, estimate: count, shards: 1)
            }
            return await runner.run(job: planned, shard: single).commitsMessage
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
        var receipt = Receipt(jobID: job.id, appID: job.appID, stage: .planned, at: .now)
        receipt.audienceEstimate = Int64(estimate)
        receipt.shardCount = shards
        try await context.publisher.publish([receipt])
    }

    /// Dead-letters a message (DESIGN §3 envelope); true once Kafka has it.
    func deadLetter(_ message: KafkaMessage, reason: String) async -> Bool {
        await PipelineDeadLetters.send(message, reason: reason, context: context)
    }
}

/// Dead letters for every consumer of the worker.
enum PipelineDeadLetters {
    /// Produces `message` with `reason` to the dead-letter topic, retrying until Kafka takes it
    /// or the worker stops; true when it may be committed.
    static func send(_ message: KafkaMessage, reason: String, context: PipelineContext) async -> Bool {
        let letter = DeadLetter(reason: String(reason.prefix(1000)),
                                source: .init(topic: message.topic, partition: message.partition, offset: message.offset),
                                original: message.value, at: .now)
        while true {
            do {
                try await context.publisher.deadLetter(letter, key: message.key)
                context.metrics.deadLettered()
                context.log.warning("message dead-lettered", [
                    "topic": .string(message.topic), "partition": .int(Int(message.partition)), "offset": .int(Int(message.offset)),
                    "reason": .string(String(reason.prefix(300))),
                ])
                return true
            } catch {
                context.metrics.kafkaError()
                context.log.error("could not dead-letter a message; retrying", ["error": .string(error.description)])
                if context.stop.isSet { return false }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
