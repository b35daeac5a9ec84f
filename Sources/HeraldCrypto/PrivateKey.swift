internal import COpenSSL

/// A private key (EC P-256 for APNs `.p8` keys, RSA for FCM service accounts) held by OpenSSL.
///
/// `@unchecked Sendable`: an `EVP_PKEY` is immutable once loaded, and OpenSSL 3 allows
/// concurrent signing with one key from many threads.
public final class PrivateKey: @unchecked Sendable {
    /// Key algorithms Herald uses.
    public enum Algorithm: Sendable, Equatable {
        case ecP256
        case rsa(bits: Int)
    }

    let pointer: OpaquePointer

    private init(pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }

    /// Loads a PEM private key (PKCS#8 `BEGIN PRIVATE KEY`, or the traditional EC/RSA forms).
    /// The error never quotes the key.
    public convenience init(pem: String) throws(CryptoError) {
        let bio = try MemoryBIO(Array(pem.utf8))
        guard let key = PEM_read_bio_PrivateKey(bio.pointer, nil, nil, nil) else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.invalidKey, "not a PEM private key")
        }
        self.init(pointer: key)
    }

    /// Generates a new key.
    public static func generate(_ algorithm: Algorithm) throws(CryptoError) -> PrivateKey {
        let name: String
        switch algorithm {
        case .ecP256: name = "EC"
        case .rsa: name = "RSA"
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, name, nil) else {
            throw CryptoError.openssl(.keyGeneration, "EVP_PKEY_CTX_new_from_name(\(name)) failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw CryptoError.openssl(.keyGeneration, "keygen init failed") }
        switch algorithm {
        case .ecP256:
            guard EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else { throw CryptoError.openssl(.keyGeneration, "P-256 unavailable") }
        case .rsa(let bits):
            guard EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)) == 1 else { throw CryptoError.openssl(.keyGeneration, "RSA bits") }
        }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(context, &key) == 1, let key else { throw CryptoError.openssl(.keyGeneration, "keygen failed") }
        return PrivateKey(pointer: key)
    }

    /// The algorithm of this key.
    public var algorithm: Algorithm {
        EVP_PKEY_get_base_id(pointer) == herald_evp_pkey_ec() ? .ecP256 : .rsa(bits: Int(EVP_PKEY_get_bits(pointer)))
    }

    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as Apple's `.p8` files are.
    public func pkcs8PEM() throws(CryptoError) -> String {
        let bio = try MemoryBIO()
        guard PEM_write_bio_PrivateKey(bio.pointer, pointer, nil, nil, 0, nil, nil) == 1 else {
            throw CryptoError.openssl(.invalidKey, "cannot write the key")
        }
        return String(decoding: bio.contents, as: UTF8.self)
    }

    /// The public half, as a `PublicKey`.
    public func publicKey() throws(CryptoError) -> PublicKey {
        let bio = try MemoryBIO()
        guard PEM_write_bio_PUBKEY(bio.pointer, pointer) == 1 else { throw CryptoError.openssl(.invalidKey, "cannot export the public key") }
        return try PublicKey(pem: String(decoding: bio.contents, as: UTF8.self))
    }

    /// The public half as DER `SubjectPublicKeyInfo` (91 bytes for a P-256 key): what a key
    /// fingerprint is taken over, since it identifies the key without revealing it.
    public func publicKeyDER() throws(CryptoError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(pointer, &buffer)
        guard length > 0, let buffer else { throw CryptoError.openssl(.invalidKey, "cannot export the public key") }
        defer { CRYPTO_free(buffer, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
    }

    /// Signs `message` with SHA-256: ES256 (`r || s`, 64 bytes, as JOSE wants) for EC keys,
    /// RS256 (PKCS#1 v1.5) for RSA keys.
    public func signSHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openssl(.signing, "EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            throw CryptoError.openssl(.signing, "EVP_DigestSignInit failed")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw CryptoError.openssl(.signing, "EVP_DigestSign (size) failed")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(context, &signature, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw CryptoError.openssl(.signing, "EVP_DigestSign failed")
        }
        signature.removeLast(signature.count - length)
        if algorithm == .ecP256 { return try ECDSASignature.joseFromDER(signature) }
        return signature
    }
}

/// A public key, for verifying signatures (the simulators verify JWTs with it).
public final class PublicKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Loads a PEM public key (`BEGIN PUBLIC KEY`).
    public init(pem: String) throws(CryptoError) {
        let bio = try MemoryBIO(Array(pem.utf8))
        guard let key = PEM_read_bio_PUBKEY(bio.pointer, nil, nil, nil) else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.invalidKey, "not a PEM public key")
        }
        pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    /// Whether `signature` (ES256 `r || s`, or RS256) over `message` is valid.
    public func verifySHA256(_ message: [UInt8], signature: [UInt8]) -> Bool {
        let isEC = EVP_PKEY_get_base_id(pointer) == herald_evp_pkey_ec()
        let der: [UInt8]
        if isEC {
            guard let converted = try? ECDSASignature.derFromJOSE(signature) else { return false }
            der = converted
        } else {
            der = signature
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            _ = drainOpenSSLErrors()
            return false
        }
        let result = der.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { msg in
                EVP_DigestVerify(context, sig.baseAddress, sig.count, msg.baseAddress, msg.count)
            }
        }
        if result != 1 { _ = drainOpenSSLErrors() }
        return result == 1
    }
}

/// ECDSA P-256 signatures between DER (what OpenSSL makes) and JOSE's fixed `r || s`.
enum ECDSASignature {
    static func joseFromDER(_ der: [UInt8]) throws(CryptoError) -> [UInt8] {
        var cursor: UnsafePointer<UInt8>? = nil
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw CryptoError.openssl(.signing, "cannot parse the ECDSA signature") }
        defer { ECDSA_SIG_free(parsed) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(parsed, &r, &s)
        var out = [UInt8](repeating: 0, count: 64)
        guard let r, let s,
              out.withUnsafeMutableBufferPointer({ BN_bn2binpad(r, $0.baseAddress, 32) }) == 32,
              out.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32
        else { throw CryptoError.openssl(.signing, "cannot encode the ECDSA signature") }
        return out
    }

    static func derFromJOSE(_ jose: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard jose.count == 64 else { throw CryptoError(.verification, "an ES256 signature is 64 bytes") }
        guard let signature = ECDSA_SIG_new() else { throw CryptoError.openssl(.verification, "ECDSA_SIG_new failed") }
        defer { ECDSA_SIG_free(signature) }
        let r = jose.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = jose.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            throw CryptoError.openssl(.verification, "cannot build the ECDSA signature")
        }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { throw CryptoError.openssl(.verification, "cannot encode the ECDSA signature") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
