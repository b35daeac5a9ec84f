import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldPostgres

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
