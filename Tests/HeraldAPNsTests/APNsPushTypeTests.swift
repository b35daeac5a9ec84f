import HeraldAPNs
import Testing

@Suite struct APNsPushTypeTests {
    @Test func topicsAndLimits() {
        #expect(APNsPushType.alert.topic(bundleID: "com.example.app") == "com.example.app")
        #expect(APNsPushType.voip.topic(bundleID: "com.example.app") == "com.example.app.voip")
        #expect(APNsPushType.liveActivity.topic(bundleID: "com.example.app") == "com.example.app.push-type.liveactivity")
        #expect(APNsPushType.location.topic(bundleID: "com.example.app") == "com.example.app.location-query")
        #expect(APNsPushType.voip.maxPayloadBytes == 5120)
        #expect(APNsPushType.alert.maxPayloadBytes == 4096)
    }

    @Test func backgroundIsAlwaysPriorityFive() {
        #expect(APNsPushType.background.priority(requested: 10) == 5)
        #expect(APNsPushType.alert.priority(requested: nil) == 10)
        #expect(APNsPushType.liveActivity.priority(requested: 5) == 5)
    }

    @Test func collapseIDsAreStableAndShort() {
        let derived = APNsCollapseID.forJob(String(repeating: "j", count: 64))
        #expect(derived.utf8.count <= APNsCollapseID.maxBytes)
        #expect(derived == APNsCollapseID.forJob(String(repeating: "j", count: 64)))
        #expect(derived != APNsCollapseID.forJob(String(repeating: "j", count: 63)))
        #expect(APNsCollapseID.forJob("job-1", collapseID: "scores") == "scores")
    }
}
