import HeraldCore
import HeraldPostgres
@testable import HeraldWorker
import HeraldTestSupport
import Testing

/// Model-based tests of the shard run's decisions: ``ShardRunState`` itself (the type the
/// worker runs), driven with random audiences, answers in random order, ticks, checkpoints,
/// halts, cancellations and crashes that restart from the last saved checkpoint — no
/// database, broker or socket. Each case is reproducible from its seed.
@Suite struct ShardRunStateTests {
    @Test func everySubscriptionEndsWithOneTerminalReceiptAcrossCrashes() async throws {
        var crashes = 0
        for seed in UInt64(1)...1500 {
            var world = World(seed: seed)
            try await world.runToTheEnd()
            crashes += world.crashes
        }
        // The cases do crash: the invariants are checked across restarts, not only in one run.
        #expect(crashes > 500)
    }

    @Test func aCaseIsReproducibleFromItsSeed() async throws {
        var first = World(seed: 42)
        try await first.runToTheEnd()
        var second = World(seed: 42)
        try await second.runToTheEnd()
        // The same receipts; within one checkpoint their order follows a dictionary's.
        #expect(first.published.map(\.id).sorted() == second.published.map(\.id).sorted())
        #expect(first.crashes == second.crashes)
        #expect(first.saved.counts == second.saved.counts)
    }

    @Test func anAnswerBeyondTheCursorIsCountedOnlyWhenTheCursorPassesIt() throws {
        var state = ShardRunState(facts: .init(job: try World.job()), counts: ShardCounts())
        let now = Timestamp(seconds: 1_800_000_000)
        var sends: [ShardRunState.Send] = []
        for index in 0..<2 {
            guard case .send(let send) = state.admit(World.member(index), haltReason: nil, now: now) else { Issue.record("not sent"); return }
            sends.append(send)
        }
        _ = state.answered(sends[1], .accepted(providerID: "b"), verdict: .apply, now: now, random: 0.5)
        var checkpoint = state.takeCheckpoint(now: now)
        #expect(checkpoint.cursor == nil && checkpoint.counts.accepted == 0, "the first send is still in flight")
        #expect(checkpoint.receipts.map(\.subscriptionID) == [World.member(1).id])
        state.checkpointed(checkpoint)
        _ = state.answered(sends[0], .accepted(providerID: "a"), verdict: .apply, now: now, random: 0.5)
        checkpoint = state.takeCheckpoint(now: now)
        #expect(checkpoint.cursor == World.member(1).id && checkpoint.counts.accepted == 2)
        #expect(checkpoint.tally[ShardRunTally.Key(provider: "apns", outcome: "accepted", reason: nil)] == 1)
    }

    /// The rule the driver asks from two fields, and the state's own answer, agree.
    @Test func aCheckpointIsDueAfterEnoughSendsOrOnceTheIntervalPassedWithSomethingToSave() throws {
        func due(_ firstAttempts: Int, _ receipts: Bool, _ seconds: Int64) -> Bool {
            ShardRunState.checkpointDue(firstAttempts: firstAttempts, receiptsWaiting: receipts, since: .seconds(seconds), every: 5, interval: .seconds(2))
        }
        #expect(due(5, false, 0), "every 5 first attempts")
        #expect(!due(4, true, 1), "neither the count nor the interval")
        #expect(due(1, false, 2) && due(0, true, 2), "the interval, with something to save")
        #expect(!due(0, false, 9), "nothing to save")
        #expect(due(0, false, 10), "nothing to save, but the lease is renewed")
        var state = ShardRunState(facts: .init(job: try World.job()), counts: ShardCounts())
        let now = Timestamp(seconds: 1_800_000_000)
        for index in 0..<6 {
            for seconds: Int64 in [0, 2, 10] {
                let expected = due(state.sinceCheckpoint, !state.receipts.isEmpty, seconds)
                #expect(state.checkpointDue(since: .seconds(seconds), every: 5, interval: .seconds(2)) == expected)
            }
            guard case .send(let send) = state.admit(World.member(index), haltReason: nil, now: now) else { Issue.record("not sent"); return }
            _ = state.answered(send, .accepted(providerID: "p"), verdict: .apply, now: now, random: 0.5)
        }
    }

