public import HeraldCore

/// Builds the parameter list of one statement: each value becomes `$n` in the SQL text.
struct SQLParameters {
    private(set) var values: [String?] = []

    init(_ values: [String?] = []) {
        self.values = values
    }

    /// Appends a value and returns its placeholder (`$3`).
    mutating func bind(_ value: String?) -> String {
        values.append(value)
        return "$\(values.count)"
    }
}

/// Text encodings of values libpq sends and receives.
public enum SQLValue {
    /// A PostgreSQL array literal (`{"a","b",NULL}`) for a `$n::text[]` (or `uuid[]`) parameter.
    /// Every element is quoted and escaped, so no element can change the array's shape.
    public static func array(_ values: some Sequence<String?>) -> String {
        var text = "{"
        var first = true
        for value in values {
            if !first { text += "," }
            first = false
            guard let value else {
                text += "NULL"
                continue
            }
            text += "\""
            for character in value.unicodeScalars {
                if character == "\\" || character == "\"" { text += "\\" }
                text.unicodeScalars.append(character)
            }
            text += "\""
        }
        return text + "}"
    }

    /// An array literal of non-optional strings.
    public static func array(_ values: [String]) -> String {
        array(values.lazy.map { Optional($0) })
    }

    /// A timestamp parameter (`$n::timestamptz`), microsecond precision (PostgreSQL's).
    public static func timestamp(_ value: Timestamp) -> String {
        var truncated = value
        truncated.nanoseconds = value.nanoseconds / 1000 * 1000
        return truncated.rfc3339
    }

    /// Reads a `timestamptz` as PostgreSQL prints it in UTC with ISO dates
    /// (`2026-12-02 18:00:14.123456+00`).
    public static func timestamp(_ text: String) -> Timestamp? {
        var text = text
        if let sign = text.lastIndex(where: { $0 == "+" || $0 == "-" }), text.distance(from: sign, to: text.endIndex) == 3 {
            text += ":00"
        }
        return Timestamp(rfc3339: text)
    }

    /// A JSON string literal (for `$n::jsonb` parameters built in Swift).
    public static func jsonString(_ value: String) -> String {
        var out: [UInt8] = []
        JSONValue.writeString(value, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` is a UUID in 8-4-4-4-12 form; such values are lower-cased before use.
    public static func isUUID(_ text: String) -> Bool { Identifiers.isUUID(text) }
}
