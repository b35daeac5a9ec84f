/// Renders a `notification` job for one Android subscription as an FCM HTTP v1 send request
/// (`{"message": {...}}`), following `schemas/payloads.md` (Android parts). Pure: the same
/// inputs give the same bytes.
public enum FCMMessage {
    /// FCM's payload limit for messages to tokens, in bytes (keys and values).
    public static let maxPayloadBytes = 4096
    /// FCM's longest time to live: 28 days.
    public static let maxTTLSeconds: Int64 = 2_419_200

    /// How the device shows the message.
    public enum Mode: String, Sendable, CaseIterable {
        /// The Herald SDK renders a data-only message itself.
        case sdk
        /// Android shows an FCM notification message (apps without the SDK).
        case plain
        /// The Pushbib SDK renders a data-only message in its own keys.
        case pushbib
        /// An iOS device registered with an FCM token (BV Garner): the notification travels in
        /// the message's `apns` block, which FCM hands to APNs.
        case ios

        /// The mode of a subscription written in `dialect`, on `platform`.
        public init(dialect: PayloadDialect, platform: Platform) {
            switch dialect {
            case .herald, .openpush: self = .sdk
            case .pushbib: self = .pushbib
            case .plain: self = platform == .ios ? .ios : .plain
            }
        }
    }

    /// Everything rendering needs besides the job content.
    public struct Target: Sendable {
        /// The FCM registration token.
        public var token: String
        public var mode: Mode
        /// The subscription's language, for `content.localized`.
        public var language: String?
        /// The app's definition of `content.channel` (id, name, importance, …), if the app has one.
        public var channel: JSONValue?
        /// `android.restricted_package_name`, if the app sets one.
        public var restrictedPackageName: String?

        /// Creates a target.
        public init(token: String, mode: Mode, language: String? = nil, channel: JSONValue? = nil, restrictedPackageName: String? = nil) {
            self.token = token
            self.mode = mode
            self.language = language
            self.channel = channel
            self.restrictedPackageName = restrictedPackageName
        }
    }

    /// A rendered request body.
    public struct Rendered: Sendable, Equatable {
        /// The `messages:send` request body.
        public var body: [UInt8]
        /// Whether the body text was shortened to fit.
        public var truncated: Bool
        /// The payload size FCM counts (data keys and values, notification title, body and image).
        public var payloadBytes: Int

        /// The same message with `"validate_only": true` beside it: FCM checks the message and
        /// the token and answers as for a send, but delivers nothing (`herald send --validate-only`).
        public var validatingOnly: Rendered {
            guard body.first == UInt8(ascii: "{") else { return self }
            var copy = self
            copy.body = Array(#"{"validate_only":true,"#.utf8) + body.dropFirst()
            return copy
        }
    }

    /// Why a job could not be rendered.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The receipt reason for the `failed` stage.
        public let reason: Receipt.Reason
        public let message: String
        public var description: String { "FCM rendering failed (\(reason.rawValue)): \(message)" }
    }

