/// A send job (`herald.job.v1`), as the upstream API produces it to `herald.jobs` (schemas/).
///
/// Decoding validates everything a worker relies on and reports the first problem with its JSON
/// path. Members Herald does not know are ignored, so a newer producer does not break an older
/// worker; an unknown `schema` version or `kind` is refused, because guessing would be worse.
public struct Job: Sendable {
    /// The `schema` value this type reads.
    public static let schemaName = "herald.job.v1"
    /// The largest accepted job, in bytes (256 KiB).
    public static let maxBytes = 256 * 1024
    /// The most ids in `audience.subscription_ids` or `audience.external_ids`.
    public static let maxExplicitIDs = 10_000

    /// The kinds of job.
    public enum Kind: String, Sendable, CaseIterable {
        case notification
        case liveActivity = "live_activity"
        case voip
    }

    /// The idempotency key: replaying a job id never fans out twice.
    public var id: String
    public var appID: String
    public var kind: Kind
    public var createdAt: Timestamp
    public var expiresAt: Timestamp?
    /// A test send (counted apart in metrics).
    public var test: Bool
    /// Set on a sub-job Herald derived from a scheduled job (local time, quiet hours, best hour,
    /// send after): the id of the job the user sent, under which its receipts are reported.
    public var parentID: String?
    /// Who receives it. Absent only for live-activity updates and ends, which go to the activity's tokens.
    public var audience: Audience?
    /// What a `notification` job shows.
    public var content: NotificationContent?
    /// What a `live_activity` job carries.
    public var liveActivity: LiveActivityUpdate?
    /// What a `voip` job carries.
    public var voip: VoIPPayload?
    /// When and how fast.
    public var delivery: Delivery
    /// The document as received, kept to store and to re-publish.
    public var document: JSONValue

    /// Decodes and validates a job from its bytes (the Kafka message value): JSON, or JSON
    /// framed by Confluent's serializers (``ConfluentWireFormat``).
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> Job {
        let bytes = ConfluentWireFormat.unwrap(bytes).json
        guard bytes.count <= maxBytes else {
            throw ValidationError(at: .root, "job is \(bytes.count) bytes, larger than the limit of \(maxBytes) bytes")
        }
        return try Job(json: try JSONValue.parse(bytes, limits: .init(maxBytes: maxBytes)))
    }

    /// Validates a parsed job document.
    public init(json: JSONValue) throws(ValidationError) {
        let root = try JSONObjectReader(json, at: .root)
        try MessageSchema.check(root, expected: Job.schemaName)
        try json.refuseNUL()
        id = try root.string("id", Identifiers.jobID)
        appID = try root.string("app_id", Identifiers.appID)
        kind = try root.enumeration("kind")
        createdAt = try root.timestamp("created_at")
        expiresAt = try root.optionalTimestamp("expires_at")
        test = try root.optionalBool("test") ?? false
        parentID = try root.optionalString("parent_id", Identifiers.jobID)
        document = json

        let audienceRequired: Bool
        switch kind {
        case .notification:
            content = try NotificationContent(try root.object("content"))
            audienceRequired = true
        case .liveActivity:
            let update = try LiveActivityUpdate(try root.object("live_activity"))
            liveActivity = update
            audienceRequired = update.event == .start
        case .voip:
            voip = try VoIPPayload(try root.object("voip"))
            audienceRequired = true
        }
        if let audienceReader = try root.optionalObject("audience") {
            audience = try Audience(audienceReader)
        } else if audienceRequired {
            throw ValidationError(at: JSONPath.root.appending("audience"), kind == .liveActivity ? "is required for event start" : "is required")
        }
        delivery = try root.optionalObject("delivery").map { reader throws(ValidationError) in try Delivery(reader) } ?? Delivery()
    }

    /// Whether the job has expired at `now`.
    public func isExpired(at now: Timestamp) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }
}

/// Checks a message's `schema` member.
enum MessageSchema {
    static func check(_ root: JSONObjectReader, expected: String) throws(ValidationError) {
        let schema = try root.string("schema")
        guard schema == expected else {
            throw ValidationError(at: JSONPath.root.appending("schema"), "unsupported schema \"\(schema.prefix(64))\" (this worker reads \(expected))")
        }
    }
}

