import Foundation
import HeraldCrypto
import HeraldTestSupport
import Testing

@Suite struct CertificateAuthorityTests {
    @Test func theServerCertificateNamesWhatWasAskedFor() throws {
        let names = try CertificateNames(["127.0.0.1", "localhost", "sim", "10.1.2.3", "::1"])
        let authority = try CertificateAuthority.generate(serverNames: names)
        #expect(try CertificateNames(certificatePEM: authority.serverCertificatePEM) == names)
        #expect(try CertificateNames(certificatePEM: CertificateAuthority.generate().serverCertificatePEM) == .loopback)
    }

    @Test func aReissuedCertificateHasTheNewNamesAndTheSameCA() throws {
        let first = try CertificateAuthority.generate()
        let names = CertificateNames.loopback.union(try CertificateNames(["sim"]))
        let second = try CertificateAuthority.reissue(caCertificatePEM: first.caCertificatePEM, caKeyPEM: first.caKeyPEM, serverNames: names)
        #expect(second.caCertificatePEM == first.caCertificatePEM)
        #expect(second.caKeyPEM == first.caKeyPEM)
        #expect(second.serverKeyPEM != first.serverKeyPEM)
        #expect(try CertificateNames(certificatePEM: second.serverCertificatePEM) == names)
        #expect(try CertificateNames(certificatePEM: first.serverCertificatePEM) == .loopback)
    }

    @Test func reissuingNeedsTheCAsOwnKeyAndAName() throws {
        let first = try CertificateAuthority.generate()
        let other = try CertificateAuthority.generate()
        #expect(throws: CryptoError.self) {
            try CertificateAuthority.reissue(caCertificatePEM: first.caCertificatePEM, caKeyPEM: other.caKeyPEM, serverNames: .loopback)
        }
        #expect(throws: CryptoError.self) {
            try CertificateAuthority.reissue(caCertificatePEM: first.caCertificatePEM, caKeyPEM: first.caKeyPEM, serverNames: CertificateNames())
        }
        #expect(throws: CryptoError.self) {
            try CertificateAuthority.reissue(caCertificatePEM: "not a certificate", caKeyPEM: first.caKeyPEM, serverNames: .loopback)
        }
    }

    /// Read back with the openssl program.
    @Test func anAPNsClientCertificateNamesItsBundleAsAppleDoes() async throws {
        let authority = try CertificateAuthority.generate()
        let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: "com.example.app", caCertificatePEM: authority.caCertificatePEM,
                                                                         caKeyPEM: authority.caKeyPEM)
        let files = ["client.pem": Array(issued.certificatePEM.utf8), "ca.pem": Array(authority.caCertificatePEM.utf8)]
        let subject = try await OpenSSLCommand.run(["x509", "-in", "client.pem", "-noout", "-subject", "-nameopt", "multiline"], files: files)
        #expect(subject.status == 0, "\(subject.stderr)")
        let lines = subject.stdout.split(separator: "\n").map { $0.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) } }
        #expect(lines.dropFirst().map { $0 } == [["userId", "com.example.app"], ["commonName", "Apple Push Services: com.example.app"]])
        let extensions = try await OpenSSLCommand.run(["x509", "-in", "client.pem", "-noout", "-ext", "extendedKeyUsage,basicConstraints"], files: files)
        #expect(extensions.stdout.contains("TLS Web Client Authentication"))
        #expect(!extensions.stdout.contains("Server Authentication"))
        #expect(extensions.stdout.contains("CA:FALSE"))
        // The CA verifies it for client authentication, the use a TLS server puts it to.
        let verify = try await OpenSSLCommand.run(["verify", "-CAfile", "ca.pem", "-purpose", "sslclient", "client.pem"], files: files)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        // Its key is the certificate's.
        let certificateKey = try await OpenSSLCommand.run(["x509", "-in", "client.pem", "-noout", "-pubkey"], files: files)
        let key = try await OpenSSLCommand.run(["pkey", "-in", "key.pem", "-pubout"], files: ["key.pem": Array(issued.keyPEM.utf8)])
        #expect(key.status == 0 && certificateKey.stdout == key.stdout)
    }

    @Test func issuingNeedsTheCAsOwnKeyAndABundleID() throws {
        let authority = try CertificateAuthority.generate()
        let other = try CertificateAuthority.generate()
        #expect(throws: CryptoError.self) {
            try CertificateAuthority.issueAPNsClientCertificate(bundleID: "com.example.app", caCertificatePEM: authority.caCertificatePEM,
                                                                caKeyPEM: other.caKeyPEM)
        }
        for bundleID in ["", "com.example app", "com.example,CN=evil", "com.exämple"] {
            #expect(throws: CryptoError.self, "\(bundleID)") {
                try CertificateAuthority.issueAPNsClientCertificate(bundleID: bundleID, caCertificatePEM: authority.caCertificatePEM,
                                                                    caKeyPEM: authority.caKeyPEM)
            }
        }
    }
}
