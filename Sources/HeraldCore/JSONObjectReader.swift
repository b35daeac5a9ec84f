/// Reads typed members out of a JSON object, turning every mismatch into a ``ValidationError``
/// that names the member's path. Absent members and `null` are told apart: an optional member
/// may be absent, but `null` is refused (producers should omit what they do not set).
public struct JSONObjectReader: Sendable {
    /// The object's members.
    public let members: [String: JSONValue]
    /// Where the object is in its document.
    public let path: JSONPath

    /// Reads `value` as an object; any other type is an error at `path`.
    public init(_ value: JSONValue, at path: JSONPath) throws(ValidationError) {
        guard case .object(let members) = value else {
            throw ValidationError(at: path, "expected an object, got \(value.typeName)")
        }
        self.members = members
        self.path = path
    }

    /// Whether the member is present (with any value, `null` included).
    public func has(_ key: String) -> Bool { members[key] != nil }

    /// The member's value, or nil when absent.
    public func value(_ key: String) -> JSONValue? { members[key] }

    /// The member's value; an error when absent.
    public func required(_ key: String) throws(ValidationError) -> JSONValue {
        guard let value = members[key] else { throw ValidationError(at: path.appending(key), "is required") }
        return value
    }

    // MARK: Strings

    /// A required string member that satisfies `rule`.
    public func string(_ key: String, _ rule: StringRule = .any) throws(ValidationError) -> String {
        try rule.check(try required(key), at: path.appending(key))
    }

    /// An optional string member that satisfies `rule`.
    public func optionalString(_ key: String, _ rule: StringRule = .any) throws(ValidationError) -> String? {
        guard let value = members[key] else { return nil }
        return try rule.check(value, at: path.appending(key))
    }

    /// A required member whose string value names a case of `T`.
    public func enumeration<T: RawRepresentable & CaseIterable>(_ key: String, _ type: T.Type = T.self) throws(ValidationError) -> T
    where T.RawValue == String {
        try JSONObjectReader.enumeration(try required(key), at: path.appending(key))
    }

    /// An optional member whose string value names a case of `T`.
    public func optionalEnumeration<T: RawRepresentable & CaseIterable>(_ key: String, _ type: T.Type = T.self) throws(ValidationError) -> T?
    where T.RawValue == String {
        guard let value = members[key] else { return nil }
        return try JSONObjectReader.enumeration(value, at: path.appending(key))
    }

    /// Reads `value` as one of `T`'s raw values.
    public static func enumeration<T: RawRepresentable & CaseIterable>(_ value: JSONValue, at path: JSONPath) throws(ValidationError) -> T
    where T.RawValue == String {
        guard case .string(let string) = value else {
            throw ValidationError(at: path, "expected a string, got \(value.typeName)")
        }
        guard let parsed = T(rawValue: string) else {
            let allowed = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw ValidationError(at: path, "must be one of \(allowed)")
        }
        return parsed
    }

    // MARK: Booleans and numbers

    /// An optional boolean member.
    public func optionalBool(_ key: String) throws(ValidationError) -> Bool? {
        guard let value = members[key] else { return nil }
        guard case .bool(let bool) = value else {
            throw ValidationError(at: path.appending(key), "expected a boolean, got \(value.typeName)")
        }
        return bool
    }

    /// A required integer member within `range`.
    public func int(_ key: String, in range: ClosedRange<Int64>) throws(ValidationError) -> Int64 {
        try JSONObjectReader.integer(try required(key), in: range, at: path.appending(key))
    }

    /// An optional integer member within `range`.
    public func optionalInt(_ key: String, in range: ClosedRange<Int64>) throws(ValidationError) -> Int64? {
        guard let value = members[key] else { return nil }
        return try JSONObjectReader.integer(value, in: range, at: path.appending(key))
    }

    /// Reads `value` as an integer within `range`.
    public static func integer(_ value: JSONValue, in range: ClosedRange<Int64>, at path: JSONPath) throws(ValidationError) -> Int64 {
        guard case .number(let number) = value else {
            throw ValidationError(at: path, "expected an integer, got \(value.typeName)")
        }
        guard let integer = number.int64 else {
            throw ValidationError(at: path, "expected an integer, got \(number.text.prefix(32))")
        }
        guard range.contains(integer) else {
            throw ValidationError(at: path, JSONObjectReader.rangeMessage(range))
        }
        return integer
    }

    static func rangeMessage(_ range: ClosedRange<Int64>) -> String {
        if range.upperBound == .max { return "must be at least \(range.lowerBound)" }
        return "must be between \(range.lowerBound) and \(range.upperBound)"
    }

    /// A required number member within `range`.
    public func number(_ key: String, in range: ClosedRange<Double>) throws(ValidationError) -> Double {
        try JSONObjectReader.number(try required(key), in: range, at: path.appending(key))
    }

    /// An optional number member within `range`.
    public func optionalNumber(_ key: String, in range: ClosedRange<Double>) throws(ValidationError) -> Double? {
        guard let value = members[key] else { return nil }
        return try JSONObjectReader.number(value, in: range, at: path.appending(key))
    }

