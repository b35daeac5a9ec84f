import Foundation
@testable import HeraldAPNs
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
@testable import HeraldWorker
import Testing

/// Golden bytes and key tables of every payload profile (`schemas/payloads.md`, "Payload
/// profiles"): one job of each kind rendered for each kind of device, compared with the
/// document's golden examples, and every key checked against the profile's key table.
@Suite struct PushRenderTests {
    static let now = Timestamp(seconds: 1_796_205_600) // 2026-12-02T10:00:00Z
    static let subscriptionID = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"

    /// The kinds of job, by golden name.
    static let jobs: [(kind: String, json: String)] = [
        ("alert", #"""
        {"schema":"herald.job.v1","id":"order-shipped:8f3a2c","app_id":"shop","kind":"notification",
         "created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"expires_at":"2026-12-03T10:00:00Z",
         "content":{"title":"Your order has shipped","subtitle":"Order #4821","body":"It is on its way.",
           "image_url":"https://cdn.example.com/p/4821.jpg","url":"shop://orders/4821",
           "buttons":[{"id":"track","text":"Track parcel","url":"https://example.com/t/4821"},{"id":"later","text":"Later"}],
           "data":{"order_id":4821,"screen":"OrderDetails","url":"shop://ignored"},"badge":3,"sound":"default",
           "thread_id":"orders","channel":"orders","collapse_id":"order-4821","interruption_level":"time-sensitive",
           "relevance_score":0.8,"show_foreground":false}}
        """#),
        ("alert-truncated", #"""
        {"schema":"herald.job.v1","id":"digest:77","app_id":"shop","kind":"notification",
         "created_at":"2026-12-02T09:00:00Z","audience":{"all":true},"delivery":{"priority":"normal"},
         "content":{"title":"Weekly digest","body":"\#(String(repeating: "Long news. ", count: 400))",
           "category":"DIGEST","content_available":true,"show_background":true}}
        """#),
        ("background", #"""
        {"schema":"herald.job.v1","id":"sync-42","app_id":"shop","kind":"notification",
         "created_at":"2026-12-02T09:00:00Z","audience":{"all":true},
         "content":{"content_available":true,"url":"shop://sync","data":{"since":1796235667}}}
        """#),
        ("voip", #"""
        {"schema":"herald.job.v1","id":"call-5c1e9d","app_id":"shop","kind":"voip","created_at":"2026-12-02T09:59:50Z",
         "audience":{"all":true},"voip":{"data":{"call_id":"5c1e9d","caller":"Ada Lovelace"},"ttl_s":30},
         "delivery":{"urgent":true}}
        """#),
        ("live-start", #"""
        {"schema":"herald.job.v1","id":"delivery-4821:start","app_id":"shop","kind":"live_activity",
         "created_at":"2026-12-02T09:00:00Z","audience":{"all":true},
         "live_activity":{"activity_id":"delivery-4821","event":"start","stream_id":"session-7","sequence":1,
           "content_state":{"status":"preparing","eta_minutes":25},"attributes_type":"DeliveryAttributes",
           "attributes":{"restaurant":"Pizza Nova"},"alert":{"title":"Order placed","body":"Pizza Nova is preparing it."}}}
        """#),
        ("live-update", #"""
        {"schema":"herald.job.v1","id":"delivery-4821:update:3","app_id":"shop","kind":"live_activity",
         "created_at":"2026-12-02T09:00:00Z",
         "live_activity":{"activity_id":"delivery-4821","event":"update","stream_id":"session-7","sequence":3,
           "content_state":{"status":"on_the_way","eta_minutes":9},"stale_date":"2026-12-02T11:00:00Z",
           "relevance_score":50,"alert":{"title":"On its way","body":"Your rider is 9 minutes away.","sound":"chime.caf"}}}
        """#),
        ("live-end", #"""
        {"schema":"herald.job.v1","id":"delivery-4821:end","app_id":"shop","kind":"live_activity",
         "created_at":"2026-12-02T09:00:00Z",
         "live_activity":{"activity_id":"delivery-4821","event":"end","stream_id":"session-7","sequence":4,
           "content_state":{"status":"delivered","eta_minutes":0},"dismissal_date":"2026-12-02T12:00:00Z"}}
        """#),
    ]

    /// The surfaces: a key table each (`schemas/payloads.md`), with the profile and device that
    /// give it.
    struct Surface: Sendable, CustomStringConvertible {
        var table: String
        var profile: PayloadProfile
        var platform: Platform
        var provider: Receipt.Provider
        var sdk = true
        /// The kinds this surface has golden examples for (the rest are refused or routed elsewhere).
        var kinds: [String]
        var description: String { table }
    }

    static let allKinds = jobs.map(\.kind)
    static let surfaces: [Surface] = [
        Surface(table: "sdk-apns", profile: .sdk, platform: .ios, provider: .apns, kinds: allKinds),
        Surface(table: "sdk-fcm", profile: .sdk, platform: .android, provider: .fcm, kinds: allKinds),
        Surface(table: "plain-apns", profile: .plain, platform: .ios, provider: .apns, kinds: allKinds),
        Surface(table: "plain-fcm", profile: .plain, platform: .android, provider: .fcm, kinds: allKinds),
        Surface(table: "openpush-apns", profile: .openpush, platform: .ios, provider: .apns, kinds: allKinds.filter { $0 != "live-start" }),
        Surface(table: "pushbib-apns", profile: .pushbib, platform: .ios, provider: .apns, kinds: allKinds),
        Surface(table: "pushbib-fcm", profile: .pushbib, platform: .android, provider: .fcm, kinds: allKinds),
        Surface(table: "ios-fcm", profile: .sdk, platform: .ios, provider: .fcm, kinds: ["alert", "alert-truncated", "background"]),
    ]

    static func app(_ profile: PayloadProfile) -> AppSettings {
        var orders = NotificationChannel(key: "orders", name: "Orders", version: 3)
        orders.importance = .high
        orders.sound = .custom("parcel")
        orders.vibration = .custom([0, 250, 100, 250])
        orders.iosSound = "parcel.caf"
        return AppSettings(id: "shop", name: "Shop", payloadProfile: profile.rawValue, channels: ["orders": orders])
    }

    static func member(_ surface: Surface) -> AudienceMember {
        let token = surface.provider == .apns ? String(repeating: "ab", count: 32) : "fcm-token-1"
        return AudienceMember(id: subscriptionID, platform: surface.platform, token: token, sandbox: false, sdk: surface.sdk,
                              language: "en", timeZone: nil, voipToken: nil, provider: surface.provider)
    }

    /// The rendered bytes of `kind` for `surface`: the APNs payload, or the FCM request body.
    static func render(_ surface: Surface, kind: String) throws -> PushRender.Result {
        let json = try #require(jobs.first { $0.kind == kind }?.json)
        let job = try Job.decode(Array(json.utf8))
        let member = member(surface)
        return PushRender.render(job, to: member, token: member.token, app: app(surface.profile), now: now)
    }

    static func bytes(_ result: PushRender.Result) -> [UInt8]? {
        switch result {
        case .apns(let notification): notification.payload
        case .fcm(let message): message.body
        case .failed: nil
        }
    }

    /// The paths a key table speaks of: the APNs payload, or the FCM `message`.
    static func paths(_ result: PushRender.Result) throws -> [String] {
        guard let bytes = bytes(result) else { return [] }
        let paths = try PayloadDocument.paths(of: bytes)
        if case .fcm = result { return paths.map { String($0.dropFirst("message.".count)) } }
        return paths
    }

    @Test(arguments: surfaces) func goldenBytesMatchTheDocument(surface: Surface) throws {
        let document = try PayloadDocument.load()
        var dump: [String] = []
        // A shortened payload is 4 KB of text: its keys are checked below, its bytes are not printed.
        for kind in surface.kinds where kind != "alert-truncated" {
            let rendered = try Self.render(surface, kind: kind)
            let text = try #require(Self.bytes(rendered).map { String(decoding: $0, as: UTF8.self) },
                                    "\(surface.table)/\(kind) was not rendered: \(rendered)")
            dump.append("<!-- golden: \(surface.table)/\(kind) -->\n```json\n\(text)\n```")
            #expect(document.goldens["\(surface.table)/\(kind)"] == text, "golden \(surface.table)/\(kind) differs; rendered:\n\(text)")
        }
        if let path = ProcessInfo.processInfo.environment["HERALD_WRITE_GOLDEN"] {
            try (dump.joined(separator: "\n\n") + "\n").write(toFile: "\(path)/\(surface.table).md", atomically: true, encoding: .utf8)
        }
    }

    @Test(arguments: surfaces) func everyKeySentIsInTheProfilesKeyTable(surface: Surface) throws {
        let document = try PayloadDocument.load()
        let rows = try #require(document.tables[surface.table], "schemas/payloads.md has no key table \(surface.table)")
        var used = Set<String>()
        for rendered in surface.kinds {
            // The table's `alert` covers the shortened alert too.
            let kind = rendered == "alert-truncated" ? "alert" : rendered
            let paths = try Self.paths(try Self.render(surface, kind: rendered))
            #expect(document.unlisted(paths, table: surface.table, kind: kind) == [], "\(surface.table)/\(kind)")
            for row in rows where row.kinds.contains(kind) && paths.contains(where: row.matches) { used.insert(row.key + "|" + kind) }
        }
        for row in rows {
            // Every row names a seed sentence or says it is Herald's choice.
            #expect(row.source.contains("**choice**") || row.source.contains("“") || row.source.contains("\""),
                    "\(surface.table) \(row.key): no source")
            for kind in row.kinds {
                #expect(used.contains(row.key + "|" + kind), "\(surface.table) \(row.key) is listed for \(kind) but no example sends it")
            }
        }
    }

    @Test func openPushRefusesWhatItsSenderNeverBuilds() throws {
        let surface = Self.surfaces[4]
        guard case .failed(let reason, let detail) = try Self.render(surface, kind: "live-start") else {
            Issue.record("an OpenPush live-activity start was rendered")
            return
        }
        #expect(reason == .unsupportedByProfile)
        #expect(detail.contains("push-to-start"))
        for content in [#""title":"T","sound":{"critical":true,"name":"alarm.caf","volume":1}"#, #""title":"T","interruption_level":"critical""#] {
            let job = try Job.decode(Array(#"""
            {"schema":"herald.job.v1","id":"crit","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z",
             "audience":{"all":true},"content":{\#(content)}}
            """#.utf8))
            let member = Self.member(surface)
            guard case .failed(let reason, _) = PushRender.render(job, to: member, token: member.token, app: Self.app(.openpush), now: Self.now) else {
                Issue.record("a critical job was rendered for OpenPush")
                continue
            }
            #expect(reason == .unsupportedByProfile)
        }
    }

    @Test func routesByProviderAndKind() {
        let fcmPhone = AudienceMember(id: Self.subscriptionID, platform: .ios, token: "fcm", sandbox: false, sdk: true,
                                      language: nil, timeZone: nil, voipToken: "cafe", provider: .fcm)
        #expect(AppDelivery.provider(for: fcmPhone, kind: .notification) == .fcm)
        // PushKit and ActivityKit tokens are APNs tokens, whoever holds the notification token.
        #expect(AppDelivery.provider(for: fcmPhone, kind: .voip) == .apns)
        #expect(AppDelivery.provider(for: fcmPhone, kind: .liveActivity) == .apns)
        let android = AudienceMember(id: Self.subscriptionID, platform: .android, token: "t", sandbox: false, sdk: true,
                                     language: nil, timeZone: nil, voipToken: nil)
        #expect(android.provider == .fcm)
        #expect(AppDelivery.provider(for: android, kind: .liveActivity) == .fcm)
    }

    @Test func aJobNamingAnUnknownChannelFailsOnEveryProfile() throws {
        let job = try Job.decode(Array(#"""
        {"schema":"herald.job.v1","id":"c","app_id":"shop","kind":"notification","created_at":"2026-12-02T09:00:00Z",
         "audience":{"all":true},"content":{"title":"T","channel":"nope"}}
        """#.utf8))
        for surface in Self.surfaces {
            let member = Self.member(surface)
            guard case .failed(let reason, _) = PushRender.render(job, to: member, token: member.token, app: Self.app(surface.profile), now: Self.now) else {
                Issue.record("\(surface.table): rendered")
                continue
            }
            #expect(reason == .unknownChannel)
        }
    }
}
