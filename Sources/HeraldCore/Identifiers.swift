/// The shapes of identifiers in Herald's contracts, shared by every message type so one rule
/// means one thing everywhere (and matches the patterns in `schemas/`).
public enum Identifiers {
    @inline(__always) static func isAlnum(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }
    @inline(__always) static func isLowerAlnum(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x7A)
    }

    /// Job ids (the idempotency key): 1–64 of `[A-Za-z0-9._:-]`.
    public static let jobID = StringRule.token(max: 64, "1–64 characters of A-Z a-z 0-9 . _ : -") { byte in
        isAlnum(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
    }

    /// App ids: a slug of 1–64 of `[a-z0-9_-]`.
    public static let appID = StringRule.token(max: 64, "a slug of 1–64 characters of a-z 0-9 _ -") { byte in
        isLowerAlnum(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// Channel keys: the same slug shape as app ids.
    public static let channelID = StringRule.token(max: 64, "a slug of 1–64 characters of a-z 0-9 _ -") { byte in
        isLowerAlnum(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// Activity and stream ids: 1–128 of `[A-Za-z0-9._:-]`.
    public static let activityID = StringRule.token(max: 128, "1–128 characters of A-Z a-z 0-9 . _ : -") { byte in
        isAlnum(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
    }

    /// Button and action ids: 1–64 of `[A-Za-z0-9._-]`.
    public static let actionID = StringRule.token(max: 64, "1–64 characters of A-Z a-z 0-9 . _ -") { byte in
        isAlnum(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// Subscription ids: a UUID in its 8-4-4-4-12 hex form (either case).
    public static let subscriptionID = StringRule(expectation: "a UUID like 0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234") { text in
        isUUID(text)
    }

    /// External ids (the app's own user id): 1–256 characters.
    public static let externalID = StringRule.text(max: 256)

    /// Tag keys: 1–128 characters.
    public static let tagKey = StringRule.text(max: 128)

    /// Language tags: `en`, `pt-BR`, `zh-Hant-TW` (2–3 letters, then `-` and 2–8 letters or digits).
    public static let language = StringRule(minLength: 2, maxLength: 35, expectation: "a language tag like en or pt-BR") { text in
        isLanguageTag(text)
    }

    /// Swift type names for Live Activity attributes: `[A-Za-z_][A-Za-z0-9_.]*`, at most 128.
    public static let attributesType = StringRule(minLength: 1, maxLength: 128, expectation: "a Swift type name like DeliveryAttributes") { text in
        guard let first = text.utf8.first, isAlnum(first) && !(first >= 0x30 && first <= 0x39) || first == UInt8(ascii: "_") else { return false }
        return text.utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") }
    }

    /// Links a tap opens: any URI with a scheme (`https://…` or an app's deep link `myapp://…`).
    public static let link = StringRule(minLength: 1, maxLength: 2048, expectation: "a URI with a scheme, like https://example.com/x or myapp://orders/42") { text in
        isURI(text, schemes: nil)
    }

    /// Images: an `http` or `https` URL.
    public static let imageURL = StringRule(minLength: 1, maxLength: 2048, expectation: "an http or https URL") { text in
        isURI(text, schemes: ["http", "https"])
    }

    /// `HH:MM`, 00:00 to 23:59.
    public static let clockTime = StringRule(expectation: "a time of day HH:MM, 00:00 to 23:59") { text in
        parseClockTime(text) != nil
    }

    /// Minutes after midnight of an `HH:MM` time, or nil.
    public static func parseClockTime(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 5, bytes[2] == UInt8(ascii: ":") else { return nil }
        let digits = [bytes[0], bytes[1], bytes[3], bytes[4]]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let hour = Int(digits[0] - 0x30) * 10 + Int(digits[1] - 0x30)
        let minute = Int(digits[2] - 0x30) * 10 + Int(digits[3] - 0x30)
        guard hour <= 23, minute <= 59 else { return nil }
        return hour * 60 + minute
    }

    /// Whether `text` is a UUID in 8-4-4-4-12 hex form.
    public static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (offset, byte) in bytes.enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let isHex = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
                guard isHex else { return false }
            }
        }
        return true
    }

    static func isLanguageTag(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, (2...3).contains(first.utf8.count),
              first.utf8.allSatisfy({ isAlnum($0) && !($0 >= 0x30 && $0 <= 0x39) })
        else { return false }
        return parts.dropFirst().allSatisfy { part in (2...8).contains(part.utf8.count) && part.utf8.allSatisfy(isAlnum) }
    }

    static func isURI(_ text: String, schemes: Set<String>?) -> Bool {
        guard let colon = text.utf8.firstIndex(of: UInt8(ascii: ":")) else { return false }
        let scheme = text.utf8[text.utf8.startIndex..<colon]
        guard let first = scheme.first, isAlnum(first), !(first >= 0x30 && first <= 0x39) else { return false }
        guard scheme.allSatisfy({ isAlnum($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }) else { return false }
        let rest = text.utf8[text.utf8.index(after: colon)...]
        guard !rest.isEmpty, rest.allSatisfy({ $0 > 0x20 }) else { return false }
        guard let schemes else { return true }
        let name = String(decoding: scheme, as: UTF8.self).lowercased()
        guard schemes.contains(name) else { return false }
        return rest.starts(with: "//".utf8) && rest.count > 2
    }
}
