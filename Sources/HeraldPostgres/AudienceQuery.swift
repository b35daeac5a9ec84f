public import HeraldCore
import Foundation

/// A job's audience compiled to one parameterised SQL condition on `subscriptions`.
///
/// Every value (tag keys included) travels as a `$n` parameter; the SQL text holds only
/// Herald's own constants. The condition always starts with
/// `app_id = $1 AND opted_in AND invalidated_at IS NULL`, spelled exactly like the partial
/// audience indexes (schemas/sql/README.md), so opted-out and invalidated rows never appear and
/// the planner can use those indexes.
///
/// Every leaf is written to be true or false, never NULL (a missing tag, language or location
/// is "false"), so `not` means what people expect: `not {"language": ["fr"]}` includes devices
/// without a language. Semantics, which the brute-force test evaluator mirrors:
/// - A tag whose value is `""` is deleted (SDKs delete a tag by writing `""` and keep sending
///   it): every tag predicate treats it exactly like a missing key.
/// - tag `eq`: the tag is a string equal to the value (`tags @> {"k":"v"}`, GIN-indexed). A
///   list tag never equals a string, even a one-item list: `contains` is the list test, so
///   `eq` means one thing whatever the producer stored. `eq ""` matches nothing (use
///   `not_exists`).
///   `ne`: not `eq` — devices without the tag, with a deleted tag, or with a list tag match.
///   `contains`: the tag is a list holding the value (`tags @> {"k":["v"]}`, GIN-indexed).
///   `gt`/`gte`/`lt`/`lte`: the tag is a non-empty string; both numbers → numeric
///   comparison, else byte-wise text comparison (`COLLATE "C"`).
///   `exists`/`not_exists`: the key is present with a value other than `""`, or not.
/// - `language`: RFC 4647 basic filtering, case-insensitive (stored languages are lower-case
///   by constraint): `en` matches `en`, `en-gb` and `en-us`; `en-GB` matches `en-gb` and
///   `en-gb-…`, not `en`.
/// - `near`: great-circle (haversine, R = 6,371,008.8 m) distance ≤ radius, after a
///   bounding-box prefilter on lat/long.
/// - `last_session`: strictly after / strictly before; devices with no session never match.
public struct AudienceQuery: Sendable {
    /// Mean Earth radius (IUGG), metres.
    public static let earthRadiusMeters = 6_371_008.8
    /// Decimal numbers that `gt`/`lt` compare numerically (the same rule in SQL and in Swift).
    public static let numberPattern = "^-?[0-9]{1,30}(\\.[0-9]{1,30})?$"

    /// The app whose subscriptions are selected.
    public let appID: String
    /// The audience compiled.
    public let audience: Audience
    /// The condition, with placeholders `$1…$n`.
    public let condition: String
    /// The values of `$1…$n`, in text format.
    public let parameters: [String?]

    /// Compiles `audience` for `appID`.
    public init(appID: String, audience: Audience) {
        var parameters = SQLParameters()
        var condition = "app_id = \(parameters.bind(appID)) AND opted_in AND invalidated_at IS NULL"
        switch audience {
        case .all:
            break
        case .subscriptionIDs(let ids):
            // Anything that is not a UUID cannot name a subscription; dropping it keeps the
            // ::uuid[] cast from failing on hostile input.
            let valid = ids.filter(SQLValue.isUUID).map { $0.lowercased() }
            condition += " AND id = ANY(\(parameters.bind(SQLValue.array(valid)))::uuid[])"
        case .externalIDs(let ids):
            condition += " AND external_id = ANY(\(parameters.bind(SQLValue.array(ids)))::text[])"
        case .filter(let filter):
            condition += " AND " + AudienceQuery.compile(filter, &parameters)
        }
        self.appID = appID
        self.audience = audience
        self.condition = condition
        self.parameters = parameters.values
    }

    /// Whether `value` is a number for `gt`/`lt`.
    public static func isNumber(_ value: String) -> Bool {
        value.range(of: numberPattern, options: .regularExpression) != nil
    }

