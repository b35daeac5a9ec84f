import HeraldCore
import Testing

@Suite struct APNsPayloadTests {
    static let subscription = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"

    private func content(_ members: [String: JSONValue]) throws -> NotificationContent {
        let job = try Job.decode(JobFixture.job(["content": .object(members)]))
        return try #require(job.content)
    }

    private func recipient(_ language: String? = nil) -> APNsPayload.Recipient {
        APNsPayload.Recipient(jobID: "job-1", subscriptionID: APNsPayloadTests.subscription, language: language)
    }

    private func json(_ rendered: APNsPayload.Rendered) throws -> JSONValue {
        try JSONValue.parse(rendered.bytes)
    }

    @Test func rendersEveryContentField() throws {
        let content = try content(try JSONValue.parse("""
        {"title":"Shipped","subtitle":"Order 4821","body":"On its way","data":{"order_id":4821,"tags":["a"]},
         "url":"shop://orders/4821","image_url":"https://cdn.example.com/p.jpg",
         "buttons":[{"id":"track","text":"Track","url":"https://example.com/t"},{"id":"later","text":"Later"}],
         "sound":{"name":"alarm.caf","critical":true,"volume":0.5},"badge":3,"thread_id":"orders",
         "interruption_level":"time-sensitive","relevance_score":0.8}
        """).objectValue ?? [:])
        let rendered = try APNsPayload.notification(content, for: recipient())
        #expect(!rendered.truncated && !rendered.isBackground)
        let expected = #"{"aps":{"alert":{"body":"On its way","subtitle":"Order 4821","title":"Shipped"},"badge":3,"#
            + #""category":"herald:track,later","interruption-level":"time-sensitive","mutable-content":1,"relevance-score":0.8,"#
            + #""sound":{"critical":1,"name":"alarm.caf","volume":0.5},"thread-id":"orders"},"#
            + #""herald":{"buttons":[{"id":"track","text":"Track","url":"https://example.com/t"},{"id":"later","text":"Later"}],"#
            + #""data":{"order_id":4821,"tags":["a"]},"id":"job-1","image_url":"https://cdn.example.com/p.jpg","#
            + #""sub":"0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234","url":"shop://orders/4821"}}"#
        #expect(String(decoding: rendered.bytes, as: UTF8.self) == expected)
        // Deterministic: the same input gives the same bytes.
        #expect(try APNsPayload.notification(content, for: recipient()).bytes == rendered.bytes)
    }

    @Test func namedSoundExplicitCategoryAndContentAvailableOnAnAlert() throws {
        let content = try content(["body": .string("Hi"), "sound": .string("default"), "category": .string("CHAT"),
                                   "buttons": .array([.object(["id": .string("reply"), "text": .string("Reply")])]),
                                   "content_available": .bool(true)])
        let aps = try json(try APNsPayload.notification(content, for: recipient()))["aps"]
        #expect(aps?["sound"] == .string("default"))
        #expect(aps?["category"] == .string("CHAT"))
        #expect(aps?["content-available"] == .int(1))
        #expect(aps?["mutable-content"] == .int(1))
    }

    @Test func backgroundPushCarriesOnlyContentAvailable() throws {
        let content = try content(["content_available": .bool(true), "data": .object(["sync": .bool(true)]), "badge": .int(2),
                                   "thread_id": .string("t"), "sound": .string("default")])
        let rendered = try APNsPayload.notification(content, for: recipient())
        #expect(rendered.isBackground)
        let payload = try json(rendered)
        #expect(payload["aps"] == .object(["content-available": .int(1)]))
        #expect(payload["herald"]?["data"] == .object(["sync": .bool(true)]))
    }

    @Test func localizationFallsBackMemberByMember() throws {
        let content = try content(try JSONValue.parse("""
        {"title":"Sale","subtitle":"Today","body":"Everything -20%","localized":{"fr":{"title":"Soldes"},"pt":{"body":"Tudo -20%"}}}
        """).objectValue ?? [:])
        let french = try json(try APNsPayload.notification(content, for: recipient("fr-CA")))["aps"]?["alert"]
        #expect(french == .object(["title": .string("Soldes"), "subtitle": .string("Today"), "body": .string("Everything -20%")]))
        let portuguese = try json(try APNsPayload.notification(content, for: recipient("pt-BR")))["aps"]?["alert"]
        #expect(portuguese?["body"] == .string("Tudo -20%"))
        #expect(portuguese?["title"] == .string("Sale"))
        let german = try json(try APNsPayload.notification(content, for: recipient("de")))["aps"]?["alert"]
        #expect(german?["title"] == .string("Sale"))
    }

    @Test func rawAPNsObjectIsMergedLast() throws {
        let content = try content(["body": .string("Hi"), "badge": .int(1),
                                   "apns": .object(["aps": .object(["badge": .int(9), "target-content-id": .string("w")]), "extra": .string("x")])])
        let payload = try json(try APNsPayload.notification(content, for: recipient()))
        #expect(payload["aps"]?["badge"] == .int(9))
        #expect(payload["aps"]?["target-content-id"] == .string("w"))
        #expect(payload["aps"]?["alert"]?["body"] == .string("Hi"))
        #expect(payload["extra"] == .string("x"))
    }

