internal import HeraldCrypto
import Foundation

/// The AES-256-GCM keys provider credentials are sealed under: `HERALD_CREDENTIALS_KEY` (the
/// current key, which seals) and, during a rotation, `HERALD_CREDENTIALS_OLD_KEYS` (which only
/// open).
///
/// A sealed value is `FE 4B`, the sealing key's 8-byte id (SHA-256 of a label and the key), then
/// AES-GCM's `nonce ‖ ciphertext ‖ tag`; the id says which key opens it. Values sealed before key
/// ids existed are the AES-GCM bytes alone; they are tried under every key (GCM refuses a wrong
/// key), so both formats read the same.
public struct CredentialsKey: Sendable {
    let key: AESGCMKey
    let keyID: [UInt8]
    /// Keys that open values but never seal them (a rotation's old keys).
    let older: [(key: AESGCMKey, id: [UInt8])]

    static let header: [UInt8] = [0xFE, 0x4B]

    /// A key from base64 text of 32 bytes; an error names the variable.
    public init(base64: String, variable: String = "HERALD_CREDENTIALS_KEY") throws(PostgresError) {
        do {
            key = try AESGCMKey(base64: base64)
        } catch {
            throw PostgresError(.configuration, "\(variable): \(error.message)")
        }
        keyID = Self.identify(base64)
        older = []
    }

    private init(key: AESGCMKey, keyID: [UInt8], older: [(key: AESGCMKey, id: [UInt8])]) {
        self.key = key
        self.keyID = keyID
        self.older = older
    }

    /// This key sealing, and `others` opening too (their own old keys included).
    public func opening(also others: [CredentialsKey]) -> CredentialsKey {
        let extra = others.flatMap { [($0.key, $0.keyID)] + $0.older }
        return CredentialsKey(key: key, keyID: keyID, older: older + extra.filter { $0.1 != keyID })
    }

    /// The key's id, lower-case hex (shown by `herald apps show`).
    public var id: String { Hex.encode(keyID) }

    static func identify(_ base64: String) -> [UInt8] {
        let raw = Array(Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) ?? Data())
        return Array(SHA256.hash(Array("herald.credentials-key".utf8) + raw).prefix(8))
    }

    /// The keys from `HERALD_CREDENTIALS_KEY` and `HERALD_CREDENTIALS_OLD_KEYS` (comma-separated).
    public static func fromEnvironment(_ environment: [String: String]? = nil) throws(PostgresError) -> CredentialsKey {
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard let text = environment["HERALD_CREDENTIALS_KEY"], !text.isEmpty else {
            throw PostgresError(.configuration, "HERALD_CREDENTIALS_KEY is not set (32 random bytes, base64: `openssl rand -base64 32`)")
        }
        return try CredentialsKey(base64: text).opening(also: try oldKeys(environment["HERALD_CREDENTIALS_OLD_KEYS"]))
    }

    /// The keys of `HERALD_CREDENTIALS_OLD_KEYS`: base64 keys separated by commas.
    public static func oldKeys(_ text: String?) throws(PostgresError) -> [CredentialsKey] {
        var keys: [CredentialsKey] = []
        for part in (text ?? "").split(separator: ",") where !part.trimmingCharacters(in: .whitespaces).isEmpty {
            keys.append(try CredentialsKey(base64: String(part), variable: "HERALD_CREDENTIALS_OLD_KEYS"))
        }
        return keys
    }

    func seal(_ text: String, binding: String) throws(PostgresError) -> String {
        do {
            return "\\x" + Hex.encode(Self.header + keyID + (try AESGCM.seal(Array(text.utf8), key: key, associatedData: Array(binding.utf8))))
        } catch {
            throw PostgresError(.credentials, "cannot encrypt \(binding): \(error.message)")
        }
    }

    /// Opens a sealed value of either format under whichever configured key sealed it.
    func open(_ bytea: String, binding: String) throws(PostgresError) -> String {
        guard let sealed = Self.bytes(fromBytea: bytea) else {
            throw PostgresError(.credentials, "\(binding) is not a bytea value")
        }
        let keys = [(key, keyID)] + older
        let associated = Array(binding.utf8)
        if sealed.count > 10, Array(sealed.prefix(2)) == Self.header {
            let id = Array(sealed[2..<10])
            if let match = keys.first(where: { $0.1 == id }),
               let plain = try? AESGCM.open(Array(sealed.dropFirst(10)), key: match.0, associatedData: associated) {
                return String(decoding: plain, as: UTF8.self)
            }
        }
        // Sealed before key ids (or, once in 65,536, a nonce that starts like the header).
        for (candidate, _) in keys {
            if let plain = try? AESGCM.open(sealed, key: candidate, associatedData: associated) {
                return String(decoding: plain, as: UTF8.self)
            }
        }
        let named = sealed.count > 10 && Array(sealed.prefix(2)) == Self.header ? " (sealed under key \(Hex.encode(sealed[2..<10])))" : ""
        throw PostgresError(.credentials, "cannot decrypt \(binding)\(named) under HERALD_CREDENTIALS_KEY or HERALD_CREDENTIALS_OLD_KEYS, or the stored value was altered")
    }

    /// Bytes of a `bytea` in PostgreSQL's hex output format (`\x0a1b…`).
    static func bytes(fromBytea text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2 - 1)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}
