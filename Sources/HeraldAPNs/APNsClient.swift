public import HeraldCrypto
public import HeraldHTTP2

/// Where and how ``APNsClient`` connects.
public struct APNsConfiguration: Sendable {
    /// APNs environments.
    public enum Environment: String, Sendable, CaseIterable {
        case production, sandbox
    }

    /// Apple's production host.
    public static let productionHost = "api.push.apple.com"
    /// Apple's development host.
    public static let sandboxHost = "api.sandbox.push.apple.com"
    /// The alternative port Apple serves on, for firewalls that block other HTTPS.
    public static let alternativePort = 2197

    /// The app's bundle id (the `apns-topic` before its push-type suffix).
    public var bundleID: String
    /// The app's environment; a subscription's own sandbox flag wins over it.
    public var environment: Environment = .production
    /// 443, or ``alternativePort``.
    public var port = 443
    /// One host for both environments (the simulators); nil: Apple's hosts.
    public var hostOverride: String?
    /// CA bundle to trust (the simulator's); nil: the system's.
    public var caFile: String?
    /// Connections per environment.
    public var maxConnections = 4
    /// Deadline of one request.
    public var requestTimeoutNanoseconds: UInt64 = 30_000_000_000

    /// Creates a configuration for Apple's production service on port 443.
    public init(bundleID: String) {
        self.bundleID = bundleID
    }

    /// The host for `environment`.
    public func host(for environment: Environment) -> String {
        hostOverride ?? (environment == .production ? APNsConfiguration.productionHost : APNsConfiguration.sandboxHost)
    }
}

/// How the app proves itself to APNs.
public enum APNsAuthentication: Sendable {
    /// Token auth: a bearer JWT per request, from the `.p8` key.
    case token(APNsProviderToken)
    /// Certificate auth: the PEM client certificate and key on the TLS connection.
    case certificate(certificatePEM: String, keyPEM: String)
}

/// Sends notifications to APNs for one app (one key or certificate, one bundle id) over the
/// HTTP/2 client pool, one pool per environment, and classifies each answer.
public final class APNsClient: Sendable {
    /// Hosts, port and limits.
    public let configuration: APNsConfiguration
    /// The key (token auth) or certificate.
    public let authentication: APNsAuthentication
    private let production: HTTP2Client
    private let sandbox: HTTP2Client

    /// Creates the client; connections open on first use.
    public init(configuration: APNsConfiguration, authentication: APNsAuthentication, loop: EventLoop) throws(CryptoError) {
        self.configuration = configuration
        self.authentication = authentication
        let tls: TLSContext
        switch authentication {
        case .token: tls = try TLSContext(client: configuration.caFile)
        case .certificate(let certificate, let key):
            tls = try TLSContext(client: configuration.caFile, clientCertificatePEM: certificate, clientKeyPEM: key)
        }
        func pool(_ environment: APNsConfiguration.Environment) -> HTTP2Client {
            var http2 = HTTP2Client.Configuration(host: configuration.host(for: environment), port: configuration.port)
            http2.maxConnections = configuration.maxConnections
            return HTTP2Client(configuration: http2, tls: tls, loop: loop)
        }
        production = pool(.production)
        sandbox = pool(.sandbox)
    }

    /// The environment a notification goes to: the subscription's flag, else the app's.
    public func environment(for notification: APNsNotification) -> APNsConfiguration.Environment {
        switch notification.sandbox {
        case true?: .sandbox
        case false?: .production
        case nil: configuration.environment
        }
    }

    /// The HTTP/2 request for `notification`, with `bearer` as the provider token (token auth).
    public func request(for notification: APNsNotification, bearer: String?) -> HTTP2Request {
        request(for: notification, authorization: bearer.map { "bearer " + $0 })
    }

    /// The request, with `authorization` as the header's whole value (`bearer <token>`). Its
    /// fields are written straight into the request's header block (no array of fields, no
    /// string for the path): one of these is made for every notification.
    func request(for notification: APNsNotification, authorization: String?) -> HTTP2Request {
        HTTP2Request(pathPrefix: "/3/device/", pathSuffix: notification.deviceToken, body: notification.payload,
                     timeoutNanoseconds: configuration.requestTimeoutNanoseconds) { fields in
            if let authorization { fields.add("authorization", authorization) }
            // Unique per request: indexed, it would only churn both ends' HPACK tables (an entry
            // allocated, copied and evicted per request on each side).
            fields.add("apns-id", notification.apnsID, neverIndex: true)
            fields.add("apns-push-type", notification.pushType.rawValue)
            fields.add("apns-topic", notification.pushType.topic(bundleID: configuration.bundleID))
            fields.add("apns-priority", Int64(notification.priority))
            if let expiration = notification.expiration { fields.add("apns-expiration", max(0, expiration)) }
            if let collapseID = notification.collapseID { fields.add("apns-collapse-id", collapseID) }
            fields.add("content-type", "application/json")
        }
    }

