import HeraldAPNs
import HeraldCore
import HeraldPostgres
@testable import HeraldWorker
import Testing

/// The templates against the tree renderer they stand in for: random jobs × devices × payload
/// profiles × times, byte for byte, and the cases where a template must not be used.
@Suite struct PushTemplatesTests {
    static let now = Timestamp(seconds: 1_796_205_600) // 2026-12-02T10:00:00Z

    /// A random job of any kind, as the upstream API would produce it (decoded, so only valid
    /// jobs), with text that needs escaping, long bodies, languages, channels and raw overrides.
    struct JobMaker {
        var random: SplitMix64

        mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(random.next() % UInt64(range.count)) }
        mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }
        mutating func pick<T>(_ values: [T]) -> T { values[int(0...(values.count - 1))] }

        mutating func text(long: Bool = false) -> String {
            let pieces = ["Hello", " ", "wörld", "🚀", "\"quoted\"", "\\", "\n", "tab\t", "日本語", "👩‍👩‍👧", "é", "x", "<b>", "\u{1}"]
            let count = long ? int(300...1500) : int(1...8)
            return (0..<count).map { _ in pick(pieces) }.joined()
        }

        mutating func rfc3339(_ seconds: Int64) -> JSONValue {
            var bytes: [UInt8] = []
            Timestamp(seconds: seconds).appendRFC3339(to: &bytes)
            return .string(String(decoding: bytes, as: UTF8.self))
        }

        mutating func content() -> [String: JSONValue] {
            var content: [String: JSONValue] = [:]
            let background = chance(15)
            if !background || chance(30) {
                if chance(85) { content["title"] = .string(text()) }
                content["body"] = .string(text(long: chance(20)))
                if chance(30) { content["subtitle"] = .string(text()) }
            }
            if background || chance(10) { content["content_available"] = .bool(true) }
            if chance(40) {
                var localized: [String: JSONValue] = [:]
                for language in ["fr", "de", "pt-br"] where chance(60) {
                    localized[language] = .object(["title": .string(text()), "body": .string(text(long: chance(15)))])
                }
                if !localized.isEmpty { content["localized"] = .object(localized) }
            }
            if chance(40) { content["url"] = .string("app://item/" + String(int(1...99_999))) }
            if chance(40) { content["image_url"] = .string("https://cdn.example.com/" + String(int(1...999)) + ".jpg") }
            if chance(40) {
                content["buttons"] = .array((0..<int(1...3)).map { index in
                    var button: [String: JSONValue] = ["id": .string("b\(index)"), "text": .string(text())]
                    if chance(50) { button["url"] = .string("https://example.com/\(index)") }
                    return .object(button)
                })
            }
            if chance(40) { content["data"] = .object(["n": .int(int(0...1000)), "s": .string(text()), "url": .string("x://y")]) }
            if chance(30) { content["sound"] = chance(80) ? .string("chime.caf") : .object(["critical": .bool(true), "name": .string("alarm.caf"), "volume": .double(0.5)]) }
            if chance(30) { content["badge"] = .int(int(0...99)) }
            if chance(20) { content["thread_id"] = .string("thread-\(int(1...9))") }
            if chance(30) { content["collapse_id"] = .string("collapse-\(int(1...9))") }
            if chance(20) { content["category"] = .string("CAT_\(int(1...9))") }
            if chance(30) { content["channel"] = .string(chance(80) ? "orders" : "missing") }
            if chance(20) { content["interruption_level"] = .string(pick(["passive", "active", "time-sensitive", "critical"])) }
            if chance(20) { content["relevance_score"] = .double(Double(int(0...100)) / 100) }
            if chance(20) { content["show_foreground"] = .bool(chance(50)) }
            if chance(20) { content["show_background"] = .bool(chance(50)) }
            if chance(15) { content["apns"] = .object(["aps": .object(["badge": .int(7)]), "extra": .string(text())]) }
            if chance(15) { content["fcm"] = .object(["android": .object(["priority": .string("normal")]), "fcm_options": .object(["analytics_label": .string("l")])]) }
            return content
        }

        mutating func job() -> JSONValue {
            var job: [String: JSONValue] = [
                "schema": .string("herald.job.v1"), "id": .string("job-\(int(1...1_000_000))"), "app_id": .string("shop"),
                "created_at": rfc3339(PushTemplatesTests.now.seconds - 60), "audience": .object(["all": .bool(true)]),
            ]
            if chance(50) {
                // Past, near, and beyond FCM's 28-day TTL (where the TTL starts to move an hour on).
                let offset = pick([-30, 90, 3 * 3600, 2_419_200 - 1800, 2_419_200 + 600, 40 * 86_400])
                job["expires_at"] = rfc3339(PushTemplatesTests.now.seconds + Int64(offset))
            }
            if chance(40) {
                var delivery: [String: JSONValue] = [:]
                if chance(70) { delivery["priority"] = .string(pick(["high", "normal"])) }
                if chance(30) { delivery["urgent"] = .bool(true) }
                job["delivery"] = .object(delivery)
            }
            switch int(0...9) {
            case 0, 1:
                job["kind"] = .string("voip")
                var voip: [String: JSONValue] = ["data": .object(["call_id": .string("c\(int(1...99))"), "caller": .string(text())])]
                if chance(50) { voip["ttl_s"] = .int(int(0...120)) }
                job["voip"] = .object(voip)
            case 2, 3:
                job["kind"] = .string("live_activity")
                let event = pick(["start", "update", "end"])
                var update: [String: JSONValue] = [
                    "activity_id": .string("act-\(int(1...9))"), "event": .string(event), "stream_id": .string("s1"),
                    "sequence": .int(int(1...1000)), "content_state": .object(["eta": .int(int(0...60)), "note": .string(text())]),
                ]
                if event == "start" {
                    update["attributes_type"] = .string("DeliveryAttributes")
                    update["attributes"] = .object(["shop": .string(text())])
                }
                if chance(40) { update["alert"] = .object(["title": .string(text()), "body": .string(text()), "sound": .string("c.caf")]) }
                if chance(30) { update["stale_date"] = rfc3339(PushTemplatesTests.now.seconds + 600) }
                if chance(30) { update["dismissal_date"] = rfc3339(PushTemplatesTests.now.seconds + 900) }
                if chance(30) { update["relevance_score"] = .int(int(0...100)) }
                if chance(30) { update["priority"] = .int(pick([5, 10])) }
                job["live_activity"] = .object(update)
            default:
                job["kind"] = .string("notification")
                job["content"] = .object(content())
            }
            return .object(job)
        }

        mutating func hex(_ count: Int) -> String {
            String((0..<count).map { _ in pick(Array("0123456789abcdef")) })
        }

        /// A device: UUID ids, hex APNs tokens or FCM-shaped tokens of varying lengths, some too
        /// short or with characters that must not be spliced.
        mutating func member() -> AudienceMember {
            let platform: Platform = chance(50) ? .ios : .android
            let provider: Receipt.Provider = platform == .android ? .fcm : (chance(80) ? .apns : .fcm)
            let id = chance(95) ? "\(hex(8))-\(hex(4))-4\(hex(3))-a\(hex(3))-\(hex(12))" : "short-\(int(1...9))"
            var token = provider == .apns ? hex(64) : "\(hex(int(10...22))):APA91b\(hex(int(100...140)))"
            if chance(5) { token = "a/b+c=" + hex(30) }
            return AudienceMember(id: id, platform: platform, token: token, sandbox: chance(30), sdk: chance(85),
                                  language: chance(30) ? nil : pick(["en", "fr", "de", "pt-BR", "ja"]), timeZone: nil,
                                  voipToken: chance(50) ? hex(64) : nil, provider: provider)
        }
    }

    static func app(_ profile: PayloadProfile) -> AppDelivery {
        var orders = NotificationChannel(key: "orders", name: "Orders", version: 3)
        orders.importance = .high
        orders.iosSound = "parcel.caf"
        let settings = AppSettings(id: "shop", name: "Shop", payloadProfile: profile.rawValue, channels: ["orders": orders])
        return AppDelivery(settings: settings, apns: nil, fcm: nil, http: [])
    }

    static func member(id: String = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234", platform: Platform = .ios,
                       provider: Receipt.Provider = .apns, token: String = String(repeating: "ab", count: 32)) -> AudienceMember {
        AudienceMember(id: id, platform: platform, token: token, sandbox: false, sdk: true, language: "en", timeZone: nil,
                       voipToken: nil, provider: provider)
    }

    static func job(_ json: String) throws -> Job {
        try Job.decode(Array(json.utf8))
    }

    @Test func templatesRenderWhatTheTreeRendersForRandomJobsDevicesAndProfiles() throws {
        var maker = JobMaker(random: SplitMix64(seed: 0x5EED_0019))
        var compared = 0
        var spliced = 0
        var jobs = 0
        while jobs < 150 {
            guard let job = try? Job.decode(maker.job().serializedBytes()) else { continue }
            jobs += 1
            for profile in PayloadProfile.allCases {
                let delivery = Self.app(profile)
                let templates = PushTemplates(seed: maker.random.next())
                // Times move forward through a run, a few seconds at a time, sometimes by hours.
                var now = Self.now
                for _ in 0..<24 {
                    let member = maker.member()
                    let token = job.kind == .voip && member.platform == .ios ? (member.voipToken ?? member.token) : member.token
                    let tree = PushRender.render(job, to: member, token: token, app: delivery.settings, now: now)
                    let template = templates.render(job, to: member, token: token, delivery: delivery, now: now)
                    #expect(template == tree, "job \(job.id) profile \(profile) member \(member) at \(now.seconds)")
                    compared += 1
                    now = Timestamp(seconds: now.seconds + Int64(maker.pick([0, 0, 0, 1, 2, 7200])))
                }
                spliced += templates.spliced
            }
        }
        // Most requests are spliced: the comparison is of templates, not of the fallback.
        #expect(compared == 150 * 4 * 24)
        #expect(spliced > compared / 2, "only \(spliced) of \(compared) spliced")
    }

    @Test func oneTemplateServesEveryDeviceOfAShape() throws {
        let job = try Self.job(#"{"schema":"herald.job.v1","id":"j1","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"content":{"title":"Sale","body":"Everything must go"}}"#)
        let delivery = Self.app(.sdk)
        let templates = PushTemplates(seed: 1)
        var maker = JobMaker(random: SplitMix64(seed: 2))
        for _ in 0..<1000 {
            var member = Self.member()
            member.id = "\(maker.hex(8))-\(maker.hex(4))-4\(maker.hex(3))-a\(maker.hex(3))-\(maker.hex(12))"
            member.token = maker.hex(64)
            #expect(templates.render(job, to: member, token: member.token, delivery: delivery, now: Self.now)
                == PushRender.render(job, to: member, token: member.token, app: delivery.settings, now: Self.now))
        }
        #expect(templates.made == 1)
        #expect(templates.spliced == 1000)
        #expect(templates.renderedAlone == 0)
    }

    @Test func aTimeToLiveCountedFromNowHoldsForItsSecondOnly() throws {
        let job = try Self.job(#"{"schema":"herald.job.v1","id":"j2","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z","expires_at":"2026-12-02T11:00:00Z","audience":{"all":true},"content":{"title":"T","body":"B"}}"#)
        let delivery = Self.app(.sdk)
        let templates = PushTemplates(seed: 3)
        let android = Self.member(platform: .android, provider: .fcm, token: "fcm-token-0123456789abcdef")
        for offset: Int64 in [0, 0, 1, 1, 2] {
            let now = Timestamp(seconds: Self.now.seconds + offset)
            #expect(templates.render(job, to: android, token: android.token, delivery: delivery, now: now)
                == PushRender.render(job, to: android, token: android.token, app: delivery.settings, now: now))
        }
        #expect(templates.made == 3)
        // APNs takes the expiry as a date: one template for the hour.
        let phone = Self.member()
        for offset: Int64 in [0, 1, 2, 3599] {
            _ = templates.render(job, to: phone, token: phone.token, delivery: delivery, now: Timestamp(seconds: Self.now.seconds + offset))
        }
        #expect(templates.made == 4)
    }

    /// Exactly `[A-Za-z0-9_:.-]` is splicable, byte by byte, in random strings of every byte.
    @Test func splicableIsExactlyLettersDigitsAndFourMarks() {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.-".utf8)
        for code in 0...255 {
            let byte = UInt8(code)
            let string = String(decoding: [UInt8(ascii: "a"), byte], as: UTF8.self)
            #expect(PushTemplates.splicable(string) == string.utf8.allSatisfy(allowed.contains), "byte \(code)")
        }
        var generator = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let length = Int(generator.next() % 40)
            let bytes = (0..<length).map { _ in generator.next() % 4 == 0 ? UInt8(truncatingIfNeeded: generator.next()) : Array(allowed)[Int(generator.next() % UInt64(allowed.count))] }
            let string = String(decoding: bytes, as: UTF8.self)
            #expect(PushTemplates.splicable(string) == string.utf8.allSatisfy(allowed.contains))
        }
        #expect(PushTemplates.splicable("") && PushTemplates.splicable("0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"))
        #expect(!PushTemplates.splicable("a/b") && !PushTemplates.splicable("é") && !PushTemplates.splicable("a b"))
    }

    @Test func idsAndTokensThatCannotBeSplicedRenderAlone() throws {
        let job = try Self.job(#"{"schema":"herald.job.v1","id":"j3","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"content":{"title":"T","body":"B"}}"#)
        let delivery = Self.app(.sdk)
        let templates = PushTemplates(seed: 4)
        for member in [Self.member(token: "short"), Self.member(platform: .android, provider: .fcm, token: String(repeating: "a/b\"", count: 10)),
                       Self.member(id: "id with spaces and more than sixteen bytes")] {
            #expect(templates.render(job, to: member, token: member.token, delivery: delivery, now: Self.now)
                == PushRender.render(job, to: member, token: member.token, app: delivery.settings, now: Self.now))
        }
        #expect(templates.renderedAlone == 3)
        #expect(templates.made == 0)
    }

    @Test func aJobThatContainsAMarkerRendersPerDevice() throws {
        let templates = PushTemplates(seed: 5)
        let member = Self.member()
        let marker = templates.marker(0, length: member.id.utf8.count)
        let job = try Self.job(#"{"schema":"herald.job.v1","id":"j4","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"content":{"title":"T","body":"\#(marker)"}}"#)
        let delivery = Self.app(.sdk)
        #expect(templates.render(job, to: member, token: member.token, delivery: delivery, now: Self.now)
            == PushRender.render(job, to: member, token: member.token, app: delivery.settings, now: Self.now))
        #expect(templates.spliced == 0)
        #expect(templates.renderedAlone == 1)
    }

    @Test func shortenedBodiesFollowTheLengthOfTheId() throws {
        let body = String(repeating: "Long news é🚀. ", count: 400)
        let job = try Self.job(#"{"schema":"herald.job.v1","id":"j5","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"content":{"title":"T","body":"\#(body)"}}"#)
        let delivery = Self.app(.openpush)
        let templates = PushTemplates(seed: 6)
        for id in ["0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234", "0b6c3a2e4f1d4a8e9c2b5d7e8f9012", "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234-extra-long-id"] {
            let member = Self.member(id: id)
            let expected = PushRender.render(job, to: member, token: member.token, app: delivery.settings, now: Self.now)
            #expect(templates.render(job, to: member, token: member.token, delivery: delivery, now: Self.now) == expected)
            guard case .apns(let notification) = expected else {
                Issue.record("not rendered: \(expected)")
                continue
            }
            #expect(notification.payload.count <= APNsPayload.maxBytes)
        }
        #expect(templates.made == 3)
    }

    @Test func anAppReadAgainStartsOver() throws {
        let job = try Self.job(#"{"schema":"herald.job.v1","id":"j6","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"content":{"title":"T","body":"B","channel":"orders"}}"#)
        let templates = PushTemplates(seed: 7)
        let member = Self.member(platform: .android, provider: .fcm, token: "fcm-token-0123456789abcdef")
        let first = Self.app(.sdk)
        _ = templates.render(job, to: member, token: member.token, delivery: first, now: Self.now)
        // The channel is renamed: the next read of the app is a new AppDelivery.
        var settings = first.settings
        settings.channels["orders"]?.name = "Parcels"
        let second = AppDelivery(settings: settings, apns: nil, fcm: nil, http: [])
        #expect(templates.render(job, to: member, token: member.token, delivery: second, now: Self.now)
            == PushRender.render(job, to: member, token: member.token, app: settings, now: Self.now))
        #expect(templates.made == 2)
    }
}
