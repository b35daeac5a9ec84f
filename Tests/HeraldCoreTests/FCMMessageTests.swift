@testable import HeraldCore
import Testing

@Suite struct FCMMessageTests {
    static let now = Timestamp(seconds: 1_796_205_600) // 2026-12-02T10:00:00Z

    /// A notification job with `content` (JSON members) and optional `expires_at`/`delivery`.
    static func job(_ content: String, extra: String = "") throws -> Job {
        try Job.decode(Array(#"""
        {"schema":"herald.job.v1","id":"order-shipped:8f3a2c","app_id":"shop","kind":"notification",
         "created_at":"2026-12-02T10:00:00Z","audience":{"all":true},"content":{\#(content)}\#(extra)}
        """#.utf8))
    }

    static func render(_ job: Job, mode: FCMMessage.Mode, channel: JSONValue? = nil, language: String? = nil) throws -> (FCMMessage.Rendered, JSONValue) {
        let content = try #require(job.content)
        let rendered = try FCMMessage.render(jobID: job.id, content: content, expiresAt: job.expiresAt, priority: job.delivery.priority,
                                             target: .init(token: "device-token", mode: mode, language: language, channel: channel), now: now)
        let message = try #require(try JSONValue.parse(rendered.body)["message"])
        return (rendered, message)
    }

    @Test func sdkMessagesAreDataOnlyWithStringValues() throws {
        let job = try Self.job(#"""
        "title":"Your order has shipped","body":"It is on its way","image_url":"https://cdn.example.com/p.jpg",
        "url":"shop://orders/4821","data":{"queries":{"featureId":205},"flag":true,"note":"{\"Status\":{\"Id\":3}}"},
        "buttons":[{"id":"track","text":"Track","url":"https://example.com/t"}],"channel":"order-updates",
        "collapse_id":"order-4821","show_foreground":false,"show_background":true
        """#)
        let (rendered, message) = try Self.render(job, mode: .sdk, channel: .object(["id": .string("order-updates"), "importance": .string("high")]))
        #expect(message["notification"] == nil)
        #expect(message["token"] == .string("device-token"))
        let data = try #require(message["data"]?.objectValue)
        for (key, value) in data {
            #expect(value.stringValue != nil, "\(key) is not a string")
            #expect(!FCMMessage.isReserved(key))
        }
        #expect(data["herald_id"] == .string("order-shipped:8f3a2c"))
        #expect(data["title"] == .string("Your order has shipped"))
        #expect(data["body"] == .string("It is on its way"))
        #expect(data["image_url"] == .string("https://cdn.example.com/p.jpg"))
        #expect(data["url"] == .string("shop://orders/4821"))
        #expect(data["collapse_id"] == .string("order-4821"))
        #expect(data["show_foreground"] == .string("false"))
        #expect(data["show_background"] == .string("true"))
        #expect(data["truncated"] == nil)
        #expect(!rendered.truncated)

        // Types round-trip through the one JSON string.
        let appData = try JSONValue.parse(try #require(data["data"]?.stringValue))
        #expect(appData["queries"]?["featureId"] == .int(205))
        #expect(appData["flag"] == .bool(true))
        #expect(appData["note"] == .string(#"{"Status":{"Id":3}}"#))
        let buttons = try JSONValue.parse(try #require(data["buttons"]?.stringValue))
        #expect(buttons.arrayValue?.first?["url"] == .string("https://example.com/t"))
        let channel = try JSONValue.parse(try #require(data["channel"]?.stringValue))
        #expect(channel["importance"] == .string("high"))

        #expect(message["android"]?["priority"] == .string("high"))
        #expect(message["android"]?["collapse_key"] == .string("order-4821"))
    }

    @Test func plainMessagesUseNotificationAndTag() throws {
        let job = try Self.job(#"""
        "title":"Hi","body":"There","image_url":"https://cdn.example.com/p.jpg","url":"shop://x","data":{"n":1},
        "channel":"news","sound":"parcel","category":"OPEN_ORDER","buttons":[{"id":"a","text":"A"}],"show_foreground":true
        """#)
        let (_, message) = try Self.render(job, mode: .plain)
        #expect(message["notification"] == .object(["title": .string("Hi"), "body": .string("There"), "image": .string("https://cdn.example.com/p.jpg")]))
        let notification = try #require(message["android"]?["notification"])
        #expect(notification["channel_id"] == .string("news"))
        #expect(notification["tag"] == .string("order-shipped:8f3a2c"))
        #expect(notification["sound"] == .string("parcel"))
        #expect(notification["click_action"] == .string("OPEN_ORDER"))
        #expect(message["data"] == .object(["herald_id": .string("order-shipped:8f3a2c"), "url": .string("shop://x"), "data": .string(#"{"n":1}"#)]))
        // No collapse key unless the job asks for one.
        #expect(message["android"]?["collapse_key"] == nil)

        let collapsing = try Self.job(#""title":"Hi","collapse_id":"score""#)
        let (_, collapsed) = try Self.render(collapsing, mode: .plain)
        #expect(collapsed["android"]?["notification"]?["tag"] == .string("score"))
        #expect(collapsed["android"]?["collapse_key"] == .string("score"))
    }

    @Test func priorityAndTTL() throws {
        let alert = try Self.job(#""title":"Hi""#, extra: #","expires_at":"2026-12-02T11:00:00Z""#)
        let (_, message) = try Self.render(alert, mode: .sdk)
        #expect(message["android"]?["priority"] == .string("high"))
        #expect(message["android"]?["ttl"] == .string("3600s"))

        let background = try Self.job(#""content_available":true"#)
        #expect(try Self.render(background, mode: .sdk).1["android"]?["priority"] == .string("normal"))
        let normal = try Self.job(#""title":"Hi""#, extra: #","delivery":{"priority":"normal"}"#)
        #expect(try Self.render(normal, mode: .sdk).1["android"]?["priority"] == .string("normal"))

        let content = try #require(alert.content)
        let far = try FCMMessage.render(jobID: "j", content: content, expiresAt: Timestamp(seconds: Self.now.seconds + 90 * 86_400), priority: nil,
                                        target: .init(token: "t", mode: .sdk), now: Self.now)
        #expect(try JSONValue.parse(far.body)["message"]?["android"]?["ttl"] == .string("2419200s"))
        let past = try FCMMessage.render(jobID: "j", content: content, expiresAt: Timestamp(seconds: Self.now.seconds - 10), priority: nil,
                                         target: .init(token: "t", mode: .sdk), now: Self.now)
        #expect(try JSONValue.parse(past.body)["message"]?["android"]?["ttl"] == .string("0s"))
        let hour = try FCMMessage.render(jobID: "j", content: content, expiresAt: Timestamp(seconds: Self.now.seconds + 3600), priority: nil,
                                         target: .init(token: "t", mode: .sdk), now: Self.now)
        #expect(try JSONValue.parse(hour.body)["message"]?["android"]?["ttl"] == .string("3600s"))
    }

    @Test(arguments: FCMMessage.Mode.allCases) func truncatesMultiByteBodiesAtCharacterBoundaries(mode: FCMMessage.Mode) throws {
        let body = String(repeating: "é日本🇫🇷", count: 400) // 2 + 3 + 3 + 8 bytes per round
        let job = try Self.job(#""title":"T","body":"\#(body)""#)
        let (rendered, message) = try Self.render(job, mode: mode)
        #expect(rendered.truncated)
        #expect(rendered.payloadBytes <= FCMMessage.maxPayloadBytes)
        #expect(rendered.payloadBytes > FCMMessage.maxPayloadBytes - 16)
        let location: JSONValue? = switch mode {
        case .sdk, .pushbib: message["data"]?["body"]
        case .plain: message["notification"]?["body"]
        case .ios: message["apns"]?["payload"]?["aps"]?["alert"]?["body"]
        }
        let shortened = try #require(location?.stringValue)
        #expect(shortened.hasSuffix("…"))
        #expect(body.hasPrefix(String(shortened.dropLast())))
        if mode == .sdk || mode == .pushbib { #expect(message["data"]?["truncated"] == .string("1")) }
    }

    @Test func tooLargeWithoutABodyToShorten() throws {
        let big = String(repeating: "x", count: 4000)
        let job = try Self.job(#""title":"T","body":"b","data":{"blob":"\#(big)","more":"\#(big)"}"#)
        #expect(throws: FCMMessage.Failure.self) { try Self.render(job, mode: .sdk) }
        do {
            _ = try Self.render(job, mode: .sdk)
        } catch let failure as FCMMessage.Failure {
            #expect(failure.reason == .payloadTooLarge)
        }
    }

    @Test func deterministicBytesAndLocalizedText() throws {
        let job = try Self.job(#""title":"Hi","body":"Hello","localized":{"fr":{"title":"Salut"}},"data":{"b":1,"a":[1,2]}"#)
        let first = try Self.render(job, mode: .sdk, language: "fr-CA")
        let second = try Self.render(job, mode: .sdk, language: "fr-CA")
        #expect(first.0.body == second.0.body)
        #expect(first.1["data"]?["title"] == .string("Salut"))
        #expect(first.1["data"]?["body"] == .string("Hello"))
        #expect(first.1["data"]?["data"] == .string(#"{"a":[1,2],"b":1}"#))
    }

    @Test func voipIsHighPriorityDataOnly() throws {
        let job = try Job.decode(Array(#"""
        {"schema":"herald.job.v1","id":"call.7","app_id":"shop","kind":"voip","created_at":"2026-12-02T10:00:00Z",
         "audience":{"all":true},"voip":{"data":{"caller":"Ada","room":"42"},"ttl_s":30}}
        """#.utf8))
        let voip = try #require(job.voip)
        let rendered = try FCMMessage.render(jobID: job.id, voip: voip, expiresAt: nil, target: .init(token: "t", mode: .sdk), now: Self.now)
        let message = try #require(try JSONValue.parse(rendered.body)["message"])
        #expect(message["notification"] == nil)
        #expect(message["android"] == .object(["priority": .string("high"), "ttl": .string("30s")]))
        #expect(message["data"] == .object(["herald_id": .string("call.7"), "voip": .string("1"), "data": .string(#"{"caller":"Ada","room":"42"}"#)]))
    }

    @Test func prefixNeverSplitsAUTF8Sequence() {
        #expect(FCMMessage.prefix(of: "aé日", maxBytes: 2) == "a")
        #expect(FCMMessage.prefix(of: "aé日", maxBytes: 3) == "aé")
        #expect(FCMMessage.prefix(of: "aé日", maxBytes: 5) == "aé")
        #expect(FCMMessage.prefix(of: "aé日", maxBytes: 6) == "aé日")
    }

    static func liveJob(_ liveActivity: String, extra: String = "") throws -> Job {
        try Job.decode(Array("""
        {"schema":"herald.job.v1","id":"ride-7:update:4","app_id":"shop","kind":"live_activity","created_at":"2026-12-02T10:00:00Z",
         "live_activity":\(liveActivity)\(extra)}
        """.utf8))
    }

    /// Issue 9: an Android live update is a data message with the action, ids, sequence,
    /// content state as a JSON string, the optional alert, `collapse_key` = activity id.
    @Test func liveUpdateCarriesItsFields() throws {
        var job = try Self.liveJob(#"""
        {"activity_id":"ride-7","event":"update","stream_id":"session-2","sequence":4,"content_state":{"eta":3,"driver":"Ada"},
         "alert":{"title":"Almost there","body":"3 minutes"},"stale_date":"2026-12-02T11:00:00Z"}
        """#, extra: #","expires_at":"2026-12-02T11:00:00Z""#)
        job.liveActivity?.timestamp = 1_796_205_590
        let update = try #require(job.liveActivity)
        let rendered = try FCMMessage.render(jobID: job.id, liveActivity: update, expiresAt: job.expiresAt,
                                             target: .init(token: "device-token", mode: .sdk), now: Self.now)
        let message = try #require(try JSONValue.parse(rendered.body)["message"])
        #expect(message["token"] == .string("device-token"))
        #expect(message["notification"] == nil)
        #expect(message["android"] == .object(["priority": .string("normal"), "collapse_key": .string("ride-7"), "ttl": .string("3600s")]))
        let data = try #require(message["data"]?.objectValue)
        #expect(data["live_update"] == .string("UPDATE"))
        #expect(data["activity_id"] == .string("ride-7"))
        #expect(data["stream_id"] == .string("session-2"))
        #expect(data["sequence"] == .string("4"))
        #expect(data["content_state"] == .string(#"{"driver":"Ada","eta":3}"#))
        #expect(data["alert"] == .string(#"{"body":"3 minutes","title":"Almost there"}"#))
        #expect(data["herald_id"] == .string("ride-7:update:4"))
        #expect(data["timestamp"] == .string("1796205590"))
        #expect(data["stale_date"] == .string(String(Timestamp(rfc3339: "2026-12-02T11:00:00Z")?.seconds ?? 0)))
        #expect(data.values.allSatisfy { $0.stringValue != nil })
    }

    /// Start and end are high priority; start carries its attributes; no alert, no key.
    @Test func liveStartAndEndAreHighPriority() throws {
        let start = try #require(try Self.liveJob(#"""
        {"activity_id":"ride-7","event":"start","stream_id":"s","sequence":1,"content_state":{},"alert":{"title":"Ride","body":"Booked"},
         "attributes_type":"RideAttributes","attributes":{"car":"blue"}}
        """#, extra: #","audience":{"all":true}"#).liveActivity)
        var message = try JSONValue.parse(try FCMMessage.render(jobID: "j", liveActivity: start, expiresAt: nil,
                                                                 target: .init(token: "t", mode: .plain), now: Self.now).body)["message"]
        #expect(message?["android"]?["priority"] == .string("high"))
        #expect(message?["data"]?["live_update"] == .string("START"))
        #expect(message?["data"]?["attributes_type"] == .string("RideAttributes"))
        #expect(message?["data"]?["attributes"] == .string(#"{"car":"blue"}"#))
        let end = try #require(try Self.liveJob(#"{"activity_id":"ride-7","event":"end","stream_id":"s","sequence":9,"content_state":{"done":true}}"#).liveActivity)
        message = try JSONValue.parse(try FCMMessage.render(jobID: "j", liveActivity: end, expiresAt: nil,
                                                             target: .init(token: "t", mode: .sdk), now: Self.now).body)["message"]
        #expect(message?["android"]?["priority"] == .string("high"))
        #expect(message?["data"]?["live_update"] == .string("END"))
        #expect(message?["data"]?["alert"] == nil && message?["data"]?["attributes"] == nil)
        let big = try #require(try Self.liveJob(#"{"activity_id":"r","event":"update","stream_id":"s","sequence":2,"content_state":{"x":"\#(String(repeating: "y", count: 4100))"}}"#).liveActivity)
        #expect(throws: FCMMessage.Failure.self) {
            try FCMMessage.render(jobID: "j", liveActivity: big, expiresAt: nil, target: .init(token: "t", mode: .sdk), now: Self.now)
        }
    }

    /// Issue 9: a plain notification names the app's versioned Android channel id; the SDK gets
    /// the whole definition.
    @Test func channelIDAndDefinition() throws {
        let job = try Self.job(#""title":"Hi","channel":"orders""#)
        var channel = NotificationChannel(key: "orders", name: "Orders", version: 3)
        channel.importance = .high
        let (_, plain) = try Self.render(job, mode: .plain, channel: channel.definition)
        #expect(plain["android"]?["notification"]?["channel_id"] == .string("nf_orders_v3"))
        let (_, sdk) = try Self.render(job, mode: .sdk, channel: channel.definition)
        let definition = try JSONValue.parse(Array((sdk["data"]?["channel"]?.stringValue ?? "").utf8))
        #expect(definition == channel.definition)
        #expect(definition["id"] == .string("nf_orders_v3") && definition["importance"] == .string("high"))
    }

    @Test func validatingOnlyAddsTheFlagBesideTheMessage() throws {
        let (rendered, _) = try Self.render(try Self.job(#""title":"T""#), mode: .sdk)
        let checked = rendered.validatingOnly
        let json = try JSONValue.parse(checked.body)
        #expect(json["validate_only"] == .bool(true))
        #expect(json["message"] == (try JSONValue.parse(rendered.body))["message"])
        #expect(checked.payloadBytes == rendered.payloadBytes)
    }
}
