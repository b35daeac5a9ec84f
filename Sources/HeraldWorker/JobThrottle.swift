import HeraldPostgres

/// `delivery.throttle_per_minute` for one shard run: takes tokens from the job's bucket in
/// PostgreSQL (shared by all its shards on all workers) in small batches and waits when the
/// bucket is empty. The bucket holds at most a fifth of a second of sends (so a take delayed by
/// a slow database loses nothing) and a shard at most 50 ms of them, so no 10-second window can
/// run more than a few percent over the rate. A shard
/// that finishes puts its unused tokens back: the remaining shards then get its share.
///
/// Used by one task (the shard run); not thread-safe.
final class JobThrottle {
    let jobID: String
    let perMinute: Int64
    let repository: ThrottleRepository
    /// Tokens taken and not used yet.
    private(set) var held = 0

    /// A throttle for `jobID` at `perMinute` sends a minute.
    init(jobID: String, perMinute: Int64, repository: ThrottleRepository) {
        self.jobID = jobID
        self.perMinute = max(1, perMinute)
        self.repository = repository
    }

    var perSecond: Double { Double(perMinute) / 60 }
    /// A fifth of a second of sends, at least one.
    var capacity: Double { max(1, perSecond / 5) }
    /// 50 ms of sends per take, at least one.
    var batch: Int { max(1, Int(perSecond / 20)) }

    /// Waits for one send's token.
    func acquire() async throws {
        while held == 0 {
            let grant = try await repository.take(jobID: jobID, perMinute: perMinute, capacity: capacity, wanted: batch)
            held += grant.granted
            if grant.granted == 0 {
                // Until the bucket holds a whole token again; never a busy loop, never long.
                let seconds = min(1, max(0.005, (1 - grant.remaining) / perSecond))
                try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            }
        }
        held -= 1
    }

    /// Hands unused tokens back (the shard is done or stopping).
    func finish() async {
        let unused = held
        held = 0
        // Best effort: a give-back lost to a database error costs the job at most 50 ms of sends.
        try? await repository.giveBack(jobID: jobID, tokens: unused)
    }
}
