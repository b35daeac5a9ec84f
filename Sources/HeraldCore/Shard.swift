/// One slice of a job's audience (`herald.shard.v1`): subscriptions with ids in `[idFrom, idTo)`.
/// The job itself is re-read from the `jobs` table by whichever worker claims the shard.
public struct Shard: Sendable, Equatable {
    /// The `schema` value this type reads and writes.
    public static let schemaName = "herald.shard.v1"
    /// The lowest subscription id, the natural start of the first shard.
    public static let minimumID = "00000000-0000-0000-0000-000000000000"

    public var jobID: String
    public var appID: String
    public var shardNo: Int
    public var shardCount: Int
    /// First subscription id in the shard (inclusive).
    public var idFrom: String
    /// End of the shard (exclusive); nil for no upper bound (the last shard).
    public var idTo: String?
    public var createdAt: Timestamp

    /// Creates a shard description.
    public init(jobID: String, appID: String, shardNo: Int, shardCount: Int, idFrom: String, idTo: String?, createdAt: Timestamp) {
        self.jobID = jobID
        self.appID = appID
        self.shardNo = shardNo
        self.shardCount = shardCount
        self.idFrom = idFrom
        self.idTo = idTo
        self.createdAt = createdAt
    }

    /// The Kafka message key: spreads one campaign's shards over every partition.
    public var messageKey: String { "\(jobID)/\(shardNo)" }

    /// Decodes and validates a shard message.
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> Shard {
        try Shard(json: try JSONValue.parse(bytes, limits: .init(maxBytes: 64 * 1024)))
    }

    /// Validates a parsed shard message.
    public init(json: JSONValue) throws(ValidationError) {
        let root = try JSONObjectReader(json, at: .root)
        try MessageSchema.check(root, expected: Shard.schemaName)
        jobID = try root.string("job_id", Identifiers.jobID)
        appID = try root.string("app_id", Identifiers.appID)
        shardCount = Int(try root.int("shard_count", in: 1...1_000_000))
        shardNo = Int(try root.int("shard_no", in: 0...999_999))
        guard shardNo < shardCount else {
            throw ValidationError(at: JSONPath.root.appending("shard_no"), "must be less than shard_count")
        }
        idFrom = try root.string("id_from", Identifiers.subscriptionID).lowercased()
        if let value = root.value("id_to"), value != .null {
            let idTo = try Identifiers.subscriptionID.check(value, at: JSONPath.root.appending("id_to")).lowercased()
            guard idTo > idFrom else {
                throw ValidationError(at: JSONPath.root.appending("id_to"), "must be greater than id_from")
            }
            self.idTo = idTo
        } else {
            idTo = nil
        }
        createdAt = try root.timestamp("created_at")
    }

    /// The message document.
    public var json: JSONValue {
        .object([
            "schema": .string(Shard.schemaName),
            "job_id": .string(jobID),
            "app_id": .string(appID),
            "shard_no": .int(shardNo),
            "shard_count": .int(shardCount),
            "id_from": .string(idFrom),
            "id_to": idTo.map(JSONValue.string) ?? .null,
            "created_at": .string(createdAt.rfc3339),
        ])
    }
}
