/// An app's notification channel (`channels` row, issue 9): an Android side, whose settings
/// Android freezes when the app first creates the channel, so every change moves ``version`` and
/// with it the Android channel id; and an iOS side applied to the APNs payload.
public struct NotificationChannel: Sendable, Equatable {
    /// Android importance.
    public enum Importance: String, Sendable, CaseIterable {
        case low, medium, high, urgent
    }

    /// Off, the platform's default, or something of the app's own.
    public enum Setting<Custom: Sendable & Equatable>: Sendable, Equatable {
        case off
        case platformDefault
        case custom(Custom)
    }

    /// Lock-screen visibility.
    public enum Visibility: String, Sendable, CaseIterable {
        case `public`, `private`, secret
    }

    /// The key jobs name in `content.channel`.
    public var key: String
    /// Shown in the app's notification settings (Android lets an app rename a channel, so no version bump).
    public var name: String
    public var description: String?
    public var importance: Importance
    /// A custom sound is a resource name.
    public var sound: Setting<String>
    /// A custom vibration is a pattern in milliseconds (off, on, off, …).
    public var vibration: Setting<[Int]>
    /// A custom light is a colour `#rrggbb`.
    public var light: Setting<String>
    public var lockscreenVisibility: Visibility
    public var badge: Bool
    public var bypassDoNotDisturb: Bool
    /// Android channel group id.
    public var group: String?
    /// An Android channel id the app pinned instead of the versioned one.
    public var pinnedAndroidID: String?
    /// 1 at creation, one more for every change of an Android setting.
    public var version: Int
    /// iOS: `aps.sound`, `aps.interruption-level`, `aps.relevance-score`, `aps.thread-id` when the job sets none.
    public var iosSound: String?
    public var iosInterruptionLevel: NotificationContent.InterruptionLevel?
    public var iosRelevanceScore: Double?
    public var iosThreadID: String?

    /// A channel with Android's defaults (medium importance, default sound and vibration, no
    /// light, private on the lock screen, a badge) and no iOS settings.
    public init(key: String, name: String, version: Int = 1) {
        self.key = key
        self.name = name
        importance = .medium
        sound = .platformDefault
        vibration = .platformDefault
        light = .off
        lockscreenVisibility = .private
        badge = true
        bypassDoNotDisturb = false
        self.version = version
    }

    /// The id the Android channel is created under: `nf_<key>_v<version>`, or the pinned id.
    public var androidID: String { pinnedAndroidID ?? "nf_\(key)_v\(version)" }

    /// The full definition the SDK creates the channel from (`data.channel`, one JSON object
    /// string; `schemas/payloads.md`).
    public var definition: JSONValue {
        var members: [String: JSONValue] = [
            "id": .string(androidID), "key": .string(key), "version": .int(version), "name": .string(name),
            "importance": .string(importance.rawValue), "lockscreen_visibility": .string(lockscreenVisibility.rawValue),
            "badge": .bool(badge), "bypass_dnd": .bool(bypassDoNotDisturb),
        ]
        if let description { members["description"] = .string(description) }
        if let group { members["group"] = .string(group) }
        switch sound {
        case .off: members["sound"] = .string("off")
        case .platformDefault: members["sound"] = .string("default")
        case .custom(let name):
            members["sound"] = .string("custom")
            members["sound_name"] = .string(name)
        }
        switch vibration {
        case .off: members["vibration"] = .string("off")
        case .platformDefault: members["vibration"] = .string("default")
        case .custom(let pattern):
            members["vibration"] = .string("pattern")
            members["vibration_pattern"] = .array(pattern.map { .int($0) })
        }
        switch light {
        case .off: members["light"] = .string("off")
        case .platformDefault: members["light"] = .string("default")
        case .custom(let colour):
            members["light"] = .string("colour")
            members["light_colour"] = .string(colour)
        }
        return .object(members)
    }
}

extension NotificationContent {
    /// The content with the channel's iOS side filling what the job left unset (`aps.sound`,
    /// `interruption-level`, `relevance-score`, `thread-id`): the job's own values win.
    public func applyingIOSSide(of channel: NotificationChannel?) -> NotificationContent {
        guard let channel else { return self }
        var content = self
        if content.sound == nil, let sound = channel.iosSound { content.sound = .named(sound) }
        if content.interruptionLevel == nil { content.interruptionLevel = channel.iosInterruptionLevel }
        if content.relevanceScore == nil { content.relevanceScore = channel.iosRelevanceScore }
        if content.threadID == nil { content.threadID = channel.iosThreadID }
        return content
    }
}
