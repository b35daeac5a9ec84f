import Testing
import HeraldCore

@Suite struct DeviceEventTests {
    @Test func roundTripsAndDedupesOnTypeJobSubscriptionAction() throws {
        let event = DeviceEvent(type: .clicked, jobID: "job-1", appID: "demo", subscriptionID: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234",
                                actionID: "buy", at: Timestamp(seconds: 1_796_232_859))
        #expect(try DeviceEvent.decode(event.json.serializedBytes()) == event)
        #expect(event.dedupeKey == "clicked:job-1:0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234:buy")
        var body = event
        body.actionID = nil
        #expect(body.dedupeKey != event.dedupeKey)
    }

    @Test func anActionIDNamesAButtonOnlyOnAClick() throws {
        let bytes = Array(#"{"schema":"herald.device-event.v1","type":"confirmed","job_id":"j","app_id":"a","subscription_id":"0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234","action_id":"buy","at":"2026-12-02T10:00:00Z"}"#.utf8)
        let confirmed = try DeviceEvent.decode(bytes)
        #expect(confirmed.actionID == "buy")
        #expect(confirmed.buttonID == nil)
        var plain = confirmed
        plain.actionID = nil
        #expect(confirmed.dedupeKey == plain.dedupeKey)
        var clicked = confirmed
        clicked.type = .clicked
        #expect(clicked.buttonID == "buy")
    }

    @Test func refusesUPlus0000WithItsPath() {
        let bytes = Array(#"{"schema":"herald.device-event.v1","type":"clicked","job_id":"j","app_id":"a","subscription_id":"0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234","action_id":"b\u0000","at":"2026-12-02T10:00:00Z"}"#.utf8)
        #expect {
            try DeviceEvent.decode(bytes)
        } throws: { error in
            (error as? ValidationError)?.description == "action_id: contains U+0000 (a NUL character), which Herald does not accept"
        }
    }

    @Test func refusesUnknownTypes() {
        #expect(throws: ValidationError.self) {
            try DeviceEvent.decode(Array(#"{"schema":"herald.device-event.v1","type":"opened","job_id":"j","app_id":"a","subscription_id":"0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234","at":"2026-12-02T10:00:00Z"}"#.utf8))
        }
    }
}
