/// A parsed JSON document.
///
/// Herald parses every message from outside (jobs, device events, provider answers) with its own
/// parser rather than `JSONDecoder`, so that malformed input of any shape — truncated text,
/// invalid UTF-8, a hundred thousand nested brackets, numbers with a thousand digits — ends in
/// a ``ValidationError`` naming the place, never in a crash or a stack overflow.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The JSON type name, as used in error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// Convenience: a number value from an integer.
    public static func int<T: BinaryInteger>(_ value: T) -> JSONValue { .number(JSONNumber(Int64(value))) }
    /// Convenience: a number value from a double. Non-finite values become `null`.
    public static func double(_ value: Double) -> JSONValue {
        value.isFinite ? .number(JSONNumber(value)) : .null
    }

    /// The object's members, or nil when this is not an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
    /// The string, or nil when this is not a string.
    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }
    /// The elements, or nil when this is not an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
    /// Member lookup; nil when this is not an object or the key is absent.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
}

/// A JSON number, kept as written so integers survive exactly (a `sequence` near 2^53, say).
public struct JSONNumber: Sendable, Equatable, CustomStringConvertible {
    /// The number's text, as written in the document (or as Herald would write it).
    public let text: String
    /// The value as a double (finite: the parser rejects numbers that overflow a double).
    public let double: Double

    /// Creates a number from an integer.
    public init(_ value: Int64) {
        self.text = String(value)
        self.double = Double(value)
    }

    /// Creates a number from a finite double.
    public init(_ value: Double) {
        if value == value.rounded(.towardZero), abs(value) < 1e15 {
            self.text = String(Int64(value))
        } else {
            self.text = "\(value)"
        }
        self.double = value
    }

    init(text: String, double: Double) {
        self.text = text
        self.double = double
    }

    /// The value as an exact integer: nil when it has a fraction or is out of `Int64`'s range.
    /// `1e3` and `1000.0` count as the integer 1000, as JSON Schema's `integer` type does.
    public var int64: Int64? {
        if let exact = Int64(text) { return exact }
        guard double == double.rounded(.towardZero), abs(double) <= 9_007_199_254_740_992 else { return nil }
        return Int64(double)
    }

    public var description: String { text }
}

extension JSONValue {
    /// Refuses U+0000 anywhere in the document, in a string or in a member name, naming where.
    /// JSON allows `\u0000`, but PostgreSQL's `jsonb` and `text` do not, and a C string ends at
    /// it; outside input (jobs, device events) is checked with this before anything stores it.
    public func refuseNUL(at path: JSONPath = .root) throws(ValidationError) {
        switch self {
        case .string(let text):
            if text.utf8.contains(0) { throw ValidationError(at: path, "contains U+0000 (a NUL character), which Herald does not accept") }
        case .array(let elements):
            for (index, element) in elements.enumerated() { try element.refuseNUL(at: path.appending(index)) }
        case .object(let members):
            for (key, value) in members {
                if key.utf8.contains(0) {
                    let shown = key.replacingOccurrences(of: "\u{0}", with: "\\u0000")
                    throw ValidationError(at: path.appending(shown), "member name contains U+0000 (a NUL character), which Herald does not accept")
                }
                try value.refuseNUL(at: path.appending(key))
            }
        case .null, .bool, .number:
            break
        }
    }
}
