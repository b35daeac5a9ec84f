import HeraldCore
import Testing

@Suite struct ConfluentWireFormatTests {
    static let job = Array(#"""
        {"schema":"herald.job.v1","id":"j1","app_id":"shop","kind":"notification","created_at":"2026-12-02T10:00:00Z",
         "audience":{"all":true},"content":{"title":"T"}}
        """#.utf8)

    @Test func aFramedValueIsTheJSONAfterTheMagicByteAndTheSchemaID() {
        let framed: [UInt8] = [0, 0, 0, 1, 2] + Self.job
        let unwrapped = ConfluentWireFormat.unwrap(framed)
        #expect(Array(unwrapped.json) == Self.job)
        #expect(unwrapped.schemaID == 258)
        // Plain JSON, and a zero byte too short for a header, are returned whole.
        #expect(ConfluentWireFormat.unwrap(Self.job).schemaID == nil && Array(ConfluentWireFormat.unwrap(Self.job).json) == Self.job)
        #expect(Array(ConfluentWireFormat.unwrap([0, 1, 2]).json) == [0, 1, 2])
    }

    @Test func jobsDeviceEventsAndAnyMessageAreReadFramedOrNot() throws {
        let framed: [UInt8] = [0, 0, 0, 0, 7] + Self.job
        #expect(try Job.decode(framed).id == "j1")
        if case .job(let job) = try Message.decode(framed) { #expect(job.id == "j1") } else { Issue.record("not a job") }
        let event = Array(#"{"schema":"herald.device-event.v1","type":"received","app_id":"shop","job_id":"j1","subscription_id":"0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234","at":"2026-12-02T10:00:01Z"}"#.utf8)
        #expect(try DeviceEvent.decode([0, 0, 0, 0, 9] + event).jobID == "j1")
        // A header with nothing valid after it is still refused as JSON.
        #expect(throws: ValidationError.self) { try Job.decode([0, 0, 0, 0, 1] + Array("not json".utf8)) }
    }
}
