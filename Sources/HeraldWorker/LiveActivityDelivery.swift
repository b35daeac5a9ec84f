import HeraldCore
import HeraldPostgres

/// Where a shard run's subscriptions come from. Notification and VoIP jobs: their audience.
/// Live activities (issue 9): `update` and `end` go to the subscriptions attached to the
/// activity (`activity_tokens`; iOS to the activity's own push token, Android to the
/// subscription's FCM token); `start` goes to the job's audience, iOS subscriptions only where a
/// push-to-start token for the attributes type is known (sent to that token).
enum ShardSource: Sendable {
    case audience
    case liveActivity(LiveActivityTargets)

    /// Whether `member` is sent to a token of its own (an activity or push-to-start token) that
    /// an unregistered answer invalidates instead of the subscription.
    func sendsToOwnToken(_ member: AudienceMember) -> Bool {
        if case .liveActivity = self { return member.platform == .ios }
        return false
    }

    /// Invalidates the live-activity tokens of `subscriptionIDs` (the token only).
    func invalidateTokens(appID: String, subscriptionIDs: [String]) async throws(PostgresError) {
        guard case .liveActivity(let targets) = self else { return }
        if targets.event == .start, let type = targets.attributesType {
            try await targets.repository.invalidatePushToStartTokens(appID: appID, attributesType: type, subscriptionIDs: subscriptionIDs)
        } else {
            try await targets.repository.invalidateActivityTokens(appID: appID, activityID: targets.activityID, subscriptionIDs: subscriptionIDs)
        }
    }

    /// The members among `ids`, with the tokens this source sends to (parked retries resumed).
    func members(appID: String, ids: [String], audience: AudienceResolver) async throws(PostgresError) -> [AudienceMember] {
        switch self {
        case .audience:
            return try await audience.members(appID: appID, ids: ids)
        case .liveActivity(let targets):
            if targets.event == .start {
                return try await targets.startMembers(appID: appID, try await audience.members(appID: appID, ids: ids))
            }
            return try await targets.repository.attached(appID: appID, activityID: targets.activityID, ids: ids)
        }
    }
}

/// The tokens of one live-activity event.
struct LiveActivityTargets: Sendable {
    let repository: LiveActivityRepository
    let activityID: String
    let event: LiveActivityUpdate.Event
    let attributesType: String?
    /// Whether a start attaches the Android subscriptions it goes to (not when it was refused).
    let attachesAndroid: Bool

    /// Targets of `update`'s event.
    init(repository: LiveActivityRepository, update: LiveActivityUpdate, attachesAndroid: Bool = true) {
        self.repository = repository
        activityID = update.activityID
        event = update.event
        attributesType = update.attributesType
        self.attachesAndroid = attachesAndroid
    }

    /// A start's members among `page` (audience members): iOS ones with a push-to-start token
    /// (sent to it), every Android one, which is attached to the activity so its updates follow.
    /// `listed`: the page lists the job's own `subscription_ids`, so every one stays, an iOS
    /// subscription without a push-to-start token as unavailable (`no-push-to-start-token`),
    /// and one already unavailable as it is; otherwise such iOS subscriptions are left out.
    func startMembers(appID: String, _ page: [AudienceMember], listed: Bool = false) async throws(PostgresError) -> [AudienceMember] {
        guard let type = attributesType else { return listed ? page : [] }
        let tokens = try await repository.pushToStartTokens(appID: appID, attributesType: type,
                                                            ids: page.filter { $0.platform == .ios && $0.unavailable == nil }.map(\.id))
        var members: [AudienceMember] = []
        var android: [(id: String, token: String)] = []
        for var member in page {
            if member.unavailable != nil {
                members.append(member)
                continue
            }
            switch member.platform {
            case .ios:
                guard let token = tokens[member.id] else {
                    if listed {
                        member.unavailable = .noPushToStartToken
                        members.append(member)
                    }
                    continue
                }
                member.token = token
                members.append(member)
            case .android:
                members.append(member)
                android.append((member.id, member.token))
            }
        }
        if attachesAndroid {
            try await repository.attachAndroid(appID: appID, activityID: activityID, android)
        }
        return members
    }
}

/// Pages of a shard run's subscriptions, in id order after the checkpoint (``ShardSource``).
struct ShardPages {
    let source: ShardSource
    let appID: String
    let audience: AudienceResolver
    var iterator: AudiencePages.AsyncIterator
    var cursor: String?
    let pageSize: Int
    /// An explicit `subscription_ids` audience, sorted: every id is read, whatever its state,
    /// so each gets one terminal receipt (``AudienceResolver/listedMembers(appID:ids:)``).
    var listed: [String]?

