internal import HeraldCrypto
public import HeraldCore
import Foundation

/// APNs token-auth settings and the `.p8` key (PKCS#8 PEM).
public struct APNsTokenCredentials: Sendable, Equatable {
    public var keyID: String
    public var teamID: String
    public var bundleID: String
    /// `production` or `sandbox`.
    public var environment: String
    public var privateKeyPEM: String

    /// Token credentials.
    public init(keyID: String, teamID: String, bundleID: String, environment: String, privateKeyPEM: String) {
        self.keyID = keyID
        self.teamID = teamID
        self.bundleID = bundleID
        self.environment = environment
        self.privateKeyPEM = privateKeyPEM
    }
}

/// APNs certificate-auth settings: Apple's client certificate for the app and its private key
/// (both PEM, the key unencrypted PKCS#8), sealed together in `apps.apns_credentials`.
public struct APNsCertificateCredentials: Sendable, Equatable {
    public var bundleID: String
    /// `production` or `sandbox`.
    public var environment: String
    public var certificatePEM: String
    public var keyPEM: String

    /// Certificate credentials.
    public init(bundleID: String, environment: String, certificatePEM: String, keyPEM: String) {
        self.bundleID = bundleID
        self.environment = environment
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }

    /// The sealed text: the certificate, then the key.
    var sealedText: String { certificatePEM + (certificatePEM.hasSuffix("\n") ? "" : "\n") + keyPEM }

    /// Splits a sealed text back at the key's PEM header.
    init?(bundleID: String, environment: String, sealedText: String) {
        guard let keyStart = sealedText.range(of: "-----BEGIN PRIVATE KEY-----") else { return nil }
        self.init(bundleID: bundleID, environment: environment, certificatePEM: String(sealedText[..<keyStart.lowerBound]),
                  keyPEM: String(sealedText[keyStart.lowerBound...]))
    }
}

/// FCM HTTP v1 settings: the project and its service-account JSON.
public struct FCMCredentials: Sendable, Equatable {
    public var projectID: String
    public var serviceAccountJSON: String

    /// FCM credentials.
    public init(projectID: String, serviceAccountJSON: String) {
        self.projectID = projectID
        self.serviceAccountJSON = serviceAccountJSON
    }
}

/// An app with its credentials decrypted.
public struct AppSettings: Sendable, Equatable {
    public var id: String
    public var name: String
    /// APNs token auth (a `.p8` key); nil for an app without APNs or with certificate auth.
    public var apns: APNsTokenCredentials?
    /// APNs certificate auth; never set together with ``apns``.
    public var apnsCertificate: APNsCertificateCredentials?
    public var fcm: FCMCredentials?
    /// `sdk` or `plain`.
    public var payloadProfile: String
    public var defaultTimeZone: String
    /// Why APNs / FCM sends are halted; nil = sending.
    public var apnsHaltedReason: String?
    public var fcmHaltedReason: String?
    /// The app's quiet window and whether jobs respect it when they do not say.
    public var quietHours = AppQuietHours()
    /// The app's own provider ceilings, sends a minute over all workers (`apps.apns_rate_per_minute`,
    /// `fcm_rate_per_minute`): nil takes the workers' `HERALD_*_RATE_PER_MINUTE`, 0 is none.
    public var apnsRatePerMinute: Int?
    public var fcmRatePerMinute: Int?
    /// The app's notification channels by key (read with the app, so a shard sees the current versions).
    public var channels: [String: NotificationChannel] = [:]
    /// Why stored APNs / FCM credentials could not be opened under any configured key (read by
    /// ``AppRepository/settingsForDelivery(id:)`` only): that provider's sends halt, the other's go on.
    public var apnsUnreadable: String?
    public var fcmUnreadable: String?

