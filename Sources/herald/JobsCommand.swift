import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldWorker

/// `herald jobs show|cancel|resume ID`: operator actions on one job, in the database (and, for
/// resume, on the shards topic).
enum JobsCommand {
    static let usage = """
    usage: herald jobs show ID [--json] [--database-url URL]
           herald jobs cancel ID [--database-url URL]
           herald jobs resume ID [--database-url URL] [--brokers B]
    """

    static func run(_ arguments: [String]) async -> Int32 {
        guard arguments.count >= 2, ["show", "cancel", "resume"].contains(arguments[0]), !arguments[1].hasPrefix("-") else {
            Console.error("herald jobs: name an action and a job id\n\(usage)")
            return 64
        }
        let action = arguments[0]
        let jobID = arguments[1]
        var options = OptionParser(Array(arguments.dropFirst(2)), command: "herald jobs \(action)", usage: usage)
        let json = action == "show" ? options.flag("--json") : false
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
            case "cancel": status = try await cancel(jobID, administration)
            default:
                guard let kafka else { return 78 }
                status = try await resume(jobID, administration, kafka.configuration, kafka.topics)
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

    private static func cancel(_ jobID: String, _ administration: JobAdministration) async throws(PostgresError) -> Int32 {
        if try await administration.cancel(jobID: jobID) {
            print("cancelled job \(jobID): its shards stop at their next page and drop the rest as cancelled")
        } else {
            let state = try await administration.show(jobID: jobID)?.state ?? "finished"
            print("job \(jobID) is already \(state): nothing changed")
        }
        return 0
    }

    private static func resume(_ jobID: String, _ administration: JobAdministration,
                               _ configuration: KafkaConfiguration, _ topics: WorkerConfiguration.Topics) async throws(PostgresError) -> Int32 {
        let shards = try await administration.resume(jobID: jobID)
        let urgent = try await administration.show(jobID: jobID)?.urgent ?? false
        let topic = urgent ? topics.shardsUrgent : topics.shards
        guard !shards.isEmpty else {
            print("resumed job \(jobID): no unfinished shards to re-queue")
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
        print("resumed job \(jobID): re-queued \(shards.count) shard\(shards.count == 1 ? "" : "s") on \(topic)")
        return 0
    }
}
