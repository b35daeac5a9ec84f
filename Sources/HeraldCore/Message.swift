/// Any of Herald's versioned messages, recognised by its `schema` member.
public enum Message: Sendable {
    case job(Job)
    case shard(Shard)
    case receipt(Receipt)
    case deviceEvent(DeviceEvent)
    case metrics(MetricsReport)
    case deadLetter(DeadLetter)

    /// Every `schema` value Herald reads.
    public static let schemaNames = [Job.schemaName, Shard.schemaName, Receipt.schemaName, DeviceEvent.schemaName, MetricsReport.schemaName, DeadLetter.schemaName]

    /// Decodes a message of whichever kind its `schema` member names.
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> Message {
        let bytes = ConfluentWireFormat.unwrap(bytes).json
        if bytes.count > Job.maxBytes {
            throw ValidationError(at: .root, "message is \(bytes.count) bytes, larger than the limit of \(Job.maxBytes) bytes")
        }
        let json = try JSONValue.parse(bytes, limits: .init(maxBytes: Job.maxBytes))
        let root = try JSONObjectReader(json, at: .root)
        let schema = try root.string("schema")
        switch schema {
        case Job.schemaName: return .job(try Job(json: json))
        case Shard.schemaName: return .shard(try Shard(json: json))
        case Receipt.schemaName: return .receipt(try Receipt(json: json))
        case DeviceEvent.schemaName: return .deviceEvent(try DeviceEvent(json: json))
        case MetricsReport.schemaName: return .metrics(try MetricsReport(json: json))
        case DeadLetter.schemaName: return .deadLetter(try DeadLetter(json: json))
        default:
            throw ValidationError(at: JSONPath.root.appending("schema"), "unsupported schema \"\(schema.prefix(64))\" (known: \(schemaNames.joined(separator: ", ")))")
        }
    }
}
