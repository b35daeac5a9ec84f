import Foundation
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

/// Issue 18's acceptance line end to end: one job of each kind to an app of each payload profile
/// through a `herald run` worker, and what each device received (`herald sim --log`) holds
/// exactly the keys of its profile's key table in `schemas/payloads.md`: none the table leaves
/// out for that kind, and every row the job's content calls for. The expected keys come from the
/// document, not from `PushRender`: this target does not link `HeraldWorker`, and
/// `PushRenderTests` already holds the renderer to the same tables, so here the shipped binary
/// is held to them too. Figures go to stderr (`profiles e2e`).
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized, .timeLimit(.minutes(5)))
struct PayloadProfileEndToEndTests {
    /// One subscription of the scenario and the tokens it holds.
    struct Device: Sendable, CustomStringConvertible {
        var app: String
        var profile: String
        var id: String
        var role: String
        var platform: Platform
        /// Who holds `token` (`subscriptions.provider`; the platform's own when not FCM on iOS).
        var provider: Receipt.Provider
        var sdk: Bool
        var token: String
        var voipToken: String?
        /// A push-to-start token for `DeliveryAttributes`.
        var startToken: String?
        /// The activity's push token, written once the start went out (as the upstream API would).
        var activityToken: String?
        var description: String { "\(app)/\(role)" }
    }

    /// The job kinds, in the order the scenario sends them (live activities need their start first).
    static let kinds = ["alert", "background", "voip", "live-start", "live-update", "live-end"]

    /// The key table a device's payload is written in: the profile table of `schemas/payloads.md`
    /// ("Payload profiles"), the same mapping as `PushRenderTests.surfaces`.
    static func table(profile: String, platform: Platform, provider: Receipt.Provider, sdk: Bool) -> String {
        if platform == .ios && provider == .fcm { return "ios-fcm" }
        let side = platform == .ios ? "apns" : "fcm"
        guard sdk else { return "plain-\(side)" }
        switch (profile, platform) {
        case ("openpush", .android): return "sdk-fcm"  // OpenPush has no Android side
        default: return "\(profile)-\(side)"
        }
    }

    /// Where `device` receives a job of `kind`: the provider and token, or nil when the job does
    /// not target it. VoIP and live activities go to APNs even for an iOS device with an FCM
    /// token (PushKit and ActivityKit tokens are APNs tokens).
    static func destination(_ device: Device, _ kind: String) -> (provider: Receipt.Provider, token: String)? {
        if device.platform == .android { return (.fcm, device.token) }
        switch kind {
        case "alert", "background": return (device.provider, device.token)
        case "voip": return device.voipToken.map { (.apns, $0) }
        case "live-start": return device.startToken.map { (.apns, $0) }
        default: return device.activityToken.map { (.apns, $0) }
        }
    }

    /// Rows that no job of this scenario can call for: the truncation markers, set only when a
    /// payload had to be shortened (the jobs here are far below the limits).
    static func calledFor(_ row: PayloadDocument.Row) -> Bool {
        !(row.key.split(separator: ".").last ?? "").hasSuffix("truncated")
    }

    static func jobID(_ app: String, _ kind: String) -> String { "\(app)-\(kind)" }

