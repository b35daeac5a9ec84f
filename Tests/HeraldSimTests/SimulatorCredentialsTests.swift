import Foundation
import HeraldCrypto
import HeraldSim
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
    @Test func withoutTheCAKeyANewNameReplacesTheCA() throws {
        try withDirectory { directory in
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
            // From now on the CA is kept.
            let next = try SimulatorCredentials.prepare(directory: directory, fcmPort: 8444, publicHost: "sim",
                                                        certificateNames: try CertificateNames(["sim.example"]))
            #expect(!next.certificateUpdate.changesAuthority)
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