    /// Truncation keeps whole characters and lands on the limit: one more character would not fit.
    @Test(arguments: ["🎉", "👩‍👩‍👧‍👦", "漢", "é", "a"])
    func truncatesMultiByteTextToTheLimit(unit: String) throws {
        let body = String(repeating: unit, count: 5000)
        let content = try content(["title": .string("T"), "body": .string(body)])
        let rendered = try APNsPayload.notification(content, for: recipient())
        #expect(rendered.truncated)
        #expect(rendered.bytes.count <= APNsPayload.maxBytes)
        let payload = try json(rendered)  // parses: UTF-8 intact
        #expect(payload["herald"]?["truncated"] == .string("1"))
        let shortened = try #require(payload["aps"]?["alert"]?["body"]?.stringValue)
        #expect(shortened.hasSuffix(APNsPayload.ellipsis))
        let kept = shortened.dropLast()
        #expect(kept.allSatisfy { String($0) == unit })
        // Exactly at the limit: one more character would overflow it.
        #expect(rendered.bytes.count + unit.utf8.count > APNsPayload.maxBytes)
    }

    @Test func truncatesToAnExplicitLimitExactly() throws {
        let content = try content(["body": .string(String(repeating: "ab", count: 100))])
        let rendered = try APNsPayload.notification(content, for: recipient(), limit: 200)
        #expect(rendered.bytes.count == 200 || rendered.bytes.count == 199)
        #expect(rendered.bytes.count + 1 > 200)
    }

    @Test func oversizedDataFailsWithPayloadTooLarge() throws {
        let content = try content(["body": .string("Hi"), "data": .object(["blob": .string(String(repeating: "x", count: 5000))])])
        #expect(throws: APNsPayload.Failure.self) { try APNsPayload.notification(content, for: recipient()) }
        do {
            _ = try APNsPayload.notification(content, for: recipient())
        } catch {
            #expect(error.reason == .payloadTooLarge)
            #expect(error.limit == 4096)
        }
    }

    @Test func voipAllows5120Bytes() throws {
        let fits = ["blob": String(repeating: "v", count: 4900)]
        let rendered = try APNsPayload.voip(data: fits, for: recipient())
        #expect(rendered.bytes.count > APNsPayload.maxBytes && rendered.bytes.count <= APNsPayload.maxVoIPBytes)
        let payload = try json(rendered)
        #expect(payload["aps"] == .object([:]))
        #expect(payload["herald"]?["data"]?["blob"]?.stringValue?.count == 4900)
        // Issue 9: the VoIP marker beside the data.
        #expect(payload["herald"]?["voip"] == .string("1"))
        let tooBig = ["blob": String(repeating: "v", count: 5200)]
        #expect(throws: APNsPayload.Failure.self) { try APNsPayload.voip(data: tooBig, for: recipient()) }
    }

    @Test func liveActivityStartCarriesAttributesAndAlert() throws {
        let job = try Job.decode(JobFixture.job([
            "kind": .string("live_activity"), "content": nil,
            "live_activity": try JSONValue.parse("""
            {"activity_id":"a1","event":"start","stream_id":"s1","sequence":3,"content_state":{"eta":9},
             "alert":{"title":"On its way","body":"9 min","sound":"chime"},"attributes_type":"DeliveryAttributes",
             "attributes":{"r":"Nova"},"stale_date":"2026-12-02T11:00:00Z","relevance_score":50}
            """),
        ]))
        let update = try #require(job.liveActivity)
        let payload = try JSONValue.parse(try APNsPayload.liveActivity(update, jobID: job.id, timestamp: 1_796_235_667).bytes)
        let aps = payload["aps"]
        #expect(aps?["timestamp"] == .int(1_796_235_667))
        #expect(aps?["event"] == .string("start"))
        #expect(aps?["content-state"] == .object(["eta": .int(9)]))
        #expect(aps?["alert"] == .object(["title": .string("On its way"), "body": .string("9 min"), "sound": .string("chime")]))
        #expect(aps?["attributes-type"] == .string("DeliveryAttributes"))
        #expect(aps?["stale-date"] == .int(Timestamp(rfc3339: "2026-12-02T11:00:00Z")?.seconds ?? 0))
        #expect(aps?["relevance-score"] == .int(50))
        #expect(aps?["input-push-token"] == .int(1))
        #expect(payload["herald"] == .object(["id": .string("job-1")]))
    }

    /// Issue 9: update and end carry neither the start-only keys nor `input-push-token`; end
    /// carries its dismissal date; the timestamp is the one given.
    @Test func liveActivityUpdateAndEndCarryOnlyTheirKeys() throws {
        for event in ["update", "end"] {
            let job = try Job.decode(JobFixture.job([
                "kind": .string("live_activity"), "content": nil, "audience": nil,
                "live_activity": try JSONValue.parse("""
                {"activity_id":"a1","event":"\(event)","stream_id":"s1","sequence":4,"content_state":{"eta":3},
                 "attributes_type":"DeliveryAttributes","attributes":{"r":"Nova"},"dismissal_date":"2026-12-02T12:00:00Z"}
                """),
            ]))
            let update = try #require(job.liveActivity)
            #expect(update.priority == (event == "update" ? 5 : 10))
            let aps = try JSONValue.parse(try APNsPayload.liveActivity(update, jobID: job.id, timestamp: 1_796_000_001).bytes)["aps"]
            #expect(aps?["event"] == .string(event))
            #expect(aps?["timestamp"] == .int(1_796_000_001))
            #expect(aps?["content-state"] == .object(["eta": .int(3)]))
            #expect(aps?["dismissal-date"] == .int(Timestamp(rfc3339: "2026-12-02T12:00:00Z")?.seconds ?? 0))
            #expect(aps?["attributes-type"] == nil && aps?["attributes"] == nil && aps?["input-push-token"] == nil && aps?["alert"] == nil)
        }
    }
}
