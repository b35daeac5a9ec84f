/// An outcome on `herald.results` (`herald.receipt.v1`): per device (accepted, unregistered,
/// failed, dropped, deferred, received, confirmed, clicked) or per job (planned, halted, completed).
public struct Receipt: Sendable, Equatable {
    /// The `schema` value this type reads and writes.
    public static let schemaName = "herald.receipt.v1"

    /// Receipt stages.
    public enum Stage: String, Sendable, CaseIterable {
        // Terminal, exactly one per subscription per job.
        case accepted, unregistered, failed, dropped
        // Not terminal: held until a later time.
        case deferred
        // Reported by devices.
        case received, confirmed, clicked
        // Job-level events (no subscription).
        case planned, halted, completed
        /// The job message was dead-lettered: the job will not run (`reason` says why).
        case rejected

        /// Whether this stage ends a subscription's delivery for a job.
        public var isTerminal: Bool { [.accepted, .unregistered, .failed, .dropped].contains(self) }
        /// Whether this is a job-level event.
        public var isJobLevel: Bool { [.planned, .halted, .completed, .rejected].contains(self) }
        /// Whether a receipt of this stage must say why.
        public var needsReason: Bool { [.unregistered, .failed, .dropped, .deferred, .halted, .rejected].contains(self) }
    }

    /// The documented reasons (`schemas/receipt-reasons.md`).
    public enum Reason: String, Sendable, CaseIterable {
        // unregistered
        case unregistered
        case badDeviceToken = "bad-device-token"
        case deviceTokenNotForTopic = "device-token-not-for-topic"
        case expiredToken = "expired-token"
        case senderIDMismatch = "sender-id-mismatch"
        case invalidToken = "invalid-token"
        // failed
        case retriesExhausted = "retries-exhausted"
        case payloadTooLarge = "payload-too-large"
        case badRequest = "bad-request"
        case providerError = "provider-error"
        case noCredentials = "no-credentials"
        case unknownChannel = "unknown-channel"
        case unsupportedByProfile = "unsupported-by-profile"
        // dropped
        case expired
        case staleSequence = "stale-sequence"
        case ended
        case optedOut = "opted-out"
        case noVoIPToken = "no-voip-token"
        case noPushToStartToken = "no-push-to-start-token"
        case unknownSubscription = "unknown-subscription"
        case cancelled
        case halted
        // deferred
        case quietHours = "quiet-hours"
        case localTime = "local-time"
        case bestHour = "best-hour"
        case sendAfter = "send-after"
        case throttled
        case retry
        // halted
        case credentials
        case suspectedMisconfiguration = "suspected-misconfiguration"
        case unreadableCredentials = "unreadable-credentials"
        // rejected (the dead letter's cause; retries-exhausted above serves both)
        case invalid
        case unknownApp = "unknown-app"
        case databaseRefused = "database-refused"
        case statementTimeout = "statement-timeout"
        case tooLarge = "too-large"
    }

    /// Totals of a completed job.
    public struct Totals: Sendable, Equatable {
        public var accepted: Int64 = 0
        public var unregistered: Int64 = 0
        public var failed: Int64 = 0
        public var dropped: Int64 = 0

        /// Creates totals.
        public init(accepted: Int64 = 0, unregistered: Int64 = 0, failed: Int64 = 0, dropped: Int64 = 0) {
            self.accepted = accepted
            self.unregistered = unregistered
            self.failed = failed
            self.dropped = dropped
        }
    }

    /// Providers, as named in receipts.
    public enum Provider: String, Sendable, CaseIterable {
        case apns, fcm
    }

    public var jobID: String
    public var appID: String
    public var stage: Stage
    /// The subscription, for per-device stages.
    public var subscriptionID: String?
    public var platform: Platform?
    public var reason: Reason?
    /// The provider's own reason string (`BadDeviceToken`, `UNREGISTERED`), when it gave one.
    public var providerReason: String?
    /// apns-id, or the FCM message name.
    public var providerID: String?
    public var attempts: Int?
    public var at: Timestamp
    /// When a deferred delivery will go.
    public var until: Timestamp?
    /// The tapped button (clicked).
    public var actionID: String?
    /// The provider a halt concerns.
    public var provider: Provider?
    /// Planned: the audience estimate and shard count.
    public var audienceEstimate: Int64?
    public var shardCount: Int?
    /// Completed: totals.
    public var totals: Totals?
    /// Completed: shards that were dead-lettered, whose unsent rest has no receipts (absent when none).
    public var deadLetteredShards: Int?

