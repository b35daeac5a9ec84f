import Foundation
import HeraldCore
import HeraldPostgres
import HeraldSim
import HeraldTestSupport
import Testing

/// Issue 9's acceptance lines end to end: `herald run` workers between the Kafka test broker,
/// PostgreSQL and `herald sim --log`, checked through the simulator's per-token log (what a
/// device would have received, in order), the results topic and the database. Figures go to
/// stderr (`live e2e [...]`).
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized, .timeLimit(.minutes(10)))
struct LiveActivityEndToEndTests {
    static func hex(_ seed: String) -> String {
        // 64 hex digits that differ per seed (APNs tokens and activity tokens).
        var digits = ""
        var value = UInt64(truncatingIfNeeded: seed.utf8.reduce(5381) { ($0 << 5) &+ $0 &+ Int($1) })
        while digits.count < 64 {
            value = value &* 6364136223846793005 &+ 1442695040888963407
            digits += String(value >> 32, radix: 16)
        }
        return String(digits.prefix(64))
    }

    /// A token the simulator treats as registered (`--unregistered-share`), or as unregistered.
    static func token(_ seed: String, registeredUnder share: Double, unregistered: Bool = false) -> String {
        var attempt = 0
        while true {
            let candidate = hex("\(seed)-\(attempt)")
            if UnregisteredShare(share).isUnregistered(candidate) == unregistered { return candidate }
            attempt += 1
        }
    }

    static func report(_ label: String, _ figures: [String: Any]) {
        let text = figures.keys.sorted().map { "\($0)=\(figures[$0]!)" }.joined(separator: " ")
        FileHandle.standardError.write(Data("live e2e [\(label)]: \(text)\n".utf8))
    }

    func withFixture(_ scenario: String, _ body: (LiveActivityFixture) async throws -> Void) async throws {
        try await LiveActivityFixture.with(scenario, failure: "live e2e: \(scenario) failed", body)
    }

    // MARK: 1,000 shuffled updates, four workers

