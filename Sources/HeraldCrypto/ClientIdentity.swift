internal import COpenSSL
import Glibc
import Synchronization

/// A TLS client identity, as APNs certificate-based authentication uses it: Apple's "Apple Push
/// Services" certificate for one app and its private key. Read from what Keychain exports (a
/// PKCS#12 `.p12`, password-protected) or from PEM (certificate and key in one file, the key
/// encrypted or not), checked (the key belongs to the certificate), and kept as PEM: the
/// certificate, and the key unencrypted as PKCS#8, which `herald apps` seals before storing.
public struct ClientIdentity: Sendable, Equatable {
    public let certificatePEM: String
    public let keyPEM: String
    /// The subject's UID: Apple puts the app's bundle id there.
    public let subjectUID: String?
    /// The subject's common name ("Apple Push Services: com.example.app").
    public let commonName: String?
    /// The end of the certificate's validity, seconds since the Unix epoch.
    public let notAfter: Int64
    /// SHA-256 of the certificate's DER, hex: what `herald apps show` prints.
    public let fingerprint: String

    /// The APNs environment the certificate's common name implies: Apple's older per-environment
    /// certificates say "Apple Development IOS Push Services" (sandbox) or "Apple Production IOS
    /// Push Services"; the current "Apple Push Services" certificates serve both (nil).
    public var environmentHint: String? {
        guard let commonName else { return nil }
        if commonName.hasPrefix("Apple Development") { return "sandbox" }
        if commonName.hasPrefix("Apple Production") { return "production" }
        return nil
    }

    /// Reads a `.p12` (PKCS#12 DER) or a PEM file with the certificate and the key. `password`
    /// opens the PKCS#12 or an encrypted PEM key. PKCS#12 files from older Keychain exports are
    /// encrypted with RC2 and 3DES, which OpenSSL 3 reads only through its legacy provider:
    /// loaded for this read if it is installed, else the error says how to convert the file.
    public static func load(_ bytes: [UInt8], password: String?) throws(CryptoError) -> ClientIdentity {
        let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
        if text.contains("-----BEGIN ") { return try fromPEM(bytes, password: password) }
        return try fromPKCS12(bytes, password: password)
    }

    /// An identity from PEM text already unencrypted (what is stored).
    public init(certificatePEM: String, keyPEM: String) throws(CryptoError) {
        self = try ClientIdentity.fromPEM(Array((certificatePEM + "\n" + keyPEM).utf8), password: nil)
    }

