internal import COpenSSL

/// A throwaway certificate authority and one server certificate it signed, as PEM text: what
/// `herald sim` writes so clients can trust it (`ca.pem`) while it serves TLS. The CA's key is
/// kept too, so that a server certificate for other names, or an APNs client certificate, can be
/// signed later without changing what clients trust.
public struct CertificateAuthority: Sendable {
    /// The CA certificate (trust this).
    public let caCertificatePEM: String
    /// The CA's private key (PKCS#8), for ``reissue(caCertificatePEM:caKeyPEM:serverNames:days:)``.
    public let caKeyPEM: String
    /// The server certificate, for its ``CertificateNames``.
    public let serverCertificatePEM: String
    /// The server certificate's private key (PKCS#8).
    public let serverKeyPEM: String

    /// Generates a CA valid for `days` and a server certificate for `serverNames`.
    public static func generate(commonName: String = "Herald simulator CA", serverNames: CertificateNames = .loopback,
                                days: Int = 3650) throws(CryptoError) -> CertificateAuthority {
        let caKey = try PrivateKey.generate(.ecP256)
        let ca = try makeCertificate(subject: [("CN", commonName)], key: caKey, issuer: nil, issuerKey: caKey, serial: 1, days: days,
                                     extensions: [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")])
        defer { X509_free(ca) }
        return try signServer(names: serverNames, ca: ca, caKey: caKey, days: days)
    }

    /// A new server certificate and key for `serverNames`, signed by an existing CA, which
    /// stays as it is: clients that trust `caCertificatePEM` accept the new certificate.
    public static func reissue(caCertificatePEM: String, caKeyPEM: String, serverNames: CertificateNames,
                               days: Int = 3650) throws(CryptoError) -> CertificateAuthority {
        let (ca, caKey) = try loadAuthority(caCertificatePEM, caKeyPEM)
        defer { X509_free(ca) }
        return try signServer(names: serverNames, ca: ca, caKey: caKey, days: days)
    }

    /// An APNs client certificate for `bundleID` and a new key, shaped like the ones Apple
    /// issues: subject `UID=<bundleID>, CN=Apple Push Services: <bundleID>`, extended key usage
    /// clientAuth, signed by the CA given. A server that verifies client certificates against
    /// `caCertificatePEM` accepts it, and reads the bundle id from its UID.
    public static func issueAPNsClientCertificate(bundleID: String, caCertificatePEM: String, caKeyPEM: String,
                                                  days: Int = 365) throws(CryptoError) -> IssuedCertificate {
        // A bundle id is letters, digits, '-' and '.' (Apple's rule); nothing else belongs in the subject.
        guard !bundleID.isEmpty, bundleID.utf8.count <= 155,
              bundleID.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == ".") })
        else { throw CryptoError(.certificate, "not a bundle id: \(bundleID.debugDescription)") }
        let (ca, caKey) = try loadAuthority(caCertificatePEM, caKeyPEM)
        defer { X509_free(ca) }
        let key = try PrivateKey.generate(.ecP256)
        let certificate = try makeCertificate(subject: [("UID", bundleID), ("CN", "Apple Push Services: \(bundleID)")], key: key,
                                              issuer: ca, issuerKey: caKey, serial: Int.random(in: 2...Int.max), days: days,
                                              extensions: [(NID_basic_constraints, "critical,CA:FALSE"), (NID_ext_key_usage, "clientAuth"),
                                                           (NID_key_usage, "critical,digitalSignature")])
        defer { X509_free(certificate) }
        return IssuedCertificate(certificatePEM: try pem(certificate), keyPEM: try key.pkcs8PEM())
    }

    /// The CA certificate (the caller frees it) and its key, checked to belong together.
    private static func loadAuthority(_ caCertificatePEM: String, _ caKeyPEM: String) throws(CryptoError) -> (OpaquePointer, PrivateKey) {
        let caKey = try PrivateKey(pem: caKeyPEM)
        let bio = try MemoryBIO(Array(caCertificatePEM.utf8))
        guard let ca = PEM_read_bio_X509(bio.pointer, nil, nil, nil) else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.certificate, "the CA certificate is not a PEM certificate")
        }
        guard X509_check_private_key(ca, caKey.pointer) == 1 else {
            X509_free(ca)
            _ = drainOpenSSLErrors()
            throw CryptoError(.certificate, "the CA key does not belong to the CA certificate")
        }
        return (ca, caKey)
    }

    private static func signServer(names: CertificateNames, ca: OpaquePointer, caKey: PrivateKey,
                                   days: Int) throws(CryptoError) -> CertificateAuthority {
        guard !names.isEmpty else { throw CryptoError(.certificate, "a server certificate needs at least one name") }
        let serverKey = try PrivateKey.generate(.ecP256)
        // A random serial: certificates the same CA signs for other names must not share one
        // (some clients refuse a second certificate with a known issuer and serial).
        let server = try makeCertificate(subject: [("CN", names.dnsNames.sorted().first ?? names.ipAddresses.sorted().first ?? "server")],
                                         key: serverKey, issuer: ca, issuerKey: caKey, serial: Int.random(in: 2...Int.max), days: days,
                                         extensions: [(NID_basic_constraints, "critical,CA:FALSE"), (NID_subject_alt_name, names.subjectAltName),
                                                      (NID_ext_key_usage, "serverAuth"), (NID_key_usage, "critical,digitalSignature")])
        defer { X509_free(server) }
        return CertificateAuthority(caCertificatePEM: try pem(ca), caKeyPEM: try caKey.pkcs8PEM(), serverCertificatePEM: try pem(server),
                                    serverKeyPEM: try serverKey.pkcs8PEM())
    }

    private static func pem(_ certificate: OpaquePointer) throws(CryptoError) -> String {
        let bio = try MemoryBIO()
        guard PEM_write_bio_X509(bio.pointer, certificate) == 1 else { throw CryptoError.openssl(.certificate, "cannot write a certificate") }
        return String(decoding: bio.contents, as: UTF8.self)
    }

    /// `subject` is (attribute short name, value) pairs, in order.
    private static func makeCertificate(subject: [(String, String)], key: PrivateKey, issuer: OpaquePointer?, issuerKey: PrivateKey,
                                        serial: Int, days: Int, extensions: [(Int32, String)]) throws(CryptoError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw CryptoError.openssl(.certificate, "X509_new failed") }
        var ok = X509_set_version(certificate, 2) == 1
        ok = ok && ASN1_INTEGER_set(X509_get_serialNumber(certificate), serial) == 1
        ok = ok && X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil
        ok = ok && X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400) != nil
        ok = ok && X509_set_pubkey(certificate, key.pointer) == 1
        let name = X509_get_subject_name(certificate)
        for (field, value) in subject where ok {
            ok = X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1
        }
        ok = ok && X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0) } ?? name) == 1
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions where ok {
            guard let extensionPointer = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                ok = false
                break
            }
            ok = X509_add_ext(certificate, extensionPointer, -1) == 1
            X509_EXTENSION_free(extensionPointer)
        }
        ok = ok && X509_sign(certificate, issuerKey.pointer, EVP_sha256()) > 0
        guard ok else {
            X509_free(certificate)
            throw CryptoError.openssl(.certificate, "cannot build a certificate")
        }
        return certificate
    }
}
