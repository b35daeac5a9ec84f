import HeraldCrypto
import Testing

@Suite struct CertificateSubjectTests {
    @Test func readsTheUIDAndTheCommonName() throws {
        let authority = try CertificateAuthority.generate(commonName: "Test CA")
        let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: "com.example.app", caCertificatePEM: authority.caCertificatePEM,
                                                                         caKeyPEM: authority.caKeyPEM)
        #expect(try CertificateSubject(certificatePEM: issued.certificatePEM)
                == CertificateSubject(uid: "com.example.app", commonName: "Apple Push Services: com.example.app"))
        // A CA certificate has no UID: it names no app.
        #expect(try CertificateSubject(certificatePEM: authority.caCertificatePEM) == CertificateSubject(uid: nil, commonName: "Test CA"))
    }

    @Test func refusesWhatIsNotACertificate() throws {
        let authority = try CertificateAuthority.generate()
        #expect(throws: CryptoError.self) { try CertificateSubject(certificatePEM: authority.caKeyPEM) }
        #expect(throws: CryptoError.self) { try CertificateSubject(certificatePEM: "") }
    }
}