    @Test func aCredentialFaultHaltsTheProviderAndParksUntilItIsLifted() throws {
        var state = ShardRunState(facts: .init(job: try World.job()), counts: ShardCounts())
        let now = Timestamp(seconds: 1_800_000_000)
        guard case .send(let send) = state.admit(World.member(0), haltReason: nil, now: now) else { Issue.record("not sent"); return }
        let effects = state.answered(send, .credentialFault(providerReason: "InvalidProviderToken"), verdict: nil, now: now, random: 0)
        #expect(effects.halt?.provider == .apns && effects.halt?.reason == .credentials)
        #expect(state.admit(World.member(2), haltReason: "credentials", now: now) == .settled, "parked behind the halt, not sent")
        #expect(state.parked.count == 2 && state.waiting.isEmpty)
        let checkpoint = state.takeCheckpoint(now: now)
        #expect(checkpoint.receipts.map(\.stage) == [.halted], "one halted event per run and provider")
        #expect(checkpoint.park.allSatisfy { $0.lastReason?.hasPrefix("halted:apns:") == true })
        state.checkpointed(checkpoint)
        _ = state.settleParked(verdicts: [:], halts: [:], now: now)
        #expect(state.dueRetries(now: now).count == 2, "lifted: both are retries due now")
    }
}

/// One shard's world: the audience, what the last checkpoint saved, the receipts on the results
/// topic, the app's halts; runs of ``ShardRunState`` over it until the shard is finished.
struct World {
    static let appID = "app"
    static let providerIDs = ["apns", "fcm"]

    var rng: SplitMix64
    let audience: [AudienceMember]
    let window: Int
    let seed: UInt64
    var now: Timestamp
    /// What the last checkpoint saved (the shard row and `shard_retries`).
    var saved = Saved()
    var invalidated: Set<String> = []
    var published: [Receipt] = []
    var halts: [Receipt.Provider: String] = [:]
    var cancelled = false
    var crashes = 0
    /// Where checkpoints are also saved and read back from at each restart (the replay against
    /// PostgreSQL); nil for the model alone.
    var store: PostgresCheckpoints?
    private var crashBudget: Int

    struct Saved {
        var cursor: String?
        var counts = ShardCounts()
        var rows: [String: ParkedRetry] = [:]
    }

    /// `now`: where the world's clock starts (a replay against PostgreSQL starts it at the
    /// database's time, which stamps `first_attempt_at`).
    init(seed: UInt64, now: Timestamp = Timestamp(seconds: 1_800_000_000)) {
        self.seed = seed
        self.now = now
        rng = SplitMix64(seed: seed)
        let size = Int(rng.next() % 60) + 1
        audience = (0..<size).map { World.member($0, android: $0 % 3 == 0) }
        window = Int(rng.next() % 8) + 1
        crashBudget = Int(rng.next() % 4)
    }

    static func member(_ index: Int, android: Bool = false) -> AudienceMember {
        let digits = String(index)
        let id = "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - digits.count) + digits
        return AudienceMember(id: id, platform: android ? .android : .ios, token: "token-\(index)", sandbox: false, sdk: true,
                              language: nil, timeZone: nil, voipToken: nil)
    }

