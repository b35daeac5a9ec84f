import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct AppRepositoryTests {
    static let keyA = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE="
    static let keyB = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="
    static let keyC = "enl4d3Z1dHNycXBvbm1sa2ppaGdmZWRjYmEwOTg3NjU="

    /// A rotation with no outage: values name their key; old-format values (no key id, as the
    /// previous release sealed them) still open; the old key opens during the rotation and
    /// `rekey` moves everything to the new key; a worker missing the key halts that provider only.
    @Test func keysRotateWithoutAnOutageAndOldFormatValuesStillOpen() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: [])
        let keyA = try CredentialsKey(base64: Self.keyA)
        let keyB = try CredentialsKey(base64: Self.keyB)
        let underA = AppRepository(pool: pool, key: keyA)
        let apns = APNsTokenCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", bundleID: "com.example.app", environment: "sandbox",
                                        privateKeyPEM: "-----BEGIN PRIVATE KEY-----\nQUFB\n-----END PRIVATE KEY-----\n")
        let fcm = FCMCredentials(projectID: "demo-project", serviceAccountJSON: #"{"type":"service_account"}"#)
        try await underA.upsert(id: "demo", name: "Demo", apns: apns, fcm: fcm)
        // Stored as FE 4B, key A's id, then the AES-GCM bytes.
        let prefix = try await pool.query("SELECT encode(substring(fcm_credentials FROM 1 FOR 10), 'hex') FROM apps").rows.first?.first ?? nil
        #expect(prefix == "fe4b" + keyA.id)
        // The previous release's format: the same AES-GCM bytes without the header. Still read.
        try await pool.query("UPDATE apps SET apns_credentials = substring(apns_credentials FROM 11)", idempotent: false)
        #expect(try await underA.app(id: "demo")?.apns == apns)

        // Step 2: workers run with the new key and the old one.
        let rotating = AppRepository(pool: pool, key: keyB.opening(also: try CredentialsKey.oldKeys(Self.keyA)))
        #expect(try await rotating.app(id: "demo")?.fcm == fcm)
        // A worker still on the new key alone cannot open them: it halts both providers, loads the app.
        let newOnly = AppRepository(pool: pool, key: keyB)
        let halted = try #require(try await newOnly.settingsForDelivery(id: "demo"))
        #expect(halted.apns == nil && halted.fcm == nil)
        #expect(halted.apnsUnreadable?.contains("HERALD_CREDENTIALS_OLD_KEYS") == true)
        #expect(halted.fcmUnreadable?.contains("sealed under key \(keyA.id)") == true, "\(halted.fcmUnreadable ?? "nil")")
        // Step 3: rekey (all or nothing) moves every value to key B.
        #expect(try await rotating.rekey() == 1)
        #expect(try await newOnly.app(id: "demo")?.apns == apns)
        #expect(try await newOnly.app(id: "demo")?.fcm == fcm)
        await #expect(throws: PostgresError.self) { try await underA.app(id: "demo") }
        // A bad old key is a configuration error naming its variable.
        #expect {
            try CredentialsKey.oldKeys("\(Self.keyA),not-a-key")
        } throws: { error in
            (error as? PostgresError)?.message.hasPrefix("HERALD_CREDENTIALS_OLD_KEYS") == true
        }
        await database.tearDown(pool)
    }

    @Test func credentialsAreEncryptedAtRestAndAWrongKeyOrTamperingIsClear() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: [])
        let apps = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyA))
        let pem = "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQg\n-----END PRIVATE KEY-----\n"
        let apns = APNsTokenCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", bundleID: "com.example.app", environment: "sandbox", privateKeyPEM: pem)
        let fcm = FCMCredentials(projectID: "demo-project", serviceAccountJSON: #"{"type":"service_account","private_key":"x"}"#)
        try await apps.upsert(id: "demo", name: "Demo", apns: apns, fcm: fcm)
        let loaded = try #require(try await apps.app(id: "demo"))
        #expect(loaded.apns == apns && loaded.fcm == fcm)
        // Nothing readable is stored.
        let stored = try await pool.query("SELECT position('PRIVATE'::bytea IN apns_credentials), position('service_account'::bytea IN fcm_credentials) FROM apps").rows
        #expect(stored == [["0", "0"]])
        // Wrong key.
        let wrong = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyB))
        await #expect {
            try await wrong.app(id: "demo")
        } throws: { error in
            let error = error as? PostgresError
            return error?.code == .credentials && error?.message.contains("HERALD_CREDENTIALS_KEY") == true
        }
        // A ciphertext moved to another app does not decrypt either.
        try await apps.upsert(id: "other", name: "Other", apns: nil, fcm: fcm)
        try await pool.query("UPDATE apps SET fcm_credentials = (SELECT fcm_credentials FROM apps WHERE id = 'demo') WHERE id = 'other'", idempotent: false)
        await #expect(throws: PostgresError.self) { try await apps.app(id: "other") }
        // One flipped byte.
        try await pool.query("UPDATE apps SET apns_credentials = set_byte(apns_credentials, 14, get_byte(apns_credentials, 14) # 1) WHERE id = 'demo'", idempotent: false)
        await #expect {
            try await apps.app(id: "demo")
        } throws: { error in
            (error as? PostgresError)?.code == .credentials
        }
        try await apps.setHalt(appID: "other", provider: "fcm", reason: "credentials")
        #expect(try await pool.query("SELECT fcm_halted_reason, apns_halted_reason FROM apps WHERE id = 'other'").rows == [["credentials", nil]])
        #expect(throws: PostgresError.self) { try CredentialsKey(base64: "short") }
        await database.tearDown(pool)
    }

    @Test func insertUpdateSummariesAndRekey() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: [])
        let apps = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyA))
        let apns = APNsTokenCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", bundleID: "com.example.app", environment: "sandbox",
                                        privateKeyPEM: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        let fcm = FCMCredentials(projectID: "demo-project", serviceAccountJSON: #"{"type":"service_account"}"#)
        try await apps.insert(AppSettings(id: "demo", name: "Demo", apns: apns, fcm: fcm, defaultTimeZone: "Europe/Paris"))
        await #expect {
            try await apps.insert(AppSettings(id: "demo", name: "Again"))
        } throws: { error in
            (error as? PostgresError)?.code == .invalidState
        }
        #expect(try await apps.app(id: "demo")?.defaultTimeZone == "Europe/Paris")

        // Only what the change touches changes; a refusal rolls the whole change back.
        let updated = try await apps.update(id: "demo") { app in
            app.payloadProfile = "plain"
            return nil
        }
        #expect(updated.apns == apns && updated.fcm == fcm && updated.payloadProfile == "plain")
        await #expect(throws: PostgresError.self) {
            try await apps.update(id: "demo") { app in
                app.name = "Renamed"
                return "no"
            }
        }
        #expect(try await apps.app(id: "demo")?.name == "Demo")
        await #expect {
            try await apps.update(id: "nobody") { _ in nil }
        } throws: { error in
            (error as? PostgresError)?.code == .notFound
        }

        let summaries = try await AppRepository.summaries(pool: pool)
        #expect(summaries.map(\.id) == ["demo"])
        #expect(summaries.first?.apnsKeyID == "ABC123DEFG" && summaries.first?.fcmProjectID == "demo-project")

        // Rekey: everything opens under the new key, nothing under the old one; again is a no-op
        // re-seal; keys that open nothing change nothing.
        let rekeyed = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyB))
        #expect(try await rekeyed.rekey(from: try CredentialsKey(base64: Self.keyA)) == 1)
        #expect(try await rekeyed.app(id: "demo")?.apns == apns)
        await #expect(throws: PostgresError.self) { try await apps.app(id: "demo") }
        #expect(try await rekeyed.rekey() == 1, "values already under the current key are re-sealed as they are")
        let stranger = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyC))
        await #expect {
            try await stranger.rekey(from: try CredentialsKey(base64: Self.keyA))
        } throws: { error in
            (error as? PostgresError)?.code == .credentials && (error as? PostgresError)?.message.contains("nothing was changed") == true
        }
        #expect(try await rekeyed.app(id: "demo")?.fcm == fcm)
        await database.tearDown(pool)
    }

    /// Certificate auth: the certificate and key are sealed together, read back apart, kept by
    /// an update that changes something else, and an app cannot hold a key and a certificate.
    @Test func apnsCertificateCredentialsRoundTrip() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: [])
        let apps = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyA))
        let certificate = APNsCertificateCredentials(bundleID: "com.example.shop", environment: "sandbox",
                                                     certificatePEM: "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n",
                                                     keyPEM: "-----BEGIN PRIVATE KEY-----\nREVG\n-----END PRIVATE KEY-----\n")
        var app = AppSettings(id: "shop", name: "Shop")
        app.apnsCertificate = certificate
        try await apps.insert(app)
        #expect(try await apps.app(id: "shop")?.apnsCertificate == certificate)
        #expect(try await apps.app(id: "shop")?.apns == nil)
        let row = try await pool.query("SELECT apns_auth, apns_key_id, apns_bundle_id, apns_environment FROM apps").rows
        #expect(row == [["certificate", nil, "com.example.shop", "sandbox"]])
        try await apps.update(id: "shop") { app in
            app.name = "Shop 2"
            return nil
        }
        #expect(try await apps.settingsForDelivery(id: "shop")?.apnsCertificate == certificate)
        await #expect(throws: PostgresError.self) {
            try await apps.update(id: "shop") { app in
                app.apns = APNsTokenCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", bundleID: "com.example.shop", environment: "sandbox",
                                                privateKeyPEM: "-----BEGIN PRIVATE KEY-----\nQUFB\n-----END PRIVATE KEY-----\n")
                return nil
            }
        }
        #expect(try await apps.app(id: "shop")?.name == "Shop 2", "the refused update changed nothing")
        await database.tearDown(pool)
    }

    /// Issue 9: every Android setting change moves the version (and so the channel id
    /// nf_<key>_v<version>); renaming, the iOS side and an unchanged write do not.
    @Test func androidSettingChangesBumpTheChannelVersion() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["app"])
        let apps = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyA))
        var channel = NotificationChannel(key: "orders", name: "Orders")
        channel.importance = .high
        channel.vibration = .custom([0, 250, 100, 250])
        channel.light = .custom("#ff8800")
        channel.iosInterruptionLevel = .timeSensitive
        var stored = try await apps.upsertChannel(appID: "app", channel)
        #expect(stored.version == 1 && stored.androidID == "nf_orders_v1")
        #expect(stored.vibration == .custom([0, 250, 100, 250]) && stored.light == .custom("#ff8800") && stored.iosInterruptionLevel == .timeSensitive)
        stored = try await apps.upsertChannel(appID: "app", channel)
        #expect(stored.version == 1)
        channel.name = "Your orders"
        channel.iosSound = "chime.caf"
        stored = try await apps.upsertChannel(appID: "app", channel)
        #expect(stored.version == 1 && stored.name == "Your orders" && stored.iosSound == "chime.caf")
        var expected = 1
        let changes: [(inout NotificationChannel) -> Void] = [
            { $0.importance = .urgent }, { $0.sound = .custom("bell") }, { $0.sound = .off }, { $0.vibration = .off },
            { $0.light = .platformDefault }, { $0.lockscreenVisibility = .public }, { $0.badge = false }, { $0.bypassDoNotDisturb = true },
            { $0.group = "shop" },
        ]
        for change in changes {
            change(&channel)
            expected += 1
            stored = try await apps.upsertChannel(appID: "app", channel)
            #expect(stored.version == expected)
        }
        #expect(stored.androidID == "nf_orders_v\(expected)")
        // A write by someone else (the upstream API) bumps it too.
        try await pool.query("UPDATE channels SET importance = 'low' WHERE app_id = 'app' AND id = 'orders'", idempotent: false)
        let loaded = try #require(try await apps.app(id: "app")?.channels["orders"])
        #expect(loaded.version == expected + 1 && loaded.importance == .low)
        channel.pinnedAndroidID = "orders"
        #expect(try await apps.upsertChannel(appID: "app", channel).androidID == "orders")
        #expect(try await apps.deleteChannel(appID: "app", key: "orders"))
        #expect(try await apps.channels(appID: "app").isEmpty)
        await database.tearDown(pool)
    }
}
