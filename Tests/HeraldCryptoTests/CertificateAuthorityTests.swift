import HeraldCrypto
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
}
