import Foundation
import HeraldCore
import HeraldCrypto
import HeraldPostgres
import HeraldTestSupport
import Testing

/// `herald apps add|update|show|list|rekey` through the binary, against a database of its own.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(3)))
struct AppsCommandTests {
    static let keyA = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE="
    static let keyB = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="

    /// A migrated database (through `herald migrate`) and a folder of credential files.
    private struct Fixture {
        let url: String
        let database: CommandDatabase
        let pool: PostgresPool
        let folder: URL
        let p8: String
        let p8Path: String
        let serviceAccountPath: String
        let rsaPEM: String
        let p8Fingerprint: String

        func drop() async {
            try? FileManager.default.removeItem(at: folder)
            await database.drop(closing: pool)
        }

        func write(_ name: String, _ text: String) throws -> String {
            let path = folder.appendingPathComponent(name).path
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    private func fixture() async throws -> Fixture {
        let database = try await CommandDatabase.migrated("herald_cli_apps")
        let url = database.url

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(TestEnvironment.uniqueName("herald-apps"))
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let key = try PrivateKey.generate(.ecP256)
        let p8 = try key.pkcs8PEM()
        let rsa = try PrivateKey.generate(.rsa(bits: 2048)).pkcs8PEM()
        let account = JSONValue.object([
            "type": .string("service_account"),
            "project_id": .string("demo-project"),
            "private_key_id": .string("0123abcd"),
            "private_key": .string(rsa),
            "client_email": .string("herald@demo-project.iam.gserviceaccount.com"),
            "token_uri": .string("https://oauth2.googleapis.com/token"),
        ]).serialized()
        var fixture = Fixture(url: url, database: database, pool: PostgresPool(PostgresPoolConfiguration(url: url, size: 2)), folder: folder,
                              p8: p8, p8Path: "", serviceAccountPath: "", rsaPEM: rsa,
                              p8Fingerprint: Hex.encode(SHA256.hash(try key.publicKeyDER())))
        fixture = Fixture(url: url, database: database, pool: fixture.pool, folder: folder, p8: p8,
                          p8Path: try fixture.write("AuthKey.p8", p8), serviceAccountPath: try fixture.write("service-account.json", account),
                          rsaPEM: rsa, p8Fingerprint: fixture.p8Fingerprint)
        return fixture
    }

    private func apps(_ arguments: [String], _ fixture: Fixture, key: String? = keyA, extra: [String: String] = [:]) async throws -> Subprocess.Result {
        var environment = ["HERALD_DATABASE_URL": fixture.url, "HERALD_CREDENTIALS_KEY": key ?? ""]
        environment.merge(extra) { _, new in new }
        return try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["apps"] + arguments, environment: environment)
    }

    private func addDemo(_ fixture: Fixture) async throws {
        let added = try await apps(["add", "--id", "demo", "--name", "Demo", "--apns-key", fixture.p8Path, "--apns-key-id", "ABC123DEFG",
                                    "--apns-team-id", "TEAM123456", "--bundle-id", "com.example.demo", "--apns-environment", "sandbox",
                                    "--fcm-service-account", fixture.serviceAccountPath, "--time-zone", "Europe/Paris"], fixture)
        #expect(added.status == 0, "\(added.stderr)")
    }

    /// The lines of a PEM's base64 body: none may appear in any output.
    private func secretLines(_ pem: String) -> [String] {
        pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count > 16 }
    }

