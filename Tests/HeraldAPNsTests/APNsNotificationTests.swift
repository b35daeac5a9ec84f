import HeraldAPNs
import HeraldCore
import Testing

@Suite struct APNsNotificationTests {
    static let subscription = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
    static let now = Timestamp(seconds: 1_796_000_000)

    static func job(_ kind: String, _ members: String, extra: String = "") throws -> Job {
        try Job.decode(Array("""
        {"schema":"herald.job.v1","id":"job-7","app_id":"demo","kind":"\(kind)","created_at":"2026-12-02T10:00:00Z",
         "audience":{"all":true}\(extra),\(members)}
        """.utf8))
    }

    private func target(sandbox: Bool? = nil) -> APNsNotification.Target {
        .init(subscriptionID: APNsNotificationTests.subscription, deviceToken: String(repeating: "ab", count: 32), sandbox: sandbox, language: "fr")
    }

    @Test func apnsIDIsADeterministicUUID() {
        let id = APNsNotification.apnsID(jobID: "job-7", subscriptionID: APNsNotificationTests.subscription)
        #expect(Identifiers.isUUID(id))
        #expect(id == id.lowercased())
        // SHA-256("herald-apns-id\0job-7\0<subscription>")[0..<16] with the version-5 and variant
        // bits, as computed independently by Python's hashlib and uuid.
        #expect(id == "ead67003-dd43-56de-b5d9-ad68c8e41a68")
        #expect(id == APNsNotification.apnsID(jobID: "job-7", subscriptionID: APNsNotificationTests.subscription))
        #expect(id != APNsNotification.apnsID(jobID: "job-8", subscriptionID: APNsNotificationTests.subscription))
        #expect(id != APNsNotification.apnsID(jobID: "job-7", subscriptionID: "1b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"))
    }

    @Test func alertJob() throws {
        let job = try APNsNotificationTests.job("notification", #""content":{"title":"Hi","localized":{"fr":{"title":"Salut"}}}"#,
                                                extra: #","expires_at":"2026-12-03T10:00:00Z","delivery":{"priority":"normal"}"#)
        let notification = try APNsNotification.forJob(job, target: target(sandbox: true), now: APNsNotificationTests.now)
        #expect(notification.pushType == .alert)
        #expect(notification.priority == 5)
        #expect(notification.expiration == Timestamp(rfc3339: "2026-12-03T10:00:00Z")?.seconds)
        #expect(notification.collapseID == APNsCollapseID.forJob("job-7"))
        #expect(notification.sandbox == true)
        #expect(try JSONValue.parse(notification.payload)["aps"]?["alert"]?["title"] == .string("Salut"))
    }

    @Test func backgroundJobIsPriorityFive() throws {
        let job = try APNsNotificationTests.job("notification", #""content":{"content_available":true,"collapse_id":"sync"}"#,
                                                extra: #","delivery":{"priority":"high"}"#)
        let notification = try APNsNotification.forJob(job, target: target(), now: APNsNotificationTests.now)
        #expect(notification.pushType == .background)
        #expect(notification.priority == 5)
        #expect(notification.collapseID == "sync")
        #expect(notification.expiration == nil)
    }

    @Test func voipJobExpiresAfterItsTTL() throws {
        let job = try APNsNotificationTests.job("voip", #""voip":{"data":{"call_id":"c1"},"ttl_s":30}"#)
        let notification = try APNsNotification.forJob(job, target: target(), now: APNsNotificationTests.now)
        #expect(notification.pushType == .voip)
        #expect(notification.priority == 10)
        #expect(notification.expiration == APNsNotificationTests.now.seconds + 30)
        #expect(try JSONValue.parse(notification.payload)["herald"]?["data"] == .object(["call_id": .string("c1")]))
    }

    @Test func liveActivityJobUsesItsPriorityAndTimestamp() throws {
        let job = try APNsNotificationTests.job("live_activity",
            #""live_activity":{"activity_id":"a1","event":"update","stream_id":"s1","sequence":4,"content_state":{"eta":3}}"#)
        let notification = try APNsNotification.forJob(job, target: target(), now: APNsNotificationTests.now)
        #expect(notification.pushType == .liveActivity)
        #expect(notification.priority == 5)
        #expect(notification.collapseID == nil)
        #expect(try JSONValue.parse(notification.payload)["aps"]?["timestamp"] == .int(APNsNotificationTests.now.seconds))
        #expect(notification.pushType.topic(bundleID: "com.example.app") == "com.example.app.push-type.liveactivity")
    }

    /// Issue 9: the worker's timestamp (from the activity's mark, never backwards) wins over the
    /// send time; start and end default to priority 10.
    @Test func liveActivityTimestampFromTheMarkAndStartPriority() throws {
        var job = try APNsNotificationTests.job("live_activity",
            #""live_activity":{"activity_id":"a1","event":"start","stream_id":"s1","sequence":1,"content_state":{"eta":3},"alert":{"title":"Ride","body":"On its way"},"attributes_type":"RideAttributes","attributes":{"car":"blue"}}"#)
        job.liveActivity?.timestamp = APNsNotificationTests.now.seconds - 30
        let notification = try APNsNotification.forJob(job, target: target(), now: APNsNotificationTests.now)
        #expect(notification.priority == 10)
        let aps = try JSONValue.parse(notification.payload)["aps"]
        #expect(aps?["timestamp"] == .int(APNsNotificationTests.now.seconds - 30))
        #expect(aps?["input-push-token"] == .int(1))
    }

    /// Issue 9: a start without an alert never reaches APNs: the job is refused at validation.
    @Test func liveActivityStartWithoutAlertIsInvalid() {
        #expect(throws: ValidationError.self) {
            try APNsNotificationTests.job("live_activity",
                #""live_activity":{"activity_id":"a1","event":"start","stream_id":"s1","sequence":1,"content_state":{},"attributes_type":"RideAttributes","attributes":{}}"#)
        }
    }

    /// Issue 9: the channel's iOS side fills what the job left unset; the job's own values win.
    @Test func channelIOSSideIsApplied() throws {
        var channel = NotificationChannel(key: "orders", name: "Orders")
        channel.iosSound = "chime.caf"
        channel.iosInterruptionLevel = .timeSensitive
        channel.iosRelevanceScore = 0.7
        channel.iosThreadID = "orders"
        let job = try APNsNotificationTests.job("notification", #""content":{"title":"Hi","channel":"orders","thread_id":"mine"}"#)
        var target = target()
        target.channel = channel
        let aps = try JSONValue.parse(try APNsNotification.forJob(job, target: target, now: APNsNotificationTests.now).payload)["aps"]
        #expect(aps?["sound"] == .string("chime.caf"))
        #expect(aps?["interruption-level"] == .string("time-sensitive"))
        #expect(aps?["relevance-score"] == .double(0.7))
        #expect(aps?["thread-id"] == .string("mine"))
    }

    @Test func oversizedDataIsPayloadTooLarge() throws {
        let blob = String(repeating: "x", count: 5000)
        let job = try APNsNotificationTests.job("notification", #""content":{"body":"Hi","data":{"blob":"\#(blob)"}}"#)
        let failure = #expect(throws: APNsPayload.Failure.self) {
            try APNsNotification.forJob(job, target: self.target(), now: APNsNotificationTests.now)
        }
        #expect(failure?.reason == .payloadTooLarge)
        #expect(failure?.limit == 4096)
        #expect(failure.map { APNsOutcome.notRendered($0).receiptReason } == .payloadTooLarge)
    }
}
