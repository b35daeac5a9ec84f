/// The `apns-push-type` values Herald sends, with the topic and priority rules APNs enforces
/// (`shared/reference/protocols.md` §A2.1).
public enum APNsPushType: String, Sendable, CaseIterable {
    case alert
    case background
    case voip
    case liveActivity = "liveactivity"
    case location

    /// The `apns-topic` for an app's bundle id: the bundle id plus this type's suffix.
    public func topic(bundleID: String) -> String {
        switch self {
        case .alert, .background: bundleID
        case .voip: bundleID + ".voip"
        case .liveActivity: bundleID + ".push-type.liveactivity"
        case .location: bundleID + ".location-query"
        }
    }

    /// The largest payload APNs accepts for this type, in bytes.
    public var maxPayloadBytes: Int { self == .voip ? 5120 : 4096 }

    /// The `apns-priority` to send, given the priority asked for: background pushes are always 5
    /// ("using priority 10 is an error"), VoIP always 10, the others as asked.
    public func priority(requested: Int?) -> Int {
        switch self {
        case .background: 5
        case .voip: 10
        case .liveActivity, .alert, .location: requested == 5 ? 5 : 10
        }
    }
}

/// `apns-collapse-id` for a job: the job's own collapse id when it set one, else one derived from
/// the job id, so a duplicate delivery of the same job replaces itself on the device (docs/ARCHITECTURE.md).
public enum APNsCollapseID {
    /// APNs's limit for the header value, in bytes.
    public static let maxBytes = 64

    /// The collapse id to send for `jobID` (or the job's explicit `collapseID`).
    public static func forJob(_ jobID: String, collapseID: String? = nil) -> String {
        if let collapseID, !collapseID.isEmpty, collapseID.utf8.count <= maxBytes { return collapseID }
        // Job ids are at most 64 ASCII characters, but prefixing them could exceed the limit, so
        // the derived id is a fixed-length hash: "h:" plus 32 hex digits of FNV-1a 128.
        return "h:" + fnv1a128Hex(jobID)
    }

    static func fnv1a128Hex(_ text: String) -> String {
        // FNV-1a, 128-bit, done as two 64-bit lanes with different offsets: stable across
        // processes and platforms (unlike Hasher), which is what matters for deduplication.
        var high: UInt64 = 0x6c62_272e_07bb_0142
        var low: UInt64 = 0x62b8_2175_6295_c58d
        for byte in text.utf8 {
            high = (high ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            low = (low ^ UInt64(byte)) &* 0x0000_0000_0100_0193 &+ high
        }
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex(high) + hex(low)
    }
}
