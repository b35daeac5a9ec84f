internal import HeraldCrypto
import Foundation

/// `HERALD_CREDENTIALS_KEY`: the AES-256-GCM key provider credentials are stored under.
public struct CredentialsKey: Sendable {
    let key: AESGCMKey

    /// A key from base64 text of 32 bytes; an error names the variable.
    public init(base64: String) throws(PostgresError) {
        do {
            key = try AESGCMKey(base64: base64)
        } catch {
            throw PostgresError(.configuration, "HERALD_CREDENTIALS_KEY: \(error.message)")
        }
    }

    /// The key from `HERALD_CREDENTIALS_KEY`.
    public static func fromEnvironment(_ environment: [String: String]? = nil) throws(PostgresError) -> CredentialsKey {
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard let text = environment["HERALD_CREDENTIALS_KEY"], !text.isEmpty else {
            throw PostgresError(.configuration, "HERALD_CREDENTIALS_KEY is not set (32 random bytes, base64: `openssl rand -base64 32`)")
        }
        return try CredentialsKey(base64: text)
    }

    func seal(_ text: String, binding: String) throws(PostgresError) -> String {
        do {
            return "\\x" + Hex.encode(try AESGCM.seal(Array(text.utf8), key: key, associatedData: Array(binding.utf8)))
        } catch {
            throw PostgresError(.credentials, "cannot encrypt \(binding): \(error.message)")
        }
    }

    func open(_ bytea: String, binding: String) throws(PostgresError) -> String {
        guard let sealed = Self.bytes(fromBytea: bytea) else {
            throw PostgresError(.credentials, "\(binding) is not a bytea value")
        }
        do {
            return String(decoding: try AESGCM.open(sealed, key: key, associatedData: Array(binding.utf8)), as: UTF8.self)
        } catch {
            throw PostgresError(.credentials, "cannot decrypt \(binding): wrong HERALD_CREDENTIALS_KEY, or the stored value was altered")
        }
    }

