import Foundation
import HeraldCore
@testable import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct AudienceQueryCompilationTests {
    @Test func valuesAndTagKeysAreParametersNeverSQLText() {
        let hostile = "x'); DROP TABLE subscriptions; --"
        let query = AudienceQuery(appID: "app", audience: .filter(.and([
            .tag(key: hostile, op: .eq, value: hostile), .tag(key: hostile, op: .gt, value: "5"),
            .tagExists(key: hostile, exists: false), .externalID([hostile]), .language(["EN"]),
        ])))
        #expect(!query.condition.contains("DROP"))
        #expect(query.parameters.contains(hostile))
        #expect(query.condition.hasPrefix("app_id = $1 AND opted_in AND invalidated_at IS NULL AND "))
        #expect(query.parameters.contains("en"), "languages are lower-cased")
    }

    @Test func languagePrefixesAreLiteralInLike() {
        #expect(AudienceQuery.likeEscaped("en-gb") == "en-gb")
        #expect(AudienceQuery.likeEscaped("a%b_c\\d") == "a\\%b\\_c\\\\d")
        let query = AudienceQuery(appID: "app", audience: .filter(.language(["en-GB", "pt"])))
        #expect(query.parameters.contains(SQLValue.array(["en-gb", "pt"])))
        #expect(query.parameters.contains(SQLValue.array(["en-gb-%", "pt-%"])))
    }

    @Test func boundingBoxCoversTheCircleAndWrapsTheAntimeridian() {
        let box = AudienceQuery.boundingBox(latitude: 0, longitude: 179.9, radius: 50_000)
        #expect(box.longitude?.count == 2)
        let polar = AudienceQuery.boundingBox(latitude: 89.9, longitude: 0, radius: 50_000)
        #expect(polar.longitude == nil, "a circle over a pole spans every longitude")
        // Every point on the circle's edge is inside the box.
        for bearing in stride(from: 0.0, to: 360, by: 5) {
            let (lat, long) = destination(latitude: 48.85, longitude: 2.35, bearing: bearing, distance: 300_000)
            let box = AudienceQuery.boundingBox(latitude: 48.85, longitude: 2.35, radius: 300_000)
            #expect(box.latitude.contains(lat))
            #expect(box.longitude?.contains { $0.contains(long) } ?? true)
        }
    }

    private func destination(latitude: Double, longitude: Double, bearing: Double, distance: Double) -> (Double, Double) {
        let d = distance / AudienceQuery.earthRadiusMeters, b = bearing * .pi / 180
        let lat1 = latitude * .pi / 180, long1 = longitude * .pi / 180
        let lat2 = asin(sin(lat1) * cos(d) + cos(lat1) * sin(d) * cos(b))
        let long2 = long1 + atan2(sin(b) * sin(d) * cos(lat1), cos(d) - sin(lat1) * sin(lat2))
        return (lat2 * 180 / .pi, long2 * 180 / .pi)
    }
}

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(3)))
struct AudienceQueryTests {
    static let rowCount = 3000

    private func audienceIDs(_ query: AudienceQuery, _ resolver: AudienceResolver, pageSize: Int = 499) async throws -> [String] {
        var ids: [String] = []
        for try await page in resolver.pages(query, pageSize: pageSize) {
            #expect(page.count <= pageSize)
            ids += page.map(\.id)
        }
        return ids
    }