    /// Keys FCM refuses in `data`, or overwrites (`collapse_key`).
    public static func isReserved(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key == "collapse_key" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    /// Renders `content` of job `jobID` for `target` at `now`.
    public static func render(
        jobID: String, content: NotificationContent, expiresAt: Timestamp?, priority: Delivery.Priority?,
        target: Target, now: Timestamp
    ) throws(Failure) -> Rendered {
        let text = content.text(for: target.language)
        var body = text.body
        var truncated = false
        var message = build(jobID: jobID, content: content, title: text.title, body: body, truncated: false,
                            expiresAt: expiresAt, priority: priority, target: target, now: now)
        var size = payloadBytes(message)
        if size > maxPayloadBytes, let original = body, !original.isEmpty {
            // The `truncated` marker itself costs bytes ("truncated" + "1" in SDK data).
            let marker = target.mode == .sdk || target.mode == .pushbib ? "truncated".utf8.count + 1 : 0
            let excess = size - maxPayloadBytes + marker + ellipsis.utf8.count
            let budget = original.utf8.count - excess
            if budget > 0 {
                body = prefix(of: original, maxBytes: budget) + ellipsis
                truncated = true
                message = build(jobID: jobID, content: content, title: text.title, body: body, truncated: true,
                                expiresAt: expiresAt, priority: priority, target: target, now: now)
                size = payloadBytes(message)
            }
        }
        guard size <= maxPayloadBytes else {
            throw Failure(reason: .payloadTooLarge, message: "payload is \(size) bytes, over FCM's \(maxPayloadBytes) even with the body shortened")
        }
        return Rendered(body: JSONValue.object(["message": message]).serializedBytes(), truncated: truncated, payloadBytes: size)
    }

    /// Renders a `voip` job for an Android subscription: a high-priority data-only message
    /// (`herald_id`, `voip` = `"1"`, `data` = the job's `voip.data` as one JSON object string),
    /// with `android.ttl` from `voip.ttl_s`, else from `expires_at`.
    public static func render(jobID: String, voip: VoIPPayload, expiresAt: Timestamp?, target: Target, now: Timestamp) throws(Failure) -> Rendered {
        var android: [String: JSONValue] = ["priority": .string(Delivery.Priority.high.rawValue)]
        if let ttl = voip.ttlSeconds ?? expiresAt.map({ $0.seconds - now.seconds }) {
            android["ttl"] = .string("\(min(max(ttl, 0), maxTTLSeconds))s")
        }
        if let package = target.restrictedPackageName { android["restricted_package_name"] = .string(package) }
        var data: [String: JSONValue]
        if target.mode == .pushbib {
            // Each data key a flat string extra, plus the marker (Pushbib: "the data you sent plus
            // pushbib_voip: "1"").
            data = voip.data.filter { !isReserved($0.key) }.mapValues { .string($0) }
            data["pushbib_voip"] = .string("1")
        } else {
            data = [
                "herald_id": .string(jobID), "voip": .string("1"),
                "data": .string(JSONValue.object(voip.data.mapValues { .string($0) }).serialized()),
            ]
        }
        let message = JSONValue.object(["token": .string(target.token), "android": .object(android), "data": .object(data)])
        let size = payloadBytes(message)
        guard size <= maxPayloadBytes else {
            throw Failure(reason: .payloadTooLarge, message: "VoIP payload is \(size) bytes, over FCM's \(maxPayloadBytes)")
        }
        return Rendered(body: JSONValue.object(["message": message]).serializedBytes(), truncated: false, payloadBytes: size)
    }

    /// Renders a `live_activity` job for an Android subscription (`schemas/payloads.md`, live
    /// updates): a data-only message the SDK turns into its ongoing notification, with
    /// `live_update` = `START`, `UPDATE` or `END`, `collapse_key` = the activity id (only the
    /// newest waits while the device is offline), priority high for start and end (and for
    /// updates sent with priority 10). Nothing is shortened: too big is `payload-too-large`.
    public static func render(jobID: String, liveActivity update: LiveActivityUpdate, expiresAt: Timestamp?, target: Target,
                              now: Timestamp) throws(Failure) -> Rendered {
        let urgent = update.event != .update || update.priority == 10
        var android: [String: JSONValue] = [
            "priority": .string((urgent ? Delivery.Priority.high : .normal).rawValue),
            "collapse_key": .string(update.activityID),
        ]
        if let expiresAt {
            android["ttl"] = .string("\(min(max(expiresAt.seconds - now.seconds, 0), maxTTLSeconds))s")
        }
        if let package = target.restrictedPackageName { android["restricted_package_name"] = .string(package) }
        // Pushbib names the event `action` and the state `contentState`, and marks the message.
        let pushbib = target.mode == .pushbib
        var data: [String: String] = [
            "herald_id": jobID, pushbib ? "action" : "live_update": update.event.rawValue.uppercased(),
            "activity_id": update.activityID, "stream_id": update.streamID, "sequence": String(update.sequence),
            pushbib ? "contentState" : "content_state": JSONValue.object(update.contentState).serialized(),
            "timestamp": String(update.timestamp ?? now.seconds),
        ]
        if pushbib { data["pushbib_live_update"] = "1" }
        if let alert = update.alert {
            var members: [String: JSONValue] = ["title": .string(alert.title), "body": .string(alert.body)]
            if let sound = alert.sound { members["sound"] = .string(sound) }
            data["alert"] = JSONValue.object(members).serialized()
        }
        if let stale = update.staleDate { data["stale_date"] = String(stale.seconds) }
        if let dismissal = update.dismissalDate { data["dismissal_date"] = String(dismissal.seconds) }
        if let score = update.relevanceScore { data["relevance_score"] = JSONValue.double(score).serialized() }
        if update.event == .start {
            if let type = update.attributesType { data["attributes_type"] = type }
            if let attributes = update.attributes { data["attributes"] = JSONValue.object(attributes).serialized() }
        }
        let message = JSONValue.object(["token": .string(target.token), "android": .object(android),
                                        "data": .object(data.mapValues { .string($0) })])
        let size = payloadBytes(message)
        guard size <= maxPayloadBytes else {
            throw Failure(reason: .payloadTooLarge, message: "live update payload is \(size) bytes, over FCM's \(maxPayloadBytes)")
        }
        return Rendered(body: JSONValue.object(["message": message]).serializedBytes(), truncated: false, payloadBytes: size)
    }

    static let ellipsis = "…"

    /// The longest prefix of `text` whose UTF-8 form fits in `maxBytes`, cut between characters
    /// (never inside a UTF-8 sequence or a grapheme cluster).
    static func prefix(of text: String, maxBytes: Int) -> String {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let count = text[index].utf8.count
            if used + count > maxBytes { break }
            used += count
            end = text.index(after: index)
        }
        return String(text[..<end])
    }

