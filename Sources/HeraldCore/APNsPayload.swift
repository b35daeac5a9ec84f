/// APNs payload rendering (schemas/; `schemas/payloads.md` iOS): pure functions from a job's
/// content to the exact bytes a device receives, with the 4096-byte (5120 VoIP) limit enforced by
/// shortening the body at a character boundary.
public enum APNsPayload {
    /// The limit for alert, background and live-activity payloads, in bytes.
    public static let maxBytes = 4096
    /// The limit for VoIP payloads, in bytes.
    public static let maxVoIPBytes = 5120
    /// What ends a shortened body.
    public static let ellipsis = "…"

    /// A rendered payload.
    public struct Rendered: Sendable, Equatable {
        /// The JSON body, object members in sorted key order.
        public var bytes: [UInt8]
        /// Whether the body was shortened to fit (the payload then carries `herald.truncated`).
        public var truncated: Bool
        /// Whether this is a background push (`aps` holds only `content-available: 1`).
        public var isBackground: Bool
    }

    /// Why a payload could not be rendered.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The receipt reason (`payload-too-large`, `unsupported-by-profile`).
        public let reason: Receipt.Reason
        /// The smallest size reached, in bytes (0 for a refusal).
        public let bytes: Int
        /// The limit, in bytes.
        public let limit: Int
        /// Why the job cannot be rendered, when it is not its size.
        public var detail: String?

        /// A payload over `limit`.
        public init(reason: Receipt.Reason, bytes: Int, limit: Int) {
            self.reason = reason
            self.bytes = bytes
            self.limit = limit
        }

        /// A job the subscription's payload profile cannot express (`unsupported-by-profile`).
        public static func unsupported(_ detail: String) -> Failure {
            var failure = Failure(reason: .unsupportedByProfile, bytes: 0, limit: 0)
            failure.detail = detail
            return failure
        }

