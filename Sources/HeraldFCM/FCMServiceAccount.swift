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
    /// Where access tokens are requested, and the JWT assertion's `aud` (docs/ARCHITECTURE.md).
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
        guard tokenURI.hasPrefix("https://"), FCMServiceAccount.host(of: tokenURI) != nil else {
            throw Invalid(reason: "token_uri must be an https URL")
        }
    }

    /// The host of `token_uri`, lower-cased, without the port; nil when it is not an https URL
    /// with a host.
    public var tokenHost: String? { FCMServiceAccount.host(of: tokenURI) }

    static func host(of url: String) -> String? {
        guard url.hasPrefix("https://") else { return nil }
        let authority = url.dropFirst("https://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else { return nil }
        var host = Substring(authority)
        if host.hasPrefix("[") {
            guard let end = host.firstIndex(of: "]") else { return nil }
            host = host[host.index(after: host.startIndex)..<end]
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        return host.isEmpty ? nil : host.lowercased()
    }

    /// The send endpoint path for this project.
    public var sendPath: String { "/v1/projects/\(projectID)/messages:send" }
}

/// The hosts a service account's `token_uri` may name (`HERALD_FCM_TOKEN_HOSTS`, added to
/// Google's `oauth2.googleapis.com`), matched exactly, any port. A tenant's service account
/// file is outside input: without the list, its `token_uri` would make every worker send a
/// signed assertion, and trust the answer, wherever it points (an internal address included).
public struct FCMTokenHosts: Sendable, Equatable {
    /// Google's token host, always allowed.
    public static let google = "oauth2.googleapis.com"
    public let hosts: Set<String>

    /// Google's host plus `extra` (lower-cased).
    public init(adding extra: [String] = []) {
        hosts = Set([FCMTokenHosts.google] + extra.map { $0.lowercased() })
    }

    /// Reads `HERALD_FCM_TOKEN_HOSTS`: comma-separated host names or addresses, no scheme or port.
    public init(variable text: String?) throws(FCMServiceAccount.Invalid) {
        let names = (text ?? "").split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
        for name in names where name.contains("/") || name.contains("@") || name.contains(" ") || (name.contains(":") && !name.contains("::") && name.filter({ $0 == ":" }).count == 1) {
            throw FCMServiceAccount.Invalid(reason: "HERALD_FCM_TOKEN_HOSTS: \"\(name.prefix(64))\" is not a host name or address (no scheme, path or port)")
        }
        self.init(adding: names)
    }

    /// Why `account` may not be used, or nil when its token host is allowed.
    public func refusal(of account: FCMServiceAccount) -> String? {
        guard let host = account.tokenHost else { return "token_uri \(account.tokenURI) is not an https URL" }
        if hosts.contains(host) { return nil }
        return "token_uri host \(host) is not allowed (allowed: \(hosts.sorted().joined(separator: ", ")); add it to HERALD_FCM_TOKEN_HOSTS)"
    }
}