    /// Creates a receipt.
    public init(jobID: String, appID: String, stage: Stage, subscriptionID: String? = nil, platform: Platform? = nil,
                reason: Reason? = nil, at: Timestamp) {
        self.jobID = jobID
        self.appID = appID
        self.stage = stage
        self.subscriptionID = subscriptionID
        self.platform = platform
        self.reason = reason
        self.at = at
    }

    /// Deterministic id, so a consumer can drop a duplicate: `job:subscription:stage` for a
    /// device, `job:stage` for a job-level event (`job:halted:provider` for a halt), and
    /// `job:subscription:clicked:action` for a button tap (two different buttons tapped are two
    /// events, not a duplicate).
    public var id: String {
        var length = 0
        forEachIDPart { length += $0.utf8.count + 1 }
        var id = ""
        id.reserveCapacity(length)  // sized first: one allocation
        forEachIDPart { part in
            if !id.isEmpty { id.append(":") }
            id.append(part)
        }
        return id
    }

    /// Calls `body` with each part of ``id`` in order (they are joined by `:`).
    private func forEachIDPart(_ body: (String) -> Void) {
        body(jobID)
        if let subscriptionID { body(subscriptionID) }
        body(stage.rawValue)
        if stage == .clicked, let actionID { body(actionID) }
        // A job can be halted on each provider: two events, not a duplicate.
        if stage == .halted, let provider { body(provider.rawValue) }
    }

    /// The Kafka message key: subscription id for device receipts, job id for job events.
    public var messageKey: String { subscriptionID ?? jobID }

    /// Decodes and validates a receipt.
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> Receipt {
        try Receipt(json: try JSONValue.parse(bytes, limits: .init(maxBytes: 64 * 1024)))
    }

    /// Validates a parsed receipt.
    public init(json: JSONValue) throws(ValidationError) {
        let root = try JSONObjectReader(json, at: .root)
        try MessageSchema.check(root, expected: Receipt.schemaName)
        _ = try root.string("id", .text(max: 512))
        jobID = try root.string("job_id", Identifiers.jobID)
        appID = try root.string("app_id", Identifiers.appID)
        stage = try root.enumeration("stage")
        at = try root.timestamp("at")
        subscriptionID = try root.optionalString("subscription_id", Identifiers.subscriptionID)?.lowercased()
        platform = try root.optionalEnumeration("platform")
        reason = try root.optionalEnumeration("reason")
        providerReason = try root.optionalString("provider_reason", .text(max: 256))
        providerID = try root.optionalString("provider_id", .text(max: 256))
        attempts = try root.optionalInt("attempts", in: 0...1_000_000).map { Int($0) }
        until = try root.optionalTimestamp("until")
        actionID = try root.optionalString("action_id", Identifiers.actionID)
        provider = try root.optionalEnumeration("provider")
        audienceEstimate = try root.optionalInt("audience_estimate", in: 0...Int64.max)
        shardCount = try root.optionalInt("shard_count", in: 0...1_000_000).map { Int($0) }
        deadLetteredShards = try root.optionalInt("dead_lettered_shards", in: 1...1_000_000).map { Int($0) }
        if let totals = try root.optionalObject("totals") {
            self.totals = Totals(
                accepted: try totals.int("accepted", in: 0...Int64.max),
                unregistered: try totals.int("unregistered", in: 0...Int64.max),
                failed: try totals.int("failed", in: 0...Int64.max),
                dropped: try totals.int("dropped", in: 0...Int64.max)
            )
        }
        func missing(_ key: String, _ why: String) -> ValidationError {
            ValidationError(at: JSONPath.root.appending(key), "is required \(why)")
        }
        if stage.isJobLevel {
            if subscriptionID != nil {
                throw ValidationError(at: JSONPath.root.appending("subscription_id"), "must be absent for job-level stage \(stage.rawValue)")
            }
        } else {
            if subscriptionID == nil { throw missing("subscription_id", "for stage \(stage.rawValue)") }
        }
        if stage.needsReason, reason == nil { throw missing("reason", "for stage \(stage.rawValue)") }
        switch stage {
        case .deferred where until == nil: throw missing("until", "for stage deferred")
        case .planned where audienceEstimate == nil: throw missing("audience_estimate", "for stage planned")
        case .planned where shardCount == nil: throw missing("shard_count", "for stage planned")
        case .halted where provider == nil: throw missing("provider", "for stage halted")
        case .completed where totals == nil: throw missing("totals", "for stage completed")
        default: break
        }
    }

