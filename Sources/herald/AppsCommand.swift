import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldPostgres

/// `herald apps add|update|show|list|rekey`: an app's provider credentials and settings.
/// Credentials are checked before they are stored (the `.p8` must be an EC P-256 PKCS#8 key, the
/// service account must parse), stored sealed under `HERALD_CREDENTIALS_KEY`, and never printed:
/// `show` prints SHA-256 fingerprints only.
enum AppsCommand {
    static let usage = """
    usage: herald apps add --id APP --name NAME [APNS] [--fcm-service-account FILE.json] [--time-zone AREA/CITY] [PROFILE] [QUIET] [RATES]
           herald apps update --id APP [--name NAME] [APNS] [--fcm-service-account FILE.json] [--time-zone Z] [PROFILE] [QUIET] [RATES]
           herald apps show --id APP [--json]
           herald apps list [--json]
           herald apps rekey [--old-key-env VAR]
      APNS: token auth: --apns-key FILE.p8 --apns-key-id KEYID --apns-team-id TEAMID --bundle-id BUNDLE [--apns-environment E]
            (update: any of them; all but the environment when the app has no APNs key yet)
            or certificate auth: --apns-certificate FILE.p12|FILE.pem [--apns-certificate-password-env VAR] [--bundle-id B]
            [--apns-environment E]: Apple's push certificate with its key (a Keychain .p12, or PEM with both; the
            password, if any, in $VAR). The bundle id is the certificate's (its subject UID); the environment is
            the certificate's when its name says (Development/Production), else production. Either auth replaces
            the other; an expired certificate is refused. E: production|sandbox
      PROFILE: --payload-profile sdk|plain|openpush|pushbib (schemas/payloads.md)
      QUIET: --quiet-hours HH:MM-HH:MM (devices without their own window; default 20:00-08:00)
             --respect-quiet-hours true|false (jobs without delivery.respect_quiet_hours; default false)
      RATES: --apns-rate-per-minute N|default  --fcm-rate-per-minute N|default
             the app's own ceiling, sends a minute over all workers (0 = none; default = the workers'
             HERALD_APNS_RATE_PER_MINUTE / HERALD_FCM_RATE_PER_MINUTE; docs/SCHEDULING.md)
      Every action also takes --database-url URL (default HERALD_DATABASE_URL). Credentials are sealed
      under HERALD_CREDENTIALS_KEY; rekey re-seals every app's under it (with its key id), opening them with
      HERALD_CREDENTIALS_KEY, the keys of HERALD_CREDENTIALS_OLD_KEYS and the key in $VAR.
    """

    /// A refusal worded for the user, with its exit status.
    struct Refusal: Error {
        let status: Int32
        let message: String
    }

    static func run(_ arguments: [String]) async -> Int32 {
        guard let action = arguments.first, ["add", "update", "show", "list", "rekey"].contains(action) else {
            Console.error("herald apps: name an action: add, update, show, list or rekey\n\(usage)")
            return 64
        }
        var options = OptionParser(Array(arguments.dropFirst()), command: "herald apps \(action)", usage: usage)
        let url = options.string("--database-url")
        do {
            switch action {
            case "add", "update":
                let change = try AppChange(&options)
                guard options.finish() else { return 64 }
                return try await save(change, adding: action == "add", url: url)
            case "show":
                let id = options.string("--id")
                let json = options.flag("--json")
                guard options.finish() else { return 64 }
                guard let id else { throw Refusal(status: 64, message: "--id is required\n\(usage)") }
                return try await show(id, json: json, url: url)
            case "list":
                let json = options.flag("--json")
                guard options.finish() else { return 64 }
                return try await list(json: json, url: url)
            default:
                let variable = options.string("--old-key-env")
                guard options.finish() else { return 64 }
                return try await rekey(oldKeyVariable: variable, url: url)
            }
        } catch let refusal as Refusal {
            Console.error("herald apps \(action): \(refusal.message)")
            return refusal.status
        } catch let error as PostgresError {
            Console.error("herald apps \(action): \(error.message)")
            return error.code == .credentials ? 65 : CommandEnvironment.exitStatus(error)
        } catch {
            Console.error("herald apps \(action): \(error)")
            return 70
        }
    }

    // MARK: - Actions

