import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldWorker

/// `herald jobs show|cancel|resume ID`: operator actions on one job, in the database (and, for
/// resume, on the shards topic).
enum JobsCommand {
    static let usage = """
    usage: herald jobs list [--app APP] [--state STATE] [--limit N] [--json] [--database-url URL]
           herald jobs show ID [--json] [--database-url URL]
           herald jobs watch ID [--timeout S] [--database-url URL]
           herald jobs cancel ID [--json] [--database-url URL]
           herald jobs resume ID [--json] [--database-url URL] [--brokers B]
      watch: a progress line a second (sent, accepted, unregistered, failed, dropped, rate, ETA from the
      shards' checkpoints) until the job completes (exit 0, with a summary), is cancelled (1) or --timeout
      passes (2; default: none). A scheduled job shows its totals once its sub-jobs are done.
      list: the jobs users sent (not derived sub-jobs), newest first (default 50, at most 10000);
      STATE is received, scheduled, planned, running, completed, cancelled, halted or expired.
    """

    static let states = ["received", "scheduled", "planned", "running", "completed", "cancelled", "halted", "expired"]

    static func run(_ arguments: [String]) async -> Int32 {
        if arguments.first == "list" { return await list(Array(arguments.dropFirst())) }
        if arguments.first == "watch", arguments.count >= 2, !arguments[1].hasPrefix("-") {
            return await watch(arguments[1], Array(arguments.dropFirst(2)))
        }
        guard arguments.count >= 2, ["show", "cancel", "resume"].contains(arguments[0]), !arguments[1].hasPrefix("-") else {
            Console.error("herald jobs: name an action and a job id\n\(usage)")
            return 64
        }
        let action = arguments[0]
        let jobID = arguments[1]
        var options = OptionParser(Array(arguments.dropFirst(2)), command: "herald jobs \(action)", usage: usage)
        let json = options.flag("--json")
        let url = options.string("--database-url")
        let brokers = action == "resume" ? options.string("--brokers") : nil
        guard options.finish() else { return 64 }

        let pool: PostgresPool
        var kafka: (configuration: KafkaConfiguration, topics: WorkerConfiguration.Topics)?
        do {
            pool = try CommandEnvironment.pool(url: url, applicationName: "herald-jobs")
            // Checked before the database is touched: a resume that cannot re-queue its shards
            // would leave the job running with nobody working on it.
            if action == "resume" {
                kafka = (try CommandEnvironment.kafka(brokers: brokers), try CommandEnvironment.topics())
            }
        } catch {
            Console.error("herald jobs \(action): \(error)")
            return 78
        }
        let administration = JobAdministration(pool: pool)
        let status: Int32
        do throws(PostgresError) {
            switch action {
            case "show": status = try await show(jobID, json: json, administration)
            case "cancel": status = try await cancel(jobID, json: json, administration)
            default:
                guard let kafka else { return 78 }
                status = try await resume(jobID, json: json, administration, kafka.configuration, kafka.topics)
            }
        } catch {
            Console.error("herald jobs \(action): \(error.message)")
            status = CommandEnvironment.exitStatus(error)
        }
        await pool.close()
        return status
    }

    private static func show(_ jobID: String, json: Bool, _ administration: JobAdministration) async throws(PostgresError) -> Int32 {
        guard let job = try await administration.show(jobID: jobID) else {
            Console.error("herald jobs show: no job \(jobID)")
            return 66
        }
        if json {
            print(job.json.serialized())
            return 0
        }
        func time(_ value: Timestamp?) -> String { value?.rfc3339 ?? "-" }
        print("job \(job.id)  app=\(job.appID) kind=\(job.kind) state=\(job.state) urgent=\(job.urgent)")
        print("audience_estimate=\(job.audienceEstimate.map(String.init) ?? "-") shards=\(job.shardCount.map(String.init) ?? "-") parked_retries=\(job.parkedRetries)")
        print("created=\(time(job.createdAt)) received=\(time(job.receivedAt)) planned=\(time(job.plannedAt))")
        print("completed=\(time(job.completedAt)) cancelled=\(time(job.cancelledAt)) expires=\(time(job.expiresAt))")
        print("totals accepted=\(job.totals.accepted) unregistered=\(job.totals.unregistered) failed=\(job.totals.failed) dropped=\(job.totals.dropped)")
        print("device_events received=\(job.received) confirmed=\(job.confirmed) clicked=\(job.clicked)")
        for shard in job.shards {
            var line = "shard \(shard.shardNo)/\(shard.shardCount) \(shard.state) sent=\(shard.counts.sent) accepted=\(shard.counts.accepted)"
            line += " unregistered=\(shard.counts.unregistered) failed=\(shard.counts.failed) dropped=\(shard.counts.dropped)"
            line += " parked=\(shard.parkedRetries) claims=\(shard.claims) cursor=\(shard.cursor ?? "-")"
            if let holder = shard.leaseHolder { line += " lease=\(holder) until \(time(shard.leaseExpiresAt))" }
            print(line)
        }
        return 0
    }