    @Test func addShowAndListPrintFingerprintsNeverSecrets() async throws {
        let fixture = try await fixture()
        try await addDemo(fixture)

        let show = try await apps(["show", "--id", "demo"], fixture)
        #expect(show.status == 0, "\(show.stderr)")
        #expect(show.stdout.contains("key_id=ABC123DEFG team_id=TEAM123456 bundle_id=com.example.demo environment=sandbox"))
        #expect(show.stdout.contains("public_key_sha256=\(fixture.p8Fingerprint)"))
        #expect(show.stdout.contains("project_id=demo-project"))
        #expect(show.stdout.contains("time_zone=Europe/Paris"))
        let json = try await apps(["show", "--id", "demo", "--json"], fixture)
        #expect(json.status == 0, "\(json.stderr)")
        let document = try JSONValue.parse(json.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(document["apns"]?["public_key_sha256"] == .string(fixture.p8Fingerprint))
        #expect(document["apns"]?["file_sha256"] == .string(Hex.encode(SHA256.hash(Array(fixture.p8.utf8)))))
        #expect(document["fcm"]?["private_key_id"] == .string("0123abcd"))

        let list = try await apps(["list"], fixture, key: nil)
        #expect(list.status == 0, "listing needs no key: \(list.stderr)")
        #expect(list.stdout.contains("demo name=\"Demo\" profile=sdk time_zone=Europe/Paris apns=token:com.example.demo:sandbox fcm=demo-project"))
        let listJSON = try await apps(["list", "--json"], fixture)
        #expect(try JSONValue.parse(listJSON.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).arrayValue?.count == 1)

        let everything = [show, json, list, listJSON].map { $0.stdout + $0.stderr }.joined()
        for line in secretLines(fixture.p8) + secretLines(fixture.rsaPEM) {
            #expect(!everything.contains(line), "a line of a private key was printed")
        }
        #expect(!everything.contains("PRIVATE KEY"))
        // Nothing readable is stored either.
        let stored = try await fixture.pool.query(
            "SELECT position('PRIVATE'::bytea IN apns_credentials), position('service_account'::bytea IN fcm_credentials) FROM apps").rows
        #expect(stored == [["0", "0"]])

        let again = try await apps(["add", "--id", "demo", "--name", "Again"], fixture)
        #expect(again.status == 65 && again.stderr.contains("already exists"))
        #expect(try await apps(["show", "--id", "nobody"], fixture).status == 66)
        await fixture.drop()
    }

    @Test func updateChangesOnlyTheGivenFields() async throws {
        let fixture = try await fixture()
        try await addDemo(fixture)
        let updated = try await apps(["update", "--id", "demo", "--payload-profile", "plain", "--apns-environment", "production"], fixture)
        #expect(updated.status == 0, "\(updated.stderr)")
        let document = try JSONValue.parse(try await apps(["show", "--id", "demo", "--json"], fixture).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(document["payload_profile"] == .string("plain"))
        #expect(document["time_zone"] == .string("Europe/Paris"))
        #expect(document["name"] == .string("Demo"))
        #expect(document["apns"]?["environment"] == .string("production"))
        #expect(document["apns"]?["key_id"] == .string("ABC123DEFG"))
        #expect(document["apns"]?["public_key_sha256"] == .string(fixture.p8Fingerprint))
        #expect(document["fcm"]?["project_id"] == .string("demo-project"))

        // A new key replaces the old one; the rest stays.
        let newKey = try PrivateKey.generate(.ecP256)
        let newPath = try fixture.write("AuthKey2.p8", try newKey.pkcs8PEM())
        #expect(try await apps(["update", "--id", "demo", "--apns-key", newPath], fixture).status == 0)
        let shown = try await apps(["show", "--id", "demo"], fixture).stdout
        #expect(shown.contains("public_key_sha256=\(Hex.encode(SHA256.hash(try newKey.publicKeyDER())))"))
        #expect(shown.contains("environment=production"))

        // An app without APNs needs the whole set the first time.
        #expect(try await apps(["add", "--id", "bare", "--name", "Bare"], fixture).status == 0)
        let partial = try await apps(["update", "--id", "bare", "--apns-key-id", "ABC123DEFG"], fixture)
        #expect(partial.status == 65 && partial.stderr.contains("no APNs key yet"))
        #expect(try await apps(["update", "--id", "nobody", "--name", "X"], fixture).status == 66)

        // Per-app rate ceilings: stored where the workers' throttle reads them, back to the
        // default with `default`; 0 is no ceiling; nonsense is refused.
        let throttle = ThrottleRepository(pool: fixture.pool)
        #expect(try await throttle.providerCeilings(appID: "demo") == (nil, nil))
        let ceilings = try await apps(["update", "--id", "demo", "--apns-rate-per-minute", "120000", "--fcm-rate-per-minute", "0"], fixture)
        #expect(ceilings.status == 0 && ceilings.stdout.contains("apns rate per minute, fcm rate per minute"), "\(ceilings.stdout) \(ceilings.stderr)")
        #expect(try await throttle.providerCeilings(appID: "demo") == (120_000, 0))
        let shownRates = try JSONValue.parse(try await apps(["show", "--id", "demo", "--json"], fixture).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(shownRates["apns_rate_per_minute"] == .int(120_000) && shownRates["fcm_rate_per_minute"] == .int(0))
        #expect(try await apps(["show", "--id", "demo"], fixture).stdout.contains("rate  apns=120000/min fcm=none"))
        // Another update keeps them; `default` clears one.
        #expect(try await apps(["update", "--id", "demo", "--name", "Demo 2"], fixture).status == 0)
        #expect(try await throttle.providerCeilings(appID: "demo") == (120_000, 0))
        #expect(try await apps(["update", "--id", "demo", "--apns-rate-per-minute", "default"], fixture).status == 0)
        #expect(try await throttle.providerCeilings(appID: "demo") == (nil, 0))
        let bad = try await apps(["update", "--id", "demo", "--fcm-rate-per-minute", "-5"], fixture)
        #expect(bad.status == 65 && bad.stderr.contains("--fcm-rate-per-minute"), "\(bad.stderr)")
        #expect(try await apps(["add", "--id", "capped", "--name", "Capped", "--fcm-rate-per-minute", "6000"], fixture).status == 0)
        #expect(try await throttle.providerCeilings(appID: "capped") == (nil, 6000))
        await fixture.drop()
    }

    /// Runs the `openssl` command line in `folder` (Debian's OpenSSL 3), for certificates shaped
    /// like Apple's push certificates.
    private func openssl(_ arguments: [String], in folder: URL) throws {
        let result = try Subprocess.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments, workingDirectory: folder)
        try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.stderr)")
    }

    /// Certificate auth: a Keychain-style .p12 (modern, then a legacy RC2/3DES one) is checked,
    /// sealed and shown by fingerprint; the bundle id comes from the certificate; switching to a
    /// .p8 and back works; a certificate for another bundle, a wrong password and an expired
    /// certificate are refused before anything is stored.
    @Test func apnsCertificateAuthIsAddedShownAndSwitched() async throws {
        let fixture = try await fixture()
        let folder = fixture.folder
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "push-key.pem",
                     "-out", "push.pem", "-days", "365", "-subj", "/UID=com.example.shop/CN=Apple Push Services: com.example.shop/O=Example"], in: folder)
        try openssl(["pkcs12", "-export", "-in", "push.pem", "-inkey", "push-key.pem", "-out", "push.p12", "-passout", "pass:keychain"], in: folder)
        try openssl(["pkcs12", "-export", "-legacy", "-in", "push.pem", "-inkey", "push-key.pem", "-out", "old.p12", "-passout", "pass:keychain"], in: folder)
        let p12 = folder.appendingPathComponent("push.p12").path
        let password = ["P12_PASSWORD": "keychain"]

