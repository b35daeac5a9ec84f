import HeraldAPNs
public import HeraldCore
import HeraldHTTP2
public import HeraldPostgres

/// One push to a raw device token, outside any audience (`herald send --token`): the same
/// rendering (`PushRender`, the app's payload profile), credentials and provider clients a
/// worker uses, and the provider's answer. Nothing is written to PostgreSQL or Kafka: no
/// receipt, no invalidation, no halt.
public enum TestPush {
    /// The device: its token, platform and provider, and whether it runs the app's SDK.
    public struct Device: Sendable {
        public var token: String
        public var platform: Platform
        public var provider: Receipt.Provider?
        var sandbox: Bool
        var sdk: Bool

        /// A device; `provider` nil is the platform's own.
        public init(token: String, platform: Platform, provider: Receipt.Provider? = nil, sandbox: Bool = false, sdk: Bool = true) {
            self.token = token
            self.platform = platform
            self.provider = provider
            self.sandbox = sandbox
            self.sdk = sdk
        }
    }

    /// What a test push came to.
    public enum Answer: Equatable, Sendable {
        /// The provider answered (for a validate-only FCM send, `accepted` means valid and
        /// nothing was delivered).
        case provider(DeliveryOutcome, provider: Receipt.Provider)
        /// Validate-only on APNs, which has no dry run: the request was rendered and checked
        /// (payload, push type, topic, credentials loaded) and not sent.
        case renderedOnly(Rendered)
    }

    /// An APNs request as it would have been sent.
    public struct Rendered: Equatable, Sendable {
        public var pushType: String
        public var topic: String
        public var priority: Int
        public var payloadBytes: Int
        /// The payload, as JSON text.
        public var payload: String
    }

    /// Sends `job` to `device` for `app` and returns the provider's answer. `job` is sent as if
    /// to one subscription with a fresh id (its `audience` is not read). A VoIP job goes to the
    /// token as a VoIP token. `validateOnly`: FCM's `validate_only` (checked, not delivered);
    /// on APNs, rendered and checked but not sent.
    public static func send(_ job: Job, to device: Device, app: AppSettings, endpoints: ProviderEndpoints,
                            validateOnly: Bool = false) async throws -> Answer {
        let loops = try EventLoopGroup(count: 1)
        defer { loops.shutdown() }
        let delivery = AppDelivery.build(settings: app, endpoints: endpoints, loops: loops)
        defer { delivery.shutdown() }
        let member = AudienceMember(id: UUIDv4.random(), platform: device.platform, token: device.token, sandbox: device.sandbox,
                                    sdk: device.sdk, language: nil, timeZone: nil, voipToken: job.kind == .voip ? device.token : nil,
                                    provider: device.provider)
        let provider = AppDelivery.provider(for: member, kind: job.kind)
        if validateOnly, provider == .apns {
            return delivery.renderAPNsWithoutSending(job, to: member, token: device.token, now: .now)
        }
        return .provider(await delivery.send(job, to: member, token: device.token, now: .now, validateOnly: validateOnly), provider: provider)
    }
}

extension AppDelivery {
    /// The APNs request `send` would make, checked as far as possible without Apple: rendered
    /// (sizes, push type rules), and the app's APNs credentials loaded.
    func renderAPNsWithoutSending(_ job: Job, to member: AudienceMember, token: String, now: Timestamp) -> TestPush.Answer {
        let client: APNsClient
        switch apns {
        case nil: return .provider(.failed(reason: .noCredentials, providerReason: "the app has no APNs credentials"), provider: .apns)
        case .failure(let problem)?: return .provider(.credentialFault(providerReason: problem.reason, haltReason: problem.haltReason), provider: .apns)
        case .success(let value)?: client = value
        }
        switch PushRender.render(job, to: member, token: token, app: settings, now: now) {
        case .apns(let notification):
            let request = client.request(for: notification, bearer: nil)
            let header = { (name: String) in request.headers.first { $0.name == name }?.value ?? "" }
            return .renderedOnly(TestPush.Rendered(pushType: header("apns-push-type"), topic: header("apns-topic"),
                                                   priority: notification.priority, payloadBytes: notification.payload.count,
                                                   payload: String(decoding: notification.payload, as: UTF8.self)))
        case .failed(let reason, let detail): return .provider(.failed(reason: reason, providerReason: detail), provider: .apns)
        case .fcm: return .provider(.failed(reason: .badRequest, providerReason: "an FCM message rendered for an APNs send"), provider: .apns)
        }
    }
}

/// A random version-4 UUID, lower case.
enum UUIDv4 {
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
    }
}
