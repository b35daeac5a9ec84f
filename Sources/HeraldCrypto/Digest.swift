internal import COpenSSL

/// SHA-256 through OpenSSL's EVP interface.
public enum SHA256 {
    /// The digest of `bytes` (32 bytes).
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let input = Array(bytes)
        let ok = input.withUnsafeBytes { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &digest, &length, EVP_sha256(), nil)
        }
        // EVP_Digest with a built-in digest fails only when OpenSSL cannot allocate a context.
        precondition(ok == 1, "EVP_Digest(SHA-256) failed: out of memory")
        return Array(digest.prefix(Int(length)))
    }

    /// Writes the digest of `buffer` to the first 32 bytes of `digest` (which must hold 32),
    /// allocating nothing: for digests on a hot path.
    public static func hash(_ buffer: UnsafeRawBufferPointer, into digest: UnsafeMutableRawBufferPointer) {
        precondition(digest.count >= 32, "a SHA-256 digest needs 32 bytes")
        var length: UInt32 = 0
        let ok = EVP_Digest(buffer.baseAddress, buffer.count, digest.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, EVP_sha256(), nil)
        // EVP_Digest with a built-in digest fails only when OpenSSL cannot allocate a context.
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed: out of memory")
    }

    /// The digest of `text`'s UTF-8 bytes, as lower-case hex.
    public static func hexDigest(_ text: String) -> String {
        Hex.encode(hash(Array(text.utf8)))
    }
}

/// Lower-case hexadecimal.
public enum Hex {
    /// Encodes bytes as lower-case hex.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digit(byte >> 4))
            out.append(digit(byte & 0x0F))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The lower-case ASCII hex digit of a nibble (0...15).
    @inlinable
    public static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x57 + nibble
    }
}

/// Cryptographically secure random bytes from OpenSSL.
public enum SecureRandom {
    /// Thrown when OpenSSL's generator cannot produce bytes (not seeded).
    public struct Unavailable: Error, Sendable {}

    /// `count` random bytes.
    public static func bytes(_ count: Int) throws(Unavailable) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        guard count == 0 || RAND_bytes(&buffer, Int32(count)) == 1 else { throw Unavailable() }
        return buffer
    }
}