    static func job() throws -> Job {
        try Job(json: JSONValue.parse(#"{"schema":"herald.job.v1","id":"job-1","app_id":"app","kind":"notification","#
            + #""created_at":"2026-12-01T00:00:00Z","audience":{"all":true},"content":{"title":"T","body":"B"}}"#))
    }

    private mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

    /// The provider's answer to attempt `attempt` of subscription `id`, as a provider answers
    /// one token: a few passing failures (429 with Retry-After, 5xx, a credential fault) and
    /// then its fate — accepted, unregistered or a bad token — whatever the path there, so a
    /// send repeated after a crash ends as it did before.
    private func answer(_ id: String, attempt: Int) -> DeliveryOutcome {
        var token = SplitMix64(seed: seed &* 31 &+ (UInt64(id.suffix(4)) ?? 0) &* 977)
        let passing = Int(token.next() % 10)  // 8 or 9: retries are exhausted first
        let fate = token.next() % 100
        if attempt <= passing {
            var failure = SplitMix64(seed: token.next() &+ UInt64(attempt))
            switch failure.next() % 100 {
            case 0..<45: return .retryable(providerReason: "TooManyRequests", retryAfterSeconds: Int(failure.next() % 30), quotaExceeded: false)
            case 45..<93: return .retryable(providerReason: "InternalServerError", retryAfterSeconds: nil, quotaExceeded: false)
            default: return .credentialFault(providerReason: "InvalidProviderToken")
            }
        }
        switch fate {
        case 0..<80: return .accepted(providerID: "p-\(id.suffix(4))-\(attempt)")
        case 80..<92: return .unregistered(reason: .unregistered, providerReason: "Unregistered", timestamp: nil)
        default: return .failed(reason: .badRequest, providerReason: "BadDeviceToken")
        }
    }

    private func verdict(_ id: String, attempt: Int) -> InvalidationGuard.Verdict {
        var hash = SplitMix64(seed: seed &+ 7 &+ (UInt64(id.suffix(4)) ?? 0) &* 1_000 &+ UInt64(attempt))
        switch hash.next() % 100 {
        case 0..<70: return .apply
        case 70..<97: return .undecided
        default: return .misconfigured
        }
    }

    enum End { case finished, halted, crashed }

    mutating func runToTheEnd() async throws {
        for _ in 0..<200 {
            switch try await runOnce() {
            case .finished:
                try checkTheEnd()
                if let store { _ = try await store.restart(expecting: saved, invalidated: invalidated) }
                return
            case .halted:
                halts = [:]  // `herald jobs resume`
            case .crashed:
                crashes += 1
            }
        }
        Issue.record("seed \(seed): the shard never finished")
    }

    /// One run from the saved checkpoint until the shard finishes, halts or the worker crashes.
    private mutating func runOnce() async throws -> End {
        if let store { saved = try await store.restart(expecting: saved, invalidated: invalidated) }
        var state = ShardRunState(facts: .init(job: try Self.job()), counts: saved.counts)
        let members = Dictionary(uniqueKeysWithValues: audience.map { ($0.id, $0) })
        state.restore(saved.rows.values.sorted { $0.subscriptionID < $1.subscriptionID }, members: members, cursor: saved.cursor,
                      halts: halts, now: now)
        if cancelled { state.cancel() }
        // The audience query from the cursor leaves out invalidated subscriptions.
        var pending = audience.filter { member in saved.cursor.map { member.id > $0 } ?? true }.filter { !invalidated.contains($0.id) }[...]
        var inFlight: [ShardRunState.Send] = []
        while true {
            if crashBudget > 0 && chance(2) {
                crashBudget -= 1
                // Half the crashes come in a checkpoint, after its receipts were published.
                if chance(50) { published += state.takeCheckpoint(now: now).receipts }
                return .crashed
            }
            if !cancelled && chance(1) && rng.next() % 20 == 0 {
                cancelled = true
                state.cancel()
            }
            if let next = pending.first, inFlight.count < window, chance(60) {
                pending.removeFirst()
                let provider = AppDelivery.provider(for: next, kind: .notification)
                if case .send(let send) = state.admit(next, haltReason: halts[provider], now: now) { inFlight.append(send) }
            } else if !inFlight.isEmpty, chance(70) {
                let send = inFlight.remove(at: Int(rng.next() % UInt64(inFlight.count)))
                let outcome = answer(send.member.id, attempt: send.attempts)
                var verdict: InvalidationGuard.Verdict?
                if case .unregistered = outcome { verdict = self.verdict(send.member.id, attempt: send.attempts) }
                let effects = state.answered(send, outcome, verdict: verdict, now: now, random: Double(rng.next() % 1000) / 1000)
                if let halt = effects.halt, halts[halt.provider] == nil {
                    halts[halt.provider] = halt.reason.rawValue
                    state.haltToRecord(halt.provider, reason: halt.reason.rawValue)
                }
            } else {
                // A tick: time passes, halts may be lifted elsewhere, parked ones settle and
                // retries due go out.
                now = Timestamp(seconds: now.seconds + Int64(rng.next() % 3))
                if pending.isEmpty && inFlight.isEmpty, let due = state.waiting.filter({ $0.kind == .retry }).map(\.due).min(), due > now {
                    now = Timestamp(seconds: due.seconds + 1)
                }
                if !halts.isEmpty && chance(3) { halts = [:] }
                let final = pending.isEmpty && inFlight.isEmpty
                let made = state.settleParked(verdicts: [.apns: final ? .apply : .undecided, .fcm: final ? .apply : .undecided], halts: halts, now: now)
                for halt in made where halts[halt.provider] == nil { halts[halt.provider] = halt.reason.rawValue }
                for entry in state.dueRetries(now: now) where inFlight.count < window {
                    let provider = AppDelivery.provider(for: entry.member, kind: .notification)
                    if case .send(let send) = state.admitRetry(entry.member.id, haltReason: halts[provider], now: now) { inFlight.append(send) }
                }
                if final && inFlight.isEmpty && state.waiting.isEmpty {
                    try await save(&state)
                    return state.parked.isEmpty ? .finished : .halted
                }
            }
            if state.checkpointDue(since: .seconds(Int64(rng.next() % 2)), every: 5, interval: .seconds(1)) { try await save(&state) }
        }
    }

    /// A checkpoint saved whole, as `JobRepository.checkpoint` saves it.
    private mutating func save(_ state: inout ShardRunState) async throws {
        let checkpoint = state.takeCheckpoint(now: now)
        try await store?.save(checkpoint)
        published += checkpoint.receipts
        // A run that has not passed a subscription yet saves no cursor: the saved one stays
        // (`COALESCE` in `JobRepository.checkpoint`).
        if let cursor = checkpoint.cursor {
            if let previous = saved.cursor { #expect(cursor >= previous, "seed \(seed): the cursor went back") }
            saved.cursor = cursor
        }
        saved.counts = checkpoint.counts
        for id in checkpoint.resolved { saved.rows.removeValue(forKey: id) }
        for var row in checkpoint.park {
            row.firstAttemptAt = saved.rows[row.subscriptionID]?.firstAttemptAt ?? now
            saved.rows[row.subscriptionID] = row
        }
        invalidated.formUnion(checkpoint.invalidations.map(\.subscriptionID))
        state.checkpointed(checkpoint)
    }

    /// Each subscription has one terminal receipt (copies repeated after a crash share its id),
    /// the counts add up to the audience, and nothing is left parked.
    private func checkTheEnd() throws {
        var stages: [String: Set<Receipt.Stage>] = [:]
        for receipt in published where receipt.stage.isTerminal {
            stages[receipt.subscriptionID ?? "", default: []].insert(receipt.stage)
        }
        for member in audience {
            var seen = stages[member.id] ?? []
            // A cancellation after a crash drops what the crashed run had already answered.
            if cancelled && seen.count > 1 { seen.remove(.dropped) }
            #expect(seen.count == 1, "seed \(seed): \(member.id) ended with \(seen)")
        }
        #expect(stages.count == audience.count, "seed \(seed): receipts for subscriptions outside the audience")
        let counts = saved.counts
        #expect(counts.accepted + counts.unregistered + counts.failed + counts.dropped == Int64(audience.count),
                "seed \(seed): counts \(counts) for an audience of \(audience.count)")
        if !cancelled {
            let accepted = stages.values.filter { $0 == [.accepted] }.count
            #expect(counts.accepted == Int64(accepted), "seed \(seed): accepted \(counts.accepted) against \(accepted) receipts")
        }
        #expect(saved.rows.isEmpty, "seed \(seed): \(saved.rows.count) parked rows left")
    }
}

/// Seeds of the model replayed against real PostgreSQL: every checkpoint goes through
/// `JobRepository.checkpoint` (where the last loss bug lived), and every restart — after a
/// crash, a halt or at the end — reads the shard's cursor, counts and parked rows back with a
/// new claim and `parkedRetries`, checks them against what the model saved, and resumes from
/// what the database holds.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(3)))
struct ShardRunStateReplayTests {
    @Test func seedsReplayedThroughJobRepositoryCheckpointEndTheSame() async throws {
        let database = try await WorkerTestDatabase.migrated(apps: [World.appID])
        let pool = database.pool()
        var replayed = 0, crashes = 0, parkedRows = 0
        for seed in UInt64(1)...400 {
            // The seeds with crashes and more than one run, the cases where saving matters.
            let start = Timestamp(seconds: Timestamp.now.seconds)
            var probe = World(seed: seed, now: start)
            try await probe.runToTheEnd()
            guard probe.crashes >= 2 else { continue }
            let store = try await PostgresCheckpoints(pool: pool, seed: seed, audience: probe.audience)
            var world = World(seed: seed, now: start)
            world.store = store
            try await world.runToTheEnd()
            #expect(world.published.map(\.id).sorted() == probe.published.map(\.id).sorted(), "seed \(seed): PostgreSQL changed the run")
            crashes += world.crashes
            parkedRows += store.parkedRowsSeen
            replayed += 1
            if replayed == 12 { break }
        }
        #expect(replayed == 12)
        #expect(crashes >= 24 && parkedRows > 0, "the replay restarts with parked rows to read back")
        await pool.close()
        await database.drop()
    }
}

/// A shard of one seed's world in PostgreSQL: its job, its audience as subscriptions, and the
/// lease of the run in progress.
final class PostgresCheckpoints {
    let jobs: JobRepository
    let pool: PostgresPool
    let jobID: String
    private var lease: ShardLease?
    private var runs = 0
    /// Parked rows read back at restarts, over the whole world.
    private(set) var parkedRowsSeen = 0

    init(pool: PostgresPool, seed: UInt64, audience: [AudienceMember]) async throws {
        self.pool = pool
        jobs = JobRepository(pool: pool)
        jobID = "job-replay-\(seed)"
        try await pool.query("DELETE FROM subscriptions WHERE app_id = $1", [World.appID])
        try await pool.query("""
            INSERT INTO subscriptions (id, app_id, platform, token)
            SELECT id, $1, platform, token FROM unnest($2::uuid[], $3::text[], $4::text[]) AS s(id, platform, token)
            """, [World.appID, SQLValue.array(audience.map(\.id)), SQLValue.array(audience.map { $0.platform == .android ? "android" : "ios" }),
                  SQLValue.array(audience.map(\.token))])
        _ = try await jobs.insert(id: jobID, appID: World.appID, kind: "notification", body: #"{"id":"\#(jobID)"}"#, createdAt: .now)
    }

    /// Gives up the lease (as one that expired after a crash), claims the shard again, and
    /// returns what PostgreSQL holds — having checked it against `expecting`.
    func restart(expecting: World.Saved, invalidated: Set<String>) async throws -> World.Saved {
        if let lease { _ = try await jobs.release(lease) }
        runs += 1
        let claim = try await jobs.claim(jobID: jobID, shardNo: 0, shardCount: 1, range: SubscriptionRange(from: Shard.minimumID),
                                         holder: "run-\(runs)")
        guard case .claimed(let claimed) = claim else {
            Issue.record("\(jobID): not claimed again: \(claim)")
            return expecting
        }
        lease = claimed
        let rows = try await jobs.parkedRetries(claimed)
        parkedRowsSeen += rows.count
        var saved = World.Saved(cursor: claimed.cursor, counts: claimed.counts)
        for row in rows { saved.rows[row.subscriptionID] = row }
        #expect(saved.cursor == expecting.cursor, "\(jobID): cursor")
        #expect(saved.counts == expecting.counts, "\(jobID): counts")
        // The database sets first_attempt_at by its own clock; the rest is what the run parked.
        let strip = { (rows: [String: ParkedRetry]) in
            rows.mapValues { ParkedRetry(subscriptionID: $0.subscriptionID, attempts: $0.attempts, nextAttemptAt: $0.nextAttemptAt, lastReason: $0.lastReason) }
        }
        #expect(strip(saved.rows) == strip(expecting.rows), "\(jobID): parked rows")
        let stored = try await pool.query("SELECT id FROM subscriptions WHERE app_id = $1 AND invalidated_at IS NOT NULL", [World.appID])
        #expect(Set(stored.rows.compactMap { $0.first ?? nil }) == invalidated, "\(jobID): invalidated subscriptions")
        return saved
    }

    /// Saves `checkpoint` as the worker does.
    func save(_ checkpoint: ShardRunState.Checkpoint) async throws {
        guard var current = lease else {
            Issue.record("\(jobID): a checkpoint without a lease")
            return
        }
        try await jobs.checkpoint(&current, cursor: checkpoint.cursor, counts: checkpoint.counts, park: checkpoint.park,
                                  resolved: checkpoint.resolved,
                                  invalidations: checkpoint.invalidations.isEmpty ? nil : (World.appID, checkpoint.invalidations))
        lease = current
    }
}
