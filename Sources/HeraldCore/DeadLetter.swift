import Foundation

/// A message Herald could not process, parked on `herald.dlq` with its original bytes and the
/// reason, so nothing is lost and nothing crashes (`herald.dead-letter.v1`).
public struct DeadLetter: Sendable, Equatable {
    /// The `schema` value this type reads and writes.
    public static let schemaName = "herald.dead-letter.v1"

    /// Where the message came from.
    public struct Source: Sendable, Equatable {
        public var topic: String
        public var partition: Int32
        public var offset: Int64

        /// Creates a source position.
        public init(topic: String, partition: Int32, offset: Int64) {
            self.topic = topic
            self.partition = partition
            self.offset = offset
        }
    }

    /// Why it was refused, e.g. `content.buttons[3]: at most 3 buttons`.
    public var reason: String
    public var source: Source
    /// The message value exactly as received.
    public var original: [UInt8]
    public var at: Timestamp

    /// Creates a dead letter.
    public init(reason: String, source: Source, original: [UInt8], at: Timestamp) {
        self.reason = reason
        self.source = source
        self.original = original
        self.at = at
    }

    /// Decodes and validates a dead letter.
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> DeadLetter {
        try DeadLetter(json: try JSONValue.parse(bytes, limits: .init(maxBytes: 1 << 20)))
    }

    /// Validates a parsed dead letter.
    public init(json: JSONValue) throws(ValidationError) {
        let root = try JSONObjectReader(json, at: .root)
        try MessageSchema.check(root, expected: DeadLetter.schemaName)
        reason = try root.string("reason", .nonEmpty)
        let source = try root.object("source")
        self.source = Source(
            topic: try source.string("topic", .text(max: 249)),
            partition: Int32(try source.int("partition", in: 0...Int64(Int32.max))),
            offset: try source.int("offset", in: 0...Int64.max)
        )
        let encoded = try root.string("original_base64")
        // Foundation accepts some malformed padding ("QQ=A"); check the canonical shape first.
        guard DeadLetter.isCanonicalBase64(encoded), let data = Data(base64Encoded: encoded) else {
            throw ValidationError(at: JSONPath.root.appending("original_base64"), "must be base64")
        }
        original = Array(data)
        at = try root.timestamp("at")
    }

    /// Whether `text` is padded standard base64 (`A–Z a–z 0–9 + /`, `=` only to pad the last group).
    static func isCanonicalBase64(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 == 0 else { return false }
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        return bytes.dropLast(padding).allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
    }

    /// The message document.
    public var json: JSONValue {
        .object([
            "schema": .string(DeadLetter.schemaName),
            "reason": .string(reason),
            "source": .object([
                "topic": .string(source.topic),
                "partition": .int(source.partition),
                "offset": .int(source.offset),
            ]),
            "original_base64": .string(Data(original).base64EncodedString()),
            "at": .string(at.rfc3339),
        ])
    }
}