    /// Sends one notification. On `ExpiredProviderToken` the shared token is refreshed and the
    /// send retried once; a second `ExpiredProviderToken` (or none to refresh) is a credential fault.
    public func send(_ notification: APNsNotification) async -> APNsOutcome {
        await withCheckedContinuation { continuation in
            execute(notification) { continuation.resume(returning: $0) }
        }
    }

    /// Sends one notification as ``send(_:)`` does, calling `completion` with the outcome instead
    /// of suspending: on the pool's event loop, or at once when the provider token cannot be signed.
    /// `submissions`: gather the request there, to be sent with others by its owner's
    /// ``HTTP2Submissions/submit()`` (a refreshed token's resend goes at once).
    public func execute(_ notification: APNsNotification, submissions: HTTP2Submissions? = nil,
                        completion: @escaping @Sendable (APNsOutcome) -> Void) {
        let pool = environment(for: notification) == .sandbox ? sandbox : production
        guard case .token(let source) = authentication else {
            execute(request(for: notification, bearer: nil), apnsID: notification.apnsID, on: pool, submissions: submissions, retry: nil,
                    completion: completion)
            return
        }
        let bearer: String
        let authorization: String
        do { (bearer, authorization) = try source.currentAuthorization() } catch {
            completion(.credentialFault(reason: "cannot sign the provider token: \(error)"))
            return
        }
        execute(request(for: notification, authorization: authorization), apnsID: notification.apnsID, on: pool, submissions: submissions,
                retry: ExpiredTokenRetry(source: source, bearer: bearer, notification: notification), completion: completion)
    }

    /// What a token-auth send needs to be resent once with a fresh token after `ExpiredProviderToken`.
    private struct ExpiredTokenRetry: Sendable {
        let source: APNsProviderToken
        /// The token the request carried.
        let bearer: String
        let notification: APNsNotification
    }

    /// Sends `request` and classifies the answer, with one closure per send: the expired-token
    /// resend (`retry`) is decided in the same closure that classifies.
    private func execute(_ request: consuming HTTP2Request, apnsID: String, on pool: HTTP2Client, submissions: HTTP2Submissions?,
                         retry: ExpiredTokenRetry?, completion: @escaping @Sendable (APNsOutcome) -> Void) {
        let certificateAuth: Bool
        if case .certificate = authentication { certificateAuth = true } else { certificateAuth = false }
        let answered: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void = { result in
            let outcome: APNsOutcome
            switch result {
            case .success(let response):
                let classified = APNsOutcome.classify(response)
                // APNs echoes the request's apns-id; keep ours if an answer ever lacks it (the
                // closure keeps the id, not the request: a retain of each of its parts).
                if classified == .accepted(apnsID: "") {
                    outcome = .accepted(apnsID: apnsID)
                } else {
                    outcome = classified
                }
            case .failure(let error):
                outcome = APNsOutcome.classify(error, certificateAuth: certificateAuth)
            }
            guard let retry, outcome == .credentialFault(reason: "ExpiredProviderToken") else { return completion(outcome) }
            // Refreshed once for every send that carried the expired token; a second
            // ExpiredProviderToken (or none to refresh) is a credential fault.
            let fresh: String
            do { fresh = try retry.source.refresh(after: retry.bearer) } catch {
                return completion(.credentialFault(reason: "cannot sign the provider token: \(error)"))
            }
            guard fresh != retry.bearer else { return completion(outcome) }
            self.execute(self.request(for: retry.notification, bearer: fresh), apnsID: retry.notification.apnsID, on: pool, submissions: nil, retry: nil,
                         completion: completion)
        }
        if let submissions {
            submissions.add(request, to: pool, completion: answered)
        } else {
            pool.execute(request, completion: answered)
        }
    }

    /// Connections open right now, to both environments (for the `herald_open_connections` gauge).
    public func openConnections() async -> Int {
        let production = await self.production.statistics().openConnections
        return production + (await sandbox.statistics().openConnections)
    }

    /// Closes every connection.
    public func shutdown() {
        production.shutdown()
        sandbox.shutdown()
    }
}