/// Who a job is for: exactly one of four forms.
public enum Audience: Sendable, Equatable {
    /// These subscriptions (UUIDs, lower-cased, without repeats).
    case subscriptionIDs([String])
    /// Every subscription of these users.
    case externalIDs([String])
    /// Every subscription the filter matches.
    case filter(AudienceFilter)
    /// Every subscription of the app.
    case all

    static let forms = ["subscription_ids", "external_ids", "filter", "all"]

    init(_ reader: JSONObjectReader) throws(ValidationError) {
        let present = Audience.forms.filter { reader.has($0) }
        guard present.count == 1, let form = present.first else {
            throw ValidationError(at: reader.path, "needs exactly one of subscription_ids, external_ids, filter, all")
        }
        switch form {
        case "subscription_ids":
            let items = try reader.array(form, count: 1...Job.maxExplicitIDs, noun: "subscription ids")
            var seen = Set<String>()
            var ids: [String] = []
            for item in items {
                let id = try Identifiers.subscriptionID.check(item.value, at: item.path).lowercased()
                if seen.insert(id).inserted { ids.append(id) }
            }
            self = .subscriptionIDs(ids)
        case "external_ids":
            let items = try reader.array(form, count: 1...Job.maxExplicitIDs, noun: "external ids")
            var seen = Set<String>()
            var ids: [String] = []
            for item in items {
                let id = try Identifiers.externalID.check(item.value, at: item.path)
                if seen.insert(id).inserted { ids.append(id) }
            }
            self = .externalIDs(ids)
        case "filter":
            self = .filter(try AudienceFilter(json: try reader.required(form), at: reader.path.appending(form)))
        default:
            guard try reader.optionalBool("all") == true else {
                throw ValidationError(at: reader.path.appending("all"), "must be true")
            }
            self = .all
        }
    }
}

/// Title, subtitle and body in one language.
public struct LocalizedText: Sendable, Equatable {
    public var title: String?
    public var subtitle: String?
    public var body: String?

    /// Creates localized text.
    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
    }

    init(_ reader: JSONObjectReader) throws(ValidationError) {
        title = try reader.optionalString("title")
        subtitle = try reader.optionalString("subtitle")
        body = try reader.optionalString("body")
    }
}

/// A button on a notification.
public struct NotificationButton: Sendable, Equatable {
    public var id: String
    public var text: String
    public var url: String?
}

/// A notification sound: a named sound, or a critical alert sound with a volume.
public enum NotificationSound: Sendable, Equatable {
    case named(String)
    case critical(name: String, volume: Double)

    init(_ value: JSONValue, at path: JSONPath) throws(ValidationError) {
        switch value {
        case .string:
            self = .named(try StringRule.text(max: 256).check(value, at: path))
        case .object:
            let reader = try JSONObjectReader(value, at: path)
            let name = try reader.string("name", .text(max: 256))
            let critical = try reader.optionalBool("critical") ?? false
            let volume = try reader.optionalNumber("volume", in: 0...1) ?? 1
            self = critical ? .critical(name: name, volume: volume) : .named(name)
        default:
            throw ValidationError(at: path, "expected a sound name or an object {name, critical, volume}, got \(value.typeName)")
        }
    }
}

/// The visible content of a `notification` job.
public struct NotificationContent: Sendable {
    /// The most buttons on one notification.
    public static let maxButtons = 3
    /// The longest collapse id, in bytes (APNs's `apns-collapse-id` limit).
    public static let maxCollapseIDBytes = 64

    /// Interruption levels (iOS 15+).
    public enum InterruptionLevel: String, Sendable, CaseIterable {
        case passive, active
        case timeSensitive = "time-sensitive"
        case critical
    }

    /// Default-language text.
    public var text: LocalizedText
    /// Per-language text, chosen by the subscription's language, falling back to ``text``.
    public var localized: [String: LocalizedText]
    /// App data, passed to the app as JSON.
    public var data: JSONValue?
    public var url: String?
    public var imageURL: String?
    public var buttons: [NotificationButton]
    public var sound: NotificationSound?
    public var badge: Int?
    public var threadID: String?
    public var collapseID: String?
    public var category: String?
    public var channel: String?
    public var interruptionLevel: InterruptionLevel?
    public var relevanceScore: Double?
    public var contentAvailable: Bool
    public var showForeground: Bool?
    public var showBackground: Bool?
    /// Raw APNs payload members, merged last.
    public var apns: [String: JSONValue]?
    /// Raw FCM message members, merged last.
    public var fcm: [String: JSONValue]?

