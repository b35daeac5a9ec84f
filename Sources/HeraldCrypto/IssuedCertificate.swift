internal import COpenSSL

/// A certificate and its private key, as PEM text: what
/// ``CertificateAuthority/issueAPNsClientCertificate(bundleID:caCertificatePEM:caKeyPEM:days:)``
/// returns for a client to present.
public struct IssuedCertificate: Sendable {
    /// The certificate.
    public let certificatePEM: String
    /// Its private key (PKCS#8).
    public let keyPEM: String

    /// A certificate and key already at hand (kept from an earlier run, say).
    public init(certificatePEM: String, keyPEM: String) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }

    /// Both as a PKCS#12 file (DER), the form Apple's portal and Keychain hand out (`.p12`),
    /// protected by `password`. OpenSSL 3's defaults protect it: AES-256-CBC under PBKDF2 for
    /// the key and the certificate, an HMAC-SHA-256 integrity check.
    public func pkcs12(password: String, friendlyName: String? = nil) throws(CryptoError) -> [UInt8] {
        let key = try PrivateKey(pem: keyPEM)
        return try withPEMCertificate(certificatePEM) { certificate throws(CryptoError) in try pkcs12(certificate, key, password, friendlyName) }
    }

    private func pkcs12(_ certificate: OpaquePointer, _ key: PrivateKey, _ password: String, _ friendlyName: String?) throws(CryptoError) -> [UInt8] {
        // Zero for the algorithms and iteration counts: OpenSSL's defaults, not the legacy
        // RC2/3DES ones that OpenSSL 3 no longer reads without its legacy provider.
        guard let p12 = PKCS12_create(password, friendlyName, key.pointer, certificate, nil, 0, 0, 0, 0, 0) else {
            throw CryptoError.openssl(.certificate, "cannot build the PKCS#12 file")
        }
        defer { PKCS12_free(p12) }
        var der: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS12(p12, &der)
        guard length > 0, let der else { throw CryptoError.openssl(.certificate, "cannot encode the PKCS#12 file") }
        defer { CRYPTO_free(der, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: der, count: Int(length)))
    }
}