    /// An app's settings; halts are read from the database, never written through this type.
    public init(id: String, name: String, apns: APNsTokenCredentials? = nil, fcm: FCMCredentials? = nil,
                payloadProfile: String = "sdk", defaultTimeZone: String = "UTC",
                apnsHaltedReason: String? = nil, fcmHaltedReason: String? = nil,
                channels: [String: NotificationChannel] = [:]) {
        self.channels = channels
        self.id = id
        self.name = name
        self.apns = apns
        self.fcm = fcm
        self.payloadProfile = payloadProfile
        self.defaultTimeZone = defaultTimeZone
        self.apnsHaltedReason = apnsHaltedReason
        self.fcmHaltedReason = fcmHaltedReason
    }
}

/// An app's settings without its secrets (nothing is decrypted to list apps).
public struct AppSummary: Sendable, Equatable {
    public var id: String
    public var name: String
    /// `token`, `certificate`, or nil when the app has no APNs credentials.
    public var apnsAuth: String?
    public var apnsKeyID: String?
    public var apnsTeamID: String?
    public var apnsBundleID: String?
    public var apnsEnvironment: String?
    public var fcmProjectID: String?
    public var payloadProfile: String
    public var defaultTimeZone: String
    public var apnsHaltedReason: String?
    public var fcmHaltedReason: String?
    /// `updated_at`, RFC 3339 as PostgreSQL prints it.
    public var updatedAt: String
}

/// `apps`: tenants and their provider credentials, encrypted with AES-256-GCM at rest. Each
/// ciphertext is bound to its app and column, so a value copied elsewhere does not decrypt.
public struct AppRepository: Sendable {
    private let pool: PostgresPool
    private let key: CredentialsKey

    /// A repository using `pool`, encrypting under `key`.
    public init(pool: PostgresPool, key: CredentialsKey) {
        self.pool = pool
        self.key = key
    }

    static func binding(_ appID: String, _ column: String) -> String { "herald:apps:\(appID):\(column)" }

    /// `apns_auth` … `apns_credentials` as query values: token auth, certificate auth, or none.
    static func apnsValues(_ app: AppSettings, sealed: String?) -> [String?] {
        if let token = app.apns {
            return ["token", token.keyID, token.teamID, token.bundleID, token.environment, sealed]
        }
        if let certificate = app.apnsCertificate {
            return ["certificate", nil, nil, certificate.bundleID, certificate.environment, sealed]
        }
        return [nil, nil, nil, nil, nil, nil]
    }

    /// `apns_rate_per_minute`, `fcm_rate_per_minute` as query values.
    static func ceilingValues(_ app: AppSettings) -> [String?] {
        [app.apnsRatePerMinute.map { String($0) }, app.fcmRatePerMinute.map { String($0) }]
    }

    /// `quiet_start`, `quiet_end` (`HH:MM`) and `respect_quiet_hours` as query values.
    static func quietValues(_ quiet: AppQuietHours) -> [String?] {
        func clock(_ minutes: Int) -> String {
            let hours = minutes / 60, rest = minutes % 60
            return (hours < 10 ? "0" : "") + "\(hours):" + (rest < 10 ? "0" : "") + "\(rest)"
        }
        return [clock(quiet.window.startMinutes), clock(quiet.window.endMinutes), quiet.respectByDefault ? "true" : "false"]
    }