        let added = try await apps(["add", "--id", "shop", "--name", "Shop", "--apns-certificate", p12,
                                    "--apns-certificate-password-env", "P12_PASSWORD"], fixture, extra: password)
        #expect(added.status == 0, "\(added.stderr)")
        let document = try JSONValue.parse(try await apps(["show", "--id", "shop", "--json"], fixture).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(document["apns"]?["auth"] == .string("certificate") && document["apns"]?["bundle_id"] == .string("com.example.shop"))
        #expect(document["apns"]?["environment"] == .string("production") && document["apns"]?["certificate_sha256"]?.stringValue?.count == 64)
        let stored = try await fixture.pool.query(
            "SELECT apns_auth, apns_bundle_id, apns_key_id, position('PRIVATE'::bytea IN apns_credentials) FROM apps WHERE id = 'shop'").rows
        #expect(stored == [["certificate", "com.example.shop", nil, "0"]])
        let keyPEM = try String(contentsOf: folder.appendingPathComponent("push-key.pem"), encoding: .utf8)
        let shown = try await apps(["show", "--id", "shop"], fixture)
        #expect(shown.stdout.contains("auth=certificate bundle_id=com.example.shop") && !shown.stdout.contains("PRIVATE"), "\(shown.stdout)")
        for line in secretLines(keyPEM) { #expect(!shown.stdout.contains(line)) }
        let list = try await apps(["list"], fixture, key: nil)
        #expect(list.stdout.contains("apns=certificate:com.example.shop:production"), "\(list.stdout)")
        // The worker reads it back as certificate auth.
        let settings = try #require(try await AppRepository(pool: fixture.pool, key: try CredentialsKey(base64: Self.keyA)).settingsForDelivery(id: "shop"))
        #expect(settings.apns == nil && settings.apnsCertificate?.bundleID == "com.example.shop")
        #expect(settings.apnsCertificate?.keyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)

        // Changing something else keeps the certificate; the environment can change alone.
        #expect(try await apps(["update", "--id", "shop", "--name", "Shop 2", "--apns-environment", "sandbox"], fixture).status == 0)
        let kept = try #require(try await AppRepository(pool: fixture.pool, key: try CredentialsKey(base64: Self.keyA)).app(id: "shop"))
        #expect(kept.apnsCertificate?.environment == "sandbox" && kept.apnsCertificate?.certificatePEM == settings.apnsCertificate?.certificatePEM)
        let otherBundle = try await apps(["update", "--id", "shop", "--bundle-id", "com.example.other"], fixture)
        #expect(otherBundle.status == 65 && otherBundle.stderr.contains("needs a new --apns-certificate"), "\(otherBundle.stderr)")

        // To a .p8 key and back to the (legacy-encrypted) certificate.
        let toToken = try await apps(["update", "--id", "shop", "--apns-key", fixture.p8Path, "--apns-key-id", "ABC123DEFG",
                                      "--apns-team-id", "TEAM123456", "--bundle-id", "com.example.shop"], fixture)
        #expect(toToken.status == 0, "\(toToken.stderr)")
        #expect(try await apps(["show", "--id", "shop"], fixture).stdout.contains("auth=token key_id=ABC123DEFG"))
        let back = try await apps(["update", "--id", "shop", "--apns-certificate", folder.appendingPathComponent("old.p12").path,
                                   "--apns-certificate-password-env", "P12_PASSWORD"], fixture, extra: password)
        #expect(back.status == 0, "a legacy .p12 opens through OpenSSL's legacy provider: \(back.stderr)")
        #expect(try await fixture.pool.query("SELECT apns_auth, apns_key_id FROM apps WHERE id = 'shop'").rows == [["certificate", nil]])

        // Refusals, with nothing stored.
        let mismatch = try await apps(["add", "--id", "other", "--name", "Other", "--apns-certificate", p12, "--apns-certificate-password-env",
                                       "P12_PASSWORD", "--bundle-id", "com.example.other"], fixture, extra: password)
        #expect(mismatch.status == 65 && mismatch.stderr.contains("the certificate is for com.example.shop"), "\(mismatch.stderr)")
        let wrong = try await apps(["add", "--id", "other", "--name", "Other", "--apns-certificate", p12,
                                    "--apns-certificate-password-env", "P12_PASSWORD"], fixture, extra: ["P12_PASSWORD": "guess"])
        #expect(wrong.status == 65 && wrong.stderr.contains("the password does not open the .p12"), "\(wrong.stderr)")
        let unset = try await apps(["add", "--id", "other", "--name", "Other", "--apns-certificate", p12,
                                    "--apns-certificate-password-env", "NOT_SET_ANYWHERE"], fixture)
        #expect(unset.status == 78 && unset.stderr.contains("$NOT_SET_ANYWHERE is not set"), "\(unset.stderr)")
        let both = try await apps(["add", "--id", "other", "--name", "Other", "--apns-certificate", p12, "--apns-key", fixture.p8Path], fixture)
        #expect(both.status == 64, "\(both.stderr)")
        // An expired certificate (issued for 2020-01-01 to 01-02 with `openssl ca`).
        try Data("[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n".utf8)
            .write(to: folder.appendingPathComponent("ca.cnf"))
        try Data().write(to: folder.appendingPathComponent("index.txt"))
        try Data("01\n".utf8).write(to: folder.appendingPathComponent("serial"))
        try openssl(["req", "-new", "-key", "push-key.pem", "-out", "old.csr", "-subj", "/CN=Apple Push Services: com.example.shop"], in: folder)
        try openssl(["ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", "push-key.pem", "-in", "old.csr", "-out", "expired.pem",
                     "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-notext"], in: folder)
        let expiredPEM = try String(contentsOf: folder.appendingPathComponent("expired.pem"), encoding: .utf8) + keyPEM
        let expiredPath = try fixture.write("expired-identity.pem", expiredPEM)
        let expired = try await apps(["add", "--id", "other", "--name", "Other", "--apns-certificate", expiredPath, "--bundle-id", "com.example.shop"], fixture)
        #expect(expired.status == 65 && expired.stderr.contains("expired at 2020-01-02"), "\(expired.stderr)")
        #expect(try await fixture.pool.query("SELECT count(*) FROM apps WHERE id = 'other'").rows == [["0"]])
        await fixture.drop()
    }

    @Test func aServiceAccountWhoseTokenHostIsNotAllowedIsRefused() async throws {
        let fixture = try await fixture()
        let google = try String(contentsOfFile: fixture.serviceAccountPath, encoding: .utf8)
        let proxyAccount = try fixture.write("proxyAccount.json", google.replacingOccurrences(of: "https://oauth2.googleapis.com/token",
                                                                                    with: "https://10.0.0.7:8443/token"))
        let refused = try await apps(["add", "--id", "sneaky", "--name", "Sneaky", "--fcm-service-account", proxyAccount], fixture)
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("token_uri host 10.0.0.7 is not allowed") && refused.stderr.contains("HERALD_FCM_TOKEN_HOSTS"), "\(refused.stderr)")
        let listed = try await apps(["add", "--id", "proxied", "--name", "Proxied", "--fcm-service-account", proxyAccount], fixture,
                                    extra: ["HERALD_FCM_TOKEN_HOSTS": "10.0.0.7"])
        #expect(listed.status == 0, "\(listed.stderr)")
        await fixture.drop()
    }

