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
        public var sandbox: Bool
        public var sdk: Bool

        /// A device; `provider` nil is the platform's own.
        public init(token: String, platform: Platform, provider: Receipt.Provider? = nil, sandbox: Bool = false, sdk: Bool = true) {
            self.token = token
            self.platform = platform
            self.provider = provider
            self.sandbox = sandbox
            self.sdk = sdk
        }
    }

    /// Sends `job` to `device` for `app` and returns the provider's answer. `job` is sent as if
    /// to one subscription with a fresh id (its `audience` is not read). A VoIP job goes to the
    /// token as a VoIP token.
    public static func send(_ job: Job, to device: Device, app: AppSettings, endpoints: ProviderEndpoints) async throws -> DeliveryOutcome {
        let loops = try EventLoopGroup(count: 1)
        defer { loops.shutdown() }
        let delivery = AppDelivery.build(settings: app, endpoints: endpoints, loops: loops)
        defer { delivery.shutdown() }
        let member = AudienceMember(id: UUIDv4.random(), platform: device.platform, token: device.token, sandbox: device.sandbox,
                                    sdk: device.sdk, language: nil, timeZone: nil, voipToken: job.kind == .voip ? device.token : nil,
                                    provider: device.provider)
        return await delivery.send(job, to: member, token: device.token, now: .now)
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
