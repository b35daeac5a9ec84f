public import HeraldCore
import HeraldCrypto
public import HeraldHTTP2
import Synchronization

/// OAuth 2 access tokens for one service account (`shared/reference/protocols.md` §B4): an RS256
/// assertion exchanged at the account's `token_uri`, cached until shortly before it expires.
///
/// However many sends wait for a token, at most one token request is in flight: the first caller
/// starts a shared task and the others await it.
public actor FCMAccessTokenSource {
    /// The scope FCM's `messages:send` accepts.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The longest assertion lifetime Google accepts.
    public static let assertionLifetimeSeconds: Int64 = 3600

    /// A bearer token and when it stops working.
    public struct AccessToken: Sendable, Equatable {
        public let value: String
        public let expiresAt: Timestamp
        /// `Bearer <value>`, made once per token rather than once per request (a token is about
        /// a kilobyte).
        public let authorization: String

        init(value: String, expiresAt: Timestamp) {
            self.value = value
            self.expiresAt = expiresAt
            authorization = "Bearer \(value)"
        }
    }

    public nonisolated let account: FCMServiceAccount
    private let key: PrivateKey
    private let client: HTTP2Client
    private let now: @Sendable () -> Timestamp
    private let refreshMarginSeconds: Int64
    private let tokenPath: String
    /// The token in use, readable without a hop onto the actor (``validToken()``): only the
    /// actor writes it.
    private nonisolated let cached = Mutex<AccessToken?>(nil)
    private var refreshing: Task<Result<AccessToken, FCMError>, Never>?
    /// Token requests sent so far (tests and metrics).
    public private(set) var tokenRequests = 0

    /// Creates a token source. `client` must be connected to the host of `account.tokenURI`;
    /// `now` is the clock (injected so expiry is testable); a token is replaced
    /// `refreshMarginSeconds` before it expires (default 5 minutes).
    public init(account: FCMServiceAccount, client: HTTP2Client, refreshMarginSeconds: Int64 = 300,
                now: @escaping @Sendable () -> Timestamp = { Timestamp.now }) throws(FCMError) {
        do {
            key = try PrivateKey(pem: account.privateKeyPEM)
        } catch {
            throw FCMError(.signing, "the service account's private_key is not a usable RSA key (\(error.code.rawValue))", isRetryable: false)
        }
        guard case .rsa = key.algorithm else {
            throw FCMError(.signing, "the service account's private_key is not an RSA key", isRetryable: false)
        }
        self.account = account
        self.client = client
        self.now = now
        self.refreshMarginSeconds = refreshMarginSeconds
        tokenPath = FCMAccessTokenSource.path(of: account.tokenURI)
    }

    /// A valid access token: the cached one, or a fresh one.
    public func token() async throws(FCMError) -> AccessToken {
        if let valid = validToken() { return valid }
        return try await refresh()
    }

    /// The cached token if it is still valid (not within the refresh margin of its expiry), from
    /// any thread and without waiting; nil: call ``token()``.
    public nonisolated func validToken() -> AccessToken? {
        guard let token = cached.withLock({ $0 }), now().seconds < token.expiresAt.seconds - refreshMarginSeconds else { return nil }
        return token
    }

    /// Forgets `token` after FCM refused it (401), so the next ``token()`` fetches a new one.
    /// Many sends refused with the same token cause one refresh, not one each.
    public func invalidate(_ token: AccessToken) {
        cached.withLock { if $0 == token { $0 = nil } }
    }

    private func refresh() async throws(FCMError) -> AccessToken {
        let task: Task<Result<AccessToken, FCMError>, Never>
        if let refreshing {
            task = refreshing
        } else {
            task = Task { await self.fetchAndStore() }
            refreshing = task
        }
        return try await task.value.get()
    }

    private func fetchAndStore() async -> Result<AccessToken, FCMError> {
        let result = await fetch()
        if case .success(let token) = result { cached.withLock { $0 = token } }
        refreshing = nil
        return result
    }

    private func fetch() async -> Result<AccessToken, FCMError> {
        tokenRequests += 1
        let issuedAt = now()
        let assertion: String
        do {
            assertion = try self.assertion(issuedAt: issuedAt)
        } catch {
            return .failure(error)
        }
        let form = "grant_type=" + FCMAccessTokenSource.formEncode("urn:ietf:params:oauth:grant-type:jwt-bearer") + "&assertion=" + assertion
        let request = HTTP2Request(path: tokenPath, headers: [HeaderField("content-type", "application/x-www-form-urlencoded")], body: Array(form.utf8))
        let response: HTTP2Response
        do {
            response = try await client.send(request)
        } catch {
            // Retryable as a send's transport failure is (FCMOutcome.classify): a reset during
            // the TLS handshake is a network fault, not a credential one, and halting the app's
            // FCM sends for it would stop the job until someone resumes it.
            return .failure(FCMError(.transport, "token request to \(account.tokenURI) failed: \(error)", isRetryable: error.code != .shutdown))
        }
        return FCMAccessTokenSource.token(from: response, issuedAt: issuedAt, clientEmail: account.clientEmail)
    }

    /// The shortest and longest token lifetimes believed from a token endpoint: a token said to
    /// live longer is refreshed after a day anyway, one said to live less (or a negative or
    /// absurd `expires_in`) after a minute, so no answer can make a worker trap on overflow or
    /// ask for a token on every send.
    public static let lifetimeBounds: ClosedRange<Int64> = 60...86_400

    /// Reads a token endpoint's answer (pure, fuzzed as `fcm-token-response`): the access
    /// token and its expiry, with `expires_in` clamped to ``lifetimeBounds``; 5xx, 429 and
    /// `internal_failure` are the endpoint's trouble (retryable), other refusals a credential
    /// fault of `clientEmail`'s account.
    public static func token(from response: HTTP2Response, issuedAt: Timestamp, clientEmail: String) -> Result<AccessToken, FCMError> {
        let json = try? JSONValue.parse(response.body, limits: .init(maxBytes: 64 * 1024, maxDepth: 8))
        guard response.status == 200 else {
            let error = json?["error"]?.stringValue.map { String($0.prefix(100)) } ?? "HTTP \(response.status)"
            let description = json?["error_description"]?.stringValue.map { ": \($0.prefix(200))" } ?? ""
            // 4xx: the assertion or the account is wrong; 5xx and 429: the endpoint is struggling.
            if response.status >= 500 || response.status == 429 || error == "internal_failure" {
                return .failure(FCMError(.tokenEndpoint, "token endpoint answered \(response.status) \(error)\(description)"))
            }
            return .failure(FCMError(.credentials, "token endpoint refused the service account \(clientEmail): \(error)\(description)"))
        }
        guard let value = json?["access_token"]?.stringValue, !value.isEmpty,
              case .number(let expiresIn)? = json?["expires_in"] else {
            return .failure(FCMError(.tokenEndpoint, "token endpoint answered 200 without access_token and expires_in"))
        }
        // Clamped as a double first: 1e300 or -5 must not reach an integer conversion.
        let lifetime = Int64(min(max(expiresIn.double, Double(lifetimeBounds.lowerBound)), Double(lifetimeBounds.upperBound)))
        let (expiry, overflow) = issuedAt.seconds.addingReportingOverflow(lifetime)
        return .success(AccessToken(value: value, expiresAt: Timestamp(seconds: overflow ? Int64.max : expiry)))
    }

    /// The signed RS256 assertion for a token request made at `issuedAt` (RFC 7523):
    /// `iss` the client email, `scope` firebase.messaging, `aud` the token URI, `exp` one hour on.
    public nonisolated func assertion(issuedAt: Timestamp) throws(FCMError) -> String {
        var header: [String: JSONValue] = ["alg": .string("RS256"), "typ": .string("JWT")]
        if let keyID = account.privateKeyID { header["kid"] = .string(keyID) }
        let claims: [String: JSONValue] = [
            "iss": .string(account.clientEmail), "scope": .string(FCMAccessTokenSource.scope), "aud": .string(account.tokenURI),
            "iat": .int(issuedAt.seconds), "exp": .int(issuedAt.seconds + FCMAccessTokenSource.assertionLifetimeSeconds),
        ]
        do {
            return try JWT.sign(header: JSONValue.object(header).serialized(), claims: JSONValue.object(claims).serialized(), key: key)
        } catch {
            throw FCMError(.signing, "could not sign the assertion (\(error.code.rawValue))", isRetryable: false)
        }
    }

    /// The path (and query) of an absolute URL: `https://host:443/token` → `/token`.
    static func path(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }

    /// `application/x-www-form-urlencoded` encoding of one value.
    static func formEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }
}
