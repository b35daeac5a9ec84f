import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP2
import HeraldPostgres
import Synchronization

/// Where the providers are: Apple's and Google's hosts, or simulators (`HERALD_APNS_ENDPOINT`,
/// `HERALD_FCM_ENDPOINT`, `HERALD_TLS_CA_FILE`).
public struct ProviderEndpoints: Sendable, Equatable {
    /// One host and port for both APNs environments; nil: Apple's hosts on 443.
    public var apns: Endpoint?
    /// The FCM API host; nil: fcm.googleapis.com:443.
    public var fcm: Endpoint?
    /// The hosts a service account's `token_uri` may name (`HERALD_FCM_TOKEN_HOSTS`).
    var fcmTokenHosts = FCMTokenHosts()
    /// An extra CA bundle to trust (the simulators'); nil: the system's.
    public var caFile: String?
    /// Connections per provider host and app.
    var connectionsPerHost = 4
    /// Deadline of one provider request.
    var requestTimeoutNanoseconds: UInt64 = 30_000_000_000

    /// Apple's and Google's services.
    init(apns: Endpoint? = nil, fcm: Endpoint? = nil, caFile: String? = nil) {
        self.apns = apns
        self.fcm = fcm
        self.caFile = caFile
    }

    /// An `https://host[:port]` base URL.
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int

        /// Parses `https://host[:port]` (a trailing `/` allowed); nil for anything else.
        init?(url: String) {
            guard url.hasPrefix("https://") else { return nil }
            var rest = url.dropFirst("https://".count)
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return nil }
            if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
                guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else { return nil }
                host = String(rest[..<colon])
                self.port = port
            } else {
                host = String(rest)
                port = 443
            }
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { return nil }
        }

        /// An endpoint.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { "https://\(host):\(port)" }
    }
}

/// One app's providers on this worker: its settings, its APNs and FCM clients (shared by every
/// shard of the app), and whether each provider is halted.
final class AppDelivery: Sendable {
    /// The app's settings as last read.
    let settings: AppSettings
    let apns: Result<APNsClient, ProviderProblem>?
    private let fcm: Result<FCMClient, ProviderProblem>?
    private let halts: Mutex<[Receipt.Provider: String]>
    private let http: [HTTP2Client]

    struct ProviderProblem: Error {
        let reason: String
        /// The `halted` receipt's reason when this problem halts the provider.
        var haltReason: Receipt.Reason = .credentials
    }

    init(settings: AppSettings, apns: Result<APNsClient, ProviderProblem>?, fcm: Result<FCMClient, ProviderProblem>?, http: [HTTP2Client]) {
        self.settings = settings
        var halts: [Receipt.Provider: String] = [:]
        if let reason = settings.apnsHaltedReason { halts[.apns] = reason }
        if let reason = settings.fcmHaltedReason { halts[.fcm] = reason }
        self.halts = Mutex(halts)
        self.apns = apns
        self.fcm = fcm
        self.http = http
    }