    private static func save(_ change: AppChange, adding: Bool, url: String?) async throws -> Int32 {
        let key = try credentialsKey()
        var app = AppSettings(id: change.id, name: change.name ?? "")
        if adding {
            guard change.name != nil else { throw Refusal(status: 64, message: "--name is required\n\(usage)") }
            if let refusal = change.apply(to: &app) { throw Refusal(status: 64, message: refusal) }
        }
        let pool = try openPool(url)
        let apps = AppRepository(pool: pool, key: key)
        do {
            if adding {
                try await apps.insert(app)
            } else {
                try await apps.update(id: change.id) { app in change.apply(to: &app) }
            }
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        print(adding ? "added app \(change.id)" : "updated app \(change.id): \(change.summary)")
        return 0
    }

    private static func show(_ id: String, json: Bool, url: String?) async throws -> Int32 {
        let key = try credentialsKey()
        let pool = try openPool(url)
        let app: AppSettings?
        do {
            app = try await AppRepository(pool: pool, key: key).app(id: id)
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        guard let app else { throw Refusal(status: 66, message: "no app \(id)") }
        let description = AppDescription(app)
        print(json ? description.json.serialized() : description.text)
        return 0
    }

    private static func list(json: Bool, url: String?) async throws -> Int32 {
        let pool = try openPool(url)
        let apps: [AppSummary]
        do {
            apps = try await AppRepository.summaries(pool: pool)
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        if json {
            print(JSONValue.array(apps.map(AppDescription.json)).serialized())
            return 0
        }
        for app in apps {
            var fields = ["\(app.id)", "name=\(quoted(app.name))", "profile=\(app.payloadProfile)", "time_zone=\(app.defaultTimeZone)"]
            if let auth = app.apnsAuth {
                fields.append("apns=\(auth):\(app.apnsBundleID ?? "-"):\(app.apnsEnvironment ?? "-")")
            } else {
                fields.append("apns=none")
            }
            fields.append("fcm=\(app.fcmProjectID ?? "none")")
            if let reason = app.apnsHaltedReason { fields.append("apns_halted=\(reason)") }
            if let reason = app.fcmHaltedReason { fields.append("fcm_halted=\(reason)") }
            print(fields.joined(separator: " "))
        }
        if apps.isEmpty { Console.error("herald apps list: no apps") }
        return 0
    }

    private static func rekey(oldKeyVariable: String?, url: String?) async throws -> Int32 {
        let newKey = try credentialsKey()
        var oldKey: CredentialsKey?
        if let oldKeyVariable {
            guard let text = CommandEnvironment.variables[oldKeyVariable], !text.isEmpty else {
                throw Refusal(status: 78, message: "\(oldKeyVariable) is not set: it must hold the old HERALD_CREDENTIALS_KEY (base64)")
            }
            do {
                oldKey = try CredentialsKey(base64: text)
            } catch {
                throw Refusal(status: 78, message: "\(oldKeyVariable): not a 32-byte base64 key")
            }
        }
        let pool = try openPool(url)
        let count: Int
        do {
            count = try await AppRepository(pool: pool, key: newKey).rekey(from: oldKey)
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        print("re-sealed the credentials of \(count) app\(count == 1 ? "" : "s") under HERALD_CREDENTIALS_KEY")
        return 0
    }

    // MARK: - Helpers

    private static func credentialsKey() throws -> CredentialsKey {
        do {
            return try CredentialsKey.fromEnvironment(CommandEnvironment.variables)
        } catch {
            throw Refusal(status: 78, message: error.message)
        }
    }

    private static func openPool(_ url: String?) throws -> PostgresPool {
        do {
            return try CommandEnvironment.pool(url: url, applicationName: "herald-apps")
        } catch {
            throw Refusal(status: 78, message: error.description)
        }
    }

    static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        JSONValue.writeString(text, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// What `apps add` / `apps update` were asked to set, read and checked before the database is
/// touched. Nil fields are left as they are.
struct AppChange {
    var id: String
    var name: String?
    var apnsKeyPEM: String?
    var apnsKeyID: String?
    var apnsTeamID: String?
    var bundleID: String?
    var apnsEnvironment: String?
    /// `--apns-certificate`: Apple's client certificate and its key.
    var apnsCertificate: ClientIdentity?
    var fcm: (account: FCMServiceAccount, json: String)?
    var timeZone: String?
    var payloadProfile: String?
    var quietWindow: QuietWindow?
    var respectQuietHours: Bool?
    /// A per-app ceiling: `.some(nil)` goes back to the workers' default.
    var apnsRatePerMinute: Int??
    var fcmRatePerMinute: Int??

    typealias Refusal = AppsCommand.Refusal

    init(_ options: inout OptionParser) throws {
        guard let id = options.string("--id") else { throw Refusal(status: 64, message: "--id is required\n\(AppsCommand.usage)") }
        guard AppChange.isAppID(id) else { throw Refusal(status: 65, message: "--id must be 1–64 of a-z 0-9 _ -, not \(AppsCommand.quoted(id))") }
        self.id = id
        name = options.string("--name")
        if let name, name.isEmpty || name.count > 200 { throw Refusal(status: 65, message: "--name must be 1–200 characters") }
        apnsKeyID = try AppChange.appleID(options.string("--apns-key-id"), "--apns-key-id")
        apnsTeamID = try AppChange.appleID(options.string("--apns-team-id"), "--apns-team-id")
        bundleID = options.string("--bundle-id")
        if let bundleID {
            let valid = (1...155).contains(bundleID.utf8.count) && bundleID.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
            }
            guard valid else { throw Refusal(status: 65, message: "--bundle-id must be a bundle id (A-Z a-z 0-9 . -), not \(AppsCommand.quoted(bundleID))") }
        }
        apnsEnvironment = options.string("--apns-environment")
        if let environment = apnsEnvironment, environment != "production" && environment != "sandbox" {
            throw Refusal(status: 65, message: "--apns-environment is production or sandbox, not \(AppsCommand.quoted(environment))")
        }
        timeZone = options.string("--time-zone")
        if let zone = timeZone {
            // The database only checks the shape; whether the zone exists is Herald's to check.
            let shaped = zone.utf8.count <= 64 && zone.first?.isLetter == true
            guard shaped, TimeZone(identifier: zone) != nil else {
                throw Refusal(status: 65, message: "--time-zone \(AppsCommand.quoted(zone)) is not a time zone this system knows (IANA name, e.g. Europe/Paris)")
            }
        }
        payloadProfile = options.string("--payload-profile")
        if let profile = payloadProfile, PayloadProfile(rawValue: profile) == nil {
            let names = PayloadProfile.allCases.map(\.rawValue).joined(separator: ", ")
            throw Refusal(status: 65, message: "--payload-profile is one of \(names), not \(AppsCommand.quoted(profile))")
        }
        if let text = options.string("--quiet-hours") {
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, let start = Identifiers.parseClockTime(String(parts[0])),
                  let end = Identifiers.parseClockTime(String(parts[1])) else {
                throw Refusal(status: 65, message: "--quiet-hours is HH:MM-HH:MM (e.g. 20:00-08:00; equal times turn the window off), not \(AppsCommand.quoted(text))")
            }
            quietWindow = QuietWindow(startMinutes: start, endMinutes: end)
        }
        if let text = options.string("--respect-quiet-hours") {
            guard text == "true" || text == "false" else {
                throw Refusal(status: 65, message: "--respect-quiet-hours is true or false, not \(AppsCommand.quoted(text))")
            }
            respectQuietHours = text == "true"
        }
        apnsRatePerMinute = try AppChange.ceiling(options.string("--apns-rate-per-minute"), "--apns-rate-per-minute")
        fcmRatePerMinute = try AppChange.ceiling(options.string("--fcm-rate-per-minute"), "--fcm-rate-per-minute")
        if let path = options.string("--apns-key") {
            apnsKeyPEM = try AppChange.p8(at: path)
        }
        let passwordVariable = options.string("--apns-certificate-password-env")
        if let path = options.string("--apns-certificate") {
            guard apnsKeyPEM == nil, apnsKeyID == nil, apnsTeamID == nil else {
                throw Refusal(status: 64, message: "--apns-certificate is certificate auth; --apns-key, --apns-key-id and --apns-team-id are token auth: give one")
            }
            let identity = try AppChange.certificate(at: path, passwordVariable: passwordVariable, now: Int64(Date().timeIntervalSince1970))
            if let bundleID, let uid = identity.subjectUID, bundleID != uid {
                throw Refusal(status: 65, message: "the certificate is for \(uid), not --bundle-id \(bundleID)")
            }
            if let hint = identity.environmentHint, let apnsEnvironment, hint != apnsEnvironment {
                throw Refusal(status: 65, message: "the certificate is a \(hint) certificate (\(identity.commonName ?? "")), not --apns-environment \(apnsEnvironment)")
            }
            guard identity.subjectUID != nil || bundleID != nil else {
                throw Refusal(status: 64, message: "the certificate names no bundle id (no subject UID): give --bundle-id")
            }
            apnsCertificate = identity
        } else if passwordVariable != nil {
            throw Refusal(status: 64, message: "--apns-certificate-password-env goes with --apns-certificate")
        }
        if let path = options.string("--fcm-service-account") {
            fcm = try AppChange.serviceAccount(at: path)
        }
    }

    /// Applies the change; returns why it cannot apply (APNs settings incomplete), or nil.
    func apply(to app: inout AppSettings) -> String? {
        if let name { app.name = name }
        if let timeZone { app.defaultTimeZone = timeZone }
        if let payloadProfile { app.payloadProfile = payloadProfile }
        if let quietWindow { app.quietHours.window = quietWindow }
        if let respectQuietHours { app.quietHours.respectByDefault = respectQuietHours }
        if let apnsRatePerMinute { app.apnsRatePerMinute = apnsRatePerMinute }
        if let fcmRatePerMinute { app.fcmRatePerMinute = fcmRatePerMinute }
        if let fcm { app.fcm = FCMCredentials(projectID: fcm.account.projectID, serviceAccountJSON: fcm.json) }
        if let identity = apnsCertificate {
            // Certificate auth, replacing whatever the app had.
            guard let uid = identity.subjectUID ?? bundleID else {
                return "the certificate names no bundle id (no subject UID): give --bundle-id"
            }
            if let bundleID, bundleID != uid { return "the certificate is for \(uid), not --bundle-id \(bundleID)" }
            if let hint = identity.environmentHint, let apnsEnvironment, hint != apnsEnvironment {
                return "the certificate is a \(hint) certificate (\(identity.commonName ?? "")), not --apns-environment \(apnsEnvironment)"
            }
            let environment = apnsEnvironment ?? identity.environmentHint ?? app.apnsCertificate?.environment ?? "production"
            app.apns = nil
            app.apnsCertificate = APNsCertificateCredentials(bundleID: uid, environment: environment,
                                                             certificatePEM: identity.certificatePEM, keyPEM: identity.keyPEM)
            return nil
        }
        let touchesAPNs = apnsKeyPEM != nil || apnsKeyID != nil || apnsTeamID != nil || bundleID != nil || apnsEnvironment != nil
        guard touchesAPNs else { return nil }
        if var certificate = app.apnsCertificate, apnsKeyPEM == nil, apnsKeyID == nil, apnsTeamID == nil {
            // A certificate app: only the environment can change without a new certificate.
            if let bundleID, bundleID != certificate.bundleID {
                return "app \(app.id) authenticates with a certificate for \(certificate.bundleID): a new bundle id needs a new --apns-certificate"
            }
            if let apnsEnvironment { certificate.environment = apnsEnvironment }
            app.apnsCertificate = certificate
            return nil
        }
        if var apns = app.apns {
            if let apnsKeyPEM { apns.privateKeyPEM = apnsKeyPEM }
            if let apnsKeyID { apns.keyID = apnsKeyID }
            if let apnsTeamID { apns.teamID = apnsTeamID }
            if let bundleID { apns.bundleID = bundleID }
            if let apnsEnvironment { apns.environment = apnsEnvironment }
            app.apns = apns
            return nil
        }
        guard let apnsKeyPEM, let apnsKeyID, let apnsTeamID, let bundleID else {
            return app.apnsCertificate == nil
                ? "app \(app.id) has no APNs key yet: --apns-key, --apns-key-id, --apns-team-id and --bundle-id are all required"
                : "app \(app.id) authenticates with a certificate: switching to a key needs --apns-key, --apns-key-id, --apns-team-id and --bundle-id"
        }
        app.apnsCertificate = nil
        app.apns = APNsTokenCredentials(keyID: apnsKeyID, teamID: apnsTeamID, bundleID: bundleID,
                                        environment: apnsEnvironment ?? "production", privateKeyPEM: apnsKeyPEM)
        return nil
    }

    /// The settings named, for the confirmation line (never a secret).
    var summary: String {
        var names: [String] = []
        if name != nil { names.append("name") }
        if apnsKeyPEM != nil { names.append("apns key") }
        if apnsCertificate != nil { names.append("apns certificate") }
        if apnsKeyID != nil { names.append("apns key id") }
        if apnsTeamID != nil { names.append("apns team id") }
        if bundleID != nil { names.append("bundle id") }
        if apnsEnvironment != nil { names.append("apns environment") }
        if fcm != nil { names.append("fcm service account") }
        if timeZone != nil { names.append("time zone") }
        if payloadProfile != nil { names.append("payload profile") }
        if quietWindow != nil { names.append("quiet hours") }
        if respectQuietHours != nil { names.append("respect quiet hours") }
        if apnsRatePerMinute != nil { names.append("apns rate per minute") }
        if fcmRatePerMinute != nil { names.append("fcm rate per minute") }
        return names.isEmpty ? "nothing to change" : names.joined(separator: ", ")
    }

    static func isAppID(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// A rate ceiling option: a whole number of sends a minute (0 = no ceiling), or `default`
    /// (`.some(nil)`: the workers' setting); nil when not given.
    static func ceiling(_ text: String?, _ flag: String) throws -> Int?? {
        guard let text else { return nil }
        if text == "default" { return .some(nil) }
        guard let value = Int(text), (0...1_000_000_000).contains(value) else {
            throw Refusal(status: 65, message: "\(flag) is a whole number of sends a minute (0 = no ceiling) or default, not \(AppsCommand.quoted(text))")
        }
        return .some(value)
    }

    /// Apple's key and team ids: 10 upper-case letters or digits.
    static func appleID(_ text: String?, _ flag: String) throws -> String? {
        guard let text else { return nil }
        let valid = text.utf8.count == 10 && text.utf8.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) }
        guard valid else { throw Refusal(status: 65, message: "\(flag) must be 10 upper-case letters or digits, as Apple shows it") }
        return text
    }

    private static func readText(_ path: String, _ flag: String) throws -> String {
        let bytes: [UInt8]
        do {
            bytes = try InputFile.read(path)
        } catch {
            throw Refusal(status: 66, message: "\(flag): cannot read \(path)")
        }
        guard bytes.count <= 64 * 1024, let text = String(validating: bytes, as: UTF8.self) else {
            throw Refusal(status: 65, message: "\(flag): \(path) is not a text file of at most 64 KiB")
        }
        return text
    }

    /// Apple's push certificate with its key, from a `.p12` or PEM file, opened with the password
    /// in `$passwordVariable`; refused when it cannot be read, has no key, or has expired.
    static func certificate(at path: String, passwordVariable: String?, now: Int64) throws -> ClientIdentity {
        let bytes: [UInt8]
        do {
            bytes = try InputFile.read(path)
        } catch {
            throw Refusal(status: 66, message: "--apns-certificate: cannot read \(path)")
        }
        guard bytes.count <= 256 * 1024 else { throw Refusal(status: 65, message: "--apns-certificate: \(path) is over 256 KiB") }
        var password: String?
        if let passwordVariable {
            guard let value = ProcessInfo.processInfo.environment[passwordVariable] else {
                throw Refusal(status: 78, message: "--apns-certificate-password-env: $\(passwordVariable) is not set")
            }
            password = value
        }
        let identity: ClientIdentity
        do {
            identity = try ClientIdentity.load(bytes, password: password)
        } catch {
            throw Refusal(status: 65, message: "--apns-certificate: \(path): \(error.message)")
        }
        if identity.notAfter <= now {
            throw Refusal(status: 65, message: "--apns-certificate: \(path) expired at \(Timestamp(seconds: identity.notAfter).rfc3339): renew it in Apple's developer portal")
        }
        if identity.notAfter - now < 30 * 86_400 {
            Console.error("herald apps: warning: the APNs certificate expires at \(Timestamp(seconds: identity.notAfter).rfc3339), in under 30 days")
        }
        return identity
    }

    /// The `.p8` text, when it is an EC P-256 key in PKCS#8 PEM (what Apple issues).
    static func p8(at path: String) throws -> String {
        let text = try readText(path, "--apns-key")
        let refusal = Refusal(status: 65, message: "--apns-key: \(path) is not an APNs auth key (an EC P-256 private key in PKCS#8 PEM, -----BEGIN PRIVATE KEY-----)")
        guard text.contains("-----BEGIN PRIVATE KEY-----") else { throw refusal }
        guard let key = try? PrivateKey(pem: text), key.algorithm == .ecP256,
              // A P-256 SubjectPublicKeyInfo is 91 bytes; other curves are longer or shorter.
              let publicKey = try? key.publicKeyDER(), publicKey.count == 91 else { throw refusal }
        return text
    }

    /// The service account and its file text, when the file parses and its key loads.
    static func serviceAccount(at path: String) throws -> (account: FCMServiceAccount, json: String) {
        let text = try readText(path, "--fcm-service-account")
        let account: FCMServiceAccount
        do {
            account = try FCMServiceAccount(json: Array(text.utf8))
        } catch {
            throw Refusal(status: 65, message: "--fcm-service-account: \(path): \(error.description)")
        }
        guard let key = try? PrivateKey(pem: account.privateKeyPEM), case .rsa = key.algorithm else {
            throw Refusal(status: 65, message: "--fcm-service-account: \(path): private_key is not an RSA private key")
        }
        let hosts: FCMTokenHosts
        do {
            hosts = try FCMTokenHosts(variable: ProcessInfo.processInfo.environment["HERALD_FCM_TOKEN_HOSTS"])
        } catch {
            throw Refusal(status: 78, message: error.reason)
        }
        if let refusal = hosts.refusal(of: account) {
            throw Refusal(status: 65, message: "--fcm-service-account: \(path): \(refusal)")
        }
        return (account, text)
    }
}

/// An app as `show` prints it: settings and fingerprints, never a secret.
struct AppDescription {
    let app: AppSettings

    init(_ app: AppSettings) { self.app = app }

    /// SHA-256 (hex) of the public half of a PEM private key; nil when it does not load.
    static func publicKeyFingerprint(_ pem: String) -> String? {
        guard let key = try? PrivateKey(pem: pem), let der = try? key.publicKeyDER() else { return nil }
        return Hex.encode(SHA256.hash(der))
    }

    /// SHA-256 (hex) of the stored text: the same as `sha256sum` of the file that was added.
    static func fileFingerprint(_ text: String) -> String { Hex.encode(SHA256.hash(Array(text.utf8))) }

    var json: JSONValue {
        var members: [String: JSONValue] = [
            "id": .string(app.id),
            "name": .string(app.name),
            "payload_profile": .string(app.payloadProfile),
            "time_zone": .string(app.defaultTimeZone),
            "apns_halted_reason": app.apnsHaltedReason.map(JSONValue.string) ?? .null,
            "fcm_halted_reason": app.fcmHaltedReason.map(JSONValue.string) ?? .null,
            "apns": .null,
            "fcm": .null,
            "quiet_hours": .object([
                "window": .string(AppDescription.window(app.quietHours.window)),
                "respect_by_default": .bool(app.quietHours.respectByDefault),
            ]),
            // null: the workers' HERALD_*_RATE_PER_MINUTE; 0: no ceiling.
            "apns_rate_per_minute": app.apnsRatePerMinute.map { JSONValue.int($0) } ?? .null,
            "fcm_rate_per_minute": app.fcmRatePerMinute.map { JSONValue.int($0) } ?? .null,
        ]
        if let apns = app.apns {
            members["apns"] = .object([
                "auth": .string("token"),
                "key_id": .string(apns.keyID),
                "team_id": .string(apns.teamID),
                "bundle_id": .string(apns.bundleID),
                "environment": .string(apns.environment),
                "public_key_sha256": AppDescription.publicKeyFingerprint(apns.privateKeyPEM).map(JSONValue.string) ?? .null,
                "file_sha256": .string(AppDescription.fileFingerprint(apns.privateKeyPEM)),
            ])
        }
        if let certificate = app.apnsCertificate {
            let identity = try? ClientIdentity(certificatePEM: certificate.certificatePEM, keyPEM: certificate.keyPEM)
            members["apns"] = .object([
                "auth": .string("certificate"),
                "bundle_id": .string(certificate.bundleID),
                "environment": .string(certificate.environment),
                "subject": identity?.commonName.map(JSONValue.string) ?? .null,
                "expires_at": identity.map { .string(Timestamp(seconds: $0.notAfter).rfc3339) } ?? .null,
                "certificate_sha256": identity.map { .string($0.fingerprint) } ?? .null,
            ])
        }
        if let fcm = app.fcm {
            let account = try? FCMServiceAccount(json: Array(fcm.serviceAccountJSON.utf8))
            members["fcm"] = .object([
                "project_id": .string(fcm.projectID),
                "client_email": account.map { JSONValue.string($0.clientEmail) } ?? .null,
                "private_key_id": account?.privateKeyID.map(JSONValue.string) ?? .null,
                "public_key_sha256": account.flatMap { AppDescription.publicKeyFingerprint($0.privateKeyPEM) }.map(JSONValue.string) ?? .null,
                "file_sha256": .string(AppDescription.fileFingerprint(fcm.serviceAccountJSON)),
            ])
        }
        return .object(members)
    }

    var text: String {
        var lines = ["app \(app.id)  name=\(AppsCommand.quoted(app.name)) payload_profile=\(app.payloadProfile) time_zone=\(app.defaultTimeZone)"]
        if let apns = app.apns {
            lines.append("apns  auth=token key_id=\(apns.keyID) team_id=\(apns.teamID) bundle_id=\(apns.bundleID) environment=\(apns.environment)")
            lines.append("      public_key_sha256=\(AppDescription.publicKeyFingerprint(apns.privateKeyPEM) ?? "-") file_sha256=\(AppDescription.fileFingerprint(apns.privateKeyPEM))")
        } else if let certificate = app.apnsCertificate {
            let identity = try? ClientIdentity(certificatePEM: certificate.certificatePEM, keyPEM: certificate.keyPEM)
            lines.append("apns  auth=certificate bundle_id=\(certificate.bundleID) environment=\(certificate.environment) subject=\(AppsCommand.quoted(identity?.commonName ?? "-"))")
            lines.append("      expires_at=\(identity.map { Timestamp(seconds: $0.notAfter).rfc3339 } ?? "-") certificate_sha256=\(identity?.fingerprint ?? "-")")
        } else {
            lines.append("apns  none")
        }
        if let fcm = app.fcm {
            let account = try? FCMServiceAccount(json: Array(fcm.serviceAccountJSON.utf8))
            lines.append("fcm   project_id=\(fcm.projectID) client_email=\(account?.clientEmail ?? "-") private_key_id=\(account?.privateKeyID ?? "-")")
            lines.append("      public_key_sha256=\(account.flatMap { AppDescription.publicKeyFingerprint($0.privateKeyPEM) } ?? "-") file_sha256=\(AppDescription.fileFingerprint(fcm.serviceAccountJSON))")
        } else {
            lines.append("fcm   none")
        }
        lines.append("quiet hours=\(AppDescription.window(app.quietHours.window)) respect_by_default=\(app.quietHours.respectByDefault)")
        func ceiling(_ value: Int?) -> String { value.map { $0 == 0 ? "none" : "\($0)/min" } ?? "default" }
        lines.append("rate  apns=\(ceiling(app.apnsRatePerMinute)) fcm=\(ceiling(app.fcmRatePerMinute))")
        lines.append("halted apns=\(app.apnsHaltedReason ?? "no") fcm=\(app.fcmHaltedReason ?? "no")")
        return lines.joined(separator: "\n")
    }

    /// `HH:MM-HH:MM`.
    static func window(_ window: QuietWindow) -> String {
        func clock(_ minutes: Int) -> String {
            let hours = minutes / 60, rest = minutes % 60
            return (hours < 10 ? "0" : "") + "\(hours):" + (rest < 10 ? "0" : "") + "\(rest)"
        }
        return clock(window.startMinutes) + "-" + clock(window.endMinutes)
    }

    /// A listed app (no secrets were decrypted to list it).
    static func json(_ app: AppSummary) -> JSONValue {
        func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return .object([
            "id": .string(app.id),
            "name": .string(app.name),
            "payload_profile": .string(app.payloadProfile),
            "time_zone": .string(app.defaultTimeZone),
            "apns_auth": optional(app.apnsAuth),
            "apns_key_id": optional(app.apnsKeyID),
            "apns_team_id": optional(app.apnsTeamID),
            "apns_bundle_id": optional(app.apnsBundleID),
            "apns_environment": optional(app.apnsEnvironment),
            "fcm_project_id": optional(app.fcmProjectID),
            "apns_halted_reason": optional(app.apnsHaltedReason),
            "fcm_halted_reason": optional(app.fcmHaltedReason),
            "updated_at": .string(app.updatedAt),
        ])
    }
}