    @Test func rekeyReSealsEverythingOrNothing() async throws {
        let fixture = try await fixture()
        try await addDemo(fixture)
        #expect(try await apps(["add", "--id", "fcm-only", "--name", "FCM", "--fcm-service-account", fixture.serviceAccountPath], fixture).status == 0)

        let rekeyed = try await apps(["rekey", "--old-key-env", "OLD_KEY"], fixture, key: Self.keyB, extra: ["OLD_KEY": Self.keyA])
        #expect(rekeyed.status == 0, "\(rekeyed.stderr)")
        #expect(rekeyed.stdout.contains("re-sealed the credentials of 2 apps"))
        let underNew = try await apps(["show", "--id", "demo"], fixture, key: Self.keyB)
        #expect(underNew.status == 0 && underNew.stdout.contains("public_key_sha256=\(fixture.p8Fingerprint)"))
        let underOld = try await apps(["show", "--id", "demo"], fixture, key: Self.keyA)
        #expect(underOld.status == 65 && underOld.stderr.contains("HERALD_CREDENTIALS_KEY"))

        // The wrong old key: a clear error, and nothing changes.
        let before = try await fixture.pool.query("SELECT id, apns_credentials, fcm_credentials FROM apps ORDER BY id").rows
        let wrong = try await apps(["rekey", "--old-key-env", "OLD_KEY"], fixture, key: Self.keyA, extra: ["OLD_KEY": Self.keyA])
        #expect(wrong.status == 65)
        #expect(wrong.stderr.contains("does not decrypt under the old keys or the current one; nothing was changed"))
        #expect(try await fixture.pool.query("SELECT id, apns_credentials, fcm_credentials FROM apps ORDER BY id").rows == before)
        #expect(try await apps(["rekey", "--old-key-env", "UNSET_VARIABLE"], fixture, key: Self.keyB).status == 78)
        await fixture.drop()
    }