    /// Builds the app's clients from its credentials; a credential that cannot be used becomes
    /// a credential fault on the first send (the app is halted on that provider, nothing else).
    static func build(settings: AppSettings, endpoints: ProviderEndpoints, loops: EventLoopGroup) -> AppDelivery {
        var http: [HTTP2Client] = []
        let unreadable = { (detail: String) in ProviderProblem(reason: "the stored credentials cannot be opened: \(detail)", haltReason: .unreadableCredentials) }
        func apnsConfiguration(bundleID: String, environment: String) -> APNsConfiguration {
            var configuration = APNsConfiguration(bundleID: bundleID)
            configuration.environment = environment == "sandbox" ? .sandbox : .production
            if let endpoint = endpoints.apns {
                configuration.hostOverride = endpoint.host
                configuration.port = endpoint.port
            }
            configuration.caFile = endpoints.caFile
            configuration.maxConnections = endpoints.connectionsPerHost
            configuration.requestTimeoutNanoseconds = endpoints.requestTimeoutNanoseconds
            return configuration
        }
        var apns: Result<APNsClient, ProviderProblem>? = settings.apnsUnreadable.map { .failure(unreadable($0)) } ?? settings.apns.map { credentials in
            do {
                let configuration = apnsConfiguration(bundleID: credentials.bundleID, environment: credentials.environment)
                let token = try APNsProviderToken(p8: credentials.privateKeyPEM, keyID: credentials.keyID, teamID: credentials.teamID)
                return .success(try APNsClient(configuration: configuration, authentication: .token(token), loop: loops.next()))
            } catch {
                return .failure(ProviderProblem(reason: "the APNs key cannot be used: \(error)"))
            }
        }
        // Certificate auth: the client certificate goes on each TLS connection, no provider token.
        if apns == nil, settings.apnsUnreadable == nil, let credentials = settings.apnsCertificate {
            do {
                let configuration = apnsConfiguration(bundleID: credentials.bundleID, environment: credentials.environment)
                apns = .success(try APNsClient(configuration: configuration,
                                               authentication: .certificate(certificatePEM: credentials.certificatePEM, keyPEM: credentials.keyPEM),
                                               loop: loops.next()))
            } catch {
                apns = .failure(ProviderProblem(reason: "the APNs certificate cannot be used: \(error)"))
            }
        }
        let fcm: Result<FCMClient, ProviderProblem>? = settings.fcmUnreadable.map { .failure(unreadable($0)) } ?? settings.fcm.map { credentials in
            do {
                let account = try FCMServiceAccount(json: Array(credentials.serviceAccountJSON.utf8))
                // An app whose token_uri is outside the list halts its FCM sends at the first one.
                if let refusal = endpoints.fcmTokenHosts.refusal(of: account) {
                    return .failure(ProviderProblem(reason: "the FCM service account cannot be used: \(refusal)"))
                }
                let tls = try TLSContext(client: endpoints.caFile)
                let loop = loops.next()
                let api = endpoints.fcm ?? ProviderEndpoints.Endpoint(host: "fcm.googleapis.com", port: 443)
                var apiConfiguration = HTTP2Client.Configuration(host: api.host, port: api.port)
                apiConfiguration.maxConnections = endpoints.connectionsPerHost
                let apiClient = HTTP2Client(configuration: apiConfiguration, tls: tls, loop: loop)
                http.append(apiClient)
                let tokenHost = ProviderEndpoints.Endpoint(url: Self.origin(of: account.tokenURI))
                var tokenClient = apiClient
                if let tokenHost, tokenHost != api {
                    tokenClient = HTTP2Client(configuration: HTTP2Client.Configuration(host: tokenHost.host, port: tokenHost.port), tls: tls, loop: loop)
                    http.append(tokenClient)
                } else if tokenHost == nil {
                    return .failure(ProviderProblem(reason: "the service account's token_uri \(account.tokenURI) is not an https URL"))
                }
                let tokens = try FCMAccessTokenSource(account: account, client: tokenClient)
                return .success(FCMClient(tokens: tokens, client: apiClient, timeoutNanoseconds: endpoints.requestTimeoutNanoseconds))
            } catch {
                return .failure(ProviderProblem(reason: "the FCM service account cannot be used: \(error)"))
            }
        }
        return AppDelivery(settings: settings, apns: apns, fcm: fcm, http: http)
    }

    /// `https://host[:port]` of a URL.
    static func origin(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" }
        return String(url[..<schemeEnd.upperBound]) + authority
    }

    /// The provider a `kind` job reaches `member` through: the one holding its token, except that
    /// VoIP and live activities on iOS always go to APNs (PushKit and ActivityKit tokens are APNs
    /// tokens, whoever holds the device's notification token).
    static func provider(for member: AudienceMember, kind: Job.Kind) -> Receipt.Provider {
        member.platform == .ios && kind != .notification ? .apns : member.provider
    }


    /// Why `provider` is halted for this app; nil when sending.
    func haltReason(_ provider: Receipt.Provider) -> String? {
        halts.withLock { $0[provider] }
    }

    /// The app's halted providers now, with their reasons.
    var haltReasons: [Receipt.Provider: String] {
        halts.withLock { $0 }
    }

