import Foundation

/// What `herald doctor` decides, without I/O: each check's verdict from what was read.
public enum Doctor {
    /// One check's line.
    public struct Check: Equatable, Sendable {
        public var name: String
        public var ok: Bool
        var detail: String

        /// A check's verdict.
        public init(name: String, ok: Bool, detail: String) {
            self.name = name
            self.ok = ok
            self.detail = detail
        }

        /// `ok   name: detail` or `FAIL name: detail`.
        public var line: String { "\(ok ? "ok  " : "FAIL") \(name): \(detail)" }
    }

    /// The most clock difference tolerated between this host and PostgreSQL: leases,
    /// scheduled releases and expiries compare the two (docs/operations.md).
    static let maximumSkewSeconds = 2.0

    /// The most clock difference tolerated between this host and a provider's `date` header.
    /// The header has whole seconds and the request takes its round trip, so a tighter bound
    /// would flag healthy hosts; 30 s is far inside what the providers' token checks accept
    /// (an APNs provider token expires an hour after its `iat`; Google refuses assertions "not in
    /// a reasonable timeframe"), yet a clock that far off already misplaces quiet hours and
    /// scheduled sends by half a minute.
    static let maximumProviderSkewSeconds: Int64 = 30

    /// What a provider's answer says of the clocks: `date` is its `date` header in seconds (nil
    /// when it sent none), `sent`/`received` this host's clock around the request.
    public static func providerClock(_ name: String, origin: String, sent: Double, received: Double, date: Int64?) -> Check {
        let milliseconds = Int((received - sent) * 1000)
        guard let date else {
            return Check(name: name, ok: true, detail: "\(origin) answers (\(milliseconds) ms) but sends no date header: clock not compared")
        }
        // The header truncates to the second: the provider's clock was in [date, date + 1) while
        // it answered, some time between sent and received.
        let ahead = sent - Double(date + 1)
        let behind = Double(date) - received
        let skew = max(ahead, behind, 0)
        guard skew <= Double(maximumProviderSkewSeconds) else {
            let direction = ahead > 0 ? "ahead of" : "behind"
            return Check(name: name, ok: false, detail: String(format: "this host's clock is %.0f s %@ %@'s (over %d s): fix NTP; provider tokens and schedules depend on it",
                                                               skew, direction, origin, Int(maximumProviderSkewSeconds)))
        }
        return Check(name: name, ok: true, detail: "\(origin) answers (\(milliseconds) ms), clocks agree within \(maximumProviderSkewSeconds) s")
    }

    public static func migrations(applied: Int, embedded: Int) -> Check {
        if applied == embedded { return Check(name: "migrations", ok: true, detail: "at \(applied), as this binary expects") }
        if applied < embedded {
            return Check(name: "migrations", ok: false, detail: "the database is at \(applied), this binary needs \(embedded): run `herald migrate`")
        }
        return Check(name: "migrations", ok: true, detail: "at \(applied), newer than this binary's \(embedded) (a newer Herald migrated it)")
    }

    public static func topics(required: [String], present: [String: Int]) -> Check {
        let missing = required.filter { present[$0] == nil }
        if !missing.isEmpty {
            return Check(name: "topics", ok: false, detail: "missing: \(missing.joined(separator: ", ")) (create them with `herald topics create`)")
        }
        let counts = required.map { "\($0)=\(present[$0] ?? 0)" }.joined(separator: " ")
        return Check(name: "topics", ok: true, detail: "every topic exists, partitions \(counts)")
    }

    public static func skew(hostMinusDatabaseSeconds skew: Double) -> Check {
        let text = String(format: "%+.3f s", skew)
        guard abs(skew) <= maximumSkewSeconds else {
            return Check(name: "clock", ok: false, detail: "this host's clock differs from PostgreSQL's by \(text), over \(Int(maximumSkewSeconds)) s: fix NTP")
        }
        return Check(name: "clock", ok: true, detail: "this host and PostgreSQL agree within \(text)")
    }

    public static func credentials(_ apps: [(id: String, unreadable: [String])]) -> Check {
        let broken = apps.filter { !$0.unreadable.isEmpty }
        if broken.isEmpty { return Check(name: "credentials", ok: true, detail: "every app's credentials open (\(apps.count) apps)") }
        let names = broken.map { "\($0.id) (\($0.unreadable.joined(separator: ", ")))" }.joined(separator: "; ")
        return Check(name: "credentials", ok: false, detail: "cannot open under HERALD_CREDENTIALS_KEY or HERALD_CREDENTIALS_OLD_KEYS: \(names)")
    }
}
