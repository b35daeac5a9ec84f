import Foundation

/// Base64url without padding (RFC 7515 §2).
public enum Base64URL {
    /// Encodes bytes.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes text; nil when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }
}

/// A compact JWS (JSON Web Token) as APNs provider tokens and Google OAuth assertions use it.
public struct JWT: Sendable {
    /// The header's members as raw JSON text pairs, e.g. `["alg": "\"ES256\"", "kid": "\"ABC\""]`.
    public let headerJSON: [UInt8]
    /// The claims' JSON bytes.
    public let claimsJSON: [UInt8]
    /// The signature bytes.
    public let signature: [UInt8]
    /// `header.claims`, the signed part.
    public let signingInput: String

    /// Signs `header` and `claims` (compact JSON text) with `key`.
    public static func sign(header: String, claims: String, key: PrivateKey) throws(CryptoError) -> String {
        let input = Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8)
        let signature = try key.signSHA256(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    /// Splits and decodes a compact token; the signature is not checked here.
    public init(compact token: some StringProtocol) throws(CryptoError) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2])
        else { throw CryptoError(.invalidJWT, "not a compact JWT (three base64url parts)") }
        headerJSON = header
        claimsJSON = claims
        self.signature = signature
        signingInput = parts[0] + "." + parts[1]
    }

    /// Whether the signature is valid for `key`.
    public func verify(with key: PublicKey) -> Bool {
        key.verifySHA256(Array(signingInput.utf8), signature: signature)
    }
}
