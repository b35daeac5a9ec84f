internal import COpenSSL
import Foundation

/// Why an AES-256-GCM operation failed.
public struct AESGCMError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case invalidKey, authenticationFailed, openssl
        }
        private let base: Base

        /// The key is not 32 bytes of base64.
        public static let invalidKey = Code(base: .invalidKey)
        /// The sealed value is too short, or its tag does not verify: wrong key or altered data.
        public static let authenticationFailed = Code(base: .authenticationFailed)
        /// OpenSSL refused an operation (out of memory, no randomness).
        public static let openssl = Code(base: .openssl)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened, for people. Never contains key material.
    public let message: String
    /// Where the error was raised.
    public let file: String
    /// The line where the error was raised.
    public let line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { "AESGCMError.\(code): \(message)" }
}

/// A 256-bit AES key.
public struct AESGCMKey: Sendable {
    /// Key length in bytes.
    public static let byteCount = 32
    let bytes: [UInt8]

    /// A key from exactly 32 bytes.
    public init(bytes: [UInt8]) throws(AESGCMError) {
        guard bytes.count == AESGCMKey.byteCount else {
            throw AESGCMError(.invalidKey, "an AES-256 key is 32 bytes, got \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// A key from base64 text of 32 bytes (`HERALD_CREDENTIALS_KEY`, e.g. `openssl rand -base64 32`).
    public init(base64: String) throws(AESGCMError) {
        guard let data = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw AESGCMError(.invalidKey, "the key is not valid base64 (expected 32 random bytes, e.g. from `openssl rand -base64 32`)")
        }
        try self.init(bytes: Array(data))
    }
}

/// AES-256-GCM authenticated encryption, as stored for credentials at rest:
/// `nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes)`, with a fresh random nonce per value.
/// The associated data (not stored) binds a value to where it belongs, so a ciphertext copied
/// to another row or column fails to open.
public enum AESGCM {
    /// Nonce length in bytes.
    public static let nonceCount = 12
    /// Tag length in bytes.
    public static let tagCount = 16

    /// Encrypts `plaintext`.
    public static func seal(_ plaintext: [UInt8], key: AESGCMKey, associatedData: [UInt8] = []) throws(AESGCMError) -> [UInt8] {
        let nonce: [UInt8]
        do { nonce = try SecureRandom.bytes(nonceCount) } catch { throw AESGCMError(.openssl, "no random bytes for the nonce") }
        return try seal(plaintext, key: key, nonce: nonce, associatedData: associatedData)
    }

    /// Encrypts with a given nonce (tests with known vectors only: a nonce must never repeat under one key).
    public static func seal(_ plaintext: [UInt8], key: AESGCMKey, nonce: [UInt8], associatedData: [UInt8] = []) throws(AESGCMError) -> [UInt8] {
        guard nonce.count == nonceCount else { throw AESGCMError(.openssl, "the nonce must be 12 bytes") }
        let context = try CipherContext()
        guard EVP_EncryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, key.bytes, nonce) == 1 else {
            throw AESGCMError(.openssl, "EVP_EncryptInit_ex failed")
        }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            guard EVP_EncryptUpdate(context.pointer, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw AESGCMError(.openssl, "EVP_EncryptUpdate (associated data) failed")
            }
        }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var written: Int32 = 0
        if !plaintext.isEmpty {
            guard EVP_EncryptUpdate(context.pointer, &output, &written, plaintext, Int32(plaintext.count)) == 1 else {
                throw AESGCMError(.openssl, "EVP_EncryptUpdate failed")
            }
        }
        var final: Int32 = 0
        let finished = output.withUnsafeMutableBufferPointer { buffer in
            EVP_EncryptFinal_ex(context.pointer, buffer.baseAddress! + Int(written), &final)
        }
        guard finished == 1 else { throw AESGCMError(.openssl, "EVP_EncryptFinal_ex failed") }
        var tag = [UInt8](repeating: 0, count: tagCount)
        guard EVP_CIPHER_CTX_ctrl(context.pointer, herald_evp_ctrl_gcm_get_tag(), Int32(tagCount), &tag) == 1 else {
            throw AESGCMError(.openssl, "reading the GCM tag failed")
        }
        return nonce + output.prefix(Int(written + final)) + tag
    }

    /// Decrypts and verifies a value made by `seal` with the same key and associated data.
    public static func open(_ sealed: [UInt8], key: AESGCMKey, associatedData: [UInt8] = []) throws(AESGCMError) -> [UInt8] {
        guard sealed.count >= nonceCount + tagCount else {
            throw AESGCMError(.authenticationFailed, "the sealed value is \(sealed.count) bytes, shorter than nonce and tag")
        }
        let nonce = Array(sealed.prefix(nonceCount))
        var tag = Array(sealed.suffix(tagCount))
        let ciphertext = Array(sealed[nonceCount..<(sealed.count - tagCount)])
        let context = try CipherContext()
        guard EVP_DecryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, key.bytes, nonce) == 1 else {
            throw AESGCMError(.openssl, "EVP_DecryptInit_ex failed")
        }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            guard EVP_DecryptUpdate(context.pointer, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw AESGCMError(.openssl, "EVP_DecryptUpdate (associated data) failed")
            }
        }
        var output = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            guard EVP_DecryptUpdate(context.pointer, &output, &written, ciphertext, Int32(ciphertext.count)) == 1 else {
                throw AESGCMError(.openssl, "EVP_DecryptUpdate failed")
            }
        }
        guard EVP_CIPHER_CTX_ctrl(context.pointer, herald_evp_ctrl_gcm_set_tag(), Int32(tagCount), &tag) == 1 else {
            throw AESGCMError(.openssl, "setting the GCM tag failed")
        }
        var final: Int32 = 0
        let verified = output.withUnsafeMutableBufferPointer { buffer in
            EVP_DecryptFinal_ex(context.pointer, buffer.baseAddress! + Int(written), &final)
        }
        guard verified == 1 else {
            throw AESGCMError(.authenticationFailed, "authentication failed: wrong key, or the value was altered")
        }
        return Array(output.prefix(Int(written + final)))
    }
}

/// Owns an `EVP_CIPHER_CTX`; used by one call on one thread.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws(AESGCMError) {
        guard let pointer = EVP_CIPHER_CTX_new() else { throw AESGCMError(.openssl, "EVP_CIPHER_CTX_new failed") }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}
