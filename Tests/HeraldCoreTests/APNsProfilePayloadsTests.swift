@testable import HeraldCore
import Testing

@Suite struct APNsProfilePayloadsTests {
    static func content(_ members: String) throws -> NotificationContent {
        let job = try Job.decode(Array(#"""
        {"schema":"herald.job.v1","id":"j:1","app_id":"a","kind":"notification","created_at":"2026-12-02T10:00:00Z",
         "audience":{"all":true},"content":{\#(members)}}
        """#.utf8))
        return try #require(job.content)
    }

    @Test func theOpenPushMessageIDSplitsBackAtTheFirstColon() {
        let id = APNsPayload.openPushMessageID(jobID: "order:shipped:8f", subscriptionID: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234")
        let parts = id.split(separator: ":", maxSplits: 1)
        #expect(parts.first == "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234")
        #expect(parts.last == "order:shipped:8f")
    }

    @Test func pushbibDataPrefersTheJobsExplicitFields() throws {
        let explicit = try Self.content(#""title":"T","url":"app://a","show_foreground":true,"data":{"url":"app://b","showForeground":false,"n":1}"#)
        let data = APNsPayload.pushbibData(explicit, background: false)
        #expect(data["url"] == .string("app://a"))
        #expect(data["showForeground"] == .bool(true))
        #expect(data["n"] == .int(1))
        // A data member stays when the job leaves the field unset.
        let fromData = try Self.content(#""title":"T","data":{"url":"app://b","showBackground":true}"#)
        #expect(APNsPayload.pushbibData(fromData, background: false)["url"] == .string("app://b"))
        // A background push is silent unless the job says otherwise.
        let background = APNsPayload.pushbibData(fromData, background: true)
        #expect(background["showForeground"] == .bool(false))
        #expect(background["showBackground"] == .bool(true))
        // Data that is not an object travels under `data`.
        let list = try Self.content(#""title":"T","data":[1,2]"#)
        #expect(APNsPayload.pushbibData(list, background: false)["data"] == .array([.int(1), .int(2)]))
    }

    @Test func openPushTruncationMarksItsOwnKey() throws {
        let long = try Self.content(#""title":"T","body":"\#(String(repeating: "é", count: 3000))""#)
        let rendered = try APNsPayload.notification(long, for: .init(jobID: "j:1", subscriptionID: "s", dialect: .openpush))
        #expect(rendered.truncated)
        let payload = try JSONValue.parse(rendered.bytes)
        #expect(payload["op_render_truncated"] == .string("1"))
        #expect(payload["herald"] == nil)
        #expect(rendered.bytes.count <= APNsPayload.maxBytes)
    }

    @Test func pushbibVoIPIsTheDataPlusItsMarker() throws {
        let rendered = try APNsPayload.voip(data: ["call_id": "c1", "pushbib_voip": "0", "aps": "x"],
                                            for: .init(jobID: "j", subscriptionID: "s", dialect: .pushbib))
        let payload = try JSONValue.parse(rendered.bytes)
        #expect(payload == .object(["aps": .object([:]), "call_id": .string("c1"), "pushbib_voip": .string("1")]))
    }

    @Test func openPushNeverSendsAnOpAPNsKeyEvenFromRawOverrides() throws {
        let content = try Self.content(#""title":"T","apns":{"op_apns_sound":"x","op_apns":1,"aps":{"badge":2},"custom":"kept"}"#)
        let rendered = try APNsPayload.notification(content, for: .init(jobID: "j:1", subscriptionID: "s", dialect: .openpush))
        let payload = try JSONValue.parse(rendered.bytes)
        #expect(payload["op_apns_sound"] == nil && payload["op_apns"] == nil)
        #expect(payload["aps"]?["badge"] == .int(2) && payload["custom"] == .string("kept"))
    }
}
