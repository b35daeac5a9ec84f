public import HeraldCore
import HeraldCrypto

/// One push to one device token, ready to send: everything ``APNsClient`` puts in the request.
public struct APNsNotification: Sendable, Equatable {
    /// The device (or live-activity) token, hex.
    public var deviceToken: String
    /// `apns-push-type`, which also picks the topic suffix.
    public var pushType: APNsPushType
    /// The JSON body.
    public var payload: [UInt8]
    /// `apns-priority`, already adjusted to the push type's rules.
    public var priority: Int
    /// `apns-expiration` in epoch seconds; nil sends no header (APNs's storage policy).
    public var expiration: Int64?
    /// `apns-collapse-id`.
    public var collapseID: String?
    /// `apns-id`: deterministic for (job, subscription), see ``APNsNotification/apnsID(jobID:subscriptionID:)``.
    public var apnsID: String
    /// The subscription's own sandbox flag, which wins over the app's environment; nil: the app's.
    public var sandbox: Bool?

    /// Creates a notification; `priority` is adjusted to `pushType`'s rules.
    public init(deviceToken: String, pushType: APNsPushType, payload: [UInt8], priority: Int? = nil, expiration: Int64? = nil,
                collapseID: String? = nil, apnsID: String, sandbox: Bool? = nil) {
        self.deviceToken = deviceToken
        self.pushType = pushType
        self.payload = payload
        self.priority = pushType.priority(requested: priority)
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.sandbox = sandbox
    }

    /// A subscription to send a job to.
    public struct Target: Sendable, Equatable {
        /// The subscription (for `herald.sub` and the `apns-id`).
        public var subscriptionID: String
        /// The APNs token (for VoIP jobs, the subscription's VoIP token).
        public var deviceToken: String
        /// The subscription's sandbox flag (nil: the app's environment).
        public var sandbox: Bool?
        /// The subscription's language, for `content.localized`.
        public var language: String?
        /// The app's definition of `content.channel`, whose iOS side fills what the job left unset.
        public var channel: NotificationChannel?
        /// The keys the subscription's SDK reads (`PayloadProfile.dialect`).
        public var dialect: PayloadDialect

        /// Creates a target.
        public init(subscriptionID: String, deviceToken: String, sandbox: Bool? = nil, language: String? = nil,
                    channel: NotificationChannel? = nil, dialect: PayloadDialect = .herald) {
            self.subscriptionID = subscriptionID
            self.deviceToken = deviceToken
            self.sandbox = sandbox
            self.language = language
            self.channel = channel
            self.dialect = dialect
        }
    }

    /// The notification for `job` and one subscription, rendered in the subscription's language.
    /// `now` stamps live-activity updates and turns a VoIP `ttl_s` into `apns-expiration`.
    /// Throws when the payload cannot fit (`payload-too-large`).
    public static func forJob(_ job: Job, target: Target, now: Timestamp) throws(APNsPayload.Failure) -> APNsNotification {
        let recipient = APNsPayload.Recipient(jobID: job.id, subscriptionID: target.subscriptionID, language: target.language,
                                              dialect: target.dialect)
        let id = apnsID(jobID: job.id, subscriptionID: target.subscriptionID)
        var expiration = job.expiresAt?.seconds
        let requested: Int? = job.delivery.priority.map { $0 == .normal ? 5 : 10 }
        if let content = job.content?.applyingIOSSide(of: target.channel) {
            let rendered = try APNsPayload.notification(content, for: recipient, limit: APNsPushType.alert.maxPayloadBytes)
            return APNsNotification(deviceToken: target.deviceToken, pushType: rendered.isBackground ? .background : .alert,
                                    payload: rendered.bytes, priority: requested, expiration: expiration,
                                    collapseID: APNsCollapseID.forJob(job.id, collapseID: content.collapseID), apnsID: id, sandbox: target.sandbox)
        }
        if let update = job.liveActivity {
            let rendered = try APNsPayload.liveActivity(update, jobID: job.id, timestamp: update.timestamp ?? now.seconds, recipient: recipient)
            return APNsNotification(deviceToken: target.deviceToken, pushType: .liveActivity, payload: rendered.bytes,
                                    priority: update.priority, expiration: expiration, apnsID: id, sandbox: target.sandbox)
        }
        // Kind voip (the job decoder guarantees its payload).
        let rendered = try APNsPayload.voip(data: job.voip?.data ?? [:], for: recipient, limit: APNsPushType.voip.maxPayloadBytes)
        if let ttl = job.voip?.ttlSeconds {
            let fromTTL = now.seconds + ttl
            expiration = min(expiration ?? fromTTL, fromTTL)
        }
        return APNsNotification(deviceToken: target.deviceToken, pushType: .voip, payload: rendered.bytes, priority: 10,
                                expiration: expiration, apnsID: id, sandbox: target.sandbox)
    }

    /// A UUID-shaped id derived from (job id, subscription id), so a receipt and APNs's delivery
    /// log can be matched, and a resend of the same delivery carries the same id: the first 16
    /// bytes of SHA-256 over both, with the version (5) and variant bits of a name-based UUID.
    public static func apnsID(jobID: String, subscriptionID: String) -> String {
        // One allocation (the result): the input and the digest live on the stack. A worker
        // derives one per APNs notification.
        let prefix: StaticString = "herald-apns-id"
        var jobID = jobID
        var subscriptionID = subscriptionID
        return jobID.withUTF8 { job in
            subscriptionID.withUTF8 { subscription in
                let count = prefix.utf8CodeUnitCount + 1 + job.count + 1 + subscription.count
                return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count + 32) { scratch in
                    var at = 0
                    func put(_ bytes: UnsafeBufferPointer<UInt8>) {
                        for byte in bytes {
                            scratch[at] = byte
                            at += 1
                        }
                    }
                    put(UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
                    scratch[at] = 0
                    at += 1
                    put(job)
                    scratch[at] = 0
                    at += 1
                    put(subscription)
                    let digest = UnsafeMutableBufferPointer(rebasing: scratch[count...])
                    SHA256.hash(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: scratch[..<count])),
                                into: UnsafeMutableRawBufferPointer(digest))
                    digest[6] = (digest[6] & 0x0F) | 0x50
                    digest[8] = (digest[8] & 0x3F) | 0x80
                    // 8-4-4-4-12 lower-case hex digits of the first 16 bytes, written in one pass.
                    return String(unsafeUninitializedCapacity: 36) { text in
                        var written = 0
                        for index in 0..<16 {
                            if index == 4 || index == 6 || index == 8 || index == 10 {
                                text[written] = UInt8(ascii: "-")
                                written += 1
                            }
                            text[written] = Hex.digit(digest[index] >> 4)
                            text[written + 1] = Hex.digit(digest[index] & 0x0F)
                            written += 2
                        }
                        return written
                    }
                }
            }
        }
    }
}
