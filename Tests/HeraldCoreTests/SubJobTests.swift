import HeraldCore
import Testing

@Suite struct SubJobTests {
    @Test func derivedIDsStayValidJobIDsAndDistinctForLongParents() throws {
        #expect(SubJob.id(parent: "campaign-7", tag: "tz", number: 3) == "campaign-7:tz:3")
        let long = String(repeating: "a", count: 64)
        let other = String(repeating: "a", count: 63) + "b"
        let first = SubJob.id(parent: long, tag: "qh", number: 12)
        let second = SubJob.id(parent: other, tag: "qh", number: 12)
        #expect(first.utf8.count == 64 && second.utf8.count == 64 && first != second)
        #expect(first.hasSuffix(":qh:12"))
        _ = try Identifiers.jobID.check(.string(first), at: .root)
    }

    @Test func subJobDocumentNamesItsParentNarrowsTheAudienceAndDropsTheTimingItWasPlannedFor() throws {
        let job = try Job(json: try JSONValue.parse(#"""
            {"schema":"herald.job.v1","id":"c1","app_id":"app","kind":"notification","created_at":"2026-01-01T00:00:00Z",
             "audience":{"all":true},"content":{"title":"Hi"},
             "delivery":{"local_time":"09:00","respect_quiet_hours":true,"throttle_per_minute":600,"send_after":"2026-01-02T00:00:00Z"}}
            """#))
        let ids = ["0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"]
        let sub = try Job(json: SubJob.document(of: job, id: "c1:tz:0", parent: "c1", subscriptionIDs: ids))
        #expect(sub.id == "c1:tz:0" && sub.parentID == "c1" && sub.audience == .subscriptionIDs(ids))
        #expect(sub.delivery.localTimeMinutes == nil && sub.delivery.respectQuietHours == false && sub.delivery.sendAfter == nil)
        #expect(sub.delivery.throttlePerMinute == 600, "the throttle still applies")
        #expect(sub.reported.id == "c1" && !sub.needsScheduling(at: .now))
        let later = try Job(json: SubJob.document(of: job, id: "c1:sa", parent: "c1", subscriptionIDs: nil, removing: ["send_after"]))
        #expect(later.audience == .all && later.delivery.localTimeMinutes == 540 && later.delivery.sendAfter == nil)
        #expect(later.needsScheduling(at: .now), "planned again for local time when released")
    }

    @Test func theAppsQuietHoursDecideOnlyForJobsThatDoNotSay() throws {
        func job(_ delivery: String, kind: String = "notification") throws -> Job {
            try Job.decode(Array(#"""
            {"schema":"herald.job.v1","id":"q","app_id":"a","kind":"notification","created_at":"2026-12-02T10:00:00Z",
             "audience":{"all":true},"content":{"title":"T"},"delivery":{\#(delivery)}}
            """#.utf8))
        }
        let now = Timestamp(seconds: 1_796_205_600)
        let opted = AppQuietHours(respectByDefault: true)
        #expect(try job("").needsScheduling(at: now, quietHours: opted))
        #expect(try !job("").needsScheduling(at: now))
        #expect(try !job(#""respect_quiet_hours":false"#).needsScheduling(at: now, quietHours: opted))
        #expect(try !job(#""urgent":true"#).needsScheduling(at: now, quietHours: opted))
        #expect(try job("").dependsOnAppQuietHours)
        #expect(try !job(#""respect_quiet_hours":true"#).dependsOnAppQuietHours)
        // A sub-job planned for its quiet hours says false, so the app's default cannot hold it again.
        let parent = try job("")
        let sub = try Job(json: SubJob.document(of: parent, id: "q:qh:0", parent: "q", subscriptionIDs: ["0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"]))
        #expect(sub.delivery.respectQuietHours == false)
        #expect(!sub.needsScheduling(at: now, quietHours: opted))
    }
}
