import Foundation
import HeraldCrypto
import HeraldSim
import HeraldTestSupport
import Testing

/// The state directory: names in the server certificate, the service account's `token_uri`,
/// and which files a restart keeps.
@Suite(.timeLimit(.minutes(1))) struct SimulatorCredentialsTests {
    /// A fresh state directory, removed when `body` returns.
    private func withDirectory(_ body: (URL) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-credentials-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try body(directory)
    }

    private func withDirectory(_ body: (URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-credentials-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(directory)
    }

    private func contents(_ directory: URL, _ name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    }

    private func tokenURI(_ directory: URL) throws -> String? {
        let account = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("fcm-service-account.json")))
        return (account as? [String: Any])?["token_uri"] as? String
    }

    @Test func theServerCertificateNamesLoopbackThePublicHostAndTheNamesAskedFor() throws {
        try withDirectory { directory in
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim",
                                                               certificateNames: try CertificateNames(["sim.example", "10.1.2.3"]))
            #expect(credentials.certificateUpdate == .created)
            let names = try CertificateNames(certificatePEM: try contents(directory, "server.pem"))
            #expect(names == (try CertificateNames(["127.0.0.1", "localhost", "sim", "sim.example", "10.1.2.3"])))
            #expect(names == (try CertificateNames(certificatePEM: credentials.serverCertificatePEM)))
            // The CA's key is kept, readable by its owner only.
            let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("ca-key.pem").path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
        }
    }

    @Test func theTokenURIFollowsThePublicHostAndPortWithTheSameKey() throws {
        try withDirectory { directory in
            let first = try SimulatorCredentials.prepare(directory: directory, fcmPort: 18444)
            #expect(first.fcmTokenURI == "https://127.0.0.1:18444/token")
            #expect(try tokenURI(directory) == "https://127.0.0.1:18444/token")
            let second = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            #expect(second.fcmTokenURI == "https://sim:8444/token")
            #expect(try tokenURI(directory) == "https://sim:8444/token")
            // Apps seeded with the first file still sign with the right key.
            #expect(try second.fcmKey.publicKeyDER() == first.fcmKey.publicKeyDER())
            #expect(second.certificateUpdate == .serverCertificateReissued(added: try CertificateNames(["sim"])))
        }
    }

    @Test func aRestartWithTheSameNamesKeepsTheCAAndTheServerCertificate() throws {
        try withDirectory { directory in
            let names = try CertificateNames(["sim.example"])
            _ = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim", certificateNames: names)
            let before = try ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"].map { try contents(directory, $0) }
            let again = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim", certificateNames: names)
            #expect(again.certificateUpdate == .kept)
            // Fewer names than the certificate has: nothing to add, so nothing changes either.
            let fewer = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            #expect(fewer.certificateUpdate == .kept)
            let after = try ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"].map { try contents(directory, $0) }
            #expect(after == before)
        }
    }

    @Test func aNewNameReissuesTheServerCertificateUnderTheSameCA() throws {
        try withDirectory { directory in
            _ = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            let ca = try contents(directory, "ca.pem")
            let server = try contents(directory, "server.pem")
            let serverKey = try contents(directory, "server-key.pem")
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim",
                                                               certificateNames: try CertificateNames(["worker.example"]))
            #expect(credentials.certificateUpdate == .serverCertificateReissued(added: try CertificateNames(["worker.example"])))
            #expect(try contents(directory, "ca.pem") == ca)
            #expect(try contents(directory, "server.pem") != server)
            #expect(try contents(directory, "server-key.pem") != serverKey)
            #expect(try CertificateNames(certificatePEM: try contents(directory, "server.pem"))
                    == (try CertificateNames(["127.0.0.1", "localhost", "sim", "worker.example"])))
        }
    }

    /// Simulators before this one kept no CA key: a new name then needs a new CA, and says so.
    @Test func withoutTheCAKeyANewNameReplacesTheCA() async throws {
        try await withDirectory { directory in
            _ = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            try FileManager.default.removeItem(at: directory.appendingPathComponent("ca-key.pem"))
            let ca = try contents(directory, "ca.pem")
            // Nothing new asked for: the old CA stays, key or no key.
            #expect(try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444).certificateUpdate == .kept)
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            #expect(credentials.certificateUpdate == .authorityReplaced(added: try CertificateNames(["sim"])))
            #expect(credentials.certificateUpdate.changesAuthority)
            #expect(try contents(directory, "ca.pem") != ca)
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("ca-key.pem").path))
            // The client certificate is signed again, by the new CA.
            try await check(clientFilesIn: directory, bundleID: credentials.bundleID)
            // From now on the CA is kept.
            let next = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim",
                                                        certificateNames: try CertificateNames(["sim.example"]))
            #expect(!next.certificateUpdate.changesAuthority)
        }
    }

    private func bytes(_ directory: URL, _ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    private func mode(_ directory: URL, _ name: String) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(name).path)[.posixPermissions] as? Int
    }

    private static let clientFiles = [SimulatorCredentials.apnsClientCertificateFile, SimulatorCredentials.apnsClientKeyFile,
                                      SimulatorCredentials.apnsClientPKCS12File]

    /// What the openssl program makes of the directory's client certificate: its subject, whether
    /// ca.pem verifies it for client authentication, and whether the .p12 opens with the password.
    private func check(clientFilesIn directory: URL, bundleID: String) async throws {
        let files = try ["ca.pem", "apns-client.pem", "apns-client.p12"].reduce(into: [String: [UInt8]]()) { $0[$1] = try bytes(directory, $1) }
        let verify = try await OpenSSLCommand.run(["verify", "-CAfile", "ca.pem", "-purpose", "sslclient", "apns-client.pem"], files: files)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let opened = try await OpenSSLCommand.run(["pkcs12", "-in", "apns-client.p12", "-passin", "pass:\(SimulatorCredentials.apnsClientPKCS12Password)",
                                                   "-nodes"], files: files)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(try CertificateSubject(certificatePEM: opened.stdout) == CertificateSubject(uid: bundleID, commonName: "Apple Push Services: \(bundleID)"))
        // The .p12 holds the same certificate as the PEM file.
        #expect(opened.stdout.contains(try contents(directory, "apns-client.pem").trimmingCharacters(in: .whitespacesAndNewlines)))
        let wrong = try await OpenSSLCommand.run(["pkcs12", "-in", "apns-client.p12", "-passin", "pass:wrong", "-nodes"], files: files)
        #expect(wrong.status != 0)
    }

    @Test func writesAnAPNsClientCertificateForTheBundle() async throws {
        try await withDirectory { directory in
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            #expect(credentials.apnsClientCertificateURL == directory.appendingPathComponent("apns-client.pem"))
            #expect(credentials.apnsClientKeyURL == directory.appendingPathComponent("apns-client-key.pem"))
            #expect(credentials.apnsClientPKCS12URL == directory.appendingPathComponent("apns-client.p12"))
            #expect(try contents(directory, "apns-client.pem") == credentials.apnsClientCertificatePEM)
            #expect(try contents(directory, "apns-client-key.pem") == credentials.apnsClientKeyPEM)
            #expect(credentials.apnsClientKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
            #expect(try mode(directory, "apns-client-key.pem") == 0o600)
            #expect(try mode(directory, "apns-client.p12") == 0o600)
            #expect(try CertificateSubject(certificatePEM: credentials.apnsClientCertificatePEM).uid == credentials.bundleID)
            try await check(clientFilesIn: directory, bundleID: credentials.bundleID)
        }
    }

    /// `herald apps add --apns-certificate DIR/apns-client.p12` reads it with ClientIdentity:
    /// the bundle id comes from the UID, without OpenSSL's legacy provider.
    @Test func clientIdentityReadsTheP12AsItReadsApples() throws {
        try withDirectory { directory in
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            let identity = try ClientIdentity.load(Array(try Data(contentsOf: credentials.apnsClientPKCS12URL)),
                                                   password: SimulatorCredentials.apnsClientPKCS12Password)
            #expect(identity.subjectUID == credentials.bundleID)
            #expect(identity.commonName == "Apple Push Services: \(credentials.bundleID)")
            #expect(identity.certificatePEM == credentials.apnsClientCertificatePEM)
            #expect(throws: CryptoError.self) {
                try ClientIdentity.load(Array(try Data(contentsOf: credentials.apnsClientPKCS12URL)), password: "wrong")
            }
        }
    }

    @Test func aRestartKeepsTheClientCertificateAndWritesOnlyWhatIsMissing() async throws {
        try await withDirectory { directory in
            _ = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            let before = try Self.clientFiles.map { try bytes(directory, $0) }
            // A restart, and one that signs a new server certificate under the same CA.
            _ = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            let reissued = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            #expect(reissued.certificateUpdate == .serverCertificateReissued(added: try CertificateNames(["sim"])))
            #expect(try Self.clientFiles.map { try bytes(directory, $0) } == before)
            // Only the .p12 gone: written again from the kept certificate and key.
            try FileManager.default.removeItem(at: reissued.apnsClientPKCS12URL)
            let again = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            #expect(again.certificateUpdate == .kept)
            #expect(try bytes(directory, "apns-client.pem") == before[0])
            #expect(try bytes(directory, "apns-client-key.pem") == before[1])
            try await check(clientFilesIn: directory, bundleID: again.bundleID)
        }
    }

    @Test func anotherBundleInAPNsJSONGetsItsOwnClientCertificate() async throws {
        try await withDirectory { directory in
            let first = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            let info: [String: Any] = ["key_id": first.apnsKeyID, "team_id": first.teamID, "bundle_id": "com.example.other"]
            try JSONSerialization.data(withJSONObject: info).write(to: directory.appendingPathComponent("apns.json"))
            let second = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            #expect(second.certificateUpdate == .kept)
            #expect(try CertificateSubject(certificatePEM: second.apnsClientCertificatePEM).uid == "com.example.other")
            try await check(clientFilesIn: directory, bundleID: "com.example.other")
        }
    }

    /// A directory from a simulator that kept no CA key and wrote no client certificate: only a
    /// new CA can sign one, and the server certificate it signs keeps every name.
    @Test func withoutTheCAKeyTheClientCertificateNeedsANewCA() async throws {
        try await withDirectory { directory in
            _ = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim")
            for name in ["ca-key.pem"] + Self.clientFiles { try FileManager.default.removeItem(at: directory.appendingPathComponent(name)) }
            let ca = try contents(directory, "ca.pem")
            // Fewer names asked for than the certificate has.
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444)
            #expect(credentials.certificateUpdate == .authorityReplacedForClientCertificate)
            #expect(credentials.certificateUpdate.changesAuthority)
            #expect(try contents(directory, "ca.pem") != ca)
            #expect(try CertificateNames(certificatePEM: credentials.serverCertificatePEM) == (try CertificateNames(["127.0.0.1", "localhost", "sim"])))
            try await check(clientFilesIn: directory, bundleID: credentials.bundleID)
            #expect(try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444).certificateUpdate == .kept)
        }
    }

    @Test(arguments: ["::1", "sim:8444", "sim,evil.example", ""])
    func aPublicHostAURLCannotNameAsItIsIsRefused(host: String) throws {
        try withDirectory { directory in
            #expect(throws: SimulatorCredentials.Failure.self) {
                try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: host)
            }
        }
    }
}
