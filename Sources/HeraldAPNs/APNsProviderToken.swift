public import HeraldCrypto
import HeraldCore
import Synchronization
import Foundation

/// The ES256 provider token for one `.p8` key (`shared/reference/protocols.md` §A4), shared by
/// every connection and request that uses the key: minted on first use, replaced once it is 50
/// minutes old, and never replaced twice within 20 minutes (APNs answers
/// `TooManyProviderTokenUpdates` to a connection that sees new tokens more often).
public final class APNsProviderToken: Sendable {
    /// Age at which a token is replaced before use, in seconds.
    public static let refreshAfterSeconds: Int64 = 50 * 60
    /// The least time between two tokens, in seconds.
    public static let minimumIntervalSeconds: Int64 = 20 * 60

    /// The 10-character key id (`kid`).
    public let keyID: String
    /// The 10-character team id (`iss`).
    public let teamID: String
    private let key: PrivateKey
    private let now: @Sendable () -> Int64

    private struct State {
        var token: String?
        /// `bearer <token>`: the `authorization` header value, made once per token.
        var authorization = ""
        var issuedAt: Int64 = 0
        var minted = 0
    }
    private let state = Mutex(State())

    /// Creates the token source; `now` gives the time in epoch seconds (injected for tests; nil: the system clock).
    public init(key: PrivateKey, keyID: String, teamID: String, now: (@Sendable () -> Int64)? = nil) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.now = now ?? { Int64(Date().timeIntervalSince1970) }
    }

    /// Loads a `.p8` key (PKCS#8 PEM).
    public convenience init(p8 pem: String, keyID: String, teamID: String,
                            now: (@Sendable () -> Int64)? = nil) throws(CryptoError) {
        self.init(key: try PrivateKey(pem: pem), keyID: keyID, teamID: teamID, now: now)
    }

    /// How many tokens this source has signed.
    public var tokensMinted: Int { state.withLock { $0.minted } }

    /// The token to send now: the shared one, replaced first when it is 50 minutes old.
    public func current() throws(CryptoError) -> String {
        let time = now()
        return try state.withLock { (state: inout State) throws(CryptoError) -> String in
            if let token = state.token, time - state.issuedAt < APNsProviderToken.refreshAfterSeconds { return token }
            return try mint(&state, at: time)
        }
    }

    /// ``current()`` with its `authorization` header value (`bearer <token>`), made once per
    /// token rather than once per request.
    public func currentAuthorization() throws(CryptoError) -> (token: String, authorization: String) {
        let time = now()
        return try state.withLock { (state: inout State) throws(CryptoError) -> (token: String, authorization: String) in
            if let token = state.token, time - state.issuedAt < APNsProviderToken.refreshAfterSeconds { return (token, state.authorization) }
            let token = try mint(&state, at: time)
            return (token, state.authorization)
        }
    }

    /// After APNs answered `ExpiredProviderToken` to `rejected`: the token to retry with. A new
    /// one when `rejected` is still the shared token and at least 20 minutes old; the shared one
    /// when another caller has already replaced it; `rejected` itself when it is too young to
    /// replace (the retry will then fail again and the caller reports a credential fault).
    public func refresh(after rejected: String) throws(CryptoError) -> String {
        let time = now()
        return try state.withLock { (state: inout State) throws(CryptoError) -> String in
            guard let token = state.token else { return try mint(&state, at: time) }
            guard token == rejected else { return token }
            guard time - state.issuedAt >= APNsProviderToken.minimumIntervalSeconds else { return token }
            return try mint(&state, at: time)
        }
    }

    private func mint(_ state: inout State, at time: Int64) throws(CryptoError) -> String {
        // Serialised by JSONValue so a key or team id with a quote cannot break the JSON.
        let header = JSONValue.object(["alg": .string("ES256"), "kid": .string(keyID)]).serialized()
        let claims = JSONValue.object(["iss": .string(teamID), "iat": .int(time)]).serialized()
        let token = try JWT.sign(header: header, claims: claims, key: key)
        state.token = token
        state.authorization = "bearer " + token
        state.issuedAt = time
        state.minted += 1
        return token
    }
}