    /// Reads `value` as a number within `range`.
    public static func number(_ value: JSONValue, in range: ClosedRange<Double>, at path: JSONPath) throws(ValidationError) -> Double {
        guard case .number(let number) = value else {
            throw ValidationError(at: path, "expected a number, got \(value.typeName)")
        }
        guard range.contains(number.double) else {
            throw ValidationError(at: path, "must be between \(format(range.lowerBound)) and \(format(range.upperBound))")
        }
        return number.double
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    // MARK: Time

    /// A required RFC 3339 timestamp member.
    public func timestamp(_ key: String) throws(ValidationError) -> Timestamp {
        try JSONObjectReader.timestamp(try required(key), at: path.appending(key))
    }

    /// An optional RFC 3339 timestamp member.
    public func optionalTimestamp(_ key: String) throws(ValidationError) -> Timestamp? {
        guard let value = members[key] else { return nil }
        return try JSONObjectReader.timestamp(value, at: path.appending(key))
    }

    /// Reads `value` as an RFC 3339 timestamp.
    public static func timestamp(_ value: JSONValue, at path: JSONPath) throws(ValidationError) -> Timestamp {
        guard case .string(let text) = value else {
            throw ValidationError(at: path, "expected an RFC 3339 timestamp string, got \(value.typeName)")
        }
        guard let timestamp = Timestamp(rfc3339: text) else {
            throw ValidationError(at: path, "not an RFC 3339 timestamp (like 2026-12-02T17:34:19Z)")
        }
        return timestamp
    }

    // MARK: Containers

    /// A required object member.
    public func object(_ key: String) throws(ValidationError) -> JSONObjectReader {
        try JSONObjectReader(try required(key), at: path.appending(key))
    }

    /// An optional object member.
    public func optionalObject(_ key: String) throws(ValidationError) -> JSONObjectReader? {
        guard let value = members[key] else { return nil }
        return try JSONObjectReader(value, at: path.appending(key))
    }

    /// A required array member with a count in `count`; `noun` names the elements in errors.
    public func array(_ key: String, count: ClosedRange<Int>, noun: String) throws(ValidationError) -> [(value: JSONValue, path: JSONPath)] {
        try JSONObjectReader.array(try required(key), count: count, noun: noun, at: path.appending(key))
    }

    /// An optional array member with a count in `count`.
    public func optionalArray(_ key: String, count: ClosedRange<Int>, noun: String) throws(ValidationError) -> [(value: JSONValue, path: JSONPath)]? {
        guard let value = members[key] else { return nil }
        return try JSONObjectReader.array(value, count: count, noun: noun, at: path.appending(key))
    }

    /// Reads `value` as an array with a count in `count`. When there are too many elements the
    /// error names the first one over the limit (`content.buttons[3]: at most 3 buttons`).
    public static func array(_ value: JSONValue, count: ClosedRange<Int>, noun: String, at path: JSONPath) throws(ValidationError) -> [(value: JSONValue, path: JSONPath)] {
        guard case .array(let elements) = value else {
            throw ValidationError(at: path, "expected an array, got \(value.typeName)")
        }
        if elements.count > count.upperBound {
            throw ValidationError(at: path.appending(count.upperBound), "at most \(count.upperBound) \(noun)")
        }
        if elements.count < count.lowerBound {
            throw ValidationError(at: path, count.lowerBound == 1 ? "must not be empty" : "at least \(count.lowerBound) \(noun)")
        }
        return elements.enumerated().map { (value: $0.element, path: path.appending($0.offset)) }
    }
}

/// What a string member must look like.
public struct StringRule: Sendable {
    /// Fewest characters (Unicode scalars, as JSON Schema's `minLength` counts).
    public var minLength: Int
    /// Most characters (Unicode scalars).
    public var maxLength: Int?
    /// Most UTF-8 bytes (APNs limits some headers in bytes).
    public var maxBytes: Int?
    /// A check on the whole string, and the message when it fails.
    public var check: (@Sendable (String) -> Bool)?
    /// Says what the string must look like, when `check` fails.
    public var expectation: String

    /// Creates a rule.
    public init(minLength: Int = 0, maxLength: Int? = nil, maxBytes: Int? = nil, expectation: String = "", check: (@Sendable (String) -> Bool)? = nil) {
        self.minLength = minLength
        self.maxLength = maxLength
        self.maxBytes = maxBytes
        self.check = check
        self.expectation = expectation
    }

    /// Any string.
    public static let any = StringRule()
    /// Any non-empty string.
    public static let nonEmpty = StringRule(minLength: 1)

    /// A non-empty string of at most `maxLength` characters.
    public static func text(max maxLength: Int) -> StringRule {
        StringRule(minLength: 1, maxLength: maxLength)
    }

    /// A string of 1...`maxLength` characters, each accepted by `allowed`.
    public static func token(max maxLength: Int, _ description: String, allowed: @escaping @Sendable (UInt8) -> Bool) -> StringRule {
        StringRule(minLength: 1, maxLength: maxLength, expectation: description) { text in
            text.utf8.allSatisfy(allowed)
        }
    }

    /// Whether `text` satisfies this rule.
    public func accepts(_ text: String) -> Bool {
        (try? check(.string(text), at: .root)) != nil
    }

    /// Reads `value` as a string satisfying this rule.
    public func check(_ value: JSONValue, at path: JSONPath) throws(ValidationError) -> String {
        guard case .string(let string) = value else {
            throw ValidationError(at: path, "expected a string, got \(value.typeName)")
        }
        let length = string.unicodeScalars.count
        if length < minLength {
            throw ValidationError(at: path, minLength == 1 ? "must not be empty" : "must be at least \(minLength) characters")
        }
        if let maxLength, length > maxLength {
            throw ValidationError(at: path, "must be at most \(maxLength) characters")
        }
        if let maxBytes, string.utf8.count > maxBytes {
            throw ValidationError(at: path, "must be at most \(maxBytes) bytes of UTF-8")
        }
        if let check, !check(string) {
            throw ValidationError(at: path, "must be \(expectation)")
        }
        return string
    }
}
