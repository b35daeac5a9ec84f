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