    /// The ids of `audience` when it lists subscriptions, lower-case and sorted (the run's id
    /// order); nil for any other audience.
    static func listedIDs(_ audience: Audience?) -> [String]? {
        guard case .subscriptionIDs(let ids)? = audience else { return nil }
        return Array(Set(ids.map { $0.lowercased() })).sorted()
    }

    mutating func next() async throws(PostgresError) -> [AudienceMember]? {
        switch source {
        case .audience:
            if listed != nil { return try await nextListed() }
            return try await iterator.next()
        case .liveActivity(let targets) where targets.event == .start:
            if listed != nil {
                guard let page = try await nextListed() else { return nil }
                return try await targets.startMembers(appID: appID, page, listed: true)
            }
            guard let page = try await iterator.next() else { return nil }
            return try await targets.startMembers(appID: appID, page)
        case .liveActivity(let targets):
            let page = try await targets.repository.attached(appID: appID, activityID: targets.activityID, after: cursor, limit: pageSize)
            guard let last = page.last else { return nil }
            cursor = last.id
            return page
        }
    }

    /// The next page of listed ids after the cursor.
    private mutating func nextListed() async throws(PostgresError) -> [AudienceMember]? {
        guard let listed else { return nil }
        let remaining = cursor.map { last in listed.drop { $0 <= last.lowercased() } } ?? listed[...]
        let ids = Array(remaining.prefix(pageSize))
        guard let last = ids.last else { return nil }
        cursor = last
        return try await audience.listedMembers(appID: appID, ids: ids)
    }
}

/// Runs `live_activity` jobs (issue 9, docs/ARCHITECTURE.md) from the jobs lane, which hands one
/// activity's jobs over one after another (Kafka key `app_id/activity_id`): the numbering check
/// and mark move in one atomic statement, its verdict is recorded on the job (a rerun after a
/// crash keeps it), then the job runs at once as one shard over the activity's tokens, through
/// the same ``ShardRunner`` as every other job; a refused update drops every subscription with
/// `stale-sequence` or `ended`.
struct LiveActivityPlanner: Sendable {
    let context: PipelineContext
    let runner: ShardRunner
    let repository: LiveActivityRepository

    /// Runs `job` (already stored in `jobs`); true when its message may be committed.
    func run(_ job: Job, stored: StoredJob?) async throws -> Bool {
        guard let update = job.liveActivity else { return true }
        var verdict = try await repository.verdict(jobID: job.id)
        if verdict == nil {
            let checked = try await repository.checkAndSet(
                appID: job.appID, activityID: update.activityID, streamID: update.streamID, sequence: update.sequence,
                timestamp: Timestamp.now.seconds, ending: update.event == .end, starting: update.event == .start,
                attributesType: update.attributesType, jobID: job.id)
            verdict = try await repository.recordVerdict(jobID: job.id, checked)
        }
        var annotated = job
        let dropping: Receipt.Reason?
        switch verdict {
        case .accepted(let timestamp)?:
            annotated.liveActivity?.timestamp = timestamp
            dropping = nil
        case .ended?: dropping = .ended
        case .stale?, nil: dropping = .staleSequence
        }
        let targets = LiveActivityTargets(repository: repository, update: update, attachesAndroid: dropping == nil)
        if stored?.shardCount == nil {
            let estimate: Int
            if update.event == .start {
                if let listed = ShardPages.listedIDs(job.audience) {
                    estimate = listed.count
                } else {
                    estimate = try await context.audience.count(AudienceQuery(appID: job.appID, audience: job.audience ?? .all))
                }
            } else {
                estimate = try await repository.attachedCount(appID: job.appID, activityID: update.activityID)
            }
            try await context.jobs.plan(jobID: job.id, ranges: [.everything], audienceEstimate: estimate)
            var receipt = Receipt(jobID: job.id, appID: job.appID, stage: .planned, at: .now)
            receipt.audienceEstimate = Int64(estimate)
            receipt.shardCount = 1
            try await context.publisher.publish([receipt])
        }
        context.log.debug("live activity job", [
            "job_id": .string(job.id), "activity_id": .string(update.activityID), "event": .string(update.event.rawValue),
            "stream_id": .string(update.streamID), "sequence": .int(Int(update.sequence)),
            "verdict": .string(dropping?.rawValue ?? "accepted"),
        ])
        let single = Shard(jobID: job.id, appID: job.appID, shardNo: 0, shardCount: 1, idFrom: Shard.minimumID, idTo: nil, createdAt: .now)
        return try await runner.run(job: annotated, shard: single, source: .liveActivity(targets), dropping: dropping).committingMessage()
    }
}