    /// Marks `provider` halted in this worker (the caller records it in PostgreSQL for the others).
    /// Returns false when it already was.
    func markHaltedLocally(_ provider: Receipt.Provider, reason: String) -> Bool {
        halts.withLock { halts in
            guard halts[provider] == nil else { return false }
            halts[provider] = reason
            return true
        }
    }

    /// Connections open right now, by provider (FCM counts its token host too).
    func openConnections() async -> [Receipt.Provider: Int] {
        var open: [Receipt.Provider: Int] = [:]
        if case .success(let client) = apns { open[.apns] = await client.openConnections() }
        for client in http { open[.fcm, default: 0] += await client.statistics().openConnections }
        return open
    }

    /// Why the app's FCM credentials cannot be used (its first FCM send halts the app on FCM), or
    /// nil when they can or there are none.
    var fcmProblem: String? {
        if case .failure(let problem)? = fcm { return problem.reason }
        return nil
    }

    /// Whether the credentials are the same as `other`'s (the clients can be kept).
    func hasSameCredentials(as other: AppSettings) -> Bool {
        settings.apns == other.apns && settings.apnsCertificate == other.apnsCertificate && settings.fcm == other.fcm
            && settings.apnsUnreadable == other.apnsUnreadable && settings.fcmUnreadable == other.fcmUnreadable
    }

    /// Renders and sends `job` to `member`; `target` is the token to use (the VoIP token for VoIP
    /// jobs on iOS). `validateOnly`: FCM checks the message and delivers nothing (APNs has no such
    /// mode: ``TestPush`` renders APNs requests without sending them).
    func send(_ job: Job, to member: AudienceMember, token: String, now: Timestamp, validateOnly: Bool = false) async -> DeliveryOutcome {
        switch prepare(job, to: member, token: token, now: now, validateOnly: validateOnly) {
        case .decided(let outcome): return outcome
        case .apns(let client, let notification): return DeliveryOutcome(await client.send(notification))
        case .fcm(let client, let body): return DeliveryOutcome(await client.send(body: body))
        }
    }

    /// A send rendered and routed: what to send through which client, or its outcome already.
    /// The shard run performs it with one completion per send (``ShardRun``'s `dispatch`).
    enum Prepared {
        case decided(DeliveryOutcome)
        case apns(APNsClient, APNsNotification)
        case fcm(FCMClient, [UInt8])
    }

    func prepare(_ job: Job, to member: AudienceMember, token: String, now: Timestamp, validateOnly: Bool,
                 templates: PushTemplates? = nil) -> Prepared {
        let rendered = templates?.render(job, to: member, token: token, delivery: self, now: now)
            ?? PushRender.render(job, to: member, token: token, app: settings, now: now)
        if case .failed(.unknownChannel, let detail) = rendered { return .decided(.failed(reason: .unknownChannel, providerReason: detail)) }
        switch Self.provider(for: member, kind: job.kind) {
        case .apns:
            let client: APNsClient
            switch apns {
            case nil: return .decided(.failed(reason: .noCredentials, providerReason: "the app has no APNs credentials"))
            case .failure(let problem)?: return .decided(.credentialFault(providerReason: problem.reason, haltReason: problem.haltReason))
            case .success(let value)?: client = value
            }
            // APNs has no dry run: a validate-only caller (TestPush) checks APNs requests itself.
            guard !validateOnly else { return .decided(.failed(reason: .badRequest, providerReason: "APNs has no validate-only mode")) }
            switch rendered {
            case .apns(let notification): return .apns(client, notification)
            case .failed(let reason, let detail): return .decided(.failed(reason: reason, providerReason: detail))
            case .fcm: return .decided(.failed(reason: .badRequest, providerReason: "an FCM message rendered for an APNs send"))
            }
        case .fcm:
            let client: FCMClient
            switch fcm {
            case nil: return .decided(.failed(reason: .noCredentials, providerReason: "the app has no FCM credentials"))
            case .failure(let problem)?: return .decided(.credentialFault(providerReason: problem.reason, haltReason: problem.haltReason))
            case .success(let value)?: client = value
            }
            switch rendered {
            case .fcm(let message): return .fcm(client, (validateOnly ? message.validatingOnly : message).body)
            case .failed(let reason, let detail): return .decided(.failed(reason: reason, providerReason: detail))
            case .apns: return .decided(.failed(reason: .badRequest, providerReason: "an APNs request rendered for an FCM send"))
            }
        }
    }