    /// Creates the app or replaces its name and credentials (halts are left as they are).
    public func upsert(id: String, name: String, apns: APNsTokenCredentials?, fcm: FCMCredentials?,
                       payloadProfile: String = "sdk") async throws(PostgresError) {
        let apnsSealed = try apns.map { credentials throws(PostgresError) in
            try key.seal(credentials.privateKeyPEM, binding: Self.binding(id, "apns_credentials"))
        }
        let fcmSealed = try fcm.map { credentials throws(PostgresError) in
            try key.seal(credentials.serviceAccountJSON, binding: Self.binding(id, "fcm_credentials"))
        }
        try await pool.query("""
            INSERT INTO apps (id, name, apns_auth, apns_key_id, apns_team_id, apns_bundle_id, apns_environment, apns_credentials,
                              fcm_project_id, fcm_credentials, payload_profile)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9, $10::bytea, $11)
            ON CONFLICT (id) DO UPDATE SET
                name = EXCLUDED.name, apns_auth = EXCLUDED.apns_auth, apns_key_id = EXCLUDED.apns_key_id,
                apns_team_id = EXCLUDED.apns_team_id, apns_bundle_id = EXCLUDED.apns_bundle_id,
                apns_environment = EXCLUDED.apns_environment, apns_credentials = EXCLUDED.apns_credentials,
                fcm_project_id = EXCLUDED.fcm_project_id, fcm_credentials = EXCLUDED.fcm_credentials,
                payload_profile = EXCLUDED.payload_profile, updated_at = now()
            """, [id, name, apns == nil ? nil : "token", apns?.keyID, apns?.teamID, apns?.bundleID, apns?.environment, apnsSealed,
                  fcm?.projectID, fcmSealed, payloadProfile])
    }

    /// The columns ``decode(_:)`` reads, in its order.
    static let settingsColumns = """
        id, name, apns_key_id, apns_team_id, apns_bundle_id, apns_environment, apns_credentials,
        fcm_project_id, fcm_credentials, payload_profile, default_time_zone, apns_halted_reason, fcm_halted_reason, apns_auth,
        quiet_start::text, quiet_end::text, respect_quiet_hours, apns_rate_per_minute::text, fcm_rate_per_minute::text
        """

    /// The app with decrypted credentials; nil when unknown. A wrong key or an altered
    /// ciphertext is a `credentials` error that says so.
    public func app(id: String) async throws(PostgresError) -> AppSettings? {
        let rows = try await pool.query("SELECT \(Self.settingsColumns) FROM apps WHERE id = $1", [id])
        guard let row = rows.rows.first, var app = try decode(row) else { return nil }
        app.channels = try await channels(appID: app.id)
        return app
    }

    /// The app for delivery: like ``app(id:)``, except that credentials which open under no
    /// configured key do not fail the load. They are left out and named in `apnsUnreadable` /
    /// `fcmUnreadable`, so that provider halts (a credential fault) and the other goes on.
    public func settingsForDelivery(id: String) async throws(PostgresError) -> AppSettings? {
        let rows = try await pool.query("SELECT \(Self.settingsColumns) FROM apps WHERE id = $1", [id])
        guard let row = rows.rows.first, var app = try decode(row, tolerant: true) else { return nil }
        app.channels = try await channels(appID: app.id)
        return app
    }

    /// An `apps` row of ``settingsColumns`` with its credentials decrypted; `tolerant`: a value
    /// that opens under no key is noted in the settings instead of failing.
    private func decode(_ row: [String?], tolerant: Bool = false) throws(PostgresError) -> AppSettings? {
        guard let appID = row[0], let name = row[1] else { return nil }
        var apns: APNsTokenCredentials?
        var apnsUnreadable: String?
        if row[13] == "token", let keyID = row[2], let teamID = row[3], let bundleID = row[4], let environment = row[5], let sealed = row[6] {
            do {
                apns = APNsTokenCredentials(keyID: keyID, teamID: teamID, bundleID: bundleID, environment: environment,
                                            privateKeyPEM: try key.open(sealed, binding: Self.binding(appID, "apns_credentials")))
            } catch where tolerant && error.code == .credentials {
                apnsUnreadable = error.message
            }
        }
        var apnsCertificate: APNsCertificateCredentials?
        if row[13] == "certificate", let bundleID = row[4], let environment = row[5], let sealed = row[6] {
            do throws(PostgresError) {
                let text = try key.open(sealed, binding: Self.binding(appID, "apns_credentials"))
                guard let credentials = APNsCertificateCredentials(bundleID: bundleID, environment: environment, sealedText: text) else {
                    throw PostgresError(.credentials, "app \(appID): the stored APNs certificate has no private key")
                }
                apnsCertificate = credentials
            } catch where tolerant && error.code == .credentials {
                apnsUnreadable = error.message
            }
        }
        var fcm: FCMCredentials?
        var fcmUnreadable: String?
        if let project = row[7], let sealed = row[8] {
            do {
                fcm = FCMCredentials(projectID: project, serviceAccountJSON: try key.open(sealed, binding: Self.binding(appID, "fcm_credentials")))
            } catch where tolerant && error.code == .credentials {
                fcmUnreadable = error.message
            }
        }
        var settings = AppSettings(id: appID, name: name, apns: apns, fcm: fcm, payloadProfile: row[9] ?? "sdk",
                                   defaultTimeZone: row[10] ?? "UTC", apnsHaltedReason: row[11], fcmHaltedReason: row[12])
        settings.apnsCertificate = apnsCertificate
        settings.apnsUnreadable = apnsUnreadable
        settings.fcmUnreadable = fcmUnreadable
        settings.quietHours.respectByDefault = row[16] == "t"
        settings.apnsRatePerMinute = row[17].flatMap { Int($0) }
        settings.fcmRatePerMinute = row[18].flatMap { Int($0) }
        if let start = row[14].flatMap(ScheduleRepository.minutes), let end = row[15].flatMap(ScheduleRepository.minutes) {
            settings.quietHours.window = QuietWindow(startMinutes: start, endMinutes: end)
        }
        return settings
    }

