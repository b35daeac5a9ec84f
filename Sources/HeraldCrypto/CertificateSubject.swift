internal import COpenSSL

/// The subject attributes that say whom a client certificate was issued to. An APNs certificate
/// carries the app's bundle id in its UID attribute (OID 0.9.2342.19200300.100.1.1) and a CN
/// such as `Apple Push Services: com.example.app`.
public struct CertificateSubject: Sendable, Hashable {
    /// The subject's UID attribute (APNs: the bundle id), or nil when it has none.
    public let uid: String?
    /// The subject's common name, or nil when it has none.
    public let commonName: String?

    /// A subject with these attributes.
    public init(uid: String?, commonName: String?) {
        self.uid = uid
        self.commonName = commonName
    }

    /// The subject of the first certificate in `pem`.
    public init(certificatePEM pem: String) throws(CryptoError) {
        self = try withPEMCertificate(pem) { certificate throws(CryptoError) in CertificateSubject(certificate: certificate) }
    }

    /// The subject of an `X509` the caller keeps owning.
    init(certificate: OpaquePointer) {
        let name = X509_get_subject_name(certificate)
        self.init(uid: Self.attribute(NID_userId, of: name), commonName: Self.attribute(NID_commonName, of: name))
    }

    /// The first value of attribute `nid` in `name`, as UTF-8 whatever string type it was stored in.
    private static func attribute(_ nid: Int32, of name: OpaquePointer?) -> String? {
        guard let name else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else {
            _ = drainOpenSSLErrors()
            return nil
        }
        defer { CRYPTO_free(utf8, #fileID, #line) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }
}