    /// The bytes FCM counts: every data key and value, and the notification's title, body and
    /// image; for an iOS device, also the APNs payload, which FCM hands on with the data keys.
    static func payloadBytes(_ message: JSONValue) -> Int {
        var total = 0
        if let payload = message["apns"]?["payload"] { total += payload.serialized().utf8.count }
        for case .object(let data)? in [message["data"], message["android"]?["data"]] {
            for (key, value) in data { total += key.utf8.count + (value.stringValue?.utf8.count ?? value.serialized().utf8.count) }
        }
        for case .object(let notification)? in [message["notification"]] {
            for key in ["title", "body", "image"] { total += notification[key]?.stringValue?.utf8.count ?? 0 }
        }
        return total
    }

    private static func build(
        jobID: String, content: NotificationContent, title: String?, body: String?, truncated: Bool,
        expiresAt: Timestamp?, priority: Delivery.Priority?, target: Target, now: Timestamp
    ) -> JSONValue {
        var message: [String: JSONValue] = ["token": .string(target.token)]
        var android: [String: JSONValue] = [:]
        let isAlert = (title?.isEmpty == false) || (body?.isEmpty == false)
        android["priority"] = .string((priority ?? (isAlert ? .high : .normal)).rawValue)
        if let expiresAt {
            let seconds = min(max(expiresAt.seconds - now.seconds, 0), maxTTLSeconds)
            android["ttl"] = .string("\(seconds)s")
        }
        if let collapseID = content.collapseID { android["collapse_key"] = .string(collapseID) }
        if let package = target.restrictedPackageName { android["restricted_package_name"] = .string(package) }

        var data: [String: String] = ["herald_id": jobID]
        if target.mode != .pushbib {
            if let url = content.url { data["url"] = url }
            if let appData = content.data { data["data"] = appData.serialized() }
        }
        switch target.mode {
        case .pushbib:
            pushbibData(&data, content: content, title: title, body: body, isAlert: isAlert, truncated: truncated, target: target)
        case .ios:
            android = [:]
            message["apns"] = iosBlock(content: content, title: title, subtitle: content.text(for: target.language).subtitle, body: body, isAlert: isAlert, expiresAt: expiresAt, priority: priority)
        case .sdk:
            if let title { data["title"] = title }
            if let body { data["body"] = body }
            if let image = content.imageURL { data["image_url"] = image }
            if !content.buttons.isEmpty {
                data["buttons"] = JSONValue.array(content.buttons.map { button in
                    var members: [String: JSONValue] = ["id": .string(button.id), "text": .string(button.text)]
                    if let url = button.url { members["url"] = .string(url) }
                    return .object(members)
                }).serialized()
            }
            if let channel = content.channel {
                data["channel"] = (target.channel ?? .object(["id": .string(channel)])).serialized()
            }
            if let collapseID = content.collapseID { data["collapse_id"] = collapseID }
            if let show = content.showForeground { data["show_foreground"] = show ? "true" : "false" }
            if let show = content.showBackground { data["show_background"] = show ? "true" : "false" }
            if truncated { data["truncated"] = "1" }
        case .plain:
            var notification: [String: JSONValue] = [:]
            if let title { notification["title"] = .string(title) }
            if let body { notification["body"] = .string(body) }
            if let image = content.imageURL { notification["image"] = .string(image) }
            if !notification.isEmpty { message["notification"] = .object(notification) }
            var androidNotification: [String: JSONValue] = ["tag": .string(content.collapseID ?? jobID)]
            if let channel = content.channel {
                // The app's versioned Android id (nf_<key>_v<version>) when it defines the channel.
                androidNotification["channel_id"] = .string(target.channel?["id"]?.stringValue ?? channel)
            }
            if let sound = content.sound {
                switch sound {
                case .named(let name): androidNotification["sound"] = .string(name)
                case .critical(let name, _): androidNotification["sound"] = .string(name)
                }
            }
            if let category = content.category { androidNotification["click_action"] = .string(category) }
            if isAlert { android["notification"] = .object(androidNotification) }
        }
        message["data"] = .object(data.filter { !isReserved($0.key) }.mapValues { .string($0) })
        if target.mode != .ios { message["android"] = .object(android) }
        var result = JSONValue.object(message)
        if let raw = content.fcm { result = merge(result, .object(raw)) }
        return result
    }

    /// `override` merged into `base`: objects member by member, anything else replaced.
    static func merge(_ base: JSONValue, _ override: JSONValue) -> JSONValue {
        guard case .object(var members) = base, case .object(let extra) = override else { return override }
        for (key, value) in extra { members[key] = members[key].map { merge($0, value) } ?? value }
        return .object(members)
    }
}