    init(_ reader: JSONObjectReader) throws(ValidationError) {
        text = try LocalizedText(reader)
        var localized: [String: LocalizedText] = [:]
        if let map = try reader.optionalObject("localized") {
            for (language, value) in map.members.sorted(by: { $0.key < $1.key }) {
                let path = map.path.appending(language)
                _ = try Identifiers.language.check(.string(language), at: path)
                localized[language.lowercased()] = try LocalizedText(try JSONObjectReader(value, at: path))
            }
        }
        self.localized = localized
        data = reader.value("data")
        url = try reader.optionalString("url", Identifiers.link)
        imageURL = try reader.optionalString("image_url", Identifiers.imageURL)
        var buttons: [NotificationButton] = []
        for item in try reader.optionalArray("buttons", count: 0...NotificationContent.maxButtons, noun: "buttons") ?? [] {
            let button = try JSONObjectReader(item.value, at: item.path)
            buttons.append(NotificationButton(
                id: try button.string("id", Identifiers.actionID),
                text: try button.string("text", .text(max: 64)),
                url: try button.optionalString("url", Identifiers.link)
            ))
        }
        self.buttons = buttons
        sound = try reader.value("sound").map { value throws(ValidationError) in try NotificationSound(value, at: reader.path.appending("sound")) }
        badge = try reader.optionalInt("badge", in: 0...99_999).map { Int($0) }
        threadID = try reader.optionalString("thread_id", .text(max: 256))
        collapseID = try reader.optionalString("collapse_id", StringRule(minLength: 1, maxLength: 64, maxBytes: NotificationContent.maxCollapseIDBytes))
        category = try reader.optionalString("category", .text(max: 256))
        channel = try reader.optionalString("channel", Identifiers.channelID)
        interruptionLevel = try reader.optionalEnumeration("interruption_level")
        relevanceScore = try reader.optionalNumber("relevance_score", in: 0...1)
        contentAvailable = try reader.optionalBool("content_available") ?? false
        showForeground = try reader.optionalBool("show_foreground")
        showBackground = try reader.optionalBool("show_background")
        apns = try reader.optionalObject("apns")?.members
        fcm = try reader.optionalObject("fcm")?.members
        let hasText = (text.title?.isEmpty == false) || (text.body?.isEmpty == false)
        guard hasText || contentAvailable else {
            throw ValidationError(at: reader.path, "needs a title or a body (or content_available: true for a background push)")
        }
    }

    /// The text for a subscription's language: an exact match, then the language without its
    /// region (`pt-br` → `pt`), then the defaults; missing members fall back one by one.
    public func text(for language: String?) -> LocalizedText {
        guard let language = language?.lowercased(), !localized.isEmpty else { return text }
        let chosen = localized[language] ?? language.split(separator: "-").first.flatMap { localized[String($0)] }
        guard let chosen else { return text }
        return LocalizedText(title: chosen.title ?? text.title, subtitle: chosen.subtitle ?? text.subtitle, body: chosen.body ?? text.body)
    }
}

/// What a `live_activity` job carries (schemas/ and docs/ARCHITECTURE.md).
public struct LiveActivityUpdate: Sendable {
    /// The largest sequence number (2^53 − 1, exact in every JSON reader).
    public static let maxSequence: Int64 = 9_007_199_254_740_991

    /// Activity events.
    public enum Event: String, Sendable, CaseIterable {
        case start, update, end
    }

    /// An alert shown with the update.
    public struct Alert: Sendable, Equatable {
        public var title: String
        public var body: String
        public var sound: String?
    }

    public var activityID: String
    public var event: Event
    /// The numbering session: updates on one stream are ordered by ``sequence``.
    public var streamID: String
    public var sequence: Int64
    public var contentState: [String: JSONValue]
    public var alert: Alert?
    public var attributesType: String?
    public var attributes: [String: JSONValue]?
    public var dismissalDate: Timestamp?
    public var staleDate: Timestamp?
    public var relevanceScore: Double?
    /// APNs priority: 5 or 10 (default 5 for updates, 10 for start and end).
    public var priority: Int
    /// The `aps.timestamp` to send, in seconds: not part of the job document; the worker sets it
    /// from the activity's numbering mark so it never goes backwards (docs/ARCHITECTURE.md). Nil: the send time.
    public var timestamp: Int64?