    /// Adds a new app; an `invalidState` error when the id is taken (nothing is replaced).
    public func insert(_ app: AppSettings) async throws(PostgresError) {
        let sealed = try seal(app)
        let inserted = try await pool.query("""
            INSERT INTO apps (id, name, apns_auth, apns_key_id, apns_team_id, apns_bundle_id, apns_environment, apns_credentials,
                              fcm_project_id, fcm_credentials, payload_profile, default_time_zone, quiet_start, quiet_end, respect_quiet_hours,
                              apns_rate_per_minute, fcm_rate_per_minute)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9, $10::bytea, $11, $12, $13::time, $14::time, $15::boolean, $16::bigint, $17::bigint)
            ON CONFLICT (id) DO NOTHING
            """, [app.id, app.name] + Self.apnsValues(app, sealed: sealed.apns) + [app.fcm?.projectID, sealed.fcm,
                  app.payloadProfile, app.defaultTimeZone]
                + Self.quietValues(app.quietHours) + Self.ceilingValues(app),
            idempotent: false)
        if inserted.affected == 0 { throw PostgresError(.invalidState, "app \(app.id) already exists (change it with `herald apps update`)") }
    }

    /// Changes an app in one transaction: reads it (row locked, credentials decrypted), lets
    /// `change` edit it, and writes every setting back, re-sealing the credentials. Halts are
    /// left as they are. `change` returns why the change cannot apply, or nil; a reason rolls
    /// back with an `invalidState` error carrying it. A `notFound` error when there is no such
    /// app. Returns the new settings.
    @discardableResult
    public func update(id: String, _ change: (inout AppSettings) -> String?) async throws(PostgresError) -> AppSettings {
        try await pool.withTransaction { connection throws(PostgresError) -> AppSettings in
            let rows = try await connection.query("SELECT \(Self.settingsColumns) FROM apps WHERE id = $1 FOR UPDATE", [id])
            guard let row = rows.rows.first, var app = try decode(row) else { throw PostgresError(.notFound, "no app \(id)") }
            if let refusal = change(&app) { throw PostgresError(.invalidState, refusal) }
            app.id = id
            let sealed = try seal(app)
            try await connection.query("""
                UPDATE apps SET name = $2, apns_auth = $3, apns_key_id = $4, apns_team_id = $5, apns_bundle_id = $6,
                                apns_environment = $7, apns_credentials = $8::bytea, fcm_project_id = $9, fcm_credentials = $10::bytea,
                                payload_profile = $11, default_time_zone = $12, quiet_start = $13::time, quiet_end = $14::time,
                                respect_quiet_hours = $15::boolean, apns_rate_per_minute = $16::bigint, fcm_rate_per_minute = $17::bigint,
                                updated_at = now()
                WHERE id = $1
                """, [id, app.name] + Self.apnsValues(app, sealed: sealed.apns) + [app.fcm?.projectID, sealed.fcm,
                      app.payloadProfile, app.defaultTimeZone]
                    + Self.quietValues(app.quietHours) + Self.ceilingValues(app))
            return app
        }
    }

