import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct AppRepositoryTests {
    static let keyA = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE="
    static let keyB = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="

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
        try await apps.upsertChannel(appID: "other", id: "news", name: "News", importance: "high")
        #expect(try await apps.channels(appID: "other")["news"]?.importance == "high")
        await #expect(throws: PostgresError.self) { try CredentialsKey(base64: "short") }
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

        // Rekey: everything opens under the new key, nothing under the old one; a wrong old key changes nothing.
        let rekeyed = AppRepository(pool: pool, key: try CredentialsKey(base64: Self.keyB))
        #expect(try await rekeyed.rekey(from: try CredentialsKey(base64: Self.keyA)) == 1)
        #expect(try await rekeyed.app(id: "demo")?.apns == apns)
        await #expect(throws: PostgresError.self) { try await apps.app(id: "demo") }
        await #expect {
            try await rekeyed.rekey(from: try CredentialsKey(base64: Self.keyA))
        } throws: { error in
            (error as? PostgresError)?.code == .credentials && (error as? PostgresError)?.message.contains("nothing was changed") == true
        }
        #expect(try await rekeyed.app(id: "demo")?.fcm == fcm)
        await database.tearDown(pool)
    }
}
