import HeraldCrypto

/// One forward-only schema change, from `schemas/sql/NNNN_name.sql`.
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String

    /// Creates a migration.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// SHA-256 of the SQL text: an applied migration whose file later changed is refused.
    public var checksum: String { SHA256.hexDigest(sql) }
}

/// Applies migrations so that any number of processes can run it at once (ten pods starting
/// together): each migration runs in its own transaction holding a transaction-scoped advisory
/// lock, re-checks whether it was applied once it holds the lock, and records itself in
/// `herald_schema_migrations` in the same transaction. Re-running is a no-op.
public struct Migrator: Sendable {
    /// The advisory lock key: the ASCII of "herald" packed into an int64.
    public static let advisoryLockKey: Int64 = 0x6865_7261_6C64

    /// What one run did.
    public struct Outcome: Sendable, Equatable {
        /// Migrations this run applied, in order.
        public var applied: [Migration] = []
        /// Migrations that were applied before (by this or another process).
        public var alreadyApplied: Int = 0
        /// Versions in the database this binary does not know (a newer Herald migrated it).
        public var unknownVersions: [Int] = []
    }

    public let migrations: [Migration]

    /// A migrator for `migrations` (Herald's own by default).
    public init(migrations: [Migration] = Migration.all) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// The newest migration version applied to the database behind `pool` (0 when none); a
    /// database without Herald's schema table is an error whose message names it.
    public static func appliedVersion(_ pool: PostgresPool) async throws(PostgresError) -> Int {
        let rows = try await pool.query("SELECT COALESCE(max(version), 0)::text FROM herald_schema_migrations")
        return rows.rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
    }

    /// Applies every migration not yet applied, in order.
    public func migrate(_ connection: PostgresConnection) async throws(PostgresError) -> Outcome {
        var outcome = Outcome()
        // CREATE TABLE IF NOT EXISTS would otherwise print a NOTICE on every run.
        try await connection.execute("SET client_min_messages = warning")
        for migration in migrations {
            if try await apply(migration, on: connection) {
                outcome.applied.append(migration)
            } else {
                outcome.alreadyApplied += 1
            }
        }
        let known = Set(migrations.map(\.version))
        let rows = try await connection.query("SELECT version FROM herald_schema_migrations ORDER BY version")
        outcome.unknownVersions = rows.rows.compactMap { row in row.first.flatMap { $0 }.flatMap { Int($0) } }.filter { !known.contains($0) }
        return outcome
    }

    /// Applies one migration unless already applied; returns whether it did.
    private func apply(_ migration: Migration, on connection: PostgresConnection) async throws(PostgresError) -> Bool {
        try await connection.execute("BEGIN")
        do throws(PostgresError) {
            try await connection.query("SELECT pg_advisory_xact_lock($1::bigint)", [String(Migrator.advisoryLockKey)])
            // Created under the lock, so concurrent first runs cannot race on it.
            try await connection.execute("""
                CREATE TABLE IF NOT EXISTS herald_schema_migrations (
                    version    integer     PRIMARY KEY,
                    name       text        NOT NULL,
                    checksum   text        NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
            let existing = try await connection.query(
                "SELECT checksum FROM herald_schema_migrations WHERE version = $1", [String(migration.version)])
            if let row = existing.rows.first {
                try await connection.execute("ROLLBACK")
                let recorded = row.first ?? nil
                guard recorded == migration.checksum else {
                    throw PostgresError(.migrationChanged, "migration \(fourDigits(migration.version))_\(migration.name) was changed after it was applied (recorded checksum \(recorded ?? "none"), file \(migration.checksum)); add a new migration instead of editing an applied one")
                }
                return false
            }
            try await connection.execute(migration.sql)
            try await connection.query(
                "INSERT INTO herald_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                [String(migration.version), migration.name, migration.checksum])
            try await connection.execute("COMMIT")
            return true
        } catch {
            if error.code != .migrationChanged {
                try? await connection.execute("ROLLBACK")
            }
            if error.code == .queryFailed {
                throw PostgresError(.queryFailed, "migration \(fourDigits(migration.version))_\(migration.name): \(error.message)", sqlState: error.sqlState)
            }
            throw error
        }
    }
}

/// A version number as four digits (`0003`).
func fourDigits(_ value: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
