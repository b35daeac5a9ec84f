import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct EmbeddedMigrationTests {
    /// The binary carries its migrations; schemas/sql/ is the source of truth.
    @Test func embeddedMigrationsMatchSchemasSQL() throws {
        let directory = TestEnvironment.repositoryRoot.appendingPathComponent("schemas/sql")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.count == Migration.all.count, "run scripts/embed-migrations")
        for (file, migration) in zip(files, Migration.all) {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            #expect(file == String(format: "%04d_%@.sql", migration.version, migration.name), "run scripts/embed-migrations")
            #expect(text == migration.sql, "\(file) differs from the embedded copy: run scripts/embed-migrations")
        }
        // Unique, increasing, from 1; a gap is a number reserved by a branch in flight.
        let versions = Migration.all.map(\.version)
        #expect(versions.first == 1 && zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 })
    }
}

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct MigratorTests {
    @Test func concurrentRunsApplyEachMigrationOnce() async throws {
        let database = try await TestDatabase.create()
        let outcomes = try await withThrowingTaskGroup(of: Migrator.Outcome.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    let connection = try await PostgresConnection.connect(database.url)
                    defer { Task { await connection.close() } }
                    return try await Migrator().migrate(connection)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.map(\.applied.count).reduce(0, +) == Migration.all.count)
        let connection = try await PostgresConnection.connect(database.url)
        let rows = try await connection.query("SELECT count(*) AS n, count(DISTINCT version) AS d FROM herald_schema_migrations")
        #expect(rows.value(0, "n") == String(Migration.all.count))
        #expect(rows.value(0, "d") == String(Migration.all.count))
        let again = try await Migrator().migrate(connection)
        #expect(again.applied.isEmpty)
        #expect(again.alreadyApplied == Migration.all.count)
        await connection.close()
        let pool = PostgresPool(PostgresPoolConfiguration(url: database.url, size: 1))
        #expect(try await Migrator.appliedVersion(pool) == Migration.all.map(\.version).max())
        await pool.close()
        await database.drop()
    }

    @Test func appliedVersionIsZeroBeforeTheFirstAndAnErrorWithoutTheSchema() async throws {
        let database = try await TestDatabase.create()
        let pool = PostgresPool(PostgresPoolConfiguration(url: database.url, size: 1))
        await #expect(throws: PostgresError.self) { try await Migrator.appliedVersion(pool) }
        try await pool.query("CREATE TABLE herald_schema_migrations (version int PRIMARY KEY)", idempotent: false)
        #expect(try await Migrator.appliedVersion(pool) == 0)
        await pool.close()
        await database.drop()
    }

    @Test func refusesAnAppliedMigrationThatChanged() async throws {
        let database = try await TestDatabase.create()
        let connection = try await PostgresConnection.connect(database.url)
        let original = Migration(version: 1, name: "t", sql: "CREATE TABLE t (id int)")
        _ = try await Migrator(migrations: [original]).migrate(connection)
        let edited = Migration(version: 1, name: "t", sql: "CREATE TABLE t (id bigint)")
        await #expect {
            try await Migrator(migrations: [edited]).migrate(connection)
        } throws: { error in
            (error as? PostgresError)?.code == .migrationChanged
        }
        await connection.close()
        await database.drop()
    }

    @Test func aFailingMigrationLeavesNothingBehind() async throws {
        let database = try await TestDatabase.create()
        let connection = try await PostgresConnection.connect(database.url)
        let broken = [Migration(version: 1, name: "ok", sql: "CREATE TABLE a (id int)"),
                      Migration(version: 2, name: "broken", sql: "CREATE TABLE b (id int); SELECT no_such_function()")]
        await #expect(throws: PostgresError.self) { try await Migrator(migrations: broken).migrate(connection) }
        let tables = try await connection.query("SELECT to_regclass('a') IS NOT NULL AS a, to_regclass('b') IS NOT NULL AS b")
        #expect(tables.value(0, "a") == "t")
        #expect(tables.value(0, "b") == "f")
        let versions = try await connection.query("SELECT version FROM herald_schema_migrations ORDER BY version")
        #expect(versions.rows == [["1"]])
        await connection.close()
        await database.drop()
    }
}
