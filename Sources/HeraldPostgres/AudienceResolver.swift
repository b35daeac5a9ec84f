public import HeraldCore

/// One subscription of an audience, with what delivery needs.
public struct AudienceMember: Sendable, Equatable {
    /// Subscription id (lower-case UUID).
    public var id: String
    public var platform: Platform
    /// APNs device token (hex) or FCM registration token.
    public var token: String
    /// iOS: the token belongs to the APNs sandbox.
    public var sandbox: Bool
    /// The device runs a Herald-compatible SDK.
    public var sdk: Bool
    public var language: String?
    public var timeZone: String?
    public var voipToken: String?
    /// The provider that holds ``token``: APNs or FCM for iOS (an iOS app built on Firebase
    /// registers an FCM token), FCM for Android.
    public var provider: Receipt.Provider
    /// Why a listed subscription cannot be sent to (``AudienceResolver/listedMembers(appID:ids:)``):
    /// `unknown-subscription`, `opted-out`; nil when it can.
    public var unavailable: Receipt.Reason?

    /// Creates a member; `provider` nil is the platform's own (APNs for iOS, FCM for Android).
    public init(id: String, platform: Platform, token: String, sandbox: Bool, sdk: Bool,
                language: String?, timeZone: String?, voipToken: String?, provider: Receipt.Provider? = nil) {
        self.provider = provider ?? (platform == .ios ? .apns : .fcm)
        self.id = id
        self.platform = platform
        self.token = token
        self.sandbox = sandbox
        self.sdk = sdk
        self.language = language
        self.timeZone = timeZone
        self.voipToken = voipToken
    }

    /// The columns read, in `decode`'s order.
    static let columns = "id, platform, token, sandbox, sdk, language, time_zone, voip_token, provider"

    static func decode(_ row: PostgresRow) -> AudienceMember? {
        guard let id = row.string(0), let platformName = row.string(1), let platform = Platform(rawValue: platformName),
              let token = row.string(2) else { return nil }
        return AudienceMember(id: id, platform: platform, token: token, sandbox: row.bool(3), sdk: row.bool(4),
                              language: row.string(5), timeZone: row.string(6), voipToken: row.string(7),
                              provider: row.string(8).flatMap(Receipt.Provider.init(rawValue:)))
    }
}

/// A range of subscription ids: `[from, to)`; nil bounds are open.
public struct SubscriptionRange: Sendable, Equatable {
    /// Lowest id, inclusive.
    public var from: String?
    /// Upper bound, exclusive.
    public var to: String?

    /// A range; ids are lower-cased.
    public init(from: String? = nil, to: String? = nil) {
        self.from = from?.lowercased()
        self.to = to?.lowercased()
    }

    /// Every id.
    public static let everything = SubscriptionRange()
}

/// An audience split into contiguous id ranges of about `devicesPerShard` subscriptions.
public struct ShardPlan: Sendable, Equatable {
    /// The ranges, in id order; together they cover every id. Empty when the audience is.
    public var ranges: [SubscriptionRange]
    /// Exact number of subscriptions in the audience when the walk ran.
    public var count: Int

    /// A plan.
    public init(ranges: [SubscriptionRange], count: Int) {
        self.ranges = ranges
        self.count = count
    }
}

/// Resolves audiences against `subscriptions`: keyset pages, counts, estimates and shard plans.
public struct AudienceResolver: Sendable {
    let pool: PostgresPool

    /// A resolver reading through `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// The audience's subscriptions in `range`, in id order, as pages of at most `pageSize`.
    /// Only one page (plus one prefetched) is held at a time, whatever the audience's size.
    /// `after` resumes after a checkpointed id.
    public func pages(_ query: AudienceQuery, in range: SubscriptionRange = .everything,
                      after cursor: String? = nil, pageSize: Int = 2000) -> AudiencePages {
        AudiencePages(pool: pool, query: query, range: range, cursor: cursor, pageSize: max(1, pageSize))
    }

    /// One page: the SQL and parameters (also what `herald bench audience` times).
    public static func pageStatement(_ query: AudienceQuery, in range: SubscriptionRange, after cursor: String?,
                                     limit: Int?) -> (sql: String, parameters: [String?]) {
        var parameters = SQLParameters(query.parameters)
        var sql = "SELECT \(AudienceMember.columns) FROM subscriptions WHERE \(query.condition)"
        sql += bounds(range, after: cursor, &parameters)
        sql += " ORDER BY id"
        if let limit { sql += " LIMIT \(parameters.bind(String(limit)))::bigint" }
        return (sql, parameters.values)
    }