    /// The message document serialised, byte for byte what `json.serializedBytes()` gives
    /// (members in sorted key order) without building the tree: a worker writes one per
    /// notification.
    public func serializedBytes() -> [UInt8] {
        var out: [UInt8] = []
        // Sized for what the receipt holds, so the bytes are one allocation: a provider's id and
        // reason can take a device receipt past any fixed size.
        out.reserveCapacity(320 + appID.utf8.count + 2 * jobID.utf8.count + 2 * (subscriptionID?.utf8.count ?? 0)
                            + (providerID?.utf8.count ?? 0) + (providerReason?.utf8.count ?? 0) + 2 * (actionID?.utf8.count ?? 0))
        var first = true
        func key(_ name: StaticString) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        }
        func string(_ name: StaticString, _ value: String?) {
            guard let value else { return }
            key(name)
            JSONValue.writeString(value, into: &out)
        }
        func integer<I: BinaryInteger>(_ name: StaticString, _ value: I?) {
            guard let value else { return }
            key(name)
            out.append(contentsOf: String(value).utf8)
        }
        string("action_id", actionID)
        string("app_id", appID)
        key("at")
        out.append(UInt8(ascii: "\""))
        at.appendRFC3339(to: &out)
        out.append(UInt8(ascii: "\""))
        integer("attempts", attempts)
        integer("audience_estimate", audienceEstimate)
        integer("dead_lettered_shards", deadLetteredShards)
        // The id written in place, not made as a string first.
        key("id")
        out.append(UInt8(ascii: "\""))
        var firstPart = true
        forEachIDPart { part in
            if !firstPart { out.append(UInt8(ascii: ":")) }
            firstPart = false
            JSONValue.writeStringContents(part, into: &out)
        }
        out.append(UInt8(ascii: "\""))
        string("job_id", jobID)
        string("platform", platform?.rawValue)
        string("provider", provider?.rawValue)
        string("provider_id", providerID)
        string("provider_reason", providerReason)
        string("reason", reason?.rawValue)
        string("schema", Receipt.schemaName)
        integer("shard_count", shardCount)
        string("stage", stage.rawValue)
        string("subscription_id", subscriptionID)
        if let totals {
            key("totals")
            out.append(contentsOf: "{\"accepted\":\(totals.accepted),\"dropped\":\(totals.dropped),\"failed\":\(totals.failed),\"unregistered\":\(totals.unregistered)}".utf8)
        }
        string("until", until?.rfc3339)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The message document.
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "schema": .string(Receipt.schemaName),
            "id": .string(id),
            "job_id": .string(jobID),
            "app_id": .string(appID),
            "stage": .string(stage.rawValue),
            "at": .string(at.rfc3339),
        ]
        if let subscriptionID { members["subscription_id"] = .string(subscriptionID) }
        if let platform { members["platform"] = .string(platform.rawValue) }
        if let reason { members["reason"] = .string(reason.rawValue) }
        if let providerReason { members["provider_reason"] = .string(providerReason) }
        if let providerID { members["provider_id"] = .string(providerID) }
        if let attempts { members["attempts"] = .int(attempts) }
        if let until { members["until"] = .string(until.rfc3339) }
        if let actionID { members["action_id"] = .string(actionID) }
        if let provider { members["provider"] = .string(provider.rawValue) }
        if let audienceEstimate { members["audience_estimate"] = .int(audienceEstimate) }
        if let shardCount { members["shard_count"] = .int(shardCount) }
        if let deadLetteredShards { members["dead_lettered_shards"] = .int(deadLetteredShards) }
        if let totals {
            members["totals"] = .object([
                "accepted": .int(totals.accepted),
                "unregistered": .int(totals.unregistered),
                "failed": .int(totals.failed),
                "dropped": .int(totals.dropped),
            ])
        }
        return .object(members)
    }
}
