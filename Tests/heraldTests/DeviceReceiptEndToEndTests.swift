import Foundation
import HeraldCore
import HeraldKafka
import HeraldSim
import HeraldTestSupport
import Synchronization
import Testing

/// Device receipts end to end (issue 18): a campaign with two buttons goes out through
/// `herald run` workers, the mock broker, PostgreSQL and `herald sim`; then device events are
/// produced to the device-events topic as the upstream API would, repeats and foreign events
/// among them, and what comes out is checked on the results and dead-letter topics, in
/// `herald jobs show` (text and `--json`) and on `/metrics`.
///
/// What is promised (DeviceEventProcessor, DeviceEventDedupe, migration 0005): events carry no
/// event id; they are deduplicated on (type, job, subscription, action id of a click), so a
/// repeat, whether the same message again or a new message with another `at`, gives no second
/// receipt and no second count. Taps on two buttons are two clicks. Events are taken as they
/// arrive, whatever their order. An event naming another app's job or subscription is
/// dead-lettered (`foreign-event`) without a receipt, a count or a dedupe row; one for a job
/// with no row is dropped and counted in `herald_device_events_dropped_total`.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized, .timeLimit(.minutes(5)))
struct DeviceReceiptEndToEndTests {
    static let app = PipelineEndToEndTests.app
    static let otherApp = "other"
    static let job = "receipts-1"

