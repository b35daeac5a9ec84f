import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct AudienceResolverTests {
    @Test func shardPlanSplitsIntoContiguousRangesOfTheRequestedSize() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let rows = AudienceFixture.rows(count: 2600, appID: "app", seed: 5)
        try await AudienceFixture.load(rows, into: pool)
        let resolver = AudienceResolver(pool: pool)
        for audience in [Audience.all, .filter(.platform([.ios])), .filter(.not(.tag(key: "plan", op: .eq, value: "free")))] {
            let query = AudienceQuery(appID: "app", audience: audience)
            let expected = rows.filter { AudienceFixture.matches(audience, $0, appID: "app") }.map(\.id).sorted()
            let plan = try await resolver.shardPlan(query, devicesPerShard: 250)
            #expect(plan.count == expected.count)
            #expect(plan.ranges.count == (expected.count + 249) / 250)
            #expect(plan.ranges.first?.from == Shard.minimumID)
            #expect(plan.ranges.last?.to == nil)
            for (left, right) in zip(plan.ranges, plan.ranges.dropFirst()) { #expect(left.to == right.from) }
            var union: [String] = []
            for (index, range) in plan.ranges.enumerated() {
                var inRange: [String] = []
                for try await page in resolver.pages(query, in: range, pageSize: 100) { inRange += page.map(\.id) }
                if index < plan.ranges.count - 1 { #expect(inRange.count == 250) }
                #expect(try await resolver.count(query, in: range) == inRange.count)
                union += inRange
            }
            #expect(union == expected)
            let estimate = try await resolver.estimate(query)
            #expect(estimate > 0)
        }
        let empty = try await resolver.shardPlan(AudienceQuery(appID: "app", audience: .externalIDs(["nobody"])))
        #expect(empty == ShardPlan(ranges: [], count: 0))
        await database.tearDown(pool)
    }

    @Test func pagesResumeAfterACheckpointAndCarryDeliveryColumns() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let rows = AudienceFixture.rows(count: 700, appID: "app", seed: 9)
        try await AudienceFixture.load(rows, into: pool)
        let resolver = AudienceResolver(pool: pool)
        let query = AudienceQuery(appID: "app", audience: .all)
        let expected = rows.filter(\.subscribable).map(\.id).sorted()
        let cursor = expected[200]
        var resumed: [AudienceMember] = []
        for try await page in resolver.pages(query, in: SubscriptionRange(from: expected[100], to: expected[600]), after: cursor, pageSize: 64) {
            resumed += page
        }
        #expect(resumed.map(\.id) == Array(expected[201..<600]))
        let first = try #require(resumed.first)
        let row = try #require(rows.first { $0.id == first.id })
        #expect(first.token == "token-\(row.id)")
        #expect(first.platform == row.platform)
        #expect(first.language == row.language)
        await database.tearDown(pool)
    }

    /// The compiled condition spells the subscribable predicate exactly as the partial indexes
    /// do, so the planner can use them. For the keyset index this is checked on the statement
    /// and the index definition (which index-only scan a tiny, busy test server picks varies);
    /// for the GIN and location indexes, with the other scans off, a mismatch would show as a
    /// disabled sequential scan instead of the index.
    @Test func pageQueriesCanUseThePartialAudienceIndexes() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await AudienceFixture.load(AudienceFixture.rows(count: 500, appID: "app", seed: 4), into: pool)
        try await pool.query("ANALYZE subscriptions", idempotent: false)
        let all = AudienceResolver.pageStatement(AudienceQuery(appID: "app", audience: .all), in: .everything, after: nil, limit: nil)
        #expect(all.sql.contains("app_id = $1 AND opted_in AND invalidated_at IS NULL"))
        #expect(all.sql.contains("ORDER BY id"))
        let definition = try await pool.query("SELECT pg_get_indexdef('subscriptions_subscribable_idx'::regclass) AS d").value(0, "d") ?? ""
        #expect(definition.contains("(app_id, id)") && definition.contains("WHERE (opted_in AND (invalidated_at IS NULL))"), "\(definition)")
        for (audience, index) in [(Audience.filter(.tag(key: "plan", op: .eq, value: "pro")), "subscriptions_tags_gin"),
                                  (.filter(.near(latitude: 48.85, longitude: 2.35, radiusMeters: 10_000)), "subscriptions_location_idx")] {
            let statement = AudienceResolver.pageStatement(AudienceQuery(appID: "app", audience: audience), in: .everything, after: nil, limit: nil)
            let plan = try await pool.withTransaction { connection throws(PostgresError) in
                try await connection.query("SELECT set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true), set_config('enable_indexonlyscan', 'off', true)")
                return try await connection.query("EXPLAIN " + statement.sql, statement.parameters).rows.compactMap { $0.first ?? nil }.joined(separator: "\n")
            }
            #expect(plan.contains(index), "\(audience):\n\(plan)")
        }
        await database.tearDown(pool)
    }

    /// Parked retries are resumed by id: every one of the app's subscriptions among the ids comes
    /// back, whatever its state now, and nothing of another app's or malformed.
    @Test func membersReadsTheAppsSubscriptionsByID() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["app", "other"])
        let rows = AudienceFixture.rows(count: 300, appID: "app", seed: 11)
        let others = AudienceFixture.rows(count: 20, appID: "other", seed: 12)
        try await AudienceFixture.load(rows, into: pool)
        try await AudienceFixture.load(others, into: pool)
        let resolver = AudienceResolver(pool: pool)
        let invalidated = try #require(rows.first { $0.invalidated })
        let optedOut = try #require(rows.first { !$0.optedIn && $0.id != invalidated.id })
        let ordinary = rows.filter(\.subscribable).prefix(5).map(\.id)
        let ids = ordinary.reversed() + [invalidated.id, optedOut.id.uppercased(), others[0].id,
                                         "00000000-0000-4000-8000-000000000000", "not-a-uuid", "'; DROP TABLE subscriptions; --"]
        let members = try await resolver.members(appID: "app", ids: ids)
        #expect(members.map(\.id) == (ordinary + [invalidated.id, optedOut.id]).sorted())
        let first = try #require(members.first)
        let row = try #require(rows.first { $0.id == first.id })
        #expect(first.token == "token-\(row.id)")
        #expect(first.platform == row.platform)
        #expect(try await resolver.members(appID: "app", ids: []).isEmpty)
        #expect(try await resolver.members(appID: "app", ids: ["not-a-uuid"]).isEmpty)
        #expect(try await resolver.members(appID: "other", ids: ordinary).isEmpty)
        await database.tearDown(pool)
    }
}
