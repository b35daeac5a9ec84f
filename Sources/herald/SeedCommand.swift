import Foundation
import HeraldCore
import HeraldPostgres

/// `herald seed --app APP --devices N --credentials-from DIR [...]`: creates (or updates) an app
/// whose credentials come from a simulator state directory, and writes N synthetic
/// subscriptions for it (replacing the app's existing ones), deterministically per `--seed`.
enum SeedCommand {
    static let usage = """
        usage: herald seed [--database-url URL] --app APP [--devices N] --credentials-from DIR
                           [--ios-share 0.5] [--ios-fcm-share 0] [--sdk-share 0.8] [--opted-out-share 0.02] [--seed 1] [--name NAME]
          DIR holds apns-key.p8 and apns.json {"key_id","team_id","bundle_id"[,"environment"]} and/or
          fcm-service-account.json, as `herald sim` writes them. Credentials are stored encrypted
          under HERALD_CREDENTIALS_KEY (32 random bytes, base64). Without --devices only the app and its
          credentials are written and its subscriptions are kept (fixing a key for `herald jobs resume`).
        """

    static func run(_ arguments: [String]) async -> Int32 {
        var parser = OptionParser(arguments, command: "herald seed", usage: usage, flags: [])
        let url = parser.string("--database-url") ?? ProcessInfo.processInfo.environment["HERALD_DATABASE_URL"]
        let app = parser.string("--app")
        let name = parser.string("--name")
        let devices = parser.int("--devices", in: 0...100_000_000)
        let directory = parser.string("--credentials-from")
        var shares: [String: Double] = [:]
        for share in ["--ios-share", "--ios-fcm-share", "--sdk-share", "--opted-out-share"] {
            if let value = parser.double(share, in: 0...1) { shares[share] = value }
        }
        let seedText = parser.string("--seed")
        guard parser.finish() else { return 64 }
        guard let seed = seedText.map({ UInt64($0) }) ?? 1 else {
            Console.error("herald seed: --seed must be a non-negative whole number")
            return 64
        }
        guard let app, let directory else {
            Console.error("herald seed: --app and --credentials-from are required\n\(usage)")
            return 64
        }
        guard let url, !url.isEmpty else {
            Console.error("herald seed: no database: set HERALD_DATABASE_URL or pass --database-url")
            return 78
        }
        let key: CredentialsKey
        do { key = try CredentialsKey.fromEnvironment() } catch {
            Console.error("herald seed: \(error.message)")
            return 78
        }
        let credentials: (apns: APNsTokenCredentials?, fcm: FCMCredentials?)
        do {
            credentials = try readCredentials(URL(fileURLWithPath: directory))
        } catch {
            Console.error("herald seed: \(error)")
            return 66
        }
        var options = SeedOptions(appID: app, devices: devices ?? 0)
        options.iosShare = shares["--ios-share"] ?? options.iosShare
        options.iosFCMShare = shares["--ios-fcm-share"] ?? options.iosFCMShare
        options.sdkShare = shares["--sdk-share"] ?? options.sdkShare
        options.optedOutShare = shares["--opted-out-share"] ?? options.optedOutShare
        options.seed = seed

        // Bulk load: no statement timeout.
        let pool = PostgresPool(PostgresPoolConfiguration(url: url, size: 1, statementTimeout: .zero, applicationName: "herald-seed"))
        defer { Task { await pool.close() } }
        let clock = ContinuousClock()
        let started = clock.now
        do {
            try await pool.withConnection { connection throws(PostgresError) in
                _ = try await Migrator().migrate(connection)
            }
            try await AppRepository(pool: pool, key: key).upsert(id: app, name: name ?? app, apns: credentials.apns, fcm: credentials.fcm)
            guard devices != nil else {
                print("updated app \(app) (apns: \(credentials.apns == nil ? "no" : "yes"), fcm: \(credentials.fcm == nil ? "no" : "yes")); subscriptions kept")
                return 0
            }
            let rows = try await SubscriptionSeeder(pool: pool).seed(options)
            let elapsed = clock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("seeded app \(app) (apns: \(credentials.apns == nil ? "no" : "yes"), fcm: \(credentials.fcm == nil ? "no" : "yes")) with \(rows) subscriptions in \(String(format: "%.1f", seconds)) s")
            return 0
        } catch {
            Console.error("herald seed: \(error)")
            switch error.code {
            case .invalidURL, .configuration: return 78
            case .connectFailed, .connectionLost, .poolTimeout: return 69
            default: return 65
            }
        }
    }

    struct CredentialsError: Error, CustomStringConvertible {
        let description: String
    }

    static func readCredentials(_ directory: URL) throws -> (apns: APNsTokenCredentials?, fcm: FCMCredentials?) {
        let fileManager = FileManager.default
        let keyFile = directory.appendingPathComponent("apns-key.p8")
        let settingsFile = directory.appendingPathComponent("apns.json")
        let fcmFile = directory.appendingPathComponent("fcm-service-account.json")
        var apns: APNsTokenCredentials?
        if fileManager.fileExists(atPath: keyFile.path) || fileManager.fileExists(atPath: settingsFile.path) {
            let pem = try String(contentsOf: keyFile, encoding: .utf8)
            guard pem.contains("-----BEGIN PRIVATE KEY-----") else {
                throw CredentialsError(description: "\(keyFile.path) is not a PKCS#8 PEM key (BEGIN PRIVATE KEY)")
            }
            let settings = try JSONValue.parse(Array(try Data(contentsOf: settingsFile)))
            guard let keyID = settings["key_id"]?.stringValue, let teamID = settings["team_id"]?.stringValue,
                  let bundleID = settings["bundle_id"]?.stringValue else {
                throw CredentialsError(description: "\(settingsFile.path) needs string members key_id, team_id and bundle_id")
            }
            apns = APNsTokenCredentials(keyID: keyID, teamID: teamID, bundleID: bundleID,
                                        environment: settings["environment"]?.stringValue ?? "production", privateKeyPEM: pem)
        }
        var fcm: FCMCredentials?
        if fileManager.fileExists(atPath: fcmFile.path) {
            let text = try String(contentsOf: fcmFile, encoding: .utf8)
            let account = try JSONValue.parse(text)
            guard let project = account["project_id"]?.stringValue, account["private_key"]?.stringValue != nil,
                  account["client_email"]?.stringValue != nil else {
                throw CredentialsError(description: "\(fcmFile.path) needs project_id, private_key and client_email")
            }
            fcm = FCMCredentials(projectID: project, serviceAccountJSON: text)
        }
        guard apns != nil || fcm != nil else {
            throw CredentialsError(description: "\(directory.path) holds neither apns-key.p8 + apns.json nor fcm-service-account.json")
        }
        return (apns, fcm)
    }
}