    /// Random filters (depth ≤ 4, every predicate) against real PostgreSQL and against a
    /// brute-force evaluator over the same rows: the same subscriptions, in id order.
    @Test func randomFiltersMatchBruteForce() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["app", "other"])
        let rows = AudienceFixture.rows(count: Self.rowCount, appID: "app", seed: 7)
            + AudienceFixture.rows(count: 300, appID: "other", seed: 8)
        try await AudienceFixture.load(rows, into: pool)
        let resolver = AudienceResolver(pool: pool)
        var random = SplitMix64(seed: 20261202)
        var nonEmpty = 0
        var compared = 0
        var everyReturned = Set<String>()
        for round in 0..<250 {
            let filter = AudienceFixture.randomFilter(depth: Int.random(in: 1...4, using: &random), using: &random)
            let audience = Audience.filter(filter)
            let expected = rows.filter { AudienceFixture.matches(audience, $0, appID: "app") }.map(\.id).sorted()
            let query = AudienceQuery(appID: "app", audience: audience)
            let actual = try await audienceIDs(query, resolver)
            #expect(actual == expected, "round \(round): \(filter)\n\(query.condition)")
            if actual != expected { break }
            if round % 10 == 0 { #expect(try await resolver.count(query) == expected.count) }
            if !expected.isEmpty { nonEmpty += 1 }
            everyReturned.formUnion(actual)
            compared += 1
        }
        // Not vacuous: most filters select something, and opted-out/invalidated rows exist.
        #expect(compared == 250)
        #expect(nonEmpty > 120)
        let excluded = rows.filter { $0.appID == "app" && !$0.subscribable }.map(\.id)
        #expect(excluded.count > 200)
        #expect(everyReturned.isDisjoint(with: excluded), "an opted-out or invalidated subscription was returned")
        // Not even when named explicitly, or through their users.
        #expect(try await audienceIDs(AudienceQuery(appID: "app", audience: .subscriptionIDs(excluded)), resolver).isEmpty)
        let excludedOnlyUsers = Set(rows.compactMap { $0.subscribable ? nil : $0.externalID })
            .subtracting(rows.compactMap { $0.subscribable ? $0.externalID : nil })
        #expect(try await audienceIDs(AudienceQuery(appID: "app", audience: .externalIDs(Array(excludedOnlyUsers) + ["x"])), resolver).isEmpty)
        for audience in [Audience.all, .externalIDs(["user-1", "user-2", "nobody"]),
                         .subscriptionIDs(Array(rows.prefix(40).map { $0.id.uppercased() }) + ["not-a-uuid'; --"])] {
            let expected = rows.filter { AudienceFixture.matches(audience, $0, appID: "app") }.map(\.id).sorted()
            #expect(try await audienceIDs(AudienceQuery(appID: "app", audience: audience), resolver) == expected)
        }
        await database.tearDown(pool)
    }

    /// Hand-made devices for the rules the SDKs rely on: language prefixes, tags deleted by
    /// writing "", list tags, and the ordering comparisons. Each case names the devices it
    /// selects, and the brute-force evaluator must agree.
    @Test func languageAndTagRulesSelectTheNamedDevices() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        var random = SplitMix64(seed: 42)
        let devices: [(name: String, language: String?, tags: [String: FixtureRow.TagValue])] = [
            ("en", "en", ["plan": .string("pro"), "score": .string("10")]),
            ("en-gb", "en-gb", ["plan": .string(""), "score": .string("9")]),
            ("en-us", "en-us", ["plan": .list(["pro", "team"]), "score": .string("10.0")]),
            ("en-gb-oxendict", "en-gb-oxendict", ["plan": .list(["pro"]), "score": .string("abc")]),
            ("eng", "eng", ["plan": .string("free"), "score": .string("")]),
            ("fr", "fr", ["plan": .list([]), "score": .list(["11"])]),
            ("none", nil, [:]),
        ]
        let rows = devices.map { device in
            FixtureRow(id: random.uuid(), appID: "app", platform: .ios, externalID: nil, tags: device.tags, language: device.language,
                       location: nil, lastSession: nil, sessionCount: 0, optedIn: true, invalidated: false)
        }
        try await AudienceFixture.load(rows, into: pool)
        let resolver = AudienceResolver(pool: pool)
        let names = Dictionary(uniqueKeysWithValues: zip(rows.map(\.id), devices.map(\.name)))
        let cases: [(AudienceFilter, Set<String>)] = [
            (.language(["en"]), ["en", "en-gb", "en-us", "en-gb-oxendict"]),
            (.language(["en-GB"]), ["en-gb", "en-gb-oxendict"]),
            (.language(["EN-gb", "fr"]), ["en-gb", "en-gb-oxendict", "fr"]),
            (.not(.language(["en-GB"])), ["en", "en-us", "eng", "fr", "none"]),
            (.language(["e"]), []),
            (.tag(key: "plan", op: .eq, value: ""), []),
            (.tag(key: "plan", op: .ne, value: ""), Set(devices.map(\.name))),
            (.tagExists(key: "plan", exists: true), ["en", "en-us", "en-gb-oxendict", "eng", "fr"]),
            (.tagExists(key: "plan", exists: false), ["en-gb", "none"]),
            (.tag(key: "plan", op: .eq, value: "pro"), ["en"]),
            (.tag(key: "plan", op: .ne, value: "pro"), ["en-gb", "en-us", "en-gb-oxendict", "eng", "fr", "none"]),
            (.tag(key: "plan", op: .contains, value: "pro"), ["en-us", "en-gb-oxendict"]),
            (.tag(key: "plan", op: .lt, value: "zzz"), ["en", "eng"]),
            (.tag(key: "score", op: .gte, value: "10"), ["en", "en-us", "en-gb-oxendict"]),
            (.tag(key: "score", op: .gt, value: "10"), ["en-gb-oxendict"]),
            (.tag(key: "score", op: .lte, value: "10"), ["en", "en-gb", "en-us"]),
            (.tag(key: "score", op: .lt, value: "10"), ["en-gb"]),
            (.tag(key: "score", op: .gte, value: "abc"), ["en-gb-oxendict"]),
            // Numbers compare as numbers ("10" > "9"); against a word, byte-wise ("10" < "9a").
            (.tag(key: "score", op: .lte, value: "9"), ["en-gb"]),
            (.tag(key: "score", op: .lte, value: "9a"), ["en", "en-gb", "en-us"]),
        ]
        for (filter, expected) in cases {
            let query = AudienceQuery(appID: "app", audience: .filter(filter))
            let actual = Set(try await audienceIDs(query, resolver).compactMap { names[$0] })
            #expect(actual == expected, "\(filter)")
            let bruteForce = Set(rows.filter { AudienceFixture.matches(.filter(filter), $0, appID: "app") }.compactMap { names[$0.id] })
            #expect(bruteForce == expected, "brute force: \(filter)")
        }
        await database.tearDown(pool)
    }

    @Test func radiusAgreesWithHaversine() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let rows = AudienceFixture.rows(count: Self.rowCount, appID: "app", seed: 11)
        try await AudienceFixture.load(rows, into: pool)
        let resolver = AudienceResolver(pool: pool)
        var total = 0
        for centre in AudienceFixture.centres {
            for radius in [500.0, 25_000, 100_000, 150_000, 1_000_000, 20_000_000] {
                let query = AudienceQuery(appID: "app", audience: .filter(.near(latitude: centre.0, longitude: centre.1, radiusMeters: radius)))
                let actual = Set(try await audienceIDs(query, resolver, pageSize: 5000))
                let inside = rows.filter { $0.subscribable && $0.location != nil }.filter {
                    AudienceFixture.distance(centre.0, centre.1, $0.location!.lat, $0.location!.long) <= radius
                }
                #expect(actual == Set(inside.map(\.id)), "centre \(centre) radius \(radius)")
                total += actual.count
            }
        }
        #expect(total > 1000)
        await database.tearDown(pool)
    }

    @Test func injectionAttemptsAreInert() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let rows = AudienceFixture.rows(count: 500, appID: "app", seed: 3)
        try await AudienceFixture.load(rows, into: pool)
        let resolver = AudienceResolver(pool: pool)
        let attacks = ["x'); DROP TABLE subscriptions; --", "' OR '1'='1", "\" OR 1=1 --", "$1", "\\", "k\"}", "'; DELETE FROM apps; --",
                       "a') OR tags ? ('b", "1; SELECT pg_sleep(5)", "%", "e_", "en\\"]
        for attack in attacks {
            for filter in [AudienceFilter.tag(key: attack, op: .eq, value: attack), .tag(key: "plan", op: .ne, value: attack),
                           .tag(key: attack, op: .gt, value: attack), .tag(key: attack, op: .contains, value: "news"),
                           .tagExists(key: attack, exists: true), .externalID([attack]), .language([attack])] {
                let audience = Audience.filter(filter)
                let expected = rows.filter { AudienceFixture.matches(audience, $0, appID: "app") }.map(\.id).sorted()
                #expect(try await audienceIDs(AudienceQuery(appID: "app", audience: audience), resolver) == expected, "\(filter)")
            }
            #expect(try await audienceIDs(AudienceQuery(appID: attack, audience: .all), resolver).isEmpty)
            #expect(try await audienceIDs(AudienceQuery(appID: "app", audience: .subscriptionIDs([attack])), resolver).isEmpty)
        }
        // The keys with quotes and backslashes really are stored and matched as data.
        let weird = "x'); DROP TABLE subscriptions; --"
        #expect(rows.contains { $0.tags[weird] != nil })
        let count = try await pool.query("SELECT count(*) FROM subscriptions").rows
        #expect(count == [[String(rows.count)]])
        #expect(try await pool.query("SELECT count(*) FROM apps").rows == [["1"]])
        await database.tearDown(pool)
    }
}
