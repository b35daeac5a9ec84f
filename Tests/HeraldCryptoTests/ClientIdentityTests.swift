import Foundation
import HeraldCrypto
import Testing

/// APNs client identities as Keychain and OpenSSL write them, made here with the `openssl`
/// command line (Debian's, OpenSSL 3): modern and legacy (RC2/3DES) .p12 files, PEM with a plain
/// or an encrypted key.
@Suite struct ClientIdentityTests {
    /// A folder with an "Apple Push Services"-shaped certificate (UID = bundle id) and its key.
    struct Files {
        let folder: URL
        var certificate: String { folder.appendingPathComponent("cert.pem").path }
        var key: String { folder.appendingPathComponent("key.pem").path }
        func path(_ name: String) -> String { folder.appendingPathComponent(name).path }
        func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path(name)))) }

        init(commonName: String = "Apple Push Services: com.example.shop") throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("herald-identity-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "30",
                         "-subj", "/UID=com.example.shop/CN=\(commonName)/OU=TEAM123456/O=Example/C=US"])
        }

        func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            process.waitUntilExit()
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            guard process.terminationStatus == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: text]) }
        }

        func remove() { try? FileManager.default.removeItem(at: folder) }
    }

    @Test func aModernP12OpensWithItsPasswordAndNamesTheBundle() throws {
        let files = try Files()
        defer { files.remove() }
        try files.openssl(["pkcs12", "-export", "-in", files.certificate, "-inkey", files.key, "-out", files.path("id.p12"), "-passout", "pass:s3cret"])
        let identity = try ClientIdentity.load(try files.bytes("id.p12"), password: "s3cret")
        #expect(identity.subjectUID == "com.example.shop")
        #expect(identity.commonName == "Apple Push Services: com.example.shop" && identity.environmentHint == nil)
        #expect(identity.keyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----") && identity.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(abs(identity.notAfter - Int64(Date().timeIntervalSince1970) - 30 * 86_400) < 120)
        #expect(identity.fingerprint.count == 64)
        // The PEM it keeps reads back as the same identity.
        #expect(try ClientIdentity(certificatePEM: identity.certificatePEM, keyPEM: identity.keyPEM) == identity)
        #expect {
            try ClientIdentity.load(try files.bytes("id.p12"), password: "wrong")
        } throws: { error in (error as? CryptoError)?.message == "the password does not open the .p12" }
        #expect {
            try ClientIdentity.load(try files.bytes("id.p12"), password: nil)
        } throws: { error in (error as? CryptoError)?.message == "the .p12 needs its password" }
    }

    /// Older Keychain exports (RC2-40 and 3DES): read through OpenSSL 3's legacy provider, which
    /// Debian's libssl3 installs.
    @Test func aLegacyP12OpensThroughTheLegacyProvider() throws {
        let files = try Files(commonName: "Apple Development IOS Push Services: com.example.shop")
        defer { files.remove() }
        try files.openssl(["pkcs12", "-export", "-legacy", "-in", files.certificate, "-inkey", files.key, "-out", files.path("old.p12"),
                           "-passout", "pass:old"])
        let identity = try ClientIdentity.load(try files.bytes("old.p12"), password: "old")
        #expect(identity.subjectUID == "com.example.shop" && identity.environmentHint == "sandbox")
    }

    @Test func pemWithAPlainOrAnEncryptedKey() throws {
        let files = try Files(commonName: "Apple Production IOS Push Services: com.example.shop")
        defer { files.remove() }
        let certificate = try String(contentsOfFile: files.certificate, encoding: .utf8)
        let key = try String(contentsOfFile: files.key, encoding: .utf8)
        let plain = try ClientIdentity.load(Array((certificate + key).utf8), password: nil)
        #expect(plain.subjectUID == "com.example.shop" && plain.environmentHint == "production")
        try files.openssl(["pkcs8", "-topk8", "-in", files.key, "-out", files.path("encrypted.pem"), "-passout", "pass:pem-pass"])
        let encrypted = certificate + (try String(contentsOfFile: files.path("encrypted.pem"), encoding: .utf8))
        #expect(try ClientIdentity.load(Array(encrypted.utf8), password: "pem-pass") == plain)
        #expect {
            try ClientIdentity.load(Array(encrypted.utf8), password: nil)
        } throws: { error in (error as? CryptoError)?.message == "the private key is encrypted: give its password" }
        #expect {
            try ClientIdentity.load(Array(encrypted.utf8), password: "nope")
        } throws: { error in (error as? CryptoError)?.message.hasPrefix("the password does not open the private key") == true }
    }

    @Test func aKeyOfAnotherCertificateOrGarbageIsRefused() throws {
        let files = try Files()
        let other = try Files()
        defer { files.remove(); other.remove() }
        let mixed = try String(contentsOfFile: files.certificate, encoding: .utf8) + (try String(contentsOfFile: other.key, encoding: .utf8))
        #expect {
            try ClientIdentity.load(Array(mixed.utf8), password: nil)
        } throws: { error in (error as? CryptoError)?.message == "the private key does not belong to the certificate" }
        #expect(throws: CryptoError.self) { try ClientIdentity.load(Array("not a certificate".utf8), password: nil) }
        #expect(throws: CryptoError.self) { try ClientIdentity.load([0x30, 0x82, 0x01], password: "x") }
        let certificateOnly = try String(contentsOfFile: files.certificate, encoding: .utf8)
        #expect {
            try ClientIdentity.load(Array(certificateOnly.utf8), password: nil)
        } throws: { error in (error as? CryptoError)?.message == "the PEM file holds no private key beside the certificate" }
    }
}