    /// Closes the app's connections.
    func shutdown() {
        if case .success(let client)? = apns { client.shutdown() }
        for client in http { client.shutdown() }
    }
}

/// Every app's ``AppDelivery`` on this worker, read from `apps` and refreshed every few seconds
/// (so a halt set or lifted by another worker or by `herald jobs resume` is seen), rebuilt only
/// when the app's credentials changed.
final class ProviderDirectory: Sendable {
    private let apps: AppRepository
    private let endpoints: ProviderEndpoints
    private let loops: EventLoopGroup
    private let refreshAfter: Duration
    private let cache = Mutex<[String: (delivery: AppDelivery, loadedAt: ContinuousClock.Instant)]>([:])
    /// Guards reset when a provider's halt is lifted.
    let guards: InvalidationGuards

    /// A directory over `apps`.
    init(apps: AppRepository, endpoints: ProviderEndpoints, loops: EventLoopGroup, guards: InvalidationGuards,
         refreshAfter: Duration = .seconds(5)) {
        self.apps = apps
        self.endpoints = endpoints
        self.loops = loops
        self.guards = guards
        self.refreshAfter = refreshAfter
    }

    /// The app's delivery, nil for an unknown app. `fresh`: re-read the settings now.
    func delivery(appID: String, fresh: Bool = false) async throws(PostgresError) -> AppDelivery? {
        let now = ContinuousClock.now
        if !fresh, let cached = cache.withLock({ $0[appID] }), now - cached.loadedAt < refreshAfter {
            return cached.delivery
        }
        guard let settings = try await apps.settingsForDelivery(id: appID) else {
            _ = cache.withLock { $0.removeValue(forKey: appID) }
            return nil
        }
        let previous = cache.withLock { $0[appID]?.delivery }
        let delivery: AppDelivery
        if let previous, previous.hasSameCredentials(as: settings), previous.settings.payloadProfile == settings.payloadProfile {
            // Same clients; take the halts as the database has them now.
            delivery = previous.with(settings: settings)
        } else {
            delivery = AppDelivery.build(settings: settings, endpoints: endpoints, loops: loops)
            if let previous {
                // Requests in flight on the old clients finish before they close.
                Task {
                    try? await Task.sleep(for: .seconds(60))
                    previous.shutdown()
                }
            }
        }
        for provider in Receipt.Provider.allCases where delivery.haltReason(provider) == nil && previous?.haltReason(provider) != nil {
            guards.reset(appID: appID, provider: provider.rawValue)
        }
        cache.withLock { $0[appID] = (delivery, now) }
        return delivery
    }

    /// Records a halt of the app's sends on `provider` for every worker (PostgreSQL); the
    /// caller has marked it on its ``AppDelivery`` already, so this worker stops at once.
    func recordHalt(appID: String, provider: Receipt.Provider, reason: String) async throws(PostgresError) {
        try await apps.setHalt(appID: appID, provider: provider.rawValue, reason: reason)
    }

    /// Connections open right now to each provider, over every app this worker has loaded (the
    /// `herald_open_connections` gauge). Clients replaced after a credential change and still
    /// finishing their requests are not counted.
    func openConnections() async -> [Receipt.Provider: Int] {
        let deliveries = cache.withLock { $0.values.map(\.delivery) }
        var open: [Receipt.Provider: Int] = [.apns: 0, .fcm: 0]
        for delivery in deliveries {
            for (provider, count) in await delivery.openConnections() { open[provider, default: 0] += count }
        }
        return open
    }

    /// Closes every app's connections.
    func shutdown() {
        let all = cache.withLock { cache in
            defer { cache.removeAll() }
            return cache.values.map(\.delivery)
        }
        for delivery in all { delivery.shutdown() }
    }
}

extension AppDelivery {
    /// The same clients with newer settings (halts).
    func with(settings: AppSettings) -> AppDelivery {
        AppDelivery(settings: settings, apns: apns, fcm: fcm, http: http)
    }
}
