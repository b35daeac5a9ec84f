/// The platforms Herald delivers to.
public enum Platform: String, Sendable, CaseIterable, Hashable {
    case ios
    case android
}

/// A job's audience filter: a tree of predicates over subscriptions (schemas/).
///
/// Filter nodes are strict where the rest of a job is lenient: a node with a key Herald does not
/// know is refused rather than ignored, because ignoring a predicate a newer producer meant
/// (`"country": "DE"`, say) would silently widen the audience to people it was not meant for.
public indirect enum AudienceFilter: Sendable, Equatable {
    case and([AudienceFilter])
    case or([AudienceFilter])
    case not(AudienceFilter)
    /// A comparison on a tag's value. A tag whose value is `""` counts as deleted (SDKs such as
    /// OpenPush delete a tag by setting it to `""`): it compares like a missing tag.
    case tag(key: String, op: TagComparison, value: String)
    /// Whether a tag is set (`exists: true`) or not; a tag set to `""` is not.
    case tagExists(key: String, exists: Bool)
    /// Subscriptions whose language is one of these or a more specific form of one (`en`
    /// matches `en` and `en-gb`; `en-GB` matches `en-gb` and `en-gb-…` but not `en`).
    case language([String])
    case platform([Platform])
    case externalID([String])
    /// Within `radiusMeters` of a point (great-circle distance).
    case near(latitude: Double, longitude: Double, radiusMeters: Double)
    /// Last session after and/or before the given instants.
    case lastSession(after: Timestamp?, before: Timestamp?)
    case sessionCount(op: CountComparison, value: Int64)

    /// Comparisons on a tag value. `eq`/`ne` compare string tags (a list tag never equals a
    /// string); `contains` is for list tags; `gt`/`gte`/`lt`/`lte` compare numerically when both
    /// sides are numbers, else byte-wise.
    public enum TagComparison: String, Sendable, CaseIterable {
        case eq, ne, contains, gt, gte, lt, lte

        /// Whether this is an ordering (`gt`, `gte`, `lt`, `lte`): a numeric test and a cast per
        /// device, which no index serves.
        public var isOrdering: Bool {
            switch self {
            case .gt, .gte, .lt, .lte: true
            case .eq, .ne, .contains: false
            }
        }
    }

    /// Comparisons on a count.
    public enum CountComparison: String, Sendable, CaseIterable {
        case eq, gt, gte, lt, lte
    }

    /// The deepest nesting accepted (a lone predicate is depth 1).
    public static let maxDepth = 16
    /// The most children of one `and`/`or`.
    public static let maxChildren = 100
    /// The most values in a `language`, `platform` or `external_id` list.
    public static let maxListValues = 10_000
    /// The longest accepted tag value.
    public static let maxTagValueLength = 1024
    /// The most nodes in one filter tree (every `and`, `or`, `not` and predicate counts one).
    public static let maxNodes = 256
    /// The most costly predicates in one filter tree: `near` (a great-circle distance per
    /// device) and tag orderings `gt`/`gte`/`lt`/`lte` (a numeric test and cast per device).
    public static let maxCostlyPredicates = 32

    /// Every `op` a tag node accepts, in the order error messages list them.
    static let tagOps = TagComparison.allCases.map(\.rawValue) + ["exists", "not_exists"]

    static let nodeKeys = ["and", "or", "not", "tag", "language", "platform", "external_id", "near", "last_session", "session_count"]

    /// Reads a filter tree.
    public init(json: JSONValue, at path: JSONPath) throws(ValidationError) {
        self = try AudienceFilter.parse(json, at: path, depth: 1)
        let (nodes, costly) = cost
        if nodes > AudienceFilter.maxNodes {
            throw ValidationError(at: path, "filter has \(nodes) nodes, more than the limit of \(AudienceFilter.maxNodes)")
        }
        if costly > AudienceFilter.maxCostlyPredicates {
            throw ValidationError(at: path, "filter has \(costly) near, gt, gte, lt and lte predicates, more than the limit of \(AudienceFilter.maxCostlyPredicates)")
        }
    }

    /// How many nodes the tree has, and how many of them are costly predicates.
    public var cost: (nodes: Int, costly: Int) {
        switch self {
        case .and(let children), .or(let children):
            children.reduce((1, 0)) { total, child in
                let cost = child.cost
                return (total.0 + cost.nodes, total.1 + cost.costly)
            }
        case .not(let child):
            (1 + child.cost.nodes, child.cost.costly)
        case .near:
            (1, 1)
        case .tag(_, let op, _):
            (1, op.isOrdering ? 1 : 0)
        default:
            (1, 0)
        }
    }

    private static func parse(_ json: JSONValue, at path: JSONPath, depth: Int) throws(ValidationError) -> AudienceFilter {
        guard depth <= maxDepth else {
            throw ValidationError(at: path, "filter nested deeper than \(maxDepth) levels")
        }
        let node = try JSONObjectReader(json, at: path)
        let present = nodeKeys.filter { node.has($0) }
        guard present.count == 1, let kind = present.first else {
            if present.isEmpty, let unknown = node.members.keys.sorted().first {
                throw ValidationError(at: path.appending(unknown), "unknown filter predicate (expected one of \(nodeKeys.joined(separator: ", ")))")
            }
            throw ValidationError(at: path, "a filter node needs exactly one of \(nodeKeys.joined(separator: ", "))")
        }
        let allowed: Set<String> = kind == "tag" ? ["tag", "op", "value"] : [kind]
        if let extra = node.members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ValidationError(at: path.appending(extra), "unexpected member in a \"\(kind)\" filter node")
        }
        switch kind {
        case "and", "or":
            let children = try node.array(kind, count: 1...maxChildren, noun: "filters")
            var parsed: [AudienceFilter] = []
            parsed.reserveCapacity(children.count)
            for child in children {
                parsed.append(try parse(child.value, at: child.path, depth: depth + 1))
            }
            return kind == "and" ? .and(parsed) : .or(parsed)
        case "not":
            return .not(try parse(try node.required("not"), at: path.appending("not"), depth: depth + 1))
        case "tag":
            let key = try node.string("tag", Identifiers.tagKey)
            let opPath = path.appending("op")
            guard case .string(let op) = try node.required("op") else {
                throw ValidationError(at: opPath, "expected a string, got \(node.members["op"]?.typeName ?? "nothing")")
            }
            if op == "exists" || op == "not_exists" {
                if node.has("value") {
                    throw ValidationError(at: path.appending("value"), "must be absent for op \"\(op)\"")
                }
                return .tagExists(key: key, exists: op == "exists")
            }
            guard let comparison = TagComparison(rawValue: op) else {
                throw ValidationError(at: opPath, "must be one of " + tagOps.map { "\"\($0)\"" }.joined(separator: ", "))
            }
            let value = try node.string("value", StringRule(maxLength: maxTagValueLength))
            return .tag(key: key, op: comparison, value: value)
        case "language":
            let values = try node.array("language", count: 1...maxListValues, noun: "languages")
            var languages: [String] = []
            for item in values { languages.append(try Identifiers.language.check(item.value, at: item.path)) }
            return .language(languages)
        case "platform":
            let values = try node.array("platform", count: 1...2, noun: "platforms")
            var platforms: [Platform] = []
            for item in values { platforms.append(try JSONObjectReader.enumeration(item.value, at: item.path)) }
            return .platform(platforms)
        case "external_id":
            let values = try node.array("external_id", count: 1...maxListValues, noun: "external ids")
            var ids: [String] = []
            for item in values { ids.append(try Identifiers.externalID.check(item.value, at: item.path)) }
            return .externalID(ids)
        case "near":
            let near = try node.object("near")
            let latitude = try near.number("lat", in: -90...90)
            let longitude = try near.number("long", in: -180...180)
            let radius = try near.number("radius_m", in: 0...20_100_000)
            guard radius > 0 else { throw ValidationError(at: near.path.appending("radius_m"), "must be greater than 0") }
            return .near(latitude: latitude, longitude: longitude, radiusMeters: radius)
        case "last_session":
            let session = try node.object("last_session")
            let after = try session.optionalTimestamp("after")
            let before = try session.optionalTimestamp("before")
            guard after != nil || before != nil else {
                throw ValidationError(at: session.path, "needs after, before, or both")
            }
            return .lastSession(after: after, before: before)
        default:  // "session_count"
            let count = try node.object("session_count")
            let op: CountComparison = try count.enumeration("op")
            let value = try count.int("value", in: 0...Int64(Int32.max))
            return .sessionCount(op: op, value: value)
        }
    }

    /// The nesting depth of this tree (a lone predicate is 1).
    public var depth: Int {
        switch self {
        case .and(let children), .or(let children): 1 + (children.map(\.depth).max() ?? 0)
        case .not(let child): 1 + child.depth
        default: 1
        }
    }
}
