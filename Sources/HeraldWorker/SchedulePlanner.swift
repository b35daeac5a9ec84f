import HeraldCore
import HeraldPostgres

/// Plans a job with `delivery.send_after` (in the future), `local_time`, `respect_quiet_hours`
/// or `best_hour` into sub-jobs released later by the ``Scheduler`` (docs/SCHEDULING.md):
///
/// - a future `send_after`: one sub-job `<job>:sa` with the same audience, released then;
/// - otherwise each subscription's instant is worked out (``DeliveryTiming``) and the audience is
///   grouped by instant into sub-jobs of at most ``SubJob/maxSubscriptions`` explicit ids:
///   `<job>:tz:<n>` (local time), `<job>:bh:<n>` (best hour), `<job>:qh:<n>` (held by quiet hours,
///   reported at once as `deferred` with `until`), `<job>:now:<n>` (nothing to wait for).
///
/// Memory stays bounded: the audience streams in keyset pages and a group is stored as soon as
/// it is full. Receipts of every sub-job carry the id of the job the user sent, whose `completed`
/// event sums its sub-jobs once all of them completed.
struct SchedulePlanner: Sendable {
    let schedule: ScheduleRepository
    let jobs: JobRepository
    /// The scheduling clock.
    let clock: any WallClock
    let publish: @Sendable ([Receipt]) async throws -> Void
    let log: WorkerLog
    let pageSize: Int

    /// A planner; `publish` must return once the broker acknowledged the receipts.
    init(schedule: ScheduleRepository, jobs: JobRepository, clock: any WallClock, log: WorkerLog, pageSize: Int = 1_000,
         publish: @escaping @Sendable ([Receipt]) async throws -> Void) {
        self.schedule = schedule
        self.jobs = jobs
        self.clock = clock
        self.log = log
        self.pageSize = max(1, pageSize)
        self.publish = publish
    }

    private struct GroupKey: Hashable {
        var due: Int64
        var reason: Receipt.Reason?
        var reported: Bool
    }

    /// Whether `job` is planned here rather than sent now: a future `send_after`, local time,
    /// best hour, or quiet hours (its own `respect_quiet_hours`, else the app's default, read
    /// only when the job leaves it to the app).
    func needsScheduling(_ job: Job) async throws(PostgresError) -> Bool {
        let now = clock.now
        if job.needsScheduling(at: now) { return true }
        guard job.dependsOnAppQuietHours, let app = try await schedule.appTiming(appID: job.appID) else { return false }
        return job.needsScheduling(at: now, quietHours: app.quietHours)
    }

