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

    /// Why a message was parked, as a bounded vocabulary a dashboard can count by
    /// (`herald_dead_letters_total{cause}`); `reason` says it in words.
    public enum Cause: String, Sendable, CaseIterable {
        /// The message is not a valid Herald message (the validator's words are in `reason`).
        case invalid
        /// A job names an app that has no row in `apps`.
        case unknownApp = "unknown-app"
        /// A shard names a job that has no row in `jobs` (deleted, or never planned).
        case unknownJob = "unknown-job"
        /// PostgreSQL refused the message's own statement as wrong for its data (SQLSTATE
        /// classes 22, 23, 42, 54): the same statement would be refused every time.
        case databaseRefused = "database-refused"
        /// The message's own statement ran past `statement_timeout` (SQLSTATE 57014).
        case statementTimeout = "statement-timeout"
        /// Something the message makes Herald produce is larger than the producer accepts.
        case tooLarge = "too-large"
        /// A device event whose app owns neither the job nor the subscription it names.
        case foreignEvent = "foreign-event"
        /// A temporary failure that only this message suffered outlasted the retry budget
        /// (`HERALD_MESSAGE_RETRY_SECONDS`).
        case retriesExhausted = "retries-exhausted"
    }

    /// The job-level `rejected` receipt of a dead-lettered job: keyed by the job id, so whoever
    /// waits for the job's `completed` learns its end instead.
    public static func rejection(jobID: String, appID: String, cause: Cause, attempts: Int, at: Timestamp) -> Receipt {
        var receipt = Receipt(jobID: jobID, appID: appID, stage: .rejected, reason: cause.receiptReason, at: at)
        receipt.attempts = attempts
        return receipt
    }

    /// Why it was refused, e.g. `content.buttons[3]: at most 3 buttons`.
    public var reason: String
    /// Why it was refused, as a bounded vocabulary. Absent in letters of workers older than it.
    public var cause: Cause?
    /// How many times the message was tried; absent in older letters.
    public var attempts: Int?
    public var source: Source
    /// The message value exactly as received; only its first bytes when `originalTruncated`.
    public var original: [UInt8]
    /// Whether `original` is only the start of the message, which did not fit in a dead letter
    /// under the producer's size limit.
    public var originalTruncated: Bool
    /// The size in bytes of the whole original message, when it was truncated.
    public var originalSize: Int?
    /// The SHA-256 of the whole original message, lower-case hex, when it was truncated.
    public var originalSHA256: String?
    public var at: Timestamp

    /// Creates a dead letter holding the whole original.
    public init(reason: String, cause: Cause? = nil, attempts: Int? = nil, source: Source, original: [UInt8], at: Timestamp) {
        self.reason = reason
        self.cause = cause
        self.attempts = attempts
        self.source = source
        self.original = original
        self.originalTruncated = false
        self.originalSize = nil
        self.originalSHA256 = nil
        self.at = at
    }

    /// This letter, made to fit in `maxBytes` of JSON: itself when it fits; otherwise with as
    /// much of the original as fits, marked truncated, with the whole original's size and
    /// `sha256` (lower-case hex, computed by the caller, who has a digest). Nil when even an
    /// empty original does not fit (a limit under about a kilobyte).
    public func fitting(maxBytes: Int, sha256: ([UInt8]) -> String) -> DeadLetter? {
        if json.serializedBytes().count <= maxBytes { return self }
        var letter = self
        letter.original = []
        letter.originalTruncated = true
        letter.originalSize = original.count
        letter.originalSHA256 = sha256(original)
        let envelope = letter.json.serializedBytes().count
        guard envelope <= maxBytes else { return nil }
        // Base64 turns every 3 bytes into 4 characters.
        letter.original = Array(original.prefix((maxBytes - envelope) / 4 * 3))
        return letter
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
        cause = try root.optionalEnumeration("cause")
        attempts = try root.optionalInt("attempts", in: 1...Int64(Int32.max)).map { Int($0) }
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
        originalTruncated = try root.optionalBool("original_truncated") ?? false
        originalSize = try root.optionalInt("original_size", in: 0...Int64(Int32.max)).map { Int($0) }
        originalSHA256 = try root.optionalString("original_sha256", DeadLetter.sha256Rule)
        if originalTruncated {
            guard let originalSize, originalSHA256 != nil else {
                throw ValidationError(at: JSONPath.root.appending("original_truncated"), "a truncated original needs original_size and original_sha256")
            }
            guard original.count < originalSize else {
                throw ValidationError(at: JSONPath.root.appending("original_size"), "must be larger than the bytes kept (\(original.count))")
            }
        }
        at = try root.timestamp("at")
    }

    static let sha256Rule = StringRule(expectation: "64 lower-case hexadecimal digits") { text in
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
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
        var members: [String: JSONValue] = [
            "schema": .string(DeadLetter.schemaName),
            "reason": .string(reason),
            "source": .object([
                "topic": .string(source.topic),
                "partition": .int(source.partition),
                "offset": .int(source.offset),
            ]),
            "original_base64": .string(Data(original).base64EncodedString()),
            "at": .string(at.rfc3339),
        ]
        if let cause { members["cause"] = .string(cause.rawValue) }
        if let attempts { members["attempts"] = .int(attempts) }
        if originalTruncated {
            members["original_truncated"] = .bool(true)
            if let originalSize { members["original_size"] = .int(originalSize) }
            if let originalSHA256 { members["original_sha256"] = .string(originalSHA256) }
        }
        return .object(members)
    }
}

extension DeadLetter.Cause {
    /// The `reason` of a `rejected` receipt with this cause.
    public var receiptReason: Receipt.Reason {
        switch self {
        case .invalid, .foreignEvent: .invalid
        case .unknownApp: .unknownApp
        case .unknownJob: .invalid
        case .databaseRefused: .databaseRefused
        case .statementTimeout: .statementTimeout
        case .tooLarge: .tooLarge
        case .retriesExhausted: .retriesExhausted
        }
    }
}
