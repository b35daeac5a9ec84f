/// What a device reports about a notification (`herald.device-event.v1`), relayed by the
/// upstream API from the SDK: it arrived (`received`), was shown (`confirmed`), was tapped (`clicked`).
public struct DeviceEvent: Sendable, Equatable {
    /// The `schema` value this type reads and writes.
    public static let schemaName = "herald.device-event.v1"

    /// Device event types.
    public enum EventType: String, Sendable, CaseIterable {
        case received, confirmed, clicked
    }

    public var type: EventType
    public var jobID: String
    public var appID: String
    public var subscriptionID: String
    /// The tapped button's id (clicked only; nil for a tap on the notification itself).
    public var actionID: String?
    public var at: Timestamp

    /// Creates an event.
    public init(type: EventType, jobID: String, appID: String, subscriptionID: String, actionID: String? = nil, at: Timestamp) {
        self.type = type
        self.jobID = jobID
        self.appID = appID
        self.subscriptionID = subscriptionID
        self.actionID = actionID
        self.at = at
    }

    /// The button a click names. `action_id` is accepted on any type but means something only
    /// on `clicked`: a `received` or `confirmed` carrying one is the same report as one without.
    public var buttonID: String? { type == .clicked ? actionID : nil }

    /// What makes two events the same event (they are deduplicated on it).
    public var dedupeKey: String { "\(type.rawValue):\(jobID):\(subscriptionID):\(buttonID ?? "")" }

    /// Decodes and validates a device event: JSON, or JSON framed by Confluent's serializers
    /// (``ConfluentWireFormat``).
    public static func decode(_ bytes: some Collection<UInt8>) throws(ValidationError) -> DeviceEvent {
        try DeviceEvent(json: try JSONValue.parse(ConfluentWireFormat.unwrap(bytes).json, limits: .init(maxBytes: 64 * 1024)))
    }

    /// Validates a parsed device event.
    public init(json: JSONValue) throws(ValidationError) {
        let root = try JSONObjectReader(json, at: .root)
        try MessageSchema.check(root, expected: DeviceEvent.schemaName)
        try json.refuseNUL()
        type = try root.enumeration("type")
        jobID = try root.string("job_id", Identifiers.jobID)
        appID = try root.string("app_id", Identifiers.appID)
        subscriptionID = try root.string("subscription_id", Identifiers.subscriptionID).lowercased()
        actionID = try root.optionalString("action_id", Identifiers.actionID)
        at = try root.timestamp("at")
    }

    /// The message document.
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "schema": .string(DeviceEvent.schemaName),
            "type": .string(type.rawValue),
            "job_id": .string(jobID),
            "app_id": .string(appID),
            "subscription_id": .string(subscriptionID),
            "at": .string(at.rfc3339),
        ]
        if let actionID { members["action_id"] = .string(actionID) }
        return .object(members)
    }
}
