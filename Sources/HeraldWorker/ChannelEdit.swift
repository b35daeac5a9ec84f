public import HeraldCore

/// What `herald channels set` changes on a channel, read from its options and checked against the
/// rules the `channels` table enforces, before anything is written. Pure: the command reads the
/// stored channel, applies the edit, and stores the result.
public struct ChannelEdit: Sendable, Equatable {
    /// Why options cannot make a channel: one line for the user.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
        init(_ message: String) { self.message = message }
    }

    /// A value to set, or (for an optional field) to clear with `""`.
    public enum Change<Value: Sendable & Equatable>: Sendable, Equatable {
        case keep
        case set(Value)
    }

    public var name: Change<String> = .keep
    public var description: Change<String?> = .keep
    public var importance: Change<NotificationChannel.Importance> = .keep
    public var sound: Change<NotificationChannel.Setting<String>> = .keep
    public var vibration: Change<NotificationChannel.Setting<[Int]>> = .keep
    public var light: Change<NotificationChannel.Setting<String>> = .keep
    public var lockscreenVisibility: Change<NotificationChannel.Visibility> = .keep
    var badge: Change<Bool> = .keep
    var bypassDoNotDisturb: Change<Bool> = .keep
    public var group: Change<String?> = .keep
    var pinnedAndroidID: Change<String?> = .keep
    public var iosSound: Change<String?> = .keep
    public var iosInterruptionLevel: Change<NotificationContent.InterruptionLevel?> = .keep
    public var iosRelevanceScore: Change<Double?> = .keep
    public var iosThreadID: Change<String?> = .keep

    /// The options `herald channels set` takes besides `--app` and `--key`, in usage order.
    public static let options = [
        "--name", "--description", "--importance", "--sound", "--vibration", "--light", "--lockscreen", "--badge", "--bypass-dnd",
        "--group", "--android-id", "--ios-sound", "--ios-interruption-level", "--ios-relevance-score", "--ios-thread-id",
    ]

    /// A channel key: what jobs name in `content.channel` (`^[a-z0-9_-]{1,64}$`).
    public static func checkKey(_ key: String) throws(Failure) {
        guard (1...64).contains(key.utf8.count), key.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F || $0 == 0x2D }) else {
            throw Failure("--key \(key.debugDescription): 1 to 64 of a-z, 0-9, _ and -")
        }
    }

    /// Reads the options given (name → value); absent options keep the stored value.
    public init(_ values: [String: String]) throws(Failure) {
        func text(_ option: String, _ value: String, max: Int) throws(Failure) -> String {
            guard (1...max).contains(value.count) else { throw Failure("\(option) takes 1 to \(max) characters") }
            return value
        }
        func optional(_ option: String, max: Int) throws(Failure) -> Change<String?> {
            guard let value = values[option] else { return .keep }
            return value.isEmpty ? .set(nil) : .set(try text(option, value, max: max))
        }
        func choice<T: RawRepresentable & CaseIterable>(_ option: String, _ type: T.Type) throws(Failure) -> Change<T> where T.RawValue == String {
            guard let value = values[option] else { return .keep }
            guard let parsed = T(rawValue: value) else {
                throw Failure("\(option) is one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), not \(value.debugDescription)")
            }
            return .set(parsed)
        }
        func boolean(_ option: String) throws(Failure) -> Change<Bool> {
            switch values[option] {
            case nil: return .keep
            case "true": return .set(true)
            case "false": return .set(false)
            case let value?: throw Failure("\(option) is true or false, not \(value.debugDescription)")
            }
        }

        if let value = values["--name"] { name = .set(try text("--name", value, max: 200)) }
        description = try optional("--description", max: 1000)
        importance = try choice("--importance", NotificationChannel.Importance.self)
        if let value = values["--sound"] {
            switch value {
            case "off": sound = .set(.off)
            case "default": sound = .set(.platformDefault)
            default: sound = .set(.custom(try text("--sound", value, max: 256)))
            }
        }
        if let value = values["--vibration"] {
            switch value {
            case "off": vibration = .set(.off)
            case "default": vibration = .set(.platformDefault)
            default:
                let parts = value.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard (1...64).contains(parts.count), parts.allSatisfy({ ($0 ?? -1) >= 0 && ($0 ?? 0) <= 60_000 }) else {
                    throw Failure("--vibration is off, default or a pattern of 1 to 64 millisecond counts (0 to 60000) such as 0,250,250,250, not \(value.debugDescription)")
                }
                vibration = .set(.custom(parts.compactMap { $0 }))
            }
        }
        if let value = values["--light"] {
            switch value {
            case "off": light = .set(.off)
            case "default": light = .set(.platformDefault)
            default:
                let colour = value.lowercased()
                guard colour.utf8.count == 7, colour.hasPrefix("#"), colour.utf8.dropFirst().allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                    throw Failure("--light is off, default or a colour #rrggbb, not \(value.debugDescription)")
                }
                light = .set(.custom(colour))
            }
        }
        lockscreenVisibility = try choice("--lockscreen", NotificationChannel.Visibility.self)
        badge = try boolean("--badge")
        bypassDoNotDisturb = try boolean("--bypass-dnd")
        group = try optional("--group", max: 64)
        pinnedAndroidID = try optional("--android-id", max: 128)
        iosSound = try optional("--ios-sound", max: 256)
        if let value = values["--ios-interruption-level"] {
            if value.isEmpty {
                iosInterruptionLevel = .set(nil)
            } else if let level = NotificationContent.InterruptionLevel(rawValue: value) {
                iosInterruptionLevel = .set(level)
            } else {
                let levels = NotificationContent.InterruptionLevel.allCases.map(\.rawValue).joined(separator: ", ")
                throw Failure("--ios-interruption-level is one of \(levels) (or \"\" to clear), not \(value.debugDescription)")
            }
        }
        if let value = values["--ios-relevance-score"] {
            if value.isEmpty {
                iosRelevanceScore = .set(nil)
            } else if let score = Double(value), score >= 0, score <= 1 {
                iosRelevanceScore = .set(score)
            } else {
                throw Failure("--ios-relevance-score is a number from 0 to 1 (or \"\" to clear), not \(value.debugDescription)")
            }
        }
        iosThreadID = try optional("--ios-thread-id", max: 256)
    }

    /// The channel `key` after this edit: `existing` changed, or a new channel (which needs a
    /// name). The version is the stored one; PostgreSQL moves it when an Android setting changes.
    public func applied(to existing: NotificationChannel?, key: String) throws(Failure) -> NotificationChannel {
        var channel: NotificationChannel
        if let existing {
            channel = existing
        } else {
            guard case .set(let name) = name else { throw Failure("channel \(key) does not exist yet: --name is required to create it") }
            channel = NotificationChannel(key: key, name: name)
        }
        func apply<T>(_ change: Change<T>, _ field: inout T) {
            if case .set(let value) = change { field = value }
        }
        apply(name, &channel.name)
        apply(description, &channel.description)
        apply(importance, &channel.importance)
        apply(sound, &channel.sound)
        apply(vibration, &channel.vibration)
        apply(light, &channel.light)
        apply(lockscreenVisibility, &channel.lockscreenVisibility)
        apply(badge, &channel.badge)
        apply(bypassDoNotDisturb, &channel.bypassDoNotDisturb)
        apply(group, &channel.group)
        apply(pinnedAndroidID, &channel.pinnedAndroidID)
        apply(iosSound, &channel.iosSound)
        apply(iosInterruptionLevel, &channel.iosInterruptionLevel)
        apply(iosRelevanceScore, &channel.iosRelevanceScore)
        apply(iosThreadID, &channel.iosThreadID)
        return channel
    }

    /// A channel as `herald channels list --json` prints it: the Android definition the SDK
    /// receives (`data.channel`) and the iOS side.
    public static func json(_ channel: NotificationChannel) -> JSONValue {
        guard case .object(var members) = channel.definition else { return channel.definition }
        var ios: [String: JSONValue] = [:]
        if let sound = channel.iosSound { ios["sound"] = .string(sound) }
        if let level = channel.iosInterruptionLevel { ios["interruption_level"] = .string(level.rawValue) }
        if let score = channel.iosRelevanceScore { ios["relevance_score"] = .double(score) }
        if let thread = channel.iosThreadID { ios["thread_id"] = .string(thread) }
        members["ios"] = .object(ios)
        return .object(members)
    }
}
