// The JSON parser: ``JSONValue/parse(_:limits:)`` and the recursive-descent `JSONParser` behind it.

extension JSONValue {
    /// Limits the parser enforces on any document.
    public struct ParseLimits: Sendable {
        /// The largest accepted document, in bytes.
        public var maxBytes: Int
        /// The deepest accepted nesting of arrays and objects.
        public var maxDepth: Int
        /// The longest accepted number literal, in characters.
        public var maxNumberLength: Int

        /// Creates limits.
        public init(maxBytes: Int = 4 << 20, maxDepth: Int = 64, maxNumberLength: Int = 64) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
            self.maxNumberLength = maxNumberLength
        }
    }

    /// Parses a JSON document (RFC 8259, strict: UTF-8, no trailing commas, no comments, unique keys).
    public static func parse(_ bytes: some Collection<UInt8>, limits: ParseLimits = ParseLimits()) throws(ValidationError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else {
            throw ValidationError(at: .root, "document is \(bytes.count) bytes, larger than the limit of \(limits.maxBytes) bytes")
        }
        let array = Array(bytes)
        guard String(validating: array, as: UTF8.self) != nil else {
            throw ValidationError(at: .root, "not valid UTF-8")
        }
        var parser = JSONParser(bytes: array, limits: limits)
        return try parser.parseDocument()
    }

    /// Parses a JSON document from a string.
    public static func parse(_ text: String, limits: ParseLimits = ParseLimits()) throws(ValidationError) -> JSONValue {
        try parse(Array(text.utf8), limits: limits)
    }
}

/// Recursive-descent parser over validated UTF-8 bytes, with a depth limit.
struct JSONParser {
    let bytes: [UInt8]
    let limits: JSONValue.ParseLimits
    var index = 0
    var depth = 0

    init(bytes: [UInt8], limits: JSONValue.ParseLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    mutating func parseDocument() throws(ValidationError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw syntax("unexpected data after the JSON value") }
        return value
    }

    private func syntax(_ message: String) -> ValidationError {
        if index >= bytes.count {
            return ValidationError(at: .root, "invalid JSON: unexpected end of input (\(message))")
        }
        return ValidationError(at: .root, "invalid JSON at byte \(index): \(message)")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(ValidationError) -> JSONValue {
        guard index < bytes.count else { throw syntax("expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw syntax("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(ValidationError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw syntax("expected \(literal)") }
        let matches = literal.withUTF8Buffer { buffer in
            for offset in 0..<count where bytes[index + offset] != buffer[offset] { return false }
            return true
        }
        guard matches else { throw syntax("expected \(literal)") }
        index += count
    }

    private mutating func enter() throws(ValidationError) {
        depth += 1
        guard depth <= limits.maxDepth else {
            throw ValidationError(at: .root, "invalid JSON: nested deeper than \(limits.maxDepth) levels")
        }
    }

    private mutating func parseObject() throws(ValidationError) -> JSONValue {
        try enter()
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw syntax("expected a member name") }
            let keyStart = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw syntax("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            if members.updateValue(value, forKey: key) != nil {
                // Two parsers that pick different copies of a key would disagree about the job.
                index = keyStart
                throw syntax("duplicate member name \"\(key.prefix(64))\"")
            }
            skipWhitespace()
            guard index < bytes.count else { throw syntax("expected ',' or '}'") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw syntax("expected ',' or '}'")
        }
        depth -= 1
        return .object(members)
    }

    private mutating func parseArray() throws(ValidationError) -> JSONValue {
        try enter()
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw syntax("expected ',' or ']'") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw syntax("expected ',' or ']'")
        }
        depth -= 1
        return .array(elements)
    }

    private mutating func parseString() throws(ValidationError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = String(decoding: bytes[start..<index], as: UTF8.self)
                index += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw syntax("control character in string") }
            index += 1
        }
        var scalars = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return String(decoding: scalars, as: UTF8.self)
            }
            if byte < 0x20 { throw syntax("control character in string") }
            if byte != UInt8(ascii: "\\") {
                scalars.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw syntax("unterminated escape") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append(0x22)
            case UInt8(ascii: "\\"): scalars.append(0x5C)
            case UInt8(ascii: "/"): scalars.append(0x2F)
            case UInt8(ascii: "b"): scalars.append(0x08)
            case UInt8(ascii: "f"): scalars.append(0x0C)
            case UInt8(ascii: "n"): scalars.append(0x0A)
            case UInt8(ascii: "r"): scalars.append(0x0D)
            case UInt8(ascii: "t"): scalars.append(0x09)
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw syntax("unpaired UTF-16 surrogate in \\u escape")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw syntax("unpaired UTF-16 surrogate in \\u escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw syntax("unpaired UTF-16 surrogate in \\u escape")
                }
                guard let scalar = Unicode.Scalar(code) else { throw syntax("invalid \\u escape") }
                scalars.append(contentsOf: String(Character(scalar)).utf8)
            default:
                throw syntax("invalid escape")
            }
        }
        throw syntax("unterminated string")
    }

    private mutating func parseHex4() throws(ValidationError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw syntax("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw syntax("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(ValidationError) -> JSONNumber {
        let start = index
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw syntax("expected a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw syntax("leading zero in number") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw syntax("expected a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw syntax("expected a digit in exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        guard index - start <= limits.maxNumberLength else {
            throw syntax("number longer than \(limits.maxNumberLength) characters")
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let double = Double(text), double.isFinite else {
            throw syntax("number out of range")
        }
        return JSONNumber(text: text, double: double)
    }
}