    /// 1,000 updates to one activity with shuffled sequence numbers, four workers: the
    /// simulator sees strictly increasing sequences with non-decreasing `aps.timestamp` on iOS
    /// and Android, every other update is reported `stale-sequence`, and each is delivered or
    /// dropped exactly once per subscription.
    @Test func thousandShuffledUpdatesReachTheDeviceInIncreasingOrder() async throws {
        try await withFixture("shuffled") { fixture in
            try await fixture.startSimulator()
            let ios = try await fixture.subscription("10000000-0000-4000-8000-000000000001", platform: .ios, token: Self.hex("device-1"))
            let android = try await fixture.subscription("10000000-0000-4000-8000-000000000002", platform: .android, token: "fcm-live-android-2")
            let activityToken = Self.hex("activity-1")
            try await fixture.activityToken(activity: "order-1", subscription: ios, token: activityToken)
            try await fixture.activityToken(activity: "order-1", subscription: android, token: "fcm-live-android-2")
            try await fixture.startWorkers(4)
            // Let the four members settle into the group before the work arrives.
            try await fixture.waitForSettledGroup()

            var random = SplitMix64(seed: 9)
            var sequences = Array(Int64(1)...1000)
            for index in stride(from: sequences.count - 1, to: 0, by: -1) {
                sequences.swapAt(index, Int(random.next() % UInt64(index + 1)))
            }
            var records: [Int64] = []
            for sequence in sequences where sequence > (records.last ?? 0) { records.append(sequence) }
            let jobs = sequences.enumerated().map { index, sequence in
                fixture.liveJob(id: "upd-\(index)", activity: "order-1", event: "update", stream: "session-1", sequence: sequence,
                                state: #"{"seq":\#(sequence)}"#)
            }
            let started = Date()
            try await fixture.produce(jobs)
            let ids = (0..<jobs.count).map { "upd-\($0)" }
            let done = try await fixture.waitCompleted(ids, seconds: 420)
            let seconds = Date().timeIntervalSince(started)
            try #require(done, "\(ids.filter { fixture.receipts.completed($0) }.count) of 1000 jobs completed")

            // Each update reached exactly one terminal stage per subscription.
            let terminal = fixture.receipts.terminal()
            var accepted: Set<Int64> = []
            var stale = 0
            for (index, sequence) in sequences.enumerated() {
                let perSubscription = terminal["upd-\(index)"] ?? [:]
                #expect(Set(perSubscription.keys) == [ios, android], "upd-\(index)")
                let stages = perSubscription.values.map { $0.map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" } }
                #expect(perSubscription.values.allSatisfy { $0.count == 1 }, "upd-\(index): \(stages)")
                let kinds = Set(perSubscription.values.flatMap { $0 }.map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" })
                if kinds == ["accepted/"] {
                    accepted.insert(sequence)
                } else {
                    #expect(kinds == ["dropped/stale-sequence"], "upd-\(index) (sequence \(sequence)): \(kinds)")
                    stale += 1
                }
            }
            #expect(accepted.count + stale == 1000)
            // Jobs run in Kafka order: exactly the running maxima are accepted.
            #expect(accepted == Set(records))

            let iosLog = try await fixture.log(.ios, token: activityToken)
            let iosSequences = iosLog.compactMap { $0["payload"]?["aps"]?["content-state"]?["seq"]?.liveInteger }
            let stamps = iosLog.compactMap { $0["payload"]?["aps"]?["timestamp"]?.liveInteger }
            #expect(iosLog.count == accepted.count && iosSequences.count == iosLog.count && stamps.count == iosLog.count)
            #expect(zip(iosSequences, iosSequences.dropFirst()).allSatisfy { $0 < $1 }, "iOS sequences not strictly increasing: \(iosSequences)")
            #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 <= $1 }, "aps.timestamp went backwards: \(stamps)")
            #expect(iosLog.allSatisfy { $0["push_type"] == .string("liveactivity") && $0["priority"] == .string("5")
                                        && $0["topic"]?.stringValue?.hasSuffix(".push-type.liveactivity") == true
                                        && $0["payload"]?["aps"]?["event"] == .string("update") })
            let androidLog = try await fixture.log(.android, token: "fcm-live-android-2")
            let androidSequences = androidLog.compactMap { $0["message"]?["data"]?["sequence"]?.stringValue.flatMap { Int64($0) } }
            #expect(androidSequences.count == accepted.count)
            #expect(zip(androidSequences, androidSequences.dropFirst()).allSatisfy { $0 < $1 })
            #expect(androidLog.allSatisfy { $0["message"]?["android"]?["collapse_key"] == .string("order-1")
                                            && $0["message"]?["data"]?["live_update"] == .string("UPDATE") })
            Self.report("1000 shuffled, 4 workers", ["updates": 1000, "delivered": accepted.count, "stale_sequence": stale,
                                                     "ios_log": iosLog.count, "android_log": androidLog.count,
                                                     "seconds": String(format: "%.1f", seconds),
                                                     "first_ts": stamps.first ?? 0, "last_ts": stamps.last ?? 0])

            // A full shuffle lets only the running maxima through (about ln 1000 ≈ 7). A second
            // session with sequences shuffled within blocks of ten (late and early arrivals, as a
            // real producer's retries give) delivers hundreds, and the same rules hold.
            var local = Array(Int64(1)...1000)
            for block in stride(from: 0, to: 1000, by: 10) {
                for index in stride(from: block + 9, to: block, by: -1) {
                    local.swapAt(index, block + Int(random.next() % UInt64(index - block + 1)))
                }
            }
            var localRecords: [Int64] = []
            for sequence in local where sequence > (localRecords.last ?? 0) { localRecords.append(sequence) }
            let second = local.enumerated().map { index, sequence in
                fixture.liveJob(id: "loc-\(index)", activity: "order-1", event: "update", stream: "session-2", sequence: sequence,
                                state: #"{"seq":\#(sequence)}"#)
            }
            let secondStarted = Date()
            try await fixture.produce(second)
            let secondIDs = (0..<second.count).map { "loc-\($0)" }
            try #require(try await fixture.waitCompleted(secondIDs, seconds: 420))
            let secondSeconds = Date().timeIntervalSince(secondStarted)
            let secondTerminal = fixture.receipts.terminal()
            var secondAccepted: [Int64] = []
            var secondStale = 0
            for (index, sequence) in local.enumerated() {
                let receipts = (secondTerminal["loc-\(index)"] ?? [:]).values.flatMap { $0 }
                #expect(receipts.count == 2, "loc-\(index): \(receipts.count) terminal receipts")
                let kinds = Set(receipts.map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" })
                if kinds == ["accepted/"] { secondAccepted.append(sequence) } else if kinds == ["dropped/stale-sequence"] { secondStale += 1 }
            }
            #expect(secondAccepted.count + secondStale == 1000)
            #expect(secondAccepted == localRecords)
            let secondLog = try await fixture.log(.ios, token: activityToken).dropFirst(iosLog.count)
            let secondSequences = secondLog.compactMap { $0["payload"]?["aps"]?["content-state"]?["seq"]?.liveInteger }
            let secondStamps = secondLog.compactMap { $0["payload"]?["aps"]?["timestamp"]?.liveInteger }
            #expect(secondSequences == localRecords, "the new session starts over at its own numbering and arrives in order")
            #expect(zip(secondSequences, secondSequences.dropFirst()).allSatisfy { $0 < $1 })
            #expect(zip(secondStamps, secondStamps.dropFirst()).allSatisfy { $0 <= $1 } && (secondStamps.first ?? 0) >= (stamps.last ?? 0))
            let secondAndroid = try await fixture.log(.android, token: "fcm-live-android-2").dropFirst(androidLog.count)
            #expect(secondAndroid.compactMap { $0["message"]?["data"]?["sequence"]?.stringValue.flatMap { Int64($0) } } == localRecords)
            let violations = try await fixture.stats(.ios)["violations"]?.liveInteger
            #expect(violations == 0)
            Self.report("1000 block-shuffled, 4 workers", ["updates": 1000, "delivered": secondAccepted.count, "stale_sequence": secondStale,
                                                           "ios_log": secondLog.count, "android_log": secondAndroid.count,
                                                           "seconds": String(format: "%.1f", secondSeconds),
                                                           "first_ts": secondStamps.first ?? 0, "last_ts": secondStamps.last ?? 0])
        }
    }

    // MARK: A worker killed mid-stream

    /// The worker running an activity's updates is killed (SIGKILL) in the middle of 400
    /// block-shuffled updates; another of the four takes the partition over. What reaches the
    /// device still never goes backwards: sequences are non-decreasing and a repeat is only the
    /// same update resent (same `apns-id`, at-least-once after a crash); every running maximum
    /// is delivered; each update has exactly one terminal stage per subscription.
    @Test func aKilledWorkerDoesNotBreakTheOrder() async throws {
        try await withFixture("killed") { fixture in
            try await fixture.startSimulator()
            let ios = try await fixture.subscription("40000000-0000-4000-8000-000000000001", platform: .ios, token: Self.hex("device-k"))
            let activityToken = Self.hex("activity-k")
            try await fixture.activityToken(activity: "order-k", subscription: ios, token: activityToken)
            try await fixture.startWorkers(4)
            try await fixture.waitForSettledGroup()

            var random = SplitMix64(seed: 21)
            var sequences = Array(Int64(1)...400)
            for block in stride(from: 0, to: 400, by: 10) {
                for index in stride(from: block + 9, to: block, by: -1) {
                    sequences.swapAt(index, block + Int(random.next() % UInt64(index - block + 1)))
                }
            }
            var records: [Int64] = []
            for sequence in sequences where sequence > (records.last ?? 0) { records.append(sequence) }
            let jobs = sequences.enumerated().map { index, sequence in
                fixture.liveJob(id: "kill-\(index)", activity: "order-k", event: "update", stream: "session-k", sequence: sequence,
                                state: #"{"seq":\#(sequence)}"#)
            }
            let ids = (0..<jobs.count).map { "kill-\($0)" }
            try await fixture.produce(jobs)
            let started = Date()
            try #require(try await fixture.wait(seconds: 120) { ids.filter { fixture.receipts.completed($0) }.count >= 100 })
            let busy = try #require(fixture.workers.first { $0.stdout.contains("\"job_id\":\"kill-") }, "no worker logged a kill- job")
            let atKill = ids.filter { fixture.receipts.completed($0) }.count
            fixture.kill(busy)
            let done = try await fixture.waitCompleted(ids, seconds: 300)
            try #require(done, "\(ids.filter { fixture.receipts.completed($0) }.count) of 400 completed after the kill")
            let seconds = Date().timeIntervalSince(started)
            let taker = fixture.workers.filter { $0.label != busy.label && $0.stdout.contains("\"job_id\":\"kill-") }.map(\.label)

            let terminal = fixture.receipts.terminal()
            var accepted: [Int64] = []
            for (index, sequence) in sequences.enumerated() {
                let receipts = terminal["kill-\(index)"]?[ios] ?? []
                #expect(receipts.count == 1, "kill-\(index): \(receipts.map(\.stage))")
                if receipts.first?.stage == .accepted { accepted.append(sequence) } else {
                    #expect(receipts.first?.reason == .staleSequence, "kill-\(index)")
                }
            }
            #expect(accepted == records)
            let log = try await fixture.log(.ios, token: activityToken)
            let delivered = log.compactMap { $0["payload"]?["aps"]?["content-state"]?["seq"]?.liveInteger }
            let apnsIDs = log.compactMap { $0["apns_id"]?.stringValue }
            let stamps = log.compactMap { $0["payload"]?["aps"]?["timestamp"]?.liveInteger }
            var repeats = 0
            for index in delivered.indices.dropFirst() {
                if delivered[index] == delivered[index - 1] {
                    repeats += 1
                    #expect(apnsIDs[index] == apnsIDs[index - 1], "a repeated sequence is the same update resent")
                } else {
                    #expect(delivered[index] > delivered[index - 1], "sequence went backwards at \(index): \(delivered[index - 1]) then \(delivered[index])")
                }
            }
            #expect(Array(Set(delivered)).sorted() == records)
            #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 <= $1 })
            Self.report("killed worker", ["updates": 400, "completed_at_kill": atKill, "killed": busy.label, "taken_over_by": taker.description,
                                          "delivered": delivered.count, "distinct": Set(delivered).count, "resent": repeats,
                                          "seconds": String(format: "%.1f", seconds)])
        }
    }

    // MARK: Start, streams, end; a dead activity token

    /// Start goes to push-to-start tokens (iOS) and to Android subscriptions, which it attaches;
    /// a new stream after a direct send of sequence 1,780,000,000 delivers its sequence 1; end
    /// ends it (later updates `ended`) until a new start; the payloads pass the simulator's
    /// checks; a 410 on an activity token invalidates that token only.
    @Test func lifecycleStreamsAndTokenInvalidation() async throws {
        try await withFixture("lifecycle") { fixture in
            let share = 0.5
            try await fixture.startSimulator(["--unregistered-share", String(share)])
            let deviceA = Self.token("device-a", registeredUnder: share)
            let startA = Self.token("start-a", registeredUnder: share)
            let activityA = Self.token("activity-a", registeredUnder: share)
            let deadActivity = Self.token("activity-d", registeredUnder: share, unregistered: true)
            var androidToken = "fcm-c"
            while UnregisteredShare(share).isUnregistered(androidToken) { androidToken += "x" }
            let a = try await fixture.subscription("20000000-0000-4000-8000-00000000000a", platform: .ios, token: deviceA)
            _ = try await fixture.subscription("20000000-0000-4000-8000-00000000000b", platform: .ios, token: Self.token("device-b", registeredUnder: share))
            let c = try await fixture.subscription("20000000-0000-4000-8000-00000000000c", platform: .android, token: androidToken)
            let d = try await fixture.subscription("20000000-0000-4000-8000-00000000000d", platform: .ios, token: Self.token("device-d", registeredUnder: share))
            try await fixture.pool.query("INSERT INTO push_to_start_tokens (app_id, subscription_id, attributes_type, token) VALUES ($1, $2::uuid, 'RideAttributes', $3)",
                                         [fixture.app, a, startA], idempotent: false)
            try await fixture.startWorkers(2)

            let alert = #","alert":{"title":"Your ride","body":"Booked","sound":"ping.caf"},"attributes_type":"RideAttributes","attributes":{"car":"blue"}"#
            try await fixture.produce([fixture.liveJob(id: "ride-start", activity: "ride-1", event: "start", stream: "s1", sequence: 1,
                                                       state: #"{"eta":9}"#, extra: alert, audience: #"{"all":true}"#)])
            try #require(try await fixture.waitCompleted(["ride-start"], seconds: 120))
            let startTerminal = fixture.receipts.terminal()["ride-start"] ?? [:]
            // B has no push-to-start token and D none either: not in a start's audience.
            #expect(Set(startTerminal.keys) == [a, c])
            #expect(startTerminal.values.allSatisfy { $0.map(\.stage) == [.accepted] })
            let start = try #require(try await fixture.log(.ios, token: startA).first)
            let aps = start["payload"]?["aps"]
            #expect(start["priority"] == .string("10") && start["push_type"] == .string("liveactivity"))
            #expect(aps?["event"] == .string("start") && aps?["input-push-token"] == .int(1))
            #expect(aps?["alert"]?["title"] == .string("Your ride") && aps?["attributes-type"] == .string("RideAttributes"))
            #expect(aps?["attributes"] == .object(["car": .string("blue")]) && aps?["content-state"] == .object(["eta": .int(9)]))
            let androidStart = try #require(try await fixture.log(.android, token: androidToken).first)
            #expect(androidStart["message"]?["data"]?["live_update"] == .string("START"))
            #expect(androidStart["message"]?["android"]?["priority"] == .string("high"))
            #expect(androidStart["message"]?["data"]?["attributes"] == .string(#"{"car":"blue"}"#))
            #expect(try await fixture.value("SELECT count(*) FROM activity_tokens WHERE activity_id = 'ride-1' AND subscription_id = $1::uuid", [c]) == "1")

            // The app got its activity token (upstream writes it); D's activity token is dead.
            try await fixture.pool.query("INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token) VALUES ($1, 'ride-1', $2::uuid, $3), ($1, 'ride-1', $4::uuid, $5)",
                                         [fixture.app, a, activityA, d, deadActivity], idempotent: false)
            let jobs = [
                fixture.liveJob(id: "ride-direct", activity: "ride-1", event: "update", stream: "direct", sequence: 1_780_000_000, state: #"{"eta":8}"#),
                fixture.liveJob(id: "ride-s2-1", activity: "ride-1", event: "update", stream: "s2", sequence: 1, state: #"{"eta":7}"#),
                fixture.liveJob(id: "ride-s2-1-again", activity: "ride-1", event: "update", stream: "s2", sequence: 1, state: #"{"eta":6}"#),
                fixture.liveJob(id: "ride-end", activity: "ride-1", event: "end", stream: "s2", sequence: 2, state: #"{"eta":0}"#,
                                extra: #","dismissal_date":"\#(Timestamp(seconds: Timestamp.now.seconds + 600).rfc3339)""#),
                fixture.liveJob(id: "ride-after-end", activity: "ride-1", event: "update", stream: "s3", sequence: 1, state: #"{"eta":5}"#),
            ]
            try await fixture.produce(jobs)
            try #require(try await fixture.waitCompleted(["ride-direct", "ride-s2-1", "ride-s2-1-again", "ride-end", "ride-after-end"], seconds: 120))
            let terminal = fixture.receipts.terminal()
            func outcome(_ job: String, _ subscription: String) -> String {
                (terminal[job]?[subscription] ?? []).map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" }.joined(separator: ",")
            }
            #expect(outcome("ride-direct", a) == "accepted/" && outcome("ride-direct", c) == "accepted/")
            #expect(outcome("ride-direct", d) == "unregistered/unregistered")
            #expect(outcome("ride-s2-1", a) == "accepted/", "a new stream's sequence 1 after the direct send of 1,780,000,000")
            #expect(outcome("ride-s2-1", c) == "accepted/")
            #expect(outcome("ride-s2-1-again", a) == "dropped/stale-sequence" && outcome("ride-s2-1-again", c) == "dropped/stale-sequence")
            #expect(outcome("ride-end", a) == "accepted/" && outcome("ride-end", c) == "accepted/")
            #expect(outcome("ride-after-end", a) == "dropped/ended" && outcome("ride-after-end", c) == "dropped/ended")
            // D: the dead token is invalidated, D itself is not, and D is no longer sent to.
            #expect(terminal["ride-s2-1"]?[d] == nil)
            #expect(try await fixture.value("SELECT invalidated_at IS NOT NULL FROM activity_tokens WHERE subscription_id = $1::uuid", [d]) == "t")
            #expect(try await fixture.value("SELECT invalidated_at IS NULL FROM subscriptions WHERE id = $1::uuid", [d]) == "t")

            let iosLog = try await fixture.log(.ios, token: activityA)
            #expect(iosLog.map { $0["payload"]?["aps"]?["event"]?.stringValue ?? "" } == ["update", "update", "end"])
            #expect(iosLog.map { $0["priority"]?.stringValue ?? "" } == ["5", "5", "10"])
            #expect(iosLog.map { $0["payload"]?["aps"]?["content-state"]?["eta"]?.liveInteger ?? -1 } == [8, 7, 0])
            let stamps = iosLog.compactMap { $0["payload"]?["aps"]?["timestamp"]?.liveInteger }
            #expect(stamps.count == 3 && zip(stamps, stamps.dropFirst()).allSatisfy { $0 <= $1 })
            #expect(iosLog.last?["payload"]?["aps"]?["dismissal-date"] != nil)
            let androidLog = try await fixture.log(.android, token: androidToken)
            #expect(androidLog.map { $0["message"]?["data"]?["live_update"]?.stringValue ?? "" } == ["START", "UPDATE", "UPDATE", "END"])
            #expect(androidLog.map { $0["message"]?["data"]?["stream_id"]?.stringValue ?? "" } == ["s1", "direct", "s2", "s2"])
            #expect(androidLog.map { $0["message"]?["data"]?["sequence"]?.stringValue ?? "" } == ["1", "1780000000", "1", "2"])
            #expect(androidLog.map { $0["message"]?["data"]?["content_state"]?.stringValue ?? "" }
                    == [#"{"eta":9}"#, #"{"eta":8}"#, #"{"eta":7}"#, #"{"eta":0}"#])
            #expect(androidLog.allSatisfy { $0["message"]?["data"]?["activity_id"] == .string("ride-1")
                                            && $0["message"]?["android"]?["collapse_key"] == .string("ride-1") })
            #expect(androidLog.map { $0["message"]?["android"]?["priority"]?.stringValue ?? "" } == ["high", "normal", "normal", "high"])
            #expect(androidLog.first?["message"]?["data"]?["alert"] == .string(#"{"body":"Booked","sound":"ping.caf","title":"Your ride"}"#))

            // A new start opens the ended activity again.
            try await fixture.produce([fixture.liveJob(id: "ride-restart", activity: "ride-1", event: "start", stream: "s4", sequence: 1,
                                                       state: #"{"eta":12}"#, extra: alert, audience: #"{"all":true}"#)])
            try #require(try await fixture.waitCompleted(["ride-restart"], seconds: 120))
            #expect(outcome2(fixture, "ride-restart", a) == "accepted/")
            let violations = try await fixture.stats(.ios)["violations"]?.liveInteger
            #expect(violations == 0)
            Self.report("lifecycle", ["ios_log": iosLog.count, "android_log": androidLog.count, "stamps": stamps.description])
        }
    }

    func outcome2(_ fixture: LiveActivityFixture, _ job: String, _ subscription: String) -> String {
        (fixture.receipts.terminal()[job]?[subscription] ?? []).map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" }.joined(separator: ",")
    }

    // MARK: VoIP and channels

    /// VoIP to iOS (VoIP token, topic `.voip`, priority 10, the marker, up to 5,120 bytes) and
    /// Android (data-only, high priority, ttl, the marker); no VoIP token is `no-voip-token`.
    /// A channel change bumps its version and the next push carries the new id and definition.
    @Test func voipAndChannels() async throws {
        try await withFixture("voip") { fixture in
            try await fixture.startSimulator()
            let voipToken = Self.hex("voip-1")
            let v1 = try await fixture.subscription("30000000-0000-4000-8000-000000000001", platform: .ios, token: Self.hex("dev-v1"), voipToken: voipToken)
            let v2 = try await fixture.subscription("30000000-0000-4000-8000-000000000002", platform: .ios, token: Self.hex("dev-v2"))
            let v3 = try await fixture.subscription("30000000-0000-4000-8000-000000000003", platform: .android, token: "fcm-v3")
            let p4 = try await fixture.subscription("30000000-0000-4000-8000-000000000004", platform: .android, token: "fcm-p4", sdk: false)
            try await fixture.startWorkers(1)

            func voipJob(_ id: String, _ data: String) -> (key: String, json: String) {
                (id, """
                    {"schema":"herald.job.v1","id":"\(id)","app_id":"\(fixture.app)","kind":"voip","created_at":"\(Timestamp.now.rfc3339)",\
                    "audience":{"subscription_ids":["\(v1)","\(v2)","\(v3)"]},"voip":{"data":\(data),"ttl_s":30}}
                    """)
            }
            let big = String(repeating: "b", count: 4_700)
            let huge = String(repeating: "h", count: 5_200)
            try await fixture.produce([voipJob("call-1", #"{"call_id":"c1","caller":"Ada"}"#), voipJob("call-big", #"{"blob":"\#(big)"}"#),
                                       voipJob("call-huge", #"{"blob":"\#(huge)"}"#)])
            try #require(try await fixture.waitCompleted(["call-1", "call-big", "call-huge"], seconds: 120),
                         "\(fixture.receipts.describe(["call-1", "call-big", "call-huge"]))")
            let terminal = fixture.receipts.terminal()
            func outcome(_ job: String, _ subscription: String) -> String {
                (terminal[job]?[subscription] ?? []).map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" }.joined(separator: ",")
            }
            #expect(outcome("call-1", v1) == "accepted/" && outcome("call-1", v2) == "dropped/no-voip-token" && outcome("call-1", v3) == "accepted/")
            #expect(outcome("call-big", v1) == "accepted/", "VoIP payloads may exceed 4,096 bytes on APNs")
            #expect(outcome("call-big", v3) == "failed/payload-too-large", "FCM's limit is 4,096")
            #expect(outcome("call-huge", v1) == "failed/payload-too-large")
            let voipLog = try await fixture.log(.ios, token: voipToken)
            #expect(voipLog.count == 2)
            // The three jobs have different keys, so they may run in any order.
            let first = try #require(voipLog.first { $0["payload"]?["herald"]?["id"] == .string("call-1") })
            let bigEntry = try #require(voipLog.first { $0["payload"]?["herald"]?["id"] == .string("call-big") })
            #expect(first["push_type"] == .string("voip") && first["priority"] == .string("10"))
            #expect(first["topic"]?.stringValue?.hasSuffix(".voip") == true)
            #expect(first["payload"]?["herald"]?["voip"] == .string("1"))
            #expect(first["payload"]?["herald"]?["data"] == .object(["call_id": .string("c1"), "caller": .string("Ada")]))
            let bigBytes = bigEntry["bytes"]?.liveInteger ?? 0
            #expect(bigBytes > 4096 && bigBytes <= 5120)
            let androidVoIP = try #require(try await fixture.log(.android, token: "fcm-v3").first { $0["message"]?["data"]?["herald_id"] == .string("call-1") })
            #expect(androidVoIP["message"]?["android"] == .object(["priority": .string("high"), "ttl": .string("30s")]))
            #expect(androidVoIP["message"]?["data"]?["voip"] == .string("1"))
            #expect(androidVoIP["message"]?["notification"] == nil)
            #expect(try await fixture.log(.ios, token: Self.hex("dev-v2")).isEmpty)

            // Channels.
            let apps = AppRepository(pool: fixture.pool, key: try CredentialsKey(base64: fixture.credentialsKey))
            var channel = NotificationChannel(key: "orders", name: "Orders")
            channel.importance = .high
            channel.iosSound = "chime.caf"
            channel.iosInterruptionLevel = .timeSensitive
            try await apps.upsertChannel(appID: fixture.app, channel)
            func channelJob(_ id: String) -> (key: String, json: String) {
                (id, """
                    {"schema":"herald.job.v1","id":"\(id)","app_id":"\(fixture.app)","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
                    "audience":{"subscription_ids":["\(v1)","\(v3)","\(p4)"]},"content":{"title":"Order","body":"Shipped","channel":"orders"}}
                    """)
            }
            try await fixture.produce([channelJob("orders-1")])
            try #require(try await fixture.waitCompleted(["orders-1"], seconds: 120))
            channel.importance = .urgent
            let stored = try await apps.upsertChannel(appID: fixture.app, channel)
            #expect(stored.version == 2)
            try await fixture.produce([channelJob("orders-2")])
            try #require(try await fixture.waitCompleted(["orders-2"], seconds: 120))

            let sdkLog = try await fixture.log(.android, token: "fcm-v3").filter { $0["message"]?["data"]?["channel"] != nil }
            let definitions = try sdkLog.map { try JSONValue.parse(Array(($0["message"]?["data"]?["channel"]?.stringValue ?? "").utf8)) }
            #expect(definitions.map { $0["id"]?.stringValue ?? "" } == ["nf_orders_v1", "nf_orders_v2"])
            #expect(definitions.map { $0["importance"]?.stringValue ?? "" } == ["high", "urgent"])
            #expect(definitions.last == stored.definition)
            let plainLog = try await fixture.log(.android, token: "fcm-p4")
            #expect(plainLog.map { $0["message"]?["android"]?["notification"]?["channel_id"]?.stringValue ?? "" } == ["nf_orders_v1", "nf_orders_v2"])
            let iosLog = try await fixture.log(.ios, token: Self.hex("dev-v1"))
            #expect(iosLog.count == 2)
            #expect(iosLog.allSatisfy { $0["payload"]?["aps"]?["sound"] == .string("chime.caf")
                                        && $0["payload"]?["aps"]?["interruption-level"] == .string("time-sensitive") })
            Self.report("voip+channels", ["voip_big_bytes": bigBytes, "channel_ids": definitions.map { $0["id"]?.stringValue ?? "" }.description])
        }
    }
}