    /// Every app's settings, by id, without decrypting anything (so no key is needed).
    public static func summaries(pool: PostgresPool) async throws(PostgresError) -> [AppSummary] {
        let rows = try await pool.query("""
            SELECT id, name, apns_auth, apns_key_id, apns_team_id, apns_bundle_id, apns_environment, fcm_project_id,
                   payload_profile, default_time_zone, apns_halted_reason, fcm_halted_reason,
                   to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM apps ORDER BY id
            """)
        return rows.rows.compactMap { row in
            guard let id = row[0], let name = row[1] else { return nil }
            return AppSummary(id: id, name: name, apnsAuth: row[2], apnsKeyID: row[3], apnsTeamID: row[4], apnsBundleID: row[5],
                              apnsEnvironment: row[6], fcmProjectID: row[7], payloadProfile: row[8] ?? "sdk",
                              defaultTimeZone: row[9] ?? "UTC", apnsHaltedReason: row[10], fcmHaltedReason: row[11],
                              updatedAt: row[12] ?? "")
        }
    }

    /// Re-seals every app's credentials under this repository's current key (with its key id),
    /// opening each with `old` or with this repository's keys (current and old), in one
    /// transaction: when any value opens under none of them, nothing changes and the
    /// `credentials` error names the app. Returns how many apps had credentials.
    public func rekey(from old: CredentialsKey? = nil) async throws(PostgresError) -> Int {
        let opener = old.map { key.opening(also: [$0]) } ?? key
        return try await pool.withTransaction { connection throws(PostgresError) -> Int in
            let rows = try await connection.query(
                "SELECT id, apns_credentials, fcm_credentials FROM apps WHERE apns_credentials IS NOT NULL OR fcm_credentials IS NOT NULL ORDER BY id FOR UPDATE")
            for row in rows.rows {
                guard let id = row[0] else { continue }
                var resealed: [String?] = [id, nil, nil]
                for (index, column) in [(1, "apns_credentials"), (2, "fcm_credentials")] {
                    guard let sealed = row[index] else { continue }
                    let binding = Self.binding(id, column)
                    let plaintext: String
                    do {
                        plaintext = try opener.open(sealed, binding: binding)
                    } catch {
                        throw PostgresError(.credentials, "app \(id): \(column) does not decrypt under the old keys or the current one; nothing was changed")
                    }
                    resealed[index] = try key.seal(plaintext, binding: binding)
                }
                try await connection.query("""
                    UPDATE apps SET apns_credentials = COALESCE($2::bytea, apns_credentials),
                                    fcm_credentials = COALESCE($3::bytea, fcm_credentials), updated_at = now()
                    WHERE id = $1
                    """, resealed)
            }
            return rows.rows.count
        }
    }

    private func seal(_ app: AppSettings) throws(PostgresError) -> (apns: String?, fcm: String?) {
        guard app.apns == nil || app.apnsCertificate == nil else {
            throw PostgresError(.invalidState, "app \(app.id) has both an APNs key and an APNs certificate: keep one")
        }
        let apnsText = app.apns?.privateKeyPEM ?? app.apnsCertificate?.sealedText
        let apns = try apnsText.map { text throws(PostgresError) in
            try key.seal(text, binding: Self.binding(app.id, "apns_credentials"))
        }
        let fcm = try app.fcm.map { credentials throws(PostgresError) in
            try key.seal(credentials.serviceAccountJSON, binding: Self.binding(app.id, "fcm_credentials"))
        }
        return (apns, fcm)
    }