    @Test func deviceEventsBecomeOneReceiptAndOneCountEach() async throws {
        try await withFixture("receipts") { fixture in
            let started = Date()
            _ = try fixture.startSimulator()
            _ = try await fixture.seed(app: Self.app, devices: 10)
            let audience = try await fixture.audience(app: Self.app)
            let sorted = audience.values.sorted { $0.id < $1.id }
            let ios = sorted.filter { $0.platform == .ios }
            let android = sorted.filter { $0.platform == .android }
            try #require(ios.count >= 2 && !android.isEmpty, "the seed gave \(ios.count) iOS and \(android.count) Android devices")
            let deviceA = ios[0], deviceB = android[0], deviceC = ios[1]
            // Another tenant with a device of its own, to name in foreign events.
            try await fixture.updateApp(Self.otherApp, apns: nil, fcm: nil)
            let otherDevice = try await fixture.pool.query("""
                INSERT INTO subscriptions (app_id, platform, token) VALUES ($1, 'android', 'other-app-token') RETURNING id::text
                """, [Self.otherApp], idempotent: false).rows.first?.first ?? nil
            let foreignSubscription = try #require(otherDevice)

            let receipts = DeviceReceiptLog()
            try fixture.tail("HERALD_TOPIC_RESULTS") { receipts.record($0.value) }
            let letters = DeadLetterLog()
            try fixture.tail("HERALD_TOPIC_DLQ") { letters.record($0.value) }
            let workers = try await fixture.startWorkers(2)

            // 1. The campaign, with two buttons, to every device of the app.
            let sent = Date()
            try await fixture.produceJob(Self.campaign(), id: Self.job)
            let seconds = try await waitForCompletion(fixture, job: Self.job, audience: audience, timeout: 120, since: sent)
            let figures = try await checkDelivery(fixture, job: Self.job, audience: audience, seconds: seconds,
                                                  unregistered: UnregisteredShare(0), exactSimulatorCounts: true)
            #expect(figures["accepted"] as? Int == audience.count, "\(figures)")

            // 2. Foreign events first, so that one of them would take a genuine event's dedupe
            // slot if it could, and an event for a job with no row.
            let foreign = [
                // The other app names this app's job (and its own device).
                Self.event("received", app: Self.otherApp, subscription: foreignSubscription),
                // This app names the other app's device.
                Self.event("confirmed", subscription: foreignSubscription),
                // The other app names this app's job and device C, before C reports it itself.
                Self.event("received", app: Self.otherApp, subscription: deviceC.id),
            ]
            for event in foreign { try await Self.produce(fixture, event) }
            let foreignLettered = try await fixture.wait(seconds: 60) { letters.count >= foreign.count }
            try #require(foreignLettered, "\(letters.count) of \(foreign.count) foreign events dead-lettered: \(letters.snapshot)")
            try await Self.produce(fixture, Self.event("received", job: "no-such-job", subscription: deviceA.id))

            // 3. Device B taps a button before it reports the notification shown: taken as it comes.
            try await Self.produce(fixture, Self.event("clicked", subscription: deviceB.id, action: "shop-now", at: "2026-12-02T17:40:00Z"))
            let clickedFirst = try await fixture.wait(seconds: 30) { receipts.copies(Self.id(deviceB, "clicked:shop-now")) >= 1 }
            #expect(clickedFirst, "device B's click before its confirmation got no receipt")
            #expect(receipts.copies(Self.id(deviceB, "confirmed")) == 0)

            // 4. Device A: every stage, each repeated as the same message and as a new one with
            // another `at` (and a confirmation with a stray `action_id`); a tap on each button. Device B's confirmation after its click, twice,
            // then a late `received`; device C's own `received` after the foreign one.
            let firstConfirmed = Self.event("confirmed", subscription: deviceA.id, at: "2026-12-02T17:35:00Z")
            let firstClick = Self.event("clicked", subscription: deviceA.id, action: "shop-now", at: "2026-12-02T17:36:00Z")
            let sequence = [
                Self.event("received", subscription: deviceA.id, at: "2026-12-02T17:34:00Z"),
                firstConfirmed,
                firstConfirmed,
                Self.event("confirmed", subscription: deviceA.id, at: "2026-12-02T17:35:30Z"),
                // The schema accepts `action_id` on any type; it means nothing on a confirmation.
                Self.event("confirmed", subscription: deviceA.id, action: "shop-now", at: "2026-12-02T17:35:45Z"),
                firstClick,
                firstClick,
                Self.event("clicked", subscription: deviceA.id, action: "shop-now", at: "2026-12-02T17:36:30Z"),
                Self.event("received", subscription: deviceA.id, at: "2026-12-02T17:34:10Z"),
                Self.event("clicked", subscription: deviceA.id, action: "later", at: "2026-12-02T17:37:00Z"),
                Self.event("confirmed", subscription: deviceB.id, at: "2026-12-02T17:41:00Z"),
                Self.event("confirmed", subscription: deviceB.id, at: "2026-12-02T17:41:00Z"),
                Self.event("received", subscription: deviceB.id, at: "2026-12-02T17:42:00Z"),
                Self.event("received", subscription: deviceC.id, at: "2026-12-02T17:43:00Z"),
            ]
            for event in sequence { try await Self.produce(fixture, event) }

            // Each device's last event is a new one, and one device's events are handled in
            // order (keyed by subscription), so once the last receipts are in, every repeat
            // before them has been handled too.
            let expected: [String: DeviceReceiptLog.Expected] = [
                Self.id(deviceA, "received"): .init(deviceA, .received, at: "2026-12-02T17:34:00Z"),
                Self.id(deviceA, "confirmed"): .init(deviceA, .confirmed, at: "2026-12-02T17:35:00Z"),
                Self.id(deviceA, "clicked:shop-now"): .init(deviceA, .clicked, action: "shop-now", at: "2026-12-02T17:36:00Z"),
                Self.id(deviceA, "clicked:later"): .init(deviceA, .clicked, action: "later", at: "2026-12-02T17:37:00Z"),
                Self.id(deviceB, "clicked:shop-now"): .init(deviceB, .clicked, action: "shop-now", at: "2026-12-02T17:40:00Z"),
                Self.id(deviceB, "confirmed"): .init(deviceB, .confirmed, at: "2026-12-02T17:41:00Z"),
                Self.id(deviceB, "received"): .init(deviceB, .received, at: "2026-12-02T17:42:00Z"),
                Self.id(deviceC, "received"): .init(deviceC, .received, at: "2026-12-02T17:43:00Z"),
            ]
            let arrived = try await fixture.wait(seconds: 60) { expected.keys.allSatisfy { receipts.copies($0) >= 1 } }
            #expect(arrived, "device receipts missing: \(expected.keys.filter { receipts.copies($0) == 0 }.sorted())")
            // A few seconds more, for a repeat that would come late.
            try await Task.sleep(for: .seconds(3))

            // Results: each expected receipt exactly once, saying what the first sighting said.
            let device = receipts.deviceReceipts()
            #expect(Set(device.keys) == Set(expected.keys),
                    "device receipt ids: unexpected \(Set(device.keys).subtracting(expected.keys).sorted()), missing \(Set(expected.keys).subtracting(device.keys).sorted())")
            for (id, copies) in device.sorted(by: { $0.key < $1.key }) {
                #expect(copies.count == 1, "\(id) published \(copies.count) times: \(copies.map(\.json.serializedString))")
                guard let receipt = copies.first, let want = expected[id] else { continue }
                #expect(receipt.jobID == Self.job && receipt.appID == Self.app && receipt.subscriptionID == want.subscription,
                        "\(id): \(receipt.json.serializedString)")
                #expect(receipt.stage == want.stage && receipt.actionID == want.action && receipt.platform == want.platform,
                        "\(id): \(receipt.json.serializedString)")
                #expect(receipt.at.rfc3339 == want.at, "\(id): the receipt keeps the first sighting's time: \(receipt.json.serializedString)")
            }
            #expect(receipts.undecodable.isEmpty, "results that are not herald.receipt.v1: \(receipts.undecodable)")
            let strays = receipts.all.filter { $0.subscriptionID == foreignSubscription || $0.jobID == "no-such-job" || $0.stage == .rejected }
            #expect(strays.isEmpty, "receipts for foreign or unknown-job events: \(strays.map(\.json.serializedString))")
            #expect(fixture.results.events(job: Self.job, stage: .completed).count == 1)

            // Dead letters: the three foreign events, as produced, and nothing else.
            let dead = letters.snapshot
            #expect(dead.undecodable.isEmpty)
            #expect(dead.letters.map(\.cause) == [DeadLetter.Cause?](repeating: .foreignEvent, count: foreign.count),
                    "\(dead.letters.map { "\($0.cause?.rawValue ?? "-"): \($0.reason)" })")
            #expect(Set(dead.letters.map { String(decoding: $0.original, as: UTF8.self) }) == Set(foreign))

            // The job's counts: one per (device, stage), one per (device, button) for clicks.
            let counts = #"device_events received=3 confirmed=2 clicked=3"#
            let text = try await Subprocess.runDetached(fixture.services.binary, ["jobs", "show", Self.job],
                                                        environment: fixture.baseEnvironment, timeout: 60)
            #expect(text.status == 0, "\(text.stderr)")
            #expect(text.stdout.split(separator: "\n").contains { $0 == counts }, "herald jobs show:\n\(text.stdout)")
            let json = try await Subprocess.runDetached(fixture.services.binary, ["jobs", "show", Self.job, "--json"],
                                                        environment: fixture.baseEnvironment, timeout: 60)
            #expect(json.status == 0, "\(json.stderr)")
            let document = try JSONValue.parse(Array(json.stdout.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
            #expect(document["device_events"] == .object(["received": .int(3), "confirmed": .int(2), "clicked": .int(3)]), "\(json.stdout)")
            let rows = try await fixture.pool.query("SELECT count(*) FROM device_event_seen WHERE subscription_id = $1::uuid OR job_id <> $2",
                                                    [foreignSubscription, Self.job]).rows
            #expect(rows == [["0"]], "dedupe rows for foreign or unknown-job events: \(rows)")

            // Metrics, summed over both workers.
            let metrics = try await scrape(workers)
            for (type, count) in [("received", 3), ("confirmed", 2), ("clicked", 3)] {
                #expect(prometheusSum(metrics, metric: "herald_device_events_total", label: "type=\"\(type)\"") == count, "herald_device_events_total{type=\"\(type)\"}")
            }
            #expect(prometheusSum(metrics, metric: "herald_device_events_dropped_total", label: "reason=\"unknown-job\"") == 1)
            #expect(prometheusSum(metrics, metric: "herald_dead_letters_total", label: "lane=\"device-events\",cause=\"foreign-event\"") == foreign.count)

            try await expectCleanStop(fixture)
            report("18 device receipts", ["devices": audience.count, "campaign_s": seconds, "seconds": Date().timeIntervalSince(started),
                                          "device_receipts": device.count, "dead_letters": dead.letters.count])
        }
    }

    // MARK: messages

    /// The campaign: a notification with two buttons to every device of the app.
    static func campaign() -> String {
        """
        {"schema":"herald.job.v1","id":"\(job)","app_id":"\(app)","kind":"notification","created_at":"\(Timestamp.now.rfc3339)",\
        "audience":{"all":true},"content":{"title":"Winter sale","body":"30% off everything until Sunday.",\
        "buttons":[{"id":"shop-now","text":"Shop now"},{"id":"later","text":"Later"}]}}
        """
    }

    /// A `herald.device-event.v1` as the upstream API writes it.
    static func event(_ type: String, app: String = app, job: String = job, subscription: String, action: String? = nil,
                      at: String = "2026-12-02T17:30:00Z") -> String {
        let action = action.map { #","action_id":"\#($0)""# } ?? ""
        return #"{"schema":"herald.device-event.v1","type":"\#(type)","job_id":"\#(job)","app_id":"\#(app)","subscription_id":"\#(subscription)","at":"\#(at)"\#(action)}"#
    }

    /// Produces an event keyed by its subscription id and waits for the broker's acknowledgement,
    /// so events land in the order they are produced.
    static func produce(_ fixture: PipelineFixture, _ event: String) async throws {
        guard let subscription = try JSONValue.parse(Array(event.utf8))["subscription_id"]?.stringValue else {
            throw PipelineFixture.Failure("event without a subscription id: \(event)")
        }
        guard let topic = fixture.topics["HERALD_TOPIC_DEVICE_EVENTS"] else { throw PipelineFixture.Failure("no device-events topic") }
        _ = try await fixture.producer.send(topic: topic, key: subscription, value: event)
    }

    static func id(_ device: PipelineFixture.Subscription, _ stage: String) -> String { "\(job):\(device.id):\(stage)" }
}