    @Test func badInputIsRefusedBeforeAnythingIsStored() async throws {
        let fixture = try await fixture()
        let base = ["add", "--id", "bad", "--name", "Bad", "--apns-key-id", "ABC123DEFG", "--apns-team-id", "TEAM123456", "--bundle-id", "com.example.bad"]
        let rsa = try fixture.write("rsa.p8", try PrivateKey.generate(.rsa(bits: 2048)).pkcs8PEM())
        let garbage = try fixture.write("garbage.p8", "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
        for path in [rsa, garbage, fixture.serviceAccountPath] {
            let refused = try await apps(base + ["--apns-key", path], fixture)
            #expect(refused.status == 65, "\(path): \(refused.stderr)")
            #expect(refused.stderr.contains("is not an APNs auth key"))
        }
        #expect(try await apps(base + ["--apns-key", fixture.folder.appendingPathComponent("missing.p8").path], fixture).status == 66)
        let badKeyID = ["add", "--id", "bad", "--name", "Bad", "--apns-key", fixture.p8Path, "--apns-key-id", "abc123defg",
                        "--apns-team-id", "TEAM123456", "--bundle-id", "com.example.bad"]
        #expect(try await apps(badKeyID, fixture).status == 65)
        #expect(try await apps(["add", "--id", "bad", "--name", "Bad", "--time-zone", "Mars/Olympus_Mons"], fixture).status == 65)
        #expect(try await apps(["add", "--id", "bad", "--name", "Bad", "--payload-profile", "fancy"], fixture).status == 65)
        #expect(try await apps(["add", "--id", "Bad!", "--name", "Bad"], fixture).status == 65)
        #expect(try await apps(["add", "--id", "bad", "--name", "Bad", "--fcm-service-account", fixture.p8Path], fixture).status == 65)
        #expect(try await apps(["add", "--name", "Bad"], fixture).status == 64)
        #expect(try await apps(["add", "--id", "bad", "--name", "Bad", "--colour", "red"], fixture).status == 64)
        #expect(try await apps(["add", "--id", "bad", "--name", "Bad"], fixture, key: nil).status == 78)
        #expect(try await fixture.pool.query("SELECT count(*) FROM apps").rows == [["0"]])
        await fixture.drop()
    }
}
