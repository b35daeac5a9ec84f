import HeraldCore

/// A Firebase service-account key file, as the app owner downloads it from the Google console.
///
/// Parsing refuses a malformed file with an error that names the problem and never includes the
/// private key.
public struct FCMServiceAccount: Sendable, Equatable {
    public var projectID: String
    public var privateKeyID: String?
    /// The RSA private key, PEM (PKCS#8). Never logged.
    public var privateKeyPEM: String
    public var clientEmail: String
    /// Where access tokens are requested, and the JWT assertion's `aud` (DESIGN §5).
    public var tokenURI: String

    /// Google's token endpoint, used when the file has no `token_uri`.
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    /// Why a service-account file was refused.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { "invalid FCM service account: \(reason)" }
    }

    /// Parses a service-account JSON file.
    public init(json bytes: [UInt8]) throws(Invalid) {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes, limits: .init(maxBytes: 64 * 1024, maxDepth: 8))
        } catch {
            throw Invalid(reason: "not JSON (\(error.reason))")
        }
        guard case .object(let members) = document else { throw Invalid(reason: "expected a JSON object") }
        func string(_ key: String, required: Bool = true) throws(Invalid) -> String? {
            guard let value = members[key] else {
                if required { throw Invalid(reason: "\(key) is missing") }
                return nil
            }
            guard case .string(let text) = value, !text.isEmpty else { throw Invalid(reason: "\(key) must be a non-empty string") }
            return text
        }
        guard try string("type") == "service_account" else {
            throw Invalid(reason: "type must be \"service_account\"")
        }
        projectID = try string("project_id") ?? ""
        privateKeyID = try string("private_key_id", required: false)
        clientEmail = try string("client_email") ?? ""
        tokenURI = try string("token_uri", required: false) ?? FCMServiceAccount.defaultTokenURI
        let key = try string("private_key") ?? ""
        guard key.contains("-----BEGIN PRIVATE KEY-----"), key.contains("-----END PRIVATE KEY-----") else {
            throw Invalid(reason: "private_key must be a PEM PKCS#8 key (-----BEGIN PRIVATE KEY-----)")
        }
        privateKeyPEM = key
        guard projectID.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "-") }) else {
            throw Invalid(reason: "project_id must be a Firebase project id (a-z, 0-9, -)")
        }
        guard tokenURI.hasPrefix("https://") || tokenURI.hasPrefix("http://127.0.0.1") || tokenURI.hasPrefix("http://localhost") else {
            throw Invalid(reason: "token_uri must be an https URL")
        }
    }

    /// The send endpoint path for this project.
    public var sendPath: String { "/v1/projects/\(projectID)/messages:send" }
}