    /// `text` matched literally by LIKE (whose escape character is `\` by default). Validated
    /// languages hold neither `%` nor `_`; this keeps an unvalidated one from becoming a pattern.
    static func likeEscaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "\\" || character == "%" || character == "_" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }

    static func compile(_ filter: AudienceFilter, _ p: inout SQLParameters) -> String {
        switch filter {
        case .and(let children):
            return "(" + children.map { compile($0, &p) }.joined(separator: " AND ") + ")"
        case .or(let children):
            return "(" + children.map { compile($0, &p) }.joined(separator: " OR ") + ")"
        case .not(let child):
            return "(NOT " + compile(child, &p) + ")"
        case .tag(let key, let op, let value):
            switch op {
            case .eq, .ne:
                // A tag holding "" is deleted, and a deleted tag equals nothing. The test is on the
                // parameter, not in Swift, so the SQL text never depends on a value.
                let v = p.bind(value)
                let equal = "(tags @> jsonb_build_object(\(p.bind(key))::text, \(v)::text) AND \(v)::text <> '')"
                return op == .eq ? equal : "(NOT \(equal))"
            case .contains:
                return "tags @> jsonb_build_object(\(p.bind(key))::text, jsonb_build_array(\(p.bind(value))::text))"
            case .gt, .gte, .lt, .lte:
                let symbol = switch op {
                case .gt: ">"
                case .gte: ">="
                case .lt: "<"
                default: "<="
                }
                let k = p.bind(key)
                let v = p.bind(value)
                // COALESCE: a missing tag gives NULL, which must read as false (see `not`). A
                // deleted ("") tag is false too, though "" sorts before every other string.
                let isSetString = "jsonb_typeof(tags -> \(k)::text) = 'string' AND (tags ->> \(k)::text) <> ''"
                if isNumber(value) {
                    return "COALESCE(\(isSetString) AND CASE WHEN (tags ->> \(k)::text) ~ '\(numberPattern)' THEN (tags ->> \(k)::text)::numeric \(symbol) \(v)::numeric ELSE (tags ->> \(k)::text) COLLATE \"C\" \(symbol) \(v)::text END, false)"
                }
                return "COALESCE(\(isSetString) AND (tags ->> \(k)::text) COLLATE \"C\" \(symbol) \(v)::text, false)"
            }
        case .tagExists(let key, let exists):
            // `tags ? k` is false for a missing key, so the -> comparison is never NULL here.
            let k = p.bind(key)
            let isSet = "(tags ? \(k)::text AND tags -> \(k)::text <> '\"\"'::jsonb)"
            return exists ? isSet : "(NOT \(isSet))"
        case .language(let languages):
            // Equal, or longer at a subtag boundary. LIKE, not a range, is right under any
            // collation. One language: both arms use subscriptions_language_idx (text_pattern_ops,
            // 0013). Several: LIKE ANY is no index condition, so the test runs on the covering
            // subscribable index, which includes language.
            let lowered = Array(Set(languages.map { $0.lowercased() })).sorted()
            let prefixes = lowered.map { likeEscaped($0) + "-%" }
            if lowered.count == 1 {
                return "(language IS NOT NULL AND (language = \(p.bind(lowered[0]))::text OR language LIKE \(p.bind(prefixes[0]))::text))"
            }
            return "(language IS NOT NULL AND (language = ANY(\(p.bind(SQLValue.array(lowered)))::text[])"
                + " OR language LIKE ANY(\(p.bind(SQLValue.array(prefixes)))::text[])))"
        case .platform(let platforms):
            let names = Array(Set(platforms.map(\.rawValue))).sorted()
            if names.count == 1 { return "platform = \(p.bind(names[0]))::text" }
            return "platform = ANY(\(p.bind(SQLValue.array(names)))::text[])"
        case .externalID(let ids):
            return "(external_id IS NOT NULL AND external_id = ANY(\(p.bind(SQLValue.array(ids)))::text[]))"
        case .near(let latitude, let longitude, let radius):
            return compileNear(latitude: latitude, longitude: longitude, radius: radius, &p)
        case .lastSession(let after, let before):
            var parts = ["last_session_at IS NOT NULL"]
            if let after { parts.append("last_session_at > \(p.bind(SQLValue.timestamp(after)))::timestamptz") }
            if let before { parts.append("last_session_at < \(p.bind(SQLValue.timestamp(before)))::timestamptz") }
            return "(" + parts.joined(separator: " AND ") + ")"
        case .sessionCount(let op, let value):
            let symbol: String
            switch op {
            case .eq: symbol = "="
            case .gt: symbol = ">"
            case .gte: symbol = ">="
            case .lt: symbol = "<"
            case .lte: symbol = "<="
            }
            return "session_count \(symbol) \(p.bind(String(value)))::integer"
        }
    }

    /// The latitude/longitude box that holds every point within `radius` metres of the centre,
    /// slightly widened so floating-point rounding never excludes a point the exact test keeps.
    public static func boundingBox(latitude: Double, longitude: Double, radius: Double)
        -> (latitude: ClosedRange<Double>, longitude: [ClosedRange<Double>]?) {
        let angular = radius / earthRadiusMeters
        let degrees = angular * 180 / .pi
        let margin = 1e-6
        let minimumLatitude = latitude - degrees - margin
        let maximumLatitude = latitude + degrees + margin
        let latitudes = max(-90, minimumLatitude)...min(90, maximumLatitude)
        // The circle reaches a pole: every longitude is possible.
        if minimumLatitude <= -90 || maximumLatitude >= 90 { return (latitudes, nil) }
        let ratio = sin(angular) / cos(latitude * .pi / 180)
        if ratio >= 1 { return (latitudes, nil) }
        let spread = asin(ratio) * 180 / .pi + margin
        let west = longitude - spread
        let east = longitude + spread
        if west >= -180 && east <= 180 { return (latitudes, [west...east]) }
        // Wraps across the antimeridian: two ranges.
        if west < -180 { return (latitudes, [(west + 360)...180, -180...east]) }
        return (latitudes, [west...180, -180...(east - 360)])
    }

    private static func compileNear(latitude: Double, longitude: Double, radius: Double, _ p: inout SQLParameters) -> String {
        let box = boundingBox(latitude: latitude, longitude: longitude, radius: radius)
        var parts = ["lat IS NOT NULL",
                     "lat BETWEEN \(p.bind(number(box.latitude.lowerBound)))::float8 AND \(p.bind(number(box.latitude.upperBound)))::float8"]
        if let ranges = box.longitude {
            let alternatives = ranges.map { range in
                "long BETWEEN \(p.bind(number(range.lowerBound)))::float8 AND \(p.bind(number(range.upperBound)))::float8"
            }
            parts.append(alternatives.count == 1 ? alternatives[0] : "(" + alternatives.joined(separator: " OR ") + ")")
        }
        let lat0 = p.bind(number(latitude))
        let long0 = p.bind(number(longitude))
        // Haversine, the same expression as `AudienceQuery.distance` (least(): rounding may push
        // the root a hair above 1, where asin is undefined).
        let distance = "\(number(2 * earthRadiusMeters))::float8 * asin(least(1.0::float8, sqrt("
            + "sin(radians(lat - \(lat0)::float8) / 2) * sin(radians(lat - \(lat0)::float8) / 2) + "
            + "cos(radians(\(lat0)::float8)) * cos(radians(lat)) * "
            + "sin(radians(long - \(long0)::float8) / 2) * sin(radians(long - \(long0)::float8) / 2))))"
        parts.append("\(distance) <= \(p.bind(number(radius)))::float8")
        return "(" + parts.joined(separator: " AND ") + ")"
    }

    /// Great-circle distance in metres (haversine), as the SQL computes it.
    public static func distance(latitude1: Double, longitude1: Double, latitude2: Double, longitude2: Double) -> Double {
        // PostgreSQL's radians(x) is x * (pi / 180): the same rounding here.
        func radians(_ degrees: Double) -> Double { degrees * (Double.pi / 180) }
        let a = sin(radians(latitude2 - latitude1) / 2) * sin(radians(latitude2 - latitude1) / 2)
            + cos(radians(latitude1)) * cos(radians(latitude2))
            * sin(radians(longitude2 - longitude1) / 2) * sin(radians(longitude2 - longitude1) / 2)
        return (2 * earthRadiusMeters) * asin(min(1.0, a.squareRoot()))
    }

    /// A Double as text that PostgreSQL reads back to the same value.
    static func number(_ value: Double) -> String { "\(value)" }
}