/// Every receipt read from the results topic, every copy of each kept.
final class DeviceReceiptLog: Sendable {
    /// What one device receipt should say.
    struct Expected {
        let subscription: String
        let platform: Platform
        let stage: Receipt.Stage
        let action: String?
        let at: String

        init(_ device: PipelineFixture.Subscription, _ stage: Receipt.Stage, action: String? = nil, at: String) {
            subscription = device.id
            platform = device.platform
            self.stage = stage
            self.action = action
            self.at = at
        }
    }

    private struct State {
        var receipts: [Receipt] = []
        var undecodable: [String] = []
    }

    private let state = Mutex(State())

    func record(_ bytes: [UInt8]) {
        do {
            let receipt = try Receipt.decode(bytes)
            state.withLock { $0.receipts.append(receipt) }
        } catch {
            state.withLock { $0.undecodable.append("\(error): \(String(decoding: bytes.prefix(300), as: UTF8.self))") }
        }
    }

    var all: [Receipt] { state.withLock { $0.receipts } }
    var undecodable: [String] { state.withLock { $0.undecodable } }

    func copies(_ id: String) -> Int { state.withLock { $0.receipts.filter { $0.id == id }.count } }

    /// The `received`, `confirmed` and `clicked` receipts by id, every copy.
    func deviceReceipts() -> [String: [Receipt]] {
        Dictionary(grouping: all.filter { [.received, .confirmed, .clicked].contains($0.stage) }, by: \.id)
    }
}
