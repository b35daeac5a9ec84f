import Foundation
import HeraldCore
import HeraldPostgres
import Synchronization

/// One seeded subscription as the brute-force evaluator sees it.
struct FixtureRow {
    var id: String
    var appID: String
    var platform: Platform
    var externalID: String?
    var tags: [String: TagValue]
    var language: String?
    var location: (lat: Double, long: Double)?
    var lastSession: Int64?
    var sessionCount: Int64
    var optedIn: Bool
    var invalidated: Bool

    enum TagValue {
        case string(String)
        case list([String])
    }

    var subscribable: Bool { optedIn && !invalidated }
}

/// Rows with varied tags, languages, platforms, locations, sessions, opt-outs and invalidations,
/// and the brute-force evaluator the SQL must agree with.
enum AudienceFixture {
    static let tagKeys = ["plan", "level", "score", "interests", "city", "x'); DROP TABLE subscriptions; --", "k\"}", "back\\slash"]
    /// "" is a deleted tag (OpenPush deletes by writing ""); "10.0" equals "10" as a number.
    static let tagWords = ["free", "pro", "team", "sports", "news", "music", "paris", "berlin", "10", "10.0", "9", "2.5", "-3", "abc", "Zed",
                           "", "'; DELETE FROM apps; --", "\"}", "$1", "\\"]
    /// Languages with their longer forms, and `eng`, which `en` must not match.
    static let languages = ["en", "en-gb", "en-us", "eng", "fr", "de", "pt", "pt-br", "es", "zh-hant"]
    /// Points the `near` filters aim at: ordinary places, the antimeridian and near a pole.
    static let centres: [(Double, Double)] = [(48.8566, 2.3522), (-33.8688, 151.2093), (0.0, 179.95), (-16.5, -179.9), (89.95, 10.0), (40.7128, -74.006)]
    static let sessionBase: Int64 = 1_780_000_000

