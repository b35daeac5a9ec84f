import Testing
import HeraldCore

/// Builds job documents for tests: a valid notification job, with members replaced or removed.
enum JobFixture {
    static let base: [String: JSONValue] = [
        "schema": .string("herald.job.v1"),
        "id": .string("job-1"),
        "app_id": .string("demo"),
        "kind": .string("notification"),
        "created_at": .string("2026-12-02T10:00:00Z"),
        "audience": .object(["all": .bool(true)]),
        "content": .object(["title": .string("Hello"), "body": .string("World")]),
    ]

    static func job(_ changes: [String: JSONValue?] = [:]) -> [UInt8] {
        var members = base
        for (key, value) in changes { members[key] = value ?? nil }
        return JSONValue.object(members).serializedBytes()
    }

    static func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(text) }
}

@Suite struct JobTests {
    private func error(_ bytes: [UInt8]) -> String? {
        do {
            _ = try Job.decode(bytes)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func refusesUPlus0000WithItsPathInAFieldAndInAnUnknownMember() {
        // PostgreSQL's jsonb refuses \u0000 (SQLSTATE 22P05): caught here, with a path, before anything stores it.
        let inTitle = Array(#"{"schema":"herald.job.v1","id":"j","app_id":"demo","kind":"notification","created_at":"2026-12-02T10:00:00Z","audience":{"all":true},"content":{"title":"a\u0000b","body":"x"}}"#.utf8)
        #expect(error(inTitle) == "content.title: contains U+0000 (a NUL character), which Herald does not accept")
        let unknown = JobFixture.job(["future": .object(["note": .array([.string("ok"), .string("\u{0}")])])])
        #expect(error(unknown) == "future.note[1]: contains U+0000 (a NUL character), which Herald does not accept")
        let inName = JobFixture.job(["x\u{0}y": .bool(true)])
        #expect(error(inName)?.hasPrefix("x\\u0000y: member name contains U+0000") == true)
    }

    @Test func decodesAFullNotificationJob() throws {
        let job = try Job.decode(Array("""
        {"schema":"herald.job.v1","id":"spring-sale.42","app_id":"shop","kind":"notification",
         "created_at":"2026-12-02T10:00:00Z","expires_at":"2026-12-03T10:00:00Z","future_member":{"x":1},
         "audience":{"subscription_ids":["0B6C3A2E-4F1D-4A8E-9C2B-5D7E8F901234","0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"]},
         "content":{"title":"Sale","body":"Everything -20%","localized":{"fr":{"title":"Soldes"},"pt-BR":{"body":"Tudo"}},
           "data":{"order":42,"nested":[true]},"url":"shop://sale","image_url":"https://cdn.example.com/s.png",
           "buttons":[{"id":"buy","text":"Buy","url":"shop://buy"},{"id":"later","text":"Later"}],
           "sound":{"name":"alarm.caf","critical":true,"volume":0.5},"badge":3,"collapse_id":"sale",
           "channel":"promotions","interruption_level":"time-sensitive","relevance_score":0.8},
         "delivery":{"priority":"high","local_time":"09:00","same_day_only":true,"throttle_per_minute":6000}}
        """.utf8))
        #expect(job.id == "spring-sale.42")
        #expect(job.kind == .notification)
        #expect(job.audience == .subscriptionIDs(["0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"]))
        let content = try #require(job.content)
        #expect(content.buttons.map(\.id) == ["buy", "later"])
        #expect(content.sound == .critical(name: "alarm.caf", volume: 0.5))
        #expect(content.text(for: "fr").title == "Soldes")
        #expect(content.text(for: "fr").body == "Everything -20%")
        #expect(content.text(for: "pt-br").body == "Tudo")
        #expect(content.text(for: "pt-PT").title == "Sale")
        #expect(content.interruptionLevel == .timeSensitive)
        #expect(job.delivery.localTimeMinutes == 540)
        #expect(job.delivery.throttlePerMinute == 6000)
        #expect(job.isExpired(at: Timestamp(rfc3339: "2026-12-03T10:00:00Z")!))
        #expect(!job.isExpired(at: Timestamp(rfc3339: "2026-12-03T09:59:59Z")!))
    }

    @Test func ignoresUnknownMembersButNotUnknownVersionsOrKinds() {
        #expect(error(JobFixture.job(["brand_new_option": .bool(true)])) == nil)
        #expect(error(JobFixture.job(["schema": .string("herald.job.v2")]))
                == #"schema: unsupported schema "herald.job.v2" (this worker reads herald.job.v1)"#)
        #expect(error(JobFixture.job(["kind": .string("sms")])) == #"kind: must be one of "notification", "live_activity", "voip""#)
    }

    @Test(arguments: [
        (["id": JSONValue.string("bad id")], "id: must be 1–64 characters of A-Z a-z 0-9 . _ : -"),
        (["app_id": .string("Demo")], "app_id: must be a slug of 1–64 characters of a-z 0-9 _ -"),
        (["created_at": .string("2026-02-30T00:00:00Z")], "created_at: not an RFC 3339 timestamp (like 2026-12-02T17:34:19Z)"),
        (["expires_at": .null], "expires_at: expected an RFC 3339 timestamp string, got null"),
        (["audience": .object([:])], "audience: needs exactly one of subscription_ids, external_ids, filter, all"),
        (["audience": .object(["all": .bool(true), "external_ids": .array([.string("u1")])])], "audience: needs exactly one of subscription_ids, external_ids, filter, all"),
        (["audience": .object(["all": .bool(false)])], "audience.all: must be true"),
        (["audience": .object(["subscription_ids": .array([.string("nope")])])], "audience.subscription_ids[0]: must be a UUID like 0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"),
        (["content": .object(["subtitle": .string("only")])], "content: needs a title or a body (or content_available: true for a background push)"),
        (["content": .object(["body": .string("x"), "collapse_id": .string(String(repeating: "c", count: 65))])], "content.collapse_id: must be at most 64 characters"),
        (["content": .object(["body": .string("x"), "collapse_id": .string(String(repeating: "é", count: 40))])], "content.collapse_id: must be at most 64 bytes of UTF-8"),
        (["content": .object(["body": .string("x"), "badge": .int(-1)])], "content.badge: must be between 0 and 99999"),
        (["content": .object(["body": .string("x"), "relevance_score": .double(1.5)])], "content.relevance_score: must be between 0 and 1"),
        (["content": .object(["body": .string("x"), "image_url": .string("file:///etc/passwd")])], "content.image_url: must be an http or https URL"),
        (["content": .object(["body": .string("x"), "localized": .object(["english": .object([:])])])], "content.localized.english: must be a language tag like en or pt-BR"),
        (["content": .object(["body": .string("x"), "channel": .string("Promo")])], "content.channel: must be a slug of 1–64 characters of a-z 0-9 _ -"),
        (["content": nil], "content: is required"),
        (["audience": nil], "audience: is required"),
        (["delivery": .object(["local_time": .string("9:00")])], "delivery.local_time: must be a time of day HH:MM, 00:00 to 23:59"),
        (["delivery": .object(["local_time": .string("09:00"), "best_hour": .bool(true)])], "delivery: local_time and best_hour cannot be combined"),
        (["delivery": .object(["throttle_per_minute": .int(0)])], "delivery.throttle_per_minute: must be between 1 and 100000000"),
    ] as [([String: JSONValue?], String)])
    func refusesWithPathAndReason(changes: [String: JSONValue?], expected: String) {
        #expect(error(JobFixture.job(changes)) == expected)
    }

    @Test func limitsButtonsAndExplicitIDs() {
        let button = JSONValue.object(["id": .string("b"), "text": .string("B")])
        #expect(error(JobFixture.job(["content": .object(["body": .string("x"), "buttons": .array(Array(repeating: button, count: 4))])]))
                == "content.buttons[3]: at most 3 buttons")
        let ids = (0...10_000).map { JSONValue.string("u\($0)") }
        #expect(error(JobFixture.job(["audience": .object(["external_ids": .array(ids)])])) == "audience.external_ids[10000]: at most 10000 external ids")
        #expect(error(JobFixture.job(["audience": .object(["external_ids": .array(Array(ids.prefix(10_000)))])])) == nil)
    }

    @Test func refusesJobsOverTheSizeLimit() {
        let big = JobFixture.job(["content": .object(["body": .string(String(repeating: "x", count: 300_000))])])
        #expect(error(big) == "job is \(big.count) bytes, larger than the limit of 262144 bytes")
    }

    @Test func liveActivityRules() throws {
        let update: JSONValue = .object([
            "activity_id": .string("order-42"), "event": .string("update"), "stream_id": .string("s1"),
            "sequence": .int(7), "content_state": .object(["eta": .int(5)]),
        ])
        let job = try Job.decode(JobFixture.job(["kind": .string("live_activity"), "content": nil, "audience": nil, "live_activity": update]))
        #expect(job.liveActivity?.priority == 5)
        #expect(job.liveActivity?.sequence == 7)
        #expect(job.audience == nil)

        var start = update.objectValue ?? [:]
        start["event"] = .string("start")
        #expect(error(JobFixture.job(["kind": .string("live_activity"), "content": nil, "live_activity": .object(start)]))
                == "live_activity.alert: is required for event start")
        start["alert"] = .object(["title": .string("On its way"), "body": .string("ETA 5 min")])
        start["attributes_type"] = .string("DeliveryAttributes")
        start["attributes"] = .object(["order": .string("42")])
        #expect(error(JobFixture.job(["kind": .string("live_activity"), "content": nil, "audience": nil, "live_activity": .object(start)]))
                == "audience: is required for event start")
        let started = try Job.decode(JobFixture.job(["kind": .string("live_activity"), "content": nil, "live_activity": .object(start)]))
        #expect(started.liveActivity?.priority == 10)
        start["priority"] = .int(7)
        #expect(error(JobFixture.job(["kind": .string("live_activity"), "content": nil, "live_activity": .object(start)])) == "live_activity.priority: must be 5 or 10")
        start["priority"] = .int(5)
        start["sequence"] = .int(-1)
        #expect(error(JobFixture.job(["kind": .string("live_activity"), "content": nil, "live_activity": .object(start)])) == "live_activity.sequence: must be between 0 and 9007199254740991")
    }

    @Test func voipRules() throws {
        let job = try Job.decode(JobFixture.job(["kind": .string("voip"), "content": nil,
                                                 "voip": .object(["data": .object(["caller": .string("Ada")]), "ttl_s": .int(30)])]))
        #expect(job.voip?.data == ["caller": "Ada"])
        #expect(job.voip?.ttlSeconds == 30)
        #expect(error(JobFixture.job(["kind": .string("voip"), "content": nil, "voip": .object(["data": .object(["n": .int(1)])])]))
                == "voip.data.n: expected a string, got number")
    }
}