        public var description: String {
            detail ?? "APNs payload is \(bytes) bytes after shortening the body, over the limit of \(limit)"
        }
    }

    /// Who a payload is for.
    public struct Recipient: Sendable, Equatable {
        /// The job id (`herald.id`).
        public var jobID: String
        /// The subscription id (`herald.sub`).
        public var subscriptionID: String
        /// The subscription's language, for `content.localized`.
        public var language: String?
        /// The keys the subscription's SDK reads (its app's payload profile).
        public var dialect: PayloadDialect

        /// Creates a recipient.
        public init(jobID: String, subscriptionID: String, language: String? = nil, dialect: PayloadDialect = .herald) {
            self.jobID = jobID
            self.subscriptionID = subscriptionID
            self.language = language
            self.dialect = dialect
        }
    }

    /// Whether `content` in `language` is a background push: `content_available` with no title and no body.
    public static func isBackground(_ content: NotificationContent, language: String?) -> Bool {
        let text = content.text(for: language)
        return content.contentAvailable && (text.title ?? "").isEmpty && (text.body ?? "").isEmpty
    }

    /// The category sent when the job has buttons but no `category`: the SDK registers it from
    /// `herald.buttons` in the service extension (`herald:` and the button ids).
    public static func derivedCategory(_ buttons: [NotificationButton]) -> String? {
        buttons.isEmpty ? nil : "herald:" + buttons.map(\.id).joined(separator: ",")
    }

    /// Renders a `notification` job for one subscription, in the keys of its dialect.
    public static func notification(_ content: NotificationContent, for recipient: Recipient,
                                    limit: Int = maxBytes) throws(Failure) -> Rendered {
        let text = content.text(for: recipient.language)
        let background = isBackground(content, language: recipient.language)
        if recipient.dialect == .openpush { try refuseForOpenPush(content) }
        func render(body: String?, truncated: Bool) -> [UInt8] {
            var payload: [String: JSONValue] = [
                "aps": .object(background ? ["content-available": .int(1)] : alertAPS(content, text: text, body: body, dialect: recipient.dialect)),
            ]
            switch recipient.dialect {
            case .herald: payload["herald"] = heraldKeys(content, for: recipient, truncated: truncated)
            case .plain: payload.merge(plainKeys(content, for: recipient)) { _, new in new }
            case .openpush: payload.merge(openPushKeys(content, for: recipient, truncated: truncated)) { _, new in new }
            case .pushbib: payload.merge(pushbibKeys(content, for: recipient, background: background, truncated: truncated)) { _, new in new }
            }
            var result = merged(payload, raw: content.apns)
            // OpenPush: APNs options live in `aps`; an `op_apns_*` key never reaches the device,
            // not even from the job's raw overrides.
            if recipient.dialect == .openpush, case .object(var members) = result {
                for key in members.keys where key.hasPrefix("op_apns") { members.removeValue(forKey: key) }
                result = .object(members)
            }
            return result.serializedBytes()
        }
        return try fit(body: background ? nil : text.body, limit: limit, background: background, render: render)
    }

    /// The `aps` dictionary of an alert. `mutable-content` wakes the service extension: on every
    /// alert for the SDKs whose extension posts receipts (Herald's, OpenPush's), on alerts with an
    /// image for Pushbib's (it only attaches images), never for plain apps.
    static func alertAPS(_ content: NotificationContent, text: LocalizedText, body: String?, dialect: PayloadDialect) -> [String: JSONValue] {
        var aps: [String: JSONValue] = [:]
        var alert: [String: JSONValue] = [:]
        if let title = text.title, !title.isEmpty { alert["title"] = .string(title) }
        if let subtitle = text.subtitle, !subtitle.isEmpty { alert["subtitle"] = .string(subtitle) }
        if let body, !body.isEmpty { alert["body"] = .string(body) }
        aps["alert"] = .object(alert)
        switch dialect {
        case .herald, .openpush: aps["mutable-content"] = .int(1)
        case .pushbib: if content.imageURL != nil { aps["mutable-content"] = .int(1) }
        case .plain: break
        }
        if content.contentAvailable { aps["content-available"] = .int(1) }
        switch content.sound {
        case .named(let name)?: aps["sound"] = .string(name)
        case .critical(let name, let volume)?:
            aps["sound"] = .object(["critical": .int(1), "name": .string(name), "volume": .double(volume)])
        case nil: break
        }
        if let badge = content.badge { aps["badge"] = .int(badge) }
        let derived: String? = switch dialect {
        case .herald: derivedCategory(content.buttons)
        case .openpush: openPushCategory(content.buttons)
        case .pushbib, .plain: nil
        }
        if let category = content.category ?? derived { aps["category"] = .string(category) }
        if let level = content.interruptionLevel { aps["interruption-level"] = .string(level.rawValue) }
        if let score = content.relevanceScore { aps["relevance-score"] = .double(score) }
        if let thread = content.threadID { aps["thread-id"] = .string(thread) }
        return aps
    }

    /// Herald's own `herald` block.
    static func heraldKeys(_ content: NotificationContent, for recipient: Recipient, truncated: Bool) -> JSONValue {
        var herald: [String: JSONValue] = ["id": .string(recipient.jobID), "sub": .string(recipient.subscriptionID)]
        if let url = content.url { herald["url"] = .string(url) }
        if let image = content.imageURL { herald["image_url"] = .string(image) }
        if !content.buttons.isEmpty { herald["buttons"] = buttonArray(content.buttons) }
        if let data = content.data { herald["data"] = data }
        if truncated { herald["truncated"] = .string("1") }
        return .object(herald)
    }

    /// `[{id, text, url?}]`, in order.
    static func buttonArray(_ buttons: [NotificationButton]) -> JSONValue {
        .array(buttons.map { button in
            var object: [String: JSONValue] = ["id": .string(button.id), "text": .string(button.text)]
            if let url = button.url { object["url"] = .string(url) }
            return .object(object)
        })
    }

    /// Renders a `voip` job (PushKit): an empty `aps` (APNs requires the dictionary) and
    /// `herald.data` with the job's string values, plus the `herald.voip: "1"` marker. Nothing is
    /// shortened: too big is a failure.
    public static func voip(_ voip: VoIPPayload, for recipient: Recipient, limit: Int = maxVoIPBytes) throws(Failure) -> Rendered {
        try self.voip(data: voip.data, for: recipient, limit: limit)
    }

    /// Renders VoIP string values (see ``voip(_:for:limit:)``).
    public static func voip(data: [String: String], for recipient: Recipient, limit: Int = maxVoIPBytes) throws(Failure) -> Rendered {
        let bytes = voipPayload(data: data, for: recipient).serializedBytes()
        guard bytes.count <= limit else { throw Failure(reason: .payloadTooLarge, bytes: bytes.count, limit: limit) }
        return Rendered(bytes: bytes, truncated: false, isBackground: false)
    }

    /// Renders a `live_activity` job; `timestamp` is the update's time in seconds, which the
    /// caller keeps from going backwards for an activity (docs/ARCHITECTURE.md). Beside `aps`, Herald's
    /// dialect sends `herald.id`, OpenPush's `op_message_id`; plain and Pushbib devices get `aps`
    /// only (ActivityKit reads nothing else). OpenPush cannot take a `start` (its attribute block
    /// is not known).
    public static func liveActivity(_ update: LiveActivityUpdate, jobID: String, timestamp: Int64,
                                    recipient: Recipient? = nil, limit: Int = maxBytes) throws(Failure) -> Rendered {
        let dialect = recipient?.dialect ?? .herald
        if dialect == .openpush, update.event == .start {
            throw .unsupported("OpenPush live activities need an openpush attribute block Herald does not know: no push-to-start for the openpush payload profile")
        }
        var aps: [String: JSONValue] = [
            "timestamp": .int(timestamp), "event": .string(update.event.rawValue),
            "content-state": .object(update.contentState),
        ]
        if let alert = update.alert {
            var object: [String: JSONValue] = ["title": .string(alert.title), "body": .string(alert.body)]
            if let sound = alert.sound { object["sound"] = .string(sound) }
            aps["alert"] = .object(object)
        }
        if let stale = update.staleDate { aps["stale-date"] = .int(stale.seconds) }
        if let dismissal = update.dismissalDate { aps["dismissal-date"] = .int(dismissal.seconds) }
        if let score = update.relevanceScore { aps["relevance-score"] = .double(score) }
        if update.event == .start {
            if let type = update.attributesType { aps["attributes-type"] = .string(type) }
            if let attributes = update.attributes { aps["attributes"] = .object(attributes) }
            // iOS 18+: hand the app the started activity's update token.
            aps["input-push-token"] = .int(1)
        }
        var payload: [String: JSONValue] = ["aps": .object(aps)]
        switch dialect {
        case .herald: payload["herald"] = .object(["id": .string(jobID)])
        case .openpush:
            if let recipient {
                payload["op_message_id"] = .string(openPushMessageID(jobID: jobID, subscriptionID: recipient.subscriptionID))
            }
        case .plain, .pushbib: break
        }
        let bytes = JSONValue.object(payload).serializedBytes()
        guard bytes.count <= limit else { throw Failure(reason: .payloadTooLarge, bytes: bytes.count, limit: limit) }
        return Rendered(bytes: bytes, truncated: false, isBackground: false)
    }

    /// The job's raw `apns` object merged over the rendered payload: top-level members replace,
    /// except that object members (`aps`, `herald`) are merged one level deep.
    static func merged(_ payload: [String: JSONValue], raw: [String: JSONValue]?) -> JSONValue {
        guard let raw else { return .object(payload) }
        var result = payload
        for (key, value) in raw {
            if case .object(let base)? = result[key], case .object(let over) = value {
                result[key] = .object(base.merging(over) { _, new in new })
            } else {
                result[key] = value
            }
        }
        return .object(result)
    }

    /// Renders with the whole body; when that is over `limit`, keeps the longest prefix of whole
    /// characters (grapheme clusters, so UTF-8 and emoji stay intact) that fits with "…" and the
    /// `truncated` mark. Size grows with the prefix, so a binary search finds it.
    static func fit(body: String?, limit: Int, background: Bool,
                    render: (String?, Bool) -> [UInt8]) throws(Failure) -> Rendered {
        let whole = render(body, false)
        if whole.count <= limit { return Rendered(bytes: whole, truncated: false, isBackground: background) }
        guard let body, !body.isEmpty else { throw Failure(reason: .payloadTooLarge, bytes: whole.count, limit: limit) }
        let characters = Array(body)
        func attempt(_ count: Int) -> [UInt8] { render(String(characters[0..<count]) + ellipsis, true) }
        let shortest = attempt(0)
        guard shortest.count <= limit else { throw Failure(reason: .payloadTooLarge, bytes: shortest.count, limit: limit) }
        var low = 0  // fits
        var high = characters.count  // keeping everything does not fit
        var best = shortest
        while high - low > 1 {
            let middle = (low + high) / 2
            let candidate = attempt(middle)
            if candidate.count <= limit {
                low = middle
                best = candidate
            } else {
                high = middle
            }
        }
        return Rendered(bytes: best, truncated: true, isBackground: background)
    }
}