    /// Bytes of a `bytea` in PostgreSQL's hex output format (`\x0a1b…`).
    static func bytes(fromBytea text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2 - 1)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}

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
    public var apns: APNsTokenCredentials?
    public var fcm: FCMCredentials?
    /// `sdk` or `plain`.
    public var payloadProfile: String
    public var defaultTimeZone: String
    /// Why APNs / FCM sends are halted; nil = sending.
    public var apnsHaltedReason: String?
    public var fcmHaltedReason: String?

    /// An app's settings; halts are read from the database, never written through this type.
    public init(id: String, name: String, apns: APNsTokenCredentials? = nil, fcm: FCMCredentials? = nil,
                payloadProfile: String = "sdk", defaultTimeZone: String = "UTC",
                apnsHaltedReason: String? = nil, fcmHaltedReason: String? = nil) {
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
        fcm_project_id, fcm_credentials, payload_profile, default_time_zone, apns_halted_reason, fcm_halted_reason, apns_auth
        """

    /// The app with decrypted credentials; nil when unknown. A wrong key or an altered
    /// ciphertext is a `credentials` error that says so.
    public func app(id: String) async throws(PostgresError) -> AppSettings? {
        let rows = try await pool.query("SELECT \(Self.settingsColumns) FROM apps WHERE id = $1", [id])
        guard let row = rows.rows.first else { return nil }
        return try decode(row)
    }

    /// An `apps` row of ``settingsColumns`` with its credentials decrypted.
    private func decode(_ row: [String?]) throws(PostgresError) -> AppSettings? {
        guard let appID = row[0], let name = row[1] else { return nil }
        var apns: APNsTokenCredentials?
        if row[13] == "token", let keyID = row[2], let teamID = row[3], let bundleID = row[4], let environment = row[5], let sealed = row[6] {
            apns = APNsTokenCredentials(keyID: keyID, teamID: teamID, bundleID: bundleID, environment: environment,
                                        privateKeyPEM: try key.open(sealed, binding: Self.binding(appID, "apns_credentials")))
        }
        var fcm: FCMCredentials?
        if let project = row[7], let sealed = row[8] {
            fcm = FCMCredentials(projectID: project, serviceAccountJSON: try key.open(sealed, binding: Self.binding(appID, "fcm_credentials")))
        }
        return AppSettings(id: appID, name: name, apns: apns, fcm: fcm, payloadProfile: row[9] ?? "sdk",
                           defaultTimeZone: row[10] ?? "UTC", apnsHaltedReason: row[11], fcmHaltedReason: row[12])
    }

    /// Adds a new app; an `invalidState` error when the id is taken (nothing is replaced).
    public func insert(_ app: AppSettings) async throws(PostgresError) {
        let sealed = try seal(app)
        let inserted = try await pool.query("""
            INSERT INTO apps (id, name, apns_auth, apns_key_id, apns_team_id, apns_bundle_id, apns_environment, apns_credentials,
                              fcm_project_id, fcm_credentials, payload_profile, default_time_zone)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9, $10::bytea, $11, $12)
            ON CONFLICT (id) DO NOTHING
            """, [app.id, app.name, app.apns == nil ? nil : "token", app.apns?.keyID, app.apns?.teamID, app.apns?.bundleID,
                  app.apns?.environment, sealed.apns, app.fcm?.projectID, sealed.fcm, app.payloadProfile, app.defaultTimeZone],
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
            // Certificate credentials have no place in AppSettings: writing it back would drop them.
            if row[13] == "certificate" {
                throw PostgresError(.invalidState, "app \(id) uses APNs certificate auth, which this command cannot change")
            }
            if let refusal = change(&app) { throw PostgresError(.invalidState, refusal) }
            app.id = id
            let sealed = try seal(app)
            try await connection.query("""
                UPDATE apps SET name = $2, apns_auth = $3, apns_key_id = $4, apns_team_id = $5, apns_bundle_id = $6,
                                apns_environment = $7, apns_credentials = $8::bytea, fcm_project_id = $9, fcm_credentials = $10::bytea,
                                payload_profile = $11, default_time_zone = $12, updated_at = now()
                WHERE id = $1
                """, [id, app.name, app.apns == nil ? nil : "token", app.apns?.keyID, app.apns?.teamID, app.apns?.bundleID,
                      app.apns?.environment, sealed.apns, app.fcm?.projectID, sealed.fcm, app.payloadProfile, app.defaultTimeZone])
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

    /// Re-seals every app's credentials, decrypted with `old`, under this repository's key, in
    /// one transaction: when any value does not open under `old`, nothing changes and the
    /// `credentials` error names the app. Returns how many apps had credentials.
    public func rekey(from old: CredentialsKey) async throws(PostgresError) -> Int {
        try await pool.withTransaction { connection throws(PostgresError) -> Int in
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
                        plaintext = try old.open(sealed, binding: binding)
                    } catch {
                        throw PostgresError(.credentials, "app \(id): \(column) does not decrypt under the old key; nothing was changed")
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
        let apns = try app.apns.map { credentials throws(PostgresError) in
            try key.seal(credentials.privateKeyPEM, binding: Self.binding(app.id, "apns_credentials"))
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

    /// Creates or replaces a notification channel.
    public func upsertChannel(appID: String, id: String, name: String, importance: String = "default", sound: String? = nil) async throws(PostgresError) {
        try await pool.query("""
            INSERT INTO channels (app_id, id, name, importance, sound) VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (app_id, id) DO UPDATE SET name = EXCLUDED.name, importance = EXCLUDED.importance, sound = EXCLUDED.sound
            """, [appID, id, name, importance, sound])
    }

    /// The app's channels: id → (name, importance, sound).
    public func channels(appID: String) async throws(PostgresError) -> [String: (name: String, importance: String, sound: String?)] {
        let rows = try await pool.query("SELECT id, name, importance, sound FROM channels WHERE app_id = $1", [appID])
        var channels: [String: (name: String, importance: String, sound: String?)] = [:]
        for row in rows.rows {
            guard let id = row[0], let name = row[1], let importance = row[2] else { continue }
            channels[id] = (name, importance, row[3])
        }
        return channels
    }
}