    private init(certificate: OpaquePointer, key: OpaquePointer) throws(CryptoError) {
        guard X509_check_private_key(certificate, key) == 1 else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.certificate, "the private key does not belong to the certificate")
        }
        let certificateBIO = try MemoryBIO()
        guard PEM_write_bio_X509(certificateBIO.pointer, certificate) == 1 else { throw CryptoError.openssl(.certificate, "cannot write the certificate") }
        let keyBIO = try MemoryBIO()
        guard PEM_write_bio_PrivateKey(keyBIO.pointer, key, nil, nil, 0, nil, nil) == 1 else { throw CryptoError.openssl(.invalidKey, "cannot write the key") }
        certificatePEM = String(decoding: certificateBIO.contents, as: UTF8.self)
        keyPEM = String(decoding: keyBIO.contents, as: UTF8.self)
        let subject = CertificateSubject(certificate: certificate)
        subjectUID = subject.uid
        commonName = subject.commonName
        var end = tm()
        guard let notAfterTime = X509_get0_notAfter(certificate), ASN1_TIME_to_tm(notAfterTime, &end) == 1 else {
            throw CryptoError.openssl(.certificate, "the certificate has no readable expiry")
        }
        notAfter = Int64(timegm(&end))
        var der: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(certificate, &der)
        guard length > 0, let der else { throw CryptoError.openssl(.certificate, "cannot encode the certificate") }
        defer { CRYPTO_free(der, #fileID, #line) }
        fingerprint = Hex.encode(SHA256.hash(UnsafeBufferPointer(start: der, count: Int(length))))
    }

    private static func fromPEM(_ bytes: [UInt8], password: String?) throws(CryptoError) -> ClientIdentity {
        let certificateBIO = try MemoryBIO(bytes)
        guard let certificate = PEM_read_bio_X509(certificateBIO.pointer, nil, nil, nil) else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.certificate, "the PEM file holds no certificate")
        }
        defer { X509_free(certificate) }
        let keyBIO = try MemoryBIO(bytes)
        // Without a password, a callback that refuses: OpenSSL would otherwise prompt on the terminal.
        let key: OpaquePointer? = password.map { password in
            password.withCString { PEM_read_bio_PrivateKey(keyBIO.pointer, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
        } ?? PEM_read_bio_PrivateKey(keyBIO.pointer, nil, { _, _, _, _ in -1 }, nil)
        guard let key else {
            let reasons = drainOpenSSLErrors()
            let encrypted = String(decoding: bytes, as: UTF8.self).contains("ENCRYPTED")
            if encrypted {
                throw CryptoError(.invalidKey, password == nil ? "the private key is encrypted: give its password"
                                                               : "the password does not open the private key (\(reasons))")
            }
            throw CryptoError(.invalidKey, "the PEM file holds no private key beside the certificate")
        }
        defer { EVP_PKEY_free(key) }
        return try ClientIdentity(certificate: certificate, key: key)
    }

    private static func fromPKCS12(_ bytes: [UInt8], password: String?) throws(CryptoError) -> ClientIdentity {
        let bio = try MemoryBIO(bytes)
        guard let p12 = d2i_PKCS12_bio(bio.pointer, nil) else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.certificate, "neither PEM nor a PKCS#12 (.p12) file")
        }
        defer { PKCS12_free(p12) }
        do {
            return try parse(p12, password: password)
        } catch let error where error.message.contains("unsupported") {
            // RC2/3DES: an older export. Read it through the legacy provider, if installed.
            guard LegacyProvider.load() else {
                throw CryptoError(.certificate, """
                    this .p12 is encrypted with RC2 or 3DES (an older Keychain export), which OpenSSL 3 reads only \
                    through its legacy provider, and that provider is not installed here. Convert the file: \
                    openssl pkcs12 -legacy -in old.p12 -nodes -out identity.pem, then pass identity.pem \
                    (or re-export it: openssl pkcs12 -export -in identity.pem -out new.p12)
                    """)
            }
            return try parse(p12, password: password)
        }
    }

    private static func parse(_ p12: OpaquePointer, password: String?) throws(CryptoError) -> ClientIdentity {
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        let parsed = (password ?? "").withCString { PKCS12_parse(p12, $0, &key, &certificate, &chain) }
        defer {
            if let key { EVP_PKEY_free(key) }
            if let certificate { X509_free(certificate) }
            if let chain { herald_x509_stack_free(chain) }
        }
        guard parsed == 1 else {
            let reasons = drainOpenSSLErrors()
            if reasons.contains("unsupported") { throw CryptoError(.certificate, "unsupported algorithm: \(reasons)") }
            if reasons.contains("mac verify failure") {
                throw CryptoError(.certificate, password == nil ? "the .p12 needs its password" : "the password does not open the .p12")
            }
            throw CryptoError(.certificate, "cannot read the .p12: \(reasons)")
        }
        guard let certificate, let key else { throw CryptoError(.certificate, "the .p12 holds no certificate with its private key") }
        return try ClientIdentity(certificate: certificate, key: key)
    }
}

/// OpenSSL 3's legacy provider (RC2, 3DES-based PBEs), loaded at most once and only when an old
/// PKCS#12 file needs it, together with the default provider (loading one provider explicitly
/// would otherwise leave the default unloaded).
enum LegacyProvider {
    private static let loaded = Mutex<Bool?>(nil)

    static func load() -> Bool {
        loaded.withLock { state in
            if let state { return state }
            let legacy = OSSL_PROVIDER_load(nil, "legacy")
            let standard = OSSL_PROVIDER_load(nil, "default")
            _ = drainOpenSSLErrors()
            state = legacy != nil && standard != nil
            return state ?? false
        }
    }
}