    /// Halts (reason non-nil) or resumes (nil) one provider's sends for an app, for every worker.
    public func setHalt(appID: String, provider: String, reason: String?) async throws(PostgresError) {
        let sql: String
        switch provider {
        case "apns": sql = "UPDATE apps SET apns_halted_reason = $2::text, apns_halted_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, updated_at = now() WHERE id = $1"
        case "fcm": sql = "UPDATE apps SET fcm_halted_reason = $2::text, fcm_halted_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, updated_at = now() WHERE id = $1"
        default: throw PostgresError(.unexpectedResult, "unknown provider \(provider) (apns or fcm)")
        }
        let updated = try await pool.query(sql, [appID, reason])
        if updated.affected == 0 { throw PostgresError(.notFound, "no app \(appID)") }
    }

    /// Creates or replaces the app's channel (``ChannelRepository/upsert(appID:_:)``).
    @discardableResult
    public func upsertChannel(appID: String, _ channel: NotificationChannel) async throws(PostgresError) -> NotificationChannel {
        try await ChannelRepository(pool: pool).upsert(appID: appID, channel)
    }

    /// Deletes the app's channel `key` (``ChannelRepository/delete(appID:key:)``).
    @discardableResult
    public func deleteChannel(appID: String, key: String) async throws(PostgresError) -> Bool {
        try await ChannelRepository(pool: pool).delete(appID: appID, key: key)
    }

    /// The app's channels by key (``ChannelRepository/channels(appID:)``).
    public func channels(appID: String) async throws(PostgresError) -> [String: NotificationChannel] {
        try await ChannelRepository(pool: pool).channels(appID: appID)
    }

    static let channelColumns = """
        id, name, description, importance, sound_mode, sound, vibration_mode, vibration_pattern::text, light_mode, light_colour, \
        lockscreen_visibility, badge, bypass_dnd, group_id, android_channel_id, version, ios_sound, ios_interruption_level, \
        ios_relevance_score, ios_thread_id
        """

    /// (mode, value) columns of an off / default / custom setting.
    static func columns<T>(_ setting: NotificationChannel.Setting<T>, custom: String, _ text: (T) -> String) -> (String, String?) {
        switch setting {
        case .off: ("off", nil)
        case .platformDefault: ("default", nil)
        case .custom(let value): (custom, text(value))
        }
    }

    static func channel(_ row: [String?]) -> NotificationChannel? {
        guard let key = row[0], let name = row[1], let version = row[15].flatMap({ Int($0) }) else { return nil }
        var channel = NotificationChannel(key: key, name: name, version: version)
        channel.description = row[2]
        channel.importance = row[3].flatMap(NotificationChannel.Importance.init(rawValue:)) ?? .medium
        func setting<T>(_ mode: String?, _ value: T?) -> NotificationChannel.Setting<T> {
            switch mode {
            case "off": return .off
            case "custom", "pattern", "colour": return value.map { .custom($0) } ?? .platformDefault
            default: return .platformDefault
            }
        }
        channel.sound = setting(row[4], row[5])
        let pattern = row[7].map { $0.trimmingCharacters(in: ["{", "}"]).split(separator: ",").compactMap { Int($0) } }
        channel.vibration = setting(row[6], pattern)
        channel.light = setting(row[8], row[9])
        channel.lockscreenVisibility = row[10].flatMap(NotificationChannel.Visibility.init(rawValue:)) ?? .private
        channel.badge = row[11] == "t"
        channel.bypassDoNotDisturb = row[12] == "t"
        channel.group = row[13]
        channel.pinnedAndroidID = row[14]
        channel.iosSound = row[16]
        channel.iosInterruptionLevel = row[17].flatMap(NotificationContent.InterruptionLevel.init(rawValue:))
        channel.iosRelevanceScore = row[18].flatMap { Double($0) }
        channel.iosThreadID = row[19]
        return channel
    }
}