    static func rows(count: Int, appID: String, seed: UInt64) -> [FixtureRow] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { index in
            var tags: [String: FixtureRow.TagValue] = [:]
            for key in tagKeys where Int.random(in: 0..<3, using: &random) == 0 {
                if key == "interests" || Int.random(in: 0..<5, using: &random) == 0 {
                    let size = Int.random(in: 0...3, using: &random)
                    tags[key] = .list((0..<size).map { _ in tagWords.randomElement(using: &random)! })
                } else {
                    tags[key] = .string(tagWords.randomElement(using: &random)!)
                }
            }
            var location: (Double, Double)?
            switch Int.random(in: 0..<10, using: &random) {
            case 0, 1: location = nil
            case 2, 3, 4:
                location = (Double.random(in: -90...90, using: &random), Double.random(in: -180...180, using: &random))
            default:
                let centre = centres.randomElement(using: &random)!
                let lat = max(-90, min(90, centre.0 + Double.random(in: -1.5...1.5, using: &random)))
                var long = centre.1 + Double.random(in: -1.5...1.5, using: &random)
                if long > 180 { long -= 360 }
                if long < -180 { long += 360 }
                location = (lat, long)
            }
            return FixtureRow(
                id: random.uuid(), appID: appID,
                platform: Bool.random(using: &random) ? .ios : .android,
                externalID: Int.random(in: 0..<3, using: &random) == 0 ? nil : "user-\(index % 500)",
                tags: tags,
                language: Int.random(in: 0..<7, using: &random) == 0 ? nil : languages.randomElement(using: &random)!,
                location: location,
                lastSession: Int.random(in: 0..<8, using: &random) == 0 ? nil : sessionBase + Int64.random(in: 0..<10_000_000, using: &random),
                sessionCount: Int64.random(in: 0...60, using: &random),
                optedIn: Int.random(in: 0..<25, using: &random) != 0,
                invalidated: Int.random(in: 0..<20, using: &random) == 0)
        }
    }

    static func tagsJSON(_ tags: [String: FixtureRow.TagValue]) -> String {
        var object: [String: JSONValue] = [:]
        for (key, value) in tags {
            switch value {
            case .string(let text): object[key] = .string(text)
            case .list(let items): object[key] = .array(items.map { .string($0) })
            }
        }
        return JSONValue.object(object).serialized()
    }

    /// Loads rows with COPY (exercising `copyIn`); values escaped for COPY's text format.
    static func load(_ rows: [FixtureRow], into pool: PostgresPool) async throws {
        func field(_ text: String?) -> String {
            guard let text else { return "\\N" }
            var out = ""
            for character in text.unicodeScalars {
                switch character {
                case "\\": out += "\\\\"
                case "\t": out += "\\t"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                default: out.unicodeScalars.append(character)
                }
            }
            return out
        }
        var text = ""
        for row in rows {
            let fields: [String?] = [
                row.id, row.appID, row.platform.rawValue, "token-\(row.id)", row.externalID, tagsJSON(row.tags), row.language,
                row.location.map { "\($0.lat)" }, row.location.map { "\($0.long)" },
                row.lastSession.map { Timestamp(seconds: $0).rfc3339 }, String(row.sessionCount),
                row.optedIn ? "t" : "f", row.invalidated ? Timestamp(seconds: sessionBase).rfc3339 : nil,
            ]
            text += fields.map(field).joined(separator: "\t") + "\n"
        }
        let bytes = Array(text.utf8)
        let copied = try await pool.withConnection { connection throws(PostgresError) in
            let sent = Mutex(false)
            return try await connection.copyIn("""
                COPY subscriptions (id, app_id, platform, token, external_id, tags, language, lat, long,
                                    last_session_at, session_count, opted_in, invalidated_at) FROM STDIN
                """) { buffer in
                if sent.withLock({ $0 }) { return false }
                sent.withLock { $0 = true }
                buffer.append(contentsOf: bytes)
                return false
            }
        }
        precondition(copied == rows.count, "COPY loaded \(copied) of \(rows.count) rows")
        try await pool.query("ANALYZE subscriptions", idempotent: false)
    }

    // MARK: brute force

    static func matches(_ audience: Audience, _ row: FixtureRow, appID: String) -> Bool {
        guard row.appID == appID, row.subscribable else { return false }
        switch audience {
        case .all: return true
        case .subscriptionIDs(let ids): return ids.map { $0.lowercased() }.contains(row.id)
        case .externalIDs(let ids): return row.externalID.map(ids.contains) ?? false
        case .filter(let filter): return matches(filter, row)
        }
    }

    /// The tag as filters see it: a tag holding "" is deleted, the same as no tag.
    static func liveTag(_ row: FixtureRow, _ key: String) -> FixtureRow.TagValue? {
        if case .string("") = row.tags[key] { return nil }
        return row.tags[key]
    }

    static func matches(_ filter: AudienceFilter, _ row: FixtureRow) -> Bool {
        switch filter {
        case .and(let children): return children.allSatisfy { matches($0, row) }
        case .or(let children): return children.contains { matches($0, row) }
        case .not(let child): return !matches(child, row)
        case .tag(let key, let op, let value):
            let tag = liveTag(row, key)
            switch op {
            case .eq:
                if case .string(let text) = tag { return text == value }
                return false
            case .ne:
                if case .string(let text) = tag { return text != value }
                return true
            case .contains:
                if case .list(let items) = tag { return items.contains(value) }
                return false
            case .gt, .gte, .lt, .lte:
                guard case .string(let text) = tag else { return false }
                let ascending: Bool, equal: Bool
                if AudienceQuery.isNumber(value) && AudienceQuery.isNumber(text),
                   let left = Decimal(string: text), let right = Decimal(string: value) {
                    (ascending, equal) = (left < right, left == right)
                } else {
                    let left = Array(text.utf8), right = Array(value.utf8)
                    (ascending, equal) = (left.lexicographicallyPrecedes(right), left == right)
                }
                switch op {
                case .gt: return !ascending && !equal
                case .gte: return !ascending
                case .lt: return ascending
                default: return ascending || equal
                }
            }
        case .tagExists(let key, let exists): return (liveTag(row, key) != nil) == exists
        case .language(let languages):
            guard let language = row.language else { return false }
            return languages.contains {
                let range = $0.lowercased()
                return language == range || language.hasPrefix(range + "-")
            }
        case .platform(let platforms): return platforms.contains(row.platform)
        case .externalID(let ids): return row.externalID.map(ids.contains) ?? false
        case .near(let latitude, let longitude, let radius):
            guard let location = row.location else { return false }
            return distance(latitude, longitude, location.lat, location.long) <= radius
        case .lastSession(let after, let before):
            guard let session = row.lastSession else { return false }
            if let after, !(session > after.seconds) { return false }
            if let before, !(session < before.seconds) { return false }
            return true
        case .sessionCount(let op, let value):
            switch op {
            case .eq: return row.sessionCount == value
            case .gt: return row.sessionCount > value
            case .gte: return row.sessionCount >= value
            case .lt: return row.sessionCount < value
            case .lte: return row.sessionCount <= value
            }
        }
    }

    /// Haversine written independently of the production code (same constants and order).
    static func distance(_ lat1: Double, _ long1: Double, _ lat2: Double, _ long2: Double) -> Double {
        let toRadians = Double.pi / 180
        let dLat = (lat2 - lat1) * toRadians / 2
        let dLong = (long2 - long1) * toRadians / 2
        let a = sin(dLat) * sin(dLat) + cos(lat1 * toRadians) * cos(lat2 * toRadians) * sin(dLong) * sin(dLong)
        return 12_742_017.6 * asin(min(1, a.squareRoot()))
    }

    // MARK: random filters

    static func randomFilter(depth: Int, using random: inout SplitMix64) -> AudienceFilter {
        if depth > 1 && Int.random(in: 0..<3, using: &random) != 0 {
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return .and((0..<Int.random(in: 1...3, using: &random)).map { _ in randomFilter(depth: depth - 1, using: &random) })
            case 1: return .or((0..<Int.random(in: 1...3, using: &random)).map { _ in randomFilter(depth: depth - 1, using: &random) })
            default: return .not(randomFilter(depth: depth - 1, using: &random))
            }
        }
        return randomLeaf(using: &random)
    }

    static func randomLeaf(using random: inout SplitMix64) -> AudienceFilter {
        switch Int.random(in: 0..<9, using: &random) {
        case 0, 1:
            let op = AudienceFilter.TagComparison.allCases.randomElement(using: &random)!
            return .tag(key: tagKeys.randomElement(using: &random)!, op: op, value: tagWords.randomElement(using: &random)!)
        case 2: return .tagExists(key: tagKeys.randomElement(using: &random)!, exists: Bool.random(using: &random))
        case 3:
            let picked = (0..<Int.random(in: 1...3, using: &random)).map { _ in languages.randomElement(using: &random)! }
            return .language(picked.map { Bool.random(using: &random) ? $0.uppercased() : $0 } + (Bool.random(using: &random) ? ["xx"] : []))
        case 4: return .platform(Bool.random(using: &random) ? [.ios] : [.android, .ios].shuffled(using: &random).prefix(Int.random(in: 1...2, using: &random)).map { $0 })
        case 5: return .externalID((0..<Int.random(in: 1...20, using: &random)).map { _ in "user-\(Int.random(in: 0..<600, using: &random))" })
        case 6:
            let centre = centres.randomElement(using: &random)!
            return .near(latitude: centre.0, longitude: centre.1, radiusMeters: [1_000, 50_000, 120_000, 300_000, 2_000_000].randomElement(using: &random)!)
        case 7:
            let a = Timestamp(seconds: sessionBase + Int64.random(in: 0..<10_000_000, using: &random))
            let b = Timestamp(seconds: sessionBase + Int64.random(in: 0..<10_000_000, using: &random))
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return .lastSession(after: a, before: nil)
            case 1: return .lastSession(after: nil, before: b)
            default: return .lastSession(after: min(a, b), before: max(a, b))
            }
        default:
            return .sessionCount(op: AudienceFilter.CountComparison.allCases.randomElement(using: &random)!, value: Int64.random(in: 0...60, using: &random))
        }
    }
}
