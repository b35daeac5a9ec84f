import HeraldCrypto
import HeraldTestSupport
import Testing

/// The PKCS#12 form, opened with the openssl program.
@Suite struct IssuedCertificateTests {
    @Test func thePKCS12FileOpensWithItsPasswordOnly() async throws {
        let authority = try CertificateAuthority.generate()
        let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: "com.example.app", caCertificatePEM: authority.caCertificatePEM,
                                                                         caKeyPEM: authority.caKeyPEM)
        let p12 = try issued.pkcs12(password: "secret", friendlyName: "Apple Push Services: com.example.app")
        // No -legacy: OpenSSL 3's default provider reads it, so its algorithms are the modern ones.
        let opened = try await OpenSSLCommand.run(["pkcs12", "-in", "client.p12", "-passin", "pass:secret", "-nodes", "-info"], files: ["client.p12": p12])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout.contains("friendlyName: Apple Push Services: com.example.app"))
        #expect(opened.stderr.contains("PBES2, PBKDF2, AES-256-CBC"), "\(opened.stderr)")
        #expect(opened.stderr.contains("MAC: sha256"), "\(opened.stderr)")
        // The certificate and key inside are the ones issued.
        let certificate = try CertificateSubject(certificatePEM: opened.stdout)
        #expect(certificate.uid == "com.example.app")
        let key = try await OpenSSLCommand.run(["pkey", "-pubout"], files: [:], input: opened.stdout)
        let expected = try await OpenSSLCommand.run(["pkey", "-pubout"], files: [:], input: issued.keyPEM)
        #expect(key.status == 0 && key.stdout == expected.stdout)

        let wrong = try await OpenSSLCommand.run(["pkcs12", "-in", "client.p12", "-passin", "pass:wrong", "-nodes"], files: ["client.p12": p12])
        #expect(wrong.status != 0)
    }
}