    /// A job of `kind` for `app`, filled so that every row of every table for that kind is
    /// called for (the content of `PushRenderTests`' alert and shortened alert together).
    static func job(_ kind: String, app: String) -> (key: String, json: String) {
        let id = jobID(app, kind)
        let now = Timestamp.now
        let head = #""schema":"herald.job.v1","id":"\#(id)","app_id":"\#(app)","created_at":"\#(now.rfc3339)""#
        func at(_ seconds: Int64) -> String { Timestamp(seconds: now.seconds + seconds).rfc3339 }
        func live(_ event: String, _ sequence: Int, _ body: String) -> (key: String, json: String) {
            ("\(app)/delivery-\(app)", #"""
            {\#(head),"kind":"live_activity","audience":{"all":true},"live_activity":{"activity_id":"delivery-\#(app)","event":"\#(event)",\#
            "stream_id":"session-7","sequence":\#(sequence),\#(body)}}
            """#)
        }
        switch kind {
        case "alert":
            return (id, #"""
            {\#(head),"kind":"notification","audience":{"all":true},"expires_at":"\#(at(86_400))",\#
            "content":{"title":"Your order has shipped","subtitle":"Order #4821","body":"It is on its way.",\#
            "image_url":"https://cdn.example.com/p/4821.jpg","url":"shop://orders/4821",\#
            "buttons":[{"id":"track","text":"Track parcel","url":"https://example.com/t/4821"},{"id":"later","text":"Later"}],\#
            "data":{"order_id":4821,"screen":"OrderDetails"},"badge":3,"sound":"default","channel":"orders","collapse_id":"order-4821",\#
            "thread_id":"orders","category":"ORDER_UPDATE","interruption_level":"time-sensitive","relevance_score":0.8,\#
            "content_available":true,"show_foreground":false,"show_background":true}}
            """#)
        case "background":
            return (id, #"""
            {\#(head),"kind":"notification","audience":{"all":true},\#
            "content":{"content_available":true,"url":"shop://sync","data":{"since":1796235667}}}
            """#)
        case "voip":
            return (id, #"""
            {\#(head),"kind":"voip","audience":{"all":true},"voip":{"data":{"call_id":"5c1e9d","caller":"Ada Lovelace"},"ttl_s":30}}
            """#)
        case "live-start":
            return live("start", 1, #"""
            "content_state":{"status":"preparing","eta_minutes":25},"attributes_type":"DeliveryAttributes",\#
            "attributes":{"restaurant":"Pizza Nova"},"alert":{"title":"Order placed","body":"Pizza Nova is preparing it."}
            """#)
        case "live-update":
            return live("update", 2, #"""
            "content_state":{"status":"on_the_way","eta_minutes":9},"stale_date":"\#(at(3_600))","relevance_score":50,\#
            "alert":{"title":"On its way","body":"Your rider is 9 minutes away.","sound":"chime.caf"}
            """#)
        default:
            return live("end", 3, #""content_state":{"status":"delivered","eta_minutes":0},"dismissal_date":"\#(at(7_200))""#)
        }
    }

    /// The five subscriptions of an app: iOS over APNs and Android with the SDK, iOS with an FCM
    /// token, iOS and Android without the SDK. Every iOS one has a VoIP token; the iOS ones over
    /// APNs get a push-to-start token and, after the start, an activity token.
    static func devices(app: String, profile: String, index: Int) -> [Device] {
        func id(_ n: Int) -> String { "5000000\(index)-0000-4000-8000-00000000000\(n)" }
        func hex(_ role: String) -> String { LiveActivityEndToEndTests.hex("\(app)-\(role)") }
        return [
            Device(app: app, profile: profile, id: id(1), role: "ios", platform: .ios, provider: .apns, sdk: true, token: hex("ios"),
                   voipToken: hex("ios-voip"), startToken: hex("ios-start"), activityToken: hex("ios-activity")),
            Device(app: app, profile: profile, id: id(2), role: "android", platform: .android, provider: .fcm, sdk: true, token: "fcm-\(app)-android"),
            Device(app: app, profile: profile, id: id(3), role: "ios-fcm", platform: .ios, provider: .fcm, sdk: true, token: "fcm-\(app)-ios",
                   voipToken: hex("ios-fcm-voip")),
            Device(app: app, profile: profile, id: id(4), role: "ios-nosdk", platform: .ios, provider: .apns, sdk: false, token: hex("ios-nosdk"),
                   voipToken: hex("ios-nosdk-voip"), startToken: hex("ios-nosdk-start"), activityToken: hex("ios-nosdk-activity")),
            Device(app: app, profile: profile, id: id(5), role: "android-nosdk", platform: .android, provider: .fcm, sdk: false,
                   token: "fcm-\(app)-android-nosdk"),
        ]
    }

    /// Builds the apps, channels and subscriptions in the fixture's database.
    static func setUp(_ fixture: LiveActivityFixture, _ devices: [Device]) async throws {
        let apps = AppRepository(pool: fixture.pool, key: try CredentialsKey(base64: fixture.credentialsKey))
        for app in Set(devices.map(\.app)).sorted() {
            let profile = devices.first { $0.app == app }?.profile ?? "sdk"
            let seeded = try await Subprocess.runDetached(fixture.binary, ["seed", "--database-url", fixture.databaseURL, "--app", app,
                                                                           "--credentials-from", fixture.simDirectory.path],
                                                          environment: fixture.baseEnvironment, timeout: 60)
            guard seeded.status == 0 else { throw LiveActivityFixture.Failure("herald seed \(app): \(seeded.stderr)") }
            let updated = try await Subprocess.runDetached(fixture.binary, ["apps", "update", "--database-url", fixture.databaseURL, "--id", app,
                                                                            "--payload-profile", profile],
                                                           environment: fixture.baseEnvironment, timeout: 60)
            guard updated.status == 0 else { throw LiveActivityFixture.Failure("herald apps update \(app): \(updated.stderr)") }
            var orders = NotificationChannel(key: "orders", name: "Orders")
            orders.importance = .high
            orders.iosSound = "parcel.caf"
            orders.iosInterruptionLevel = .timeSensitive
            _ = try await apps.upsertChannel(appID: app, orders)
        }
        for device in devices {
            try await fixture.pool.query("""
                INSERT INTO subscriptions (id, app_id, platform, token, voip_token, sdk, provider)
                VALUES ($1::uuid, $2, $3, $4, $5, $6::boolean, $7)
                """, [device.id, device.app, device.platform.rawValue, device.token, device.voipToken, device.sdk ? "true" : "false",
                      device.platform == .ios ? device.provider.rawValue : nil], idempotent: false)
            if let start = device.startToken {
                try await fixture.pool.query("""
                    INSERT INTO push_to_start_tokens (app_id, subscription_id, attributes_type, token)
                    VALUES ($1, $2::uuid, 'DeliveryAttributes', $3)
                    """, [device.app, device.id, start], idempotent: false)
            }
        }
    }

    /// What the simulator of `provider` accepted for `token`.
    static func log(_ fixture: LiveActivityFixture, _ provider: Receipt.Provider, _ token: String) async throws -> [JSONValue] {
        // The fixture picks the simulator by platform: iOS is the APNs one, Android the FCM one.
        try await fixture.log(provider == .apns ? .ios : .android, token: token)
    }

    @Test func eachDeviceReceivesExactlyTheKeysOfItsProfilesTable() async throws {
        let document = try PayloadDocument.load()
        try await LiveActivityFixture.with("profiles", failure: "profiles e2e: failed") { try await run($0, document) }
    }

    func run(_ fixture: LiveActivityFixture, _ document: PayloadDocument) async throws {
        let started = Date()
        try await fixture.startSimulator()
        let profiles = ["sdk", "plain", "openpush", "pushbib"]
        let devices = profiles.enumerated().flatMap { index, profile in Self.devices(app: "p-\(profile)", profile: profile, index: index) }
        try await Self.setUp(fixture, devices)
        try await fixture.startWorkers(1)

        var seen: [String: Int] = [:]  // log entries already read, by provider/token
        var checked: Set<String> = []  // table/kind pairs a device received
        var entries = 0
        for kind in Self.kinds {
            if kind == "live-update" {
                // The app reports each activity's push token after the start (upstream writes it).
                for device in devices {
                    guard let token = device.activityToken else { continue }
                    try await fixture.pool.query("INSERT INTO live_activities (app_id, activity_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                                 [device.app, "delivery-\(device.app)"], idempotent: false)
                    try await fixture.pool.query("INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token) VALUES ($1, $2, $3::uuid, $4)",
                                                 [device.app, "delivery-\(device.app)", device.id, token], idempotent: false)
                }
            }
            let apps = profiles.map { "p-\($0)" }
            let ids = apps.map { Self.jobID($0, kind) }
            try await fixture.produce(apps.map { Self.job(kind, app: $0) })
            try #require(try await fixture.waitCompleted(ids, seconds: 90), "\(kind): \(fixture.receipts.describe(ids))")

            // Receipts: one terminal receipt per targeted subscription, none for the others.
            let terminal = fixture.receipts.terminal()
            for device in devices {
                let table = Self.destination(device, kind).map {
                    Self.table(profile: device.profile, platform: device.platform, provider: $0.provider, sdk: device.sdk)
                }
                let got = (terminal[Self.jobID(device.app, kind)]?[device.id] ?? []).map { "\($0.stage.rawValue)/\($0.reason?.rawValue ?? "")" }
                switch table {
                case nil: #expect(got == [], "\(device) \(kind): not targeted, yet \(got)")
                case "openpush-apns"? where kind == "live-start":
                    #expect(got == ["failed/unsupported-by-profile"], "\(device) \(kind)")
                default: #expect(got == ["accepted/"], "\(device) \(kind) (\(table ?? ""))")
                }
            }

            // What each device received.
            for device in devices {
                guard let (provider, token) = Self.destination(device, kind) else { continue }
                let table = Self.table(profile: device.profile, platform: device.platform, provider: provider, sdk: device.sdk)
                let refused = table == "openpush-apns" && kind == "live-start"
                let key = "\(provider.rawValue)/\(token)"
                let before = seen[key] ?? 0
                var log: [JSONValue] = []
                // The simulator logs before it answers, so the entry is there once the receipt
                // is; poll briefly anyway, with a deadline.
                _ = try await fixture.wait(seconds: refused ? 0 : 10) {
                    log = try await Self.log(fixture, provider, token)
                    return log.count > before
                }
                let fresh = Array(log.dropFirst(before))
                seen[key] = log.count
                if refused {
                    #expect(fresh.isEmpty, "\(device) \(kind): refused by the profile, yet sent \(fresh.count)")
                    continue
                }
                try #require(fresh.count == 1, "\(device) \(kind) (\(table)): \(fresh.count) entries at \(key)")
                let entry = fresh[0]
                let body = try #require(provider == .apns ? entry["payload"] : entry["message"], "\(device) \(kind): \(entry)")
                // APNs: paths into the payload; FCM: into `message`, as the tables write them.
                let paths = try PayloadDocument.paths(of: body.serializedBytes())
                let text = String(decoding: body.serializedBytes(), as: UTF8.self)
                #expect(document.unlisted(paths, table: table, kind: kind) == [], "\(device) \(kind) (\(table)) sent keys its table does not list: \(text)")
                let rows = try #require(document.tables[table], "schemas/payloads.md has no key table \(table)")
                let missing = rows.filter { $0.kinds.contains(kind) && Self.calledFor($0) && !paths.contains(where: $0.matches) }.map(\.key)
                #expect(missing == [], "\(device) \(kind) (\(table)) lacks keys its table lists for this job: \(text)")
                checked.insert("\(table)/\(kind)")
                entries += 1
            }
        }

        // Every key table was received for every kind it lists.
        var expected: Set<String> = []
        for (table, rows) in document.tables {
            for kind in Set(rows.flatMap(\.kinds)) where !(table == "openpush-apns" && kind == "live-start") { expected.insert("\(table)/\(kind)") }
        }
        #expect(expected.subtracting(checked).sorted() == [], "table/kind pairs no device received")
        #expect(try await fixture.stats(.ios)["violations"]?.liveInteger == 0)
        #expect(try await fixture.stats(.android)["violations"]?.liveInteger == 0)
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        FileHandle.standardError.write(Data("""
            profiles e2e: \(devices.count) devices, \(Self.kinds.count * profiles.count) jobs, \(entries) payloads checked \
            against \(checked.count) table/kind pairs in \(seconds) s

            """.utf8))
    }
}