    /// Plans `job` (already stored in `jobs`, in state `state`) into sub-jobs. Repeating it after
    /// a crash stores nothing twice (sub-job ids are derived, and a known one is skipped).
    func plan(_ job: Job, state: JobState?) async throws {
        if state == .scheduled || state == .completed || state == .cancelled { return }
        let root = job.parentID ?? job.id
        let now = clock.now
        var subJobs = 0
        var planned = 0
        var dropped: Int64 = 0
        if let sendAfter = job.delivery.sendAfter, sendAfter > now {
            // Whole seconds, rounded up: never before the time asked for.
            let due = Timestamp(seconds: sendAfter.seconds + (sendAfter.nanoseconds > 0 ? 1 : 0))
            let id = SubJob.id(parent: job.id, tag: "sa")
            let body = SubJob.document(of: job, id: id, parent: root, subscriptionIDs: nil, removing: ["send_after"])
            try await store(job, id: id, body: body, due: due, reason: "send-after")
            subJobs = 1
        } else {
            let app = try await schedule.appTiming(appID: job.appID)
            let defaultZone = app?.zone ?? "UTC"
            let quietHours = app?.quietHours ?? AppQuietHours()
            let query = AudienceQuery(appID: job.appID, audience: job.audience ?? .all)
            var groups: [GroupKey: [SubscriptionTiming]] = [:]
            var numbers: [String: Int] = [:]
            func flush(_ key: GroupKey, _ members: [SubscriptionTiming]) async throws {
                let tag: String
                switch key.reason {
                case .localTime?: tag = "tz"
                case .bestHour?: tag = "bh"
                case .quietHours?: tag = "qh"
                default: tag = "now"
                }
                let number = numbers[tag, default: 0]
                numbers[tag] = number + 1
                let due = Timestamp(seconds: key.due)
                if key.reported {
                    // Reported before the release is stored, so `deferred` always comes first.
                    try await publish(members.map { member in
                        var receipt = Receipt(jobID: root, appID: job.appID, stage: .deferred, subscriptionID: member.id,
                                              platform: member.platform, reason: key.reason ?? .quietHours, at: now)
                        receipt.until = due
                        return receipt
                    })
                }
                let id = SubJob.id(parent: job.id, tag: tag, number: number)
                let body = SubJob.document(of: job, id: id, parent: root, subscriptionIDs: members.map(\.id))
                try await store(job, id: id, body: body, due: due, reason: Self.rowReason(key.reason, job: job))
                subJobs += 1
            }
            // A listed audience: ids the timing walk does not return (opted out, invalidated, no
            // subscription of the app) go out now, so the run gives each its terminal receipt.
            var unseen = Set(ShardPages.listedIDs(job.audience) ?? [])
            var cursor: String?
            while true {
                let page = try await schedule.timingPage(query, after: cursor, limit: pageSize)
                guard let last = page.last else { break }
                cursor = last.id
                for member in page { unseen.remove(member.id.lowercased()) }
                var drops: [Receipt] = []
                for member in page {
                    switch DeliveryTiming.release(member, delivery: job.delivery, defaultZone: defaultZone,
                                                  quietHours: quietHours, now: now) {
                    case .drop(let reason):
                        drops.append(Receipt(jobID: root, appID: job.appID, stage: .dropped, subscriptionID: member.id,
                                             platform: member.platform, reason: reason, at: now))
                    case .at(let at, let reason, let reported):
                        let key = GroupKey(due: at.seconds, reason: reason, reported: reported)
                        groups[key, default: []].append(member)
                        planned += 1
                        if let full = groups[key], full.count >= SubJob.maxSubscriptions {
                            groups[key] = nil
                            try await flush(key, full)
                        }
                    }
                }
                if !drops.isEmpty {
                    try await publish(drops)
                    dropped += Int64(drops.count)
                }
                if page.count < pageSize { break }
            }
            let nowKey = GroupKey(due: now.seconds, reason: nil, reported: false)
            for id in unseen.sorted() {
                groups[nowKey, default: []].append(SubscriptionTiming(id: id, timeZone: nil, quiet: nil, histogram: nil))
                planned += 1
                if let full = groups[nowKey], full.count >= SubJob.maxSubscriptions {
                    groups[nowKey] = nil
                    try await flush(nowKey, full)
                }
            }
            for key in groups.keys.sorted(by: { ($0.due, $0.reason?.rawValue ?? "") < ($1.due, $1.reason?.rawValue ?? "") }) {
                if let members = groups[key] { try await flush(key, members) }
            }
        }
        // The audience is known once it is walked: a send_after job reports `planned` when its
        // `:sa` sub-job is released, not now.
        if job.reportsPlan && job.delivery.sendAfter.map({ $0 <= now }) ?? true {
            var receipt = Receipt(jobID: root, appID: job.appID, stage: .planned, at: now)
            receipt.audienceEstimate = Int64(planned)
            receipt.shardCount = subJobs
            try await publish([receipt])
        }
        try await schedule.markScheduled(jobID: job.id, dropped: dropped)
        if job.parentID != nil {
            // A sub-job planned further (send_after, then local time): its own sub-jobs carry the
            // work now, so it is done, with nothing of its own to count.
            try await jobs.markCompleted(jobID: job.id, totals: .init(dropped: dropped))
        }
        log.info("job scheduled", ["job_id": .string(job.id), "sub_jobs": .int(subJobs), "subscriptions": .int(planned),
                                   "dropped": .int(Int(dropped))])
        try await completeParentIfDone(root, appID: job.appID)
    }

    private func store(_ job: Job, id: String, body: JSONValue, due: Timestamp, reason: String) async throws {
        try await schedule.schedule(ScheduledSubJob(id: id, parentID: job.parentID ?? job.id, appID: job.appID, kind: job.kind.rawValue,
                                                    body: body.serialized(), createdAt: job.createdAt, expiresAt: job.expiresAt,
                                                    urgent: job.delivery.urgent, dueAt: due, reason: reason))
    }

    static func rowReason(_ reason: Receipt.Reason?, job: Job) -> String {
        switch reason {
        case .localTime?: return "local-time"
        case .bestHour?: return "best-hour"
        case .quietHours?: return "quiet-hours"
        default:
            if job.delivery.localTimeMinutes != nil { return "local-time" }
            if job.delivery.bestHour { return "best-hour" }
            return "quiet-hours"
        }
    }

    /// Publishes the `completed` event of a scheduled job once its planning is done and every
    /// sub-job completed, then records it (publishing first: a crash in between repeats the
    /// event with the same receipt id rather than losing it).
    func completeParentIfDone(_ parentID: String, appID: String) async throws {
        guard let totals = try await schedule.totalsIfSubJobsDone(parentID: parentID) else { return }
        var receipt = Receipt(jobID: parentID, appID: appID, stage: .completed, at: clock.now)
        receipt.totals = totals
        try await publish([receipt])
        if try await jobs.markCompleted(jobID: parentID, totals: totals) {
            log.info("scheduled job completed", [
                "job_id": .string(parentID), "accepted": .int(Int(totals.accepted)), "dropped": .int(Int(totals.dropped)),
            ])
        }
    }
}
