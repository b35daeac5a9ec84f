internal import COpenSSL

/// A failure in OpenSSL: key parsing, signing, certificates or TLS.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Code: String, Sendable {
        case invalidKey, keyGeneration, signing, verification, certificate, tlsContext, tlsHandshake, tlsIO, invalidJWT
    }

    public let code: Code
    /// What happened, for people; never contains key material.
    public let message: String
    public let file: String
    public let line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// An error with OpenSSL's queued reasons appended (and the queue cleared).
    static func openssl(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) -> CryptoError {
        let reasons = drainOpenSSLErrors()
        return CryptoError(code, reasons.isEmpty ? message : "\(message): \(reasons)", file: file, line: line)
    }

    public var description: String { "CryptoError.\(code.rawValue): \(message)" }
}

/// Takes every queued OpenSSL error off this thread's queue, as text.
func drainOpenSSLErrors() -> String {
    var reasons: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return reasons.joined(separator: "; ")
}

/// Owns a memory BIO.
final class MemoryBIO {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openssl(.invalidKey, "BIO_new failed") }
        pointer = bio
    }

    init(_ bytes: [UInt8]) throws(CryptoError) {
        guard let bio = bytes.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
            throw CryptoError.openssl(.invalidKey, "BIO_new_mem_buf failed")
        }
        // BIO_new_mem_buf does not copy: keep the bytes alive as long as the BIO.
        pointer = bio
        storage = bytes
    }

    private var storage: [UInt8] = []

    var contents: [UInt8] {
        var data: UnsafeMutablePointer<CChar>?
        let length = herald_bio_mem_data(pointer, &data)
        guard length > 0, let data else { return [] }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }

    deinit { BIO_free(pointer) }
}

/// Runs `body` with the first certificate of `pem` (freed afterwards); "not a PEM certificate"
/// when there is none. The one PEM certificate reader of HeraldCrypto's inspecting types.
func withPEMCertificate<T>(_ pem: String, _ body: (OpaquePointer) throws(CryptoError) -> T) throws(CryptoError) -> T {
    let bio = try MemoryBIO(Array(pem.utf8))
    guard let certificate = PEM_read_bio_X509(bio.pointer, nil, nil, nil) else {
        _ = drainOpenSSLErrors()
        throw CryptoError(.certificate, "not a PEM certificate")
    }
    defer { X509_free(certificate) }
    return try body(certificate)
}
