import HeraldCore
import HeraldKafka
import HeraldPostgres
import Synchronization

/// The scheduler of docs/ARCHITECTURE.md, run by every worker: claims due rows of `scheduled_jobs` for a
/// while (`ScheduleRepository.releaseDue`), produces each to `herald.jobs` (or
/// `herald.jobs.urgent` for the urgent lane; a shard waiting for its retries to `herald.shards`
/// or `herald.shards.urgent`) with no transaction open, and deletes it once the broker
/// acknowledged it. A crash before the delete leaves the row claimed until the claim expires,
/// then another scheduler produces it: a release may be produced twice, which the `jobs` row of
/// the sub-job (the shard's lease and state) makes harmless; a row is never lost and never
/// handed to two schedulers at once while a claim holds.
///
/// Also writes this worker's heartbeat, from which ``liveWorkers`` (the workers sharing the
/// provider rate ceilings) is read.
final class Scheduler: Sendable {
    /// Produces releases; returns the ids the broker acknowledged.
    typealias Sink = @Sendable ([ScheduledRelease]) async -> [Int64]

    let repository: ScheduleRepository
    let clock: any WallClock
    let sink: Sink
    let log: WorkerLog
    let workerID: String
    /// Pause between rounds when nothing was due.
    let interval: Duration
    /// Rows claimed per transaction.
    let batch: Int
    private let workers = Atomic<Int>(1)

    /// A scheduler over `repository` reading time from `clock`.
    init(repository: ScheduleRepository, clock: any WallClock, workerID: String, log: WorkerLog,
         interval: Duration = .milliseconds(250), batch: Int = 500, sink: @escaping Sink) {
        self.repository = repository
        self.clock = clock
        self.workerID = workerID
        self.log = log
        self.interval = interval
        self.batch = max(1, batch)
        self.sink = sink
    }

    /// A sink producing each release's body to the topic of its lane, keyed by its job id (a
    /// shard message by `job_id/shard_no`, as the planner keys it).
    static func kafkaSink(producer: KafkaProducer, topics: WorkerConfiguration.Topics) -> Sink {
        { releases in
            let messages = releases.map { release in
                KafkaProducerMessage(topic: topic(of: release, topics), key: Array(key(of: release).utf8), value: Array(release.body.utf8))
            }
            let results = await producer.sendAll(messages)
            return zip(releases, results).compactMap { release, result in
                if case .success = result { return release.id }
                return nil
            }
        }
    }

    /// The topic a release goes to: by lane; `campaign` (and anything unknown, which the table's
    /// check refuses anyway) to the jobs topic.
    static func topic(of release: ScheduledRelease, _ topics: WorkerConfiguration.Topics) -> String {
        switch release.lane {
        case "urgent": topics.jobsUrgent
        case "shards": topics.shards
        case "shards-urgent": topics.shardsUrgent
        default: topics.jobs
        }
    }

    /// The message key of a release: the job id, or `job_id/shard_no` for a shard.
    static func key(of release: ScheduledRelease) -> String {
        release.shardNo.map { "\(release.jobID)/\($0)" } ?? release.jobID
    }

    /// Workers seen in the last 30 s (at least 1), as of the last heartbeat.
    var liveWorkers: Int { workers.load(ordering: .relaxed) }

    /// Releases everything due at the clock's time, batch after batch; returns how many.
    @discardableResult
    func releaseDue() async throws(PostgresError) -> Int {
        var total = 0
        while true {
            let now = clock.now
            var claimed = 0
            let sink = self.sink
            let released = try await repository.releaseDue(limit: batch, now: now) { releases in
                claimed = releases.count
                return await sink(releases)
            }
            total += released
            if released > 0 {
                log.debug("scheduled jobs released", ["count": .int(released)])
            }
            // A short batch means nothing more is due; an unacknowledged one waits a round.
            if claimed < batch || released < claimed { return total }
        }
    }

    /// Runs until `stop`: releases what is due, writes the heartbeat every 5 s, pauses between
    /// rounds. Database errors are logged and retried with backoff.
    func run(stop: StopSignal) async {
        var lastHeartbeat: ContinuousClock.Instant?
        // After a failed round: twice the interval, doubling up to 10 s.
        var backoff = Backoff(first: interval * 2, maximum: .seconds(10))
        var delay = interval
        while !stop.isSet {
            do {
                if lastHeartbeat.map({ ContinuousClock.now - $0 >= .seconds(5) }) ?? true {
                    let live = try await repository.heartbeat(workerID: workerID)
                    workers.store(max(1, live), ordering: .relaxed)
                    lastHeartbeat = ContinuousClock.now
                }
                try await releaseDue()
                backoff.reset()
                delay = interval
            } catch {
                delay = backoff.next()
                log.error("scheduler round failed; retrying", ["error": .string(error.description), "retry_in_ms": .int(Int(delay.milliseconds))])
            }
            await stop.sleep(for: delay)
        }
    }
}

extension Scheduler: Service {
    var name: String { "scheduler" }
}