    private static func cancel(_ jobID: String, json: Bool, _ administration: JobAdministration) async throws(PostgresError) -> Int32 {
        let cancelled = try await administration.cancel(jobID: jobID)
        let state = cancelled ? "cancelled" : try await administration.show(jobID: jobID)?.state ?? "finished"
        if json {
            print(JSONValue.object(["job_id": .string(jobID), "cancelled": .bool(cancelled), "state": .string(state)]).serialized())
        } else if cancelled {
            print("cancelled job \(jobID): its shards stop at their next page and drop the rest as cancelled")
        } else {
            print("job \(jobID) is already \(state): nothing changed")
        }
        return 0
    }

    /// `herald jobs watch ID`.
    private static func watch(_ jobID: String, _ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald jobs watch", usage: usage)
        let timeout = options.int("--timeout", in: 1...604_800)
        let url = options.string("--database-url")
        guard options.finish() else { return 64 }
        let pool: PostgresPool
        do {
            pool = try CommandEnvironment.pool(url: url, applicationName: "herald-jobs")
        } catch {
            Console.error("herald jobs watch: \(error)")
            return 78
        }
        defer { Task { await pool.close() } }
        let administration = JobAdministration(pool: pool)
        let started = ContinuousClock.now
        var previous: (at: ContinuousClock.Instant, sent: Int64)?
        while true {
            let job: JobStatus
            do {
                guard let found = try await administration.show(jobID: jobID) else {
                    Console.error("herald jobs watch: no job \(jobID)")
                    return 66
                }
                job = found
            } catch {
                Console.error("herald jobs watch: \(error.message)")
                return CommandEnvironment.exitStatus(error)
            }
            let now = ContinuousClock.now
            if job.completedAt != nil || job.state == "cancelled" {
                let totals = job.totals
                let seconds = job.receivedAt.flatMap { received in job.completedAt.map { Double($0.unixMilliseconds - received.unixMilliseconds) / 1000 } }
                print("\(job.state) \(jobID): accepted \(totals.accepted)  unregistered \(totals.unregistered)  failed \(totals.failed)"
                      + "  dropped \(totals.dropped)" + (seconds.map { String(format: "  in %.1f s", $0) } ?? ""))
                return job.state == "cancelled" ? 1 : 0
            }
            let sent = job.shards.reduce(Int64(0)) { $0 + Int64($1.counts.sent) }
            let accepted = job.shards.reduce(Int64(0)) { $0 + Int64($1.counts.accepted) }
            let unregistered = job.shards.reduce(Int64(0)) { $0 + Int64($1.counts.unregistered) }
            let failed = job.shards.reduce(Int64(0)) { $0 + Int64($1.counts.failed) }
            let dropped = job.shards.reduce(Int64(0)) { $0 + Int64($1.counts.dropped) }
            var rate = 0.0
            if let previous {
                let elapsed = now - previous.at
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                if seconds > 0 { rate = Double(sent - previous.sent) / seconds }
            }
            previous = (now, sent)
            var line = "\(job.state)  \(jobID)  sent \(sent)  accepted \(accepted)  unregistered \(unregistered)  failed \(failed)"
                + "  dropped \(dropped)  " + String(format: "%.0f/s", rate)
            if let estimate = job.audienceEstimate, rate > 0, estimate > sent {
                line += String(format: "  ETA %.0f s", Double(estimate - sent) / rate)
            }
            print(line)
            fflush(nil)
            if let timeout, now - started >= .seconds(timeout) {
                Console.error("herald jobs watch: \(jobID) not finished after \(timeout) s")
                return 2
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// `herald jobs list`.
    private static func list(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald jobs list", usage: usage, flags: ["--json"])
        let app = options.string("--app")
        let state = options.string("--state")
        let limit = options.int("--limit", in: 1...10_000) ?? 50
        let json = options.flag("--json")
        let url = options.string("--database-url")
        guard options.finish() else { return 64 }
        if let state, !states.contains(state) {
            Console.error("herald jobs list: --state is one of \(states.joined(separator: ", ")), not \(state)")
            return 64
        }
        let pool: PostgresPool
        do {
            pool = try CommandEnvironment.pool(url: url, applicationName: "herald-jobs")
        } catch {
            Console.error("herald jobs list: \(error)")
            return 78
        }
        defer { Task { await pool.close() } }
        let jobs: [JobAdministration.Listing]
        do {
            jobs = try await JobAdministration(pool: pool).list(appID: app, state: state, limit: limit)
        } catch {
            Console.error("herald jobs list: \(error.message)")
            return CommandEnvironment.exitStatus(error)
        }
        for job in jobs {
            let totals = job.totals
            if json {
                let members: [String: JSONValue] = [
                    "id": .string(job.id), "app_id": .string(job.appID), "kind": .string(job.kind), "state": .string(job.state),
                    "urgent": .bool(job.urgent), "received_at": job.receivedAt.map { .string($0.rfc3339) } ?? .null,
                    "completed_at": job.completedAt.map { .string($0.rfc3339) } ?? .null,
                    "audience_estimate": job.audienceEstimate.map { .int($0) } ?? .null,
                    "totals": .object(["accepted": .int(totals.accepted), "unregistered": .int(totals.unregistered),
                                       "failed": .int(totals.failed), "dropped": .int(totals.dropped)]),
                ]
                print(JSONValue.object(members).serialized())
            } else {
                print("\(job.id)  app=\(job.appID) kind=\(job.kind) state=\(job.state)\(job.urgent ? " urgent" : "") received=\(job.receivedAt?.rfc3339 ?? "-")"
                      + " audience=\(job.audienceEstimate.map(String.init) ?? "-") accepted=\(totals.accepted) unregistered=\(totals.unregistered)"
                      + " failed=\(totals.failed) dropped=\(totals.dropped)")
            }
        }
        if jobs.isEmpty && !json { Console.error("herald jobs list: no jobs") }
        return 0
    }

    private static func resume(_ jobID: String, json: Bool, _ administration: JobAdministration,
                               _ configuration: KafkaConfiguration, _ topics: WorkerConfiguration.Topics) async throws(PostgresError) -> Int32 {
        let shards = try await administration.resume(jobID: jobID)
        let urgent = try await administration.show(jobID: jobID)?.urgent ?? false
        let topic = urgent ? topics.shardsUrgent : topics.shards
        guard !shards.isEmpty else {
            if json {
                print(JSONValue.object(["job_id": .string(jobID), "requeued_shards": .int(0), "topic": .string(topic)]).serialized())
            } else {
                print("resumed job \(jobID): no unfinished shards to re-queue")
            }
            return 0
        }
        let results: [Result<KafkaDeliveryReport, KafkaError>]
        do {
            let producer = try KafkaProducer(configuration: configuration)
            results = await producer.sendAll(shards.map { shard in
                KafkaProducerMessage(topic: topic, key: Array(shard.messageKey.utf8), value: shard.json.serializedBytes())
            })
        } catch {
            Console.error("herald jobs resume: job \(jobID) was resumed in the database but no shard was re-queued: \(error); run it again")
            return 69
        }
        let failures = results.compactMap { result -> KafkaError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        if let first = failures.first {
            Console.error("herald jobs resume: \(failures.count) of \(shards.count) shard messages were not acknowledged (\(first)); running it again is safe")
            return 69
        }
        if json {
            print(JSONValue.object(["job_id": .string(jobID), "requeued_shards": .int(shards.count), "topic": .string(topic)]).serialized())
        } else {
            print("resumed job \(jobID): re-queued \(shards.count) shard\(shards.count == 1 ? "" : "s") on \(topic)")
        }
        return 0
    }
}
