import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldPostgres

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