    init(_ reader: JSONObjectReader) throws(ValidationError) {
        activityID = try reader.string("activity_id", Identifiers.activityID)
        event = try reader.enumeration("event")
        streamID = try reader.string("stream_id", Identifiers.activityID)
        sequence = try reader.int("sequence", in: 0...LiveActivityUpdate.maxSequence)
        contentState = try reader.object("content_state").members
        if let alert = try reader.optionalObject("alert") {
            self.alert = Alert(
                title: try alert.string("title", .nonEmpty),
                body: try alert.string("body", .nonEmpty),
                sound: try alert.optionalString("sound", .text(max: 256))
            )
        }
        attributesType = try reader.optionalString("attributes_type", Identifiers.attributesType)
        attributes = try reader.optionalObject("attributes")?.members
        dismissalDate = try reader.optionalTimestamp("dismissal_date")
        staleDate = try reader.optionalTimestamp("stale_date")
        relevanceScore = try reader.optionalNumber("relevance_score", in: 0...1_000_000)
        if let priority = try reader.optionalInt("priority", in: 0...100) {
            guard priority == 5 || priority == 10 else {
                throw ValidationError(at: reader.path.appending("priority"), "must be 5 or 10")
            }
            self.priority = Int(priority)
        } else {
            self.priority = event == .update ? 5 : 10
        }
        if event == .start {
            // APNs refuses a push-to-start without an alert, a type or attributes.
            if alert == nil { throw ValidationError(at: reader.path.appending("alert"), "is required for event start") }
            if attributesType == nil { throw ValidationError(at: reader.path.appending("attributes_type"), "is required for event start") }
            if attributes == nil { throw ValidationError(at: reader.path.appending("attributes"), "is required for event start") }
        }
    }
}

/// What a `voip` job carries.
public struct VoIPPayload: Sendable {
    /// The longest accepted time to live: 28 days, FCM's maximum.
    public static let maxTTLSeconds: Int64 = 2_419_200

    /// String values delivered to the app's VoIP handler.
    public var data: [String: String]
    /// Seconds the push stays deliverable; nil for the provider's default.
    public var ttlSeconds: Int64?

    init(_ reader: JSONObjectReader) throws(ValidationError) {
        var data: [String: String] = [:]
        if let map = try reader.optionalObject("data") {
            for (key, value) in map.members {
                data[key] = try StringRule.any.check(value, at: map.path.appending(key))
            }
        }
        self.data = data
        ttlSeconds = try reader.optionalInt("ttl_s", in: 0...VoIPPayload.maxTTLSeconds)
    }
}

/// When and how fast a job is delivered.
public struct Delivery: Sendable, Equatable {
    /// Delivery priority.
    public enum Priority: String, Sendable, CaseIterable {
        case high, normal
    }

    public var priority: Priority?
    /// Goes through the urgent lane, ahead of campaigns.
    public var urgent: Bool = false
    public var sendAfter: Timestamp?
    /// Minutes after local midnight at which each device gets it.
    public var localTimeMinutes: Int?
    public var sameDayOnly: Bool = false
    /// Hold the push while the device is in its quiet window; nil: the app's default
    /// (`apps.respect_quiet_hours`, off unless the app opts in).
    public var respectQuietHours: Bool?
    public var bestHour: Bool = false
    public var throttlePerMinute: Int64?

    /// No delivery options: now, normal lane, unthrottled.
    public init() {}

    init(_ reader: JSONObjectReader) throws(ValidationError) {
        priority = try reader.optionalEnumeration("priority")
        urgent = try reader.optionalBool("urgent") ?? false
        sendAfter = try reader.optionalTimestamp("send_after")
        localTimeMinutes = try reader.optionalString("local_time", Identifiers.clockTime).flatMap(Identifiers.parseClockTime)
        sameDayOnly = try reader.optionalBool("same_day_only") ?? false
        respectQuietHours = try reader.optionalBool("respect_quiet_hours")
        bestHour = try reader.optionalBool("best_hour") ?? false
        throttlePerMinute = try reader.optionalInt("throttle_per_minute", in: 1...100_000_000)
        if localTimeMinutes != nil && bestHour {
            throw ValidationError(at: reader.path, "local_time and best_hour cannot be combined")
        }
    }
}