    private static func bounds(_ range: SubscriptionRange, after cursor: String?, _ parameters: inout SQLParameters) -> String {
        var sql = ""
        if let cursor {
            sql += " AND id > \(parameters.bind(cursor.lowercased()))::uuid"
        }
        if let from = range.from, cursor.map({ $0.lowercased() < from }) ?? true {
            sql += " AND id >= \(parameters.bind(from))::uuid"
        }
        if let to = range.to {
            sql += " AND id < \(parameters.bind(to))::uuid"
        }
        return sql
    }

    /// Exactly how many subscriptions the audience holds in `range`.
    public func count(_ query: AudienceQuery, in range: SubscriptionRange = .everything) async throws(PostgresError) -> Int {
        var parameters = SQLParameters(query.parameters)
        let sql = "SELECT count(*) FROM subscriptions WHERE \(query.condition)" + AudienceResolver.bounds(range, after: nil, &parameters)
        let rows = try await pool.query(sql, parameters.values)
        return rows.rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
    }

    /// The planner's row estimate for the audience (cheap, approximate; from `EXPLAIN`).
    public func estimate(_ query: AudienceQuery) async throws(PostgresError) -> Int {
        let rows = try await pool.query("EXPLAIN (FORMAT JSON) SELECT id FROM subscriptions WHERE \(query.condition)", query.parameters)
        guard let plan = rows.rows.first?.first ?? nil,
              let json = try? JSONValue.parse(plan),
              let rowsEstimate = json.arrayValue?.first?["Plan"]?["Plan Rows"],
              case .number(let number) = rowsEstimate else {
            throw PostgresError(.unexpectedResult, "EXPLAIN returned no row estimate")
        }
        return Int(number.double)
    }

    /// Splits the audience into contiguous id ranges of `devicesPerShard` subscriptions (the
    /// last one smaller). Walks the audience in id order, one bounded step per shard
    /// (`OFFSET devicesPerShard LIMIT 1` from the previous boundary, index-only for `all` and
    /// for filters on indexed columns), never an `OFFSET` over the whole table.
    public func shardPlan(_ query: AudienceQuery, devicesPerShard: Int = 50_000) async throws(PostgresError) -> ShardPlan {
        let size = max(1, devicesPerShard)
        var boundaries: [String] = []
        var count = 0
        var from: String? = nil
        while true {
            var parameters = SQLParameters(query.parameters)
            var sql = "SELECT id FROM subscriptions WHERE \(query.condition)"
            if let from { sql += " AND id >= \(parameters.bind(from))::uuid" }
            sql += " ORDER BY id OFFSET \(parameters.bind(String(size)))::bigint LIMIT 1"
            let rows = try await pool.query(sql, parameters.values)
            guard let next = rows.rows.first?.first ?? nil else { break }
            boundaries.append(next)
            count += size
            from = next
        }
        count += try await self.count(query, in: SubscriptionRange(from: from))
        if count == 0 { return ShardPlan(ranges: [], count: 0) }
        var ranges: [SubscriptionRange] = []
        var lower = Shard.minimumID
        for boundary in boundaries {
            ranges.append(SubscriptionRange(from: lower, to: boundary))
            lower = boundary
        }
        ranges.append(SubscriptionRange(from: lower, to: nil))
        return ShardPlan(ranges: ranges, count: count)
    }
}

/// The pages of one audience range, fetched in keyset order (`id > cursor ORDER BY id LIMIT n`).
/// While the caller works on one page, the next is already being fetched.
public struct AudiencePages: AsyncSequence, Sendable {
    public typealias Element = [AudienceMember]

    let pool: PostgresPool
    let query: AudienceQuery
    let range: SubscriptionRange
    let cursor: String?
    let pageSize: Int

    /// Iterates the pages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let pages: AudiencePages
        var pending: Task<Result<[AudienceMember], PostgresError>, Never>?
        var started = false
        var done = false

        /// The next page, or nil after the last.
        public mutating func next() async throws(PostgresError) -> [AudienceMember]? {
            if done { return nil }
            if !started {
                started = true
                pending = fetch(after: pages.cursor)
            }
            guard let pending else { return nil }
            let page: [AudienceMember]
            do throws(PostgresError) {
                page = try await pending.value.get()
            } catch {
                done = true
                throw error
            }
            if page.count < pages.pageSize {
                done = true
                self.pending = nil
            } else {
                self.pending = fetch(after: page.last?.id)
            }
            return page.isEmpty ? nil : page
        }

        private func fetch(after cursor: String?) -> Task<Result<[AudienceMember], PostgresError>, Never> {
            let pages = self.pages
            return Task {
                let statement = AudienceResolver.pageStatement(pages.query, in: pages.range, after: cursor, limit: pages.pageSize)
                do throws(PostgresError) {
                    let members = try await pages.pool.withConnection(retryingIfLost: true) { connection throws(PostgresError) in
                        try await connection.query(statement.sql, statement.parameters, decode: AudienceMember.decode)
                    }
                    return .success(members)
                } catch {
                    return .failure(error)
                }
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self)
    }
}
