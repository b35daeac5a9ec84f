import HeraldCrypto
import Testing

@Suite struct CertificateNamesTests {
    @Test func namesAreSortedIntoIPAddressesAndDNSNamesInTheFormsClientsCompare() throws {
        let names = try CertificateNames(["127.0.0.1", "LocalHost", "0:0:0:0:0:0:0:1", "sim", "herald_sim.example", "10.1.2.3"])
        #expect(names.ipAddresses == ["127.0.0.1", "::1", "10.1.2.3"])
        #expect(names.dnsNames == ["localhost", "sim", "herald_sim.example"])
        #expect(names.description == "10.1.2.3, 127.0.0.1, ::1, herald_sim.example, localhost, sim")
        #expect(CertificateNames.loopback == (try CertificateNames(["localhost", "127.0.0.1"])))
    }

    /// Names go into OpenSSL's extension syntax: a comma or a prefix there would add a name.
    @Test(arguments: ["", "sim,DNS:evil.example", "IP:10.0.0.1", "two words", "-sim", "sim-", "a..b", ".sim", "999.1.1.1",
                      "10.0.0", "sim.example:8443", String(repeating: "a", count: 64) + ".example", "sïm"])
    func anythingElseIsRefused(name: String) {
        #expect(throws: CryptoError.self) { try CertificateNames([name]) }
    }

    @Test func containsUnionAndSubtracting() throws {
        let stored = try CertificateNames(["127.0.0.1", "localhost", "sim"])
        #expect(stored.contains(.loopback))
        #expect(stored.contains(try CertificateNames(["SIM"])))
        #expect(!stored.contains(try CertificateNames(["sim", "10.0.0.1"])))
        let wanted = stored.union(try CertificateNames(["10.0.0.1"]))
        #expect(wanted.subtracting(stored) == (try CertificateNames(["10.0.0.1"])))
        #expect(wanted.subtracting(wanted).isEmpty)
    }

    @Test func aCertificateWithoutNamesNamesNothingAndTextThatIsNoCertificateIsRefused() throws {
        // The CA certificate has no subjectAltName.
        let authority = try CertificateAuthority.generate()
        #expect(try CertificateNames(certificatePEM: authority.caCertificatePEM).isEmpty)
        #expect(throws: CryptoError.self) { try CertificateNames(certificatePEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") }
        #expect(throws: CryptoError.self) { try CertificateNames(certificatePEM: authority.serverKeyPEM) }
    }
}
