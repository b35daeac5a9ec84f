import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct SubscriptionSeederTests {
    private func fingerprint(_ pool: PostgresPool, _ app: String) async throws -> String? {
        try await pool.query("""
            SELECT md5(string_agg(concat_ws('|', id, platform, token, sandbox, sdk, external_id, tags::text, language, lat, long,
                                            time_zone, opted_in, last_session_at, session_count, voip_token), ',' ORDER BY id))
            FROM subscriptions WHERE app_id = $1
            """, [app]).rows.first?.first ?? nil
    }

    @Test func sameSeedSameRowsWithTheRequestedShares() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["seeded"])
        let seeder = SubscriptionSeeder(pool: pool)
        var options = SeedOptions(appID: "seeded", devices: 10_000)
        options.iosShare = 0.3
        options.sdkShare = 0.9
        options.optedOutShare = 0.1
        #expect(try await seeder.seed(options) == 10_000)
        let first = try await fingerprint(pool, "seeded")
        #expect(try await seeder.seed(options) == 10_000, "re-seeding replaces the app's rows")
        #expect(try await fingerprint(pool, "seeded") == first)
        options.seed = 2
        _ = try await seeder.seed(options)
        #expect(try await fingerprint(pool, "seeded") != first)
        let shares = try await pool.query("""
            SELECT avg((platform = 'ios')::int), avg(sdk::int), avg((NOT opted_in)::int),
                   bool_and(platform <> 'ios' OR token ~ '^[0-9a-f]{64}$'), bool_and(platform <> 'android' OR length(token) > 100),
                   count(DISTINCT language), count(DISTINCT time_zone), avg((lat IS NOT NULL)::int)
            FROM subscriptions
            """).rows[0].map { $0 ?? "" }
        #expect(abs(Double(shares[0])! - 0.3) < 0.03)
        #expect(abs(Double(shares[1])! - 0.9) < 0.03)
        #expect(abs(Double(shares[2])! - 0.1) < 0.03)
        #expect(shares[3] == "t" && shares[4] == "t")
        #expect(Int(shares[5])! >= 10 && Int(shares[6])! >= 20)
        #expect(abs(Double(shares[7])! - 0.85) < 0.03)
        // The generated tags are usable by filters.
        let pro = try await AudienceResolver(pool: pool).count(AudienceQuery(appID: "seeded", audience: .filter(.and([
            .tag(key: "plan", op: .eq, value: "pro"), .tag(key: "interests", op: .contains, value: "news")]))))
        #expect(pro > 100)
        await database.tearDown(pool)
    }

    /// The bulk path drops and rebuilds the audience indexes: afterwards the schema is exactly
    /// what the migrations made (definitions and comments), and the planner still uses them.
    @Test func bulkLoadLeavesTheIndexesAsMigrated() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["seeded"])
        let catalog = """
            SELECT string_agg(pg_get_indexdef(indexrelid) || ' -- ' || coalesce(obj_description(indexrelid, 'pg_class'), ''), E'\n' ORDER BY indexrelid::regclass::text)
            FROM pg_index WHERE indrelid = 'subscriptions'::regclass
            """
        let before = try await pool.query(catalog).rows
        var options = SeedOptions(appID: "seeded", devices: 3000)
        options.rebuildIndexes = true
        #expect(try await SubscriptionSeeder(pool: pool).seed(options) == 3000)
        #expect(try await pool.query(catalog).rows == before)
        #expect(before.first?.first??.contains("subscriptions_tags_gin") == true)
        #expect(before.first?.first??.contains("Keyset scan of targetable subscriptions") == true)
        await database.tearDown(pool)
    }
}
