public import HeraldCore

/// What `herald seed` generates.
public struct SeedOptions: Sendable {
    public var appID: String
    /// How many subscriptions.
    public var devices: Int
    /// Share of iOS devices (the rest are Android).
    public var iosShare: Double = 0.5
    /// Share of devices running a Herald-compatible SDK.
    public var sdkShare: Double = 0.8
    /// Share of devices that opted out.
    public var optedOutShare: Double = 0.02
    /// The same seed gives the same rows.
    public var seed: UInt64 = 1
    /// "Now" for session data, fixed so the rows do not depend on the day they were made.
    public var reference = Timestamp(seconds: 1_796_083_200)  // 2026-12-01T00:00:00Z

    /// Options for `devices` subscriptions of `appID`, other values at their defaults.
    public init(appID: String, devices: Int) {
        self.appID = appID
        self.devices = devices
    }
}

/// Writes synthetic subscriptions with `COPY … FROM STDIN`: realistic tags, languages,
/// locations (around real cities, with their time zones), sessions, tokens, opt-outs.
public struct SubscriptionSeeder: Sendable {
    private let pool: PostgresPool

    /// A seeder writing through `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Replaces the app's subscriptions with `options.devices` generated ones (one transaction),
    /// then vacuums and analyzes so audience scans can be index-only. Returns the rows written.
    public func seed(_ options: SeedOptions) async throws(PostgresError) -> Int {
        let generator = SeedGenerator(options)
        let copied = try await pool.withTransaction { connection throws(PostgresError) -> Int in
            try await connection.query("DELETE FROM subscriptions WHERE app_id = $1", [options.appID])
            return try await connection.copyIn("""
                COPY subscriptions (id, app_id, platform, token, sandbox, sdk, external_id, tags, language, lat, long,
                                    time_zone, opted_in, last_session_at, session_count, voip_token, token_updated_at) FROM STDIN
                """) { buffer in generator.fill(&buffer) }
        }
        try await pool.query("VACUUM (ANALYZE) subscriptions", idempotent: false)
        return copied
    }
}

/// Generates rows in COPY text format. `@unchecked Sendable`: used only from the one
/// connection queue that runs the COPY.
final class SeedGenerator: @unchecked Sendable {
    private let options: SeedOptions
    private var random: SplitMix64
    private var produced = 0
    private let appField: [UInt8]

    struct City {
        let latitude: Double, longitude: Double, zone: String, languages: [String]
    }

    static let cities: [City] = [
        City(latitude: 40.7128, longitude: -74.0060, zone: "America/New_York", languages: ["en", "es"]),
        City(latitude: 34.0522, longitude: -118.2437, zone: "America/Los_Angeles", languages: ["en", "es"]),
        City(latitude: 41.8781, longitude: -87.6298, zone: "America/Chicago", languages: ["en"]),
        City(latitude: 19.4326, longitude: -99.1332, zone: "America/Mexico_City", languages: ["es"]),
        City(latitude: -23.5505, longitude: -46.6333, zone: "America/Sao_Paulo", languages: ["pt-br"]),
        City(latitude: -34.6037, longitude: -58.3816, zone: "America/Argentina/Buenos_Aires", languages: ["es"]),
        City(latitude: 51.5074, longitude: -0.1278, zone: "Europe/London", languages: ["en"]),
        City(latitude: 48.8566, longitude: 2.3522, zone: "Europe/Paris", languages: ["fr", "en"]),
        City(latitude: 52.5200, longitude: 13.4050, zone: "Europe/Berlin", languages: ["de", "en"]),
        City(latitude: 40.4168, longitude: -3.7038, zone: "Europe/Madrid", languages: ["es"]),
        City(latitude: 41.9028, longitude: 12.4964, zone: "Europe/Rome", languages: ["it"]),
        City(latitude: 52.3676, longitude: 4.9041, zone: "Europe/Amsterdam", languages: ["nl", "en"]),
        City(latitude: 59.3293, longitude: 18.0686, zone: "Europe/Stockholm", languages: ["sv", "en"]),
        City(latitude: 55.7558, longitude: 37.6173, zone: "Europe/Moscow", languages: ["ru"]),
        City(latitude: 41.0082, longitude: 28.9784, zone: "Europe/Istanbul", languages: ["tr"]),
        City(latitude: 30.0444, longitude: 31.2357, zone: "Africa/Cairo", languages: ["ar"]),
        City(latitude: 6.5244, longitude: 3.3792, zone: "Africa/Lagos", languages: ["en"]),
        City(latitude: 19.0760, longitude: 72.8777, zone: "Asia/Kolkata", languages: ["hi", "en"]),
        City(latitude: 35.6762, longitude: 139.6503, zone: "Asia/Tokyo", languages: ["ja"]),
        City(latitude: 37.5665, longitude: 126.9780, zone: "Asia/Seoul", languages: ["ko"]),
        City(latitude: 31.2304, longitude: 121.4737, zone: "Asia/Shanghai", languages: ["zh-hans"]),
        City(latitude: 25.0330, longitude: 121.5654, zone: "Asia/Taipei", languages: ["zh-hant"]),
        City(latitude: 1.3521, longitude: 103.8198, zone: "Asia/Singapore", languages: ["en", "zh-hans"]),
        City(latitude: -33.8688, longitude: 151.2093, zone: "Australia/Sydney", languages: ["en"]),
        City(latitude: -36.8485, longitude: 174.7633, zone: "Pacific/Auckland", languages: ["en"]),
    ]
    static let plans = ["free", "free", "free", "free", "pro", "pro", "team"]
    static let interests = ["sports", "news", "music", "tech", "travel", "food", "games", "finance"]
    static let hex = Array("0123456789abcdef".utf8)
    static let tokenAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    init(_ options: SeedOptions) {
        self.options = options
        self.random = SplitMix64(seed: options.seed ^ 0x4845_5241_4C44)
        self.appField = Array(options.appID.utf8)
    }

    /// Appends up to ~4,000 rows; false when every row has been produced.
    func fill(_ out: inout [UInt8]) -> Bool {
        let end = min(options.devices, produced + 4000)
        while produced < end {
            row(produced, &out)
            produced += 1
        }
        return produced < options.devices
    }

    private func chance(_ share: Double) -> Bool {
        Double(random.next() >> 11) / Double(1 << 53) < share
    }

    private func pick<T>(_ values: [T]) -> T { values[Int(random.next() % UInt64(values.count))] }

    private func row(_ index: Int, _ out: inout [UInt8]) {
        let tab = UInt8(ascii: "\t")
        // id: a version-4 UUID from the generator.
        let high = random.next(), low = random.next()
        appendUUID(high: (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x4000, low: (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000, &out)
        out.append(tab)
        out += appField
        out.append(tab)
        let ios = chance(options.iosShare)
        out += Array((ios ? "ios" : "android").utf8)
        out.append(tab)
        if ios {
            for _ in 0..<4 { appendHex(random.next(), 16, &out) }
        } else {
            for _ in 0..<22 { out.append(SeedGenerator.tokenAlphabet[Int(random.next() & 63)]) }
            out += Array(":APA91b".utf8)
            for _ in 0..<134 { out.append(SeedGenerator.tokenAlphabet[Int(random.next() & 63)]) }
        }
        out.append(tab)
        out.append(ios && chance(0.1) ? UInt8(ascii: "t") : UInt8(ascii: "f"))  // sandbox
        out.append(tab)
        out.append(chance(options.sdkShare) ? UInt8(ascii: "t") : UInt8(ascii: "f"))
        out.append(tab)
        if chance(0.7) { out += Array("user-\(random.next() % UInt64(max(1, options.devices * 3 / 4)))".utf8) } else { out += nullField }
        out.append(tab)
        // tags
        out += Array(#"{"plan": ""#.utf8) + Array(pick(SeedGenerator.plans).utf8)
        out += Array(#"", "level": ""#.utf8) + Array(String(1 + random.next() % 50).utf8) + [UInt8(ascii: "\"")]
        let interestMask = random.next()
        var first = true
        out += Array(#", "interests": ["#.utf8)
        for (bit, interest) in SeedGenerator.interests.enumerated() where interestMask >> (bit * 3) & 7 == 0 {
            if !first { out += Array(", ".utf8) }
            first = false
            out += [UInt8(ascii: "\"")] + Array(interest.utf8) + [UInt8(ascii: "\"")]
        }
        out += Array("]".utf8)
        if chance(0.3) { out += Array(#", "beta": "yes""#.utf8) }
        out += Array("}".utf8)
        out.append(tab)
        let city = pick(SeedGenerator.cities)
        if chance(0.9) { out += Array(pick(city.languages).utf8) } else { out += nullField }
        out.append(tab)
        if chance(0.85) {
            appendFixed(city.latitude + (Double(random.next() % 60_000) / 100_000 - 0.3), &out)
            out.append(tab)
            appendFixed(city.longitude + (Double(random.next() % 60_000) / 100_000 - 0.3), &out)
        } else {
            out += nullField
            out.append(tab)
            out += nullField
        }
        out.append(tab)
        out += Array(city.zone.utf8)
        out.append(tab)
        out.append(chance(options.optedOutShare) ? UInt8(ascii: "f") : UInt8(ascii: "t"))
        out.append(tab)
        let sessions = random.next() % 200
        if sessions == 0 {
            out += nullField
        } else {
            let ago = Int64(random.next() % (90 * 86_400))
            out += Array(options.reference.adding(seconds: -ago).rfc3339.utf8)
        }
        out.append(tab)
        out += Array(String(sessions).utf8)
        out.append(tab)
        if ios && chance(0.2) { for _ in 0..<4 { appendHex(random.next(), 16, &out) } } else { out += nullField }
        out.append(tab)
        out += Array(options.reference.adding(seconds: -Int64(random.next() % (365 * 86_400))).rfc3339.utf8)
        out.append(UInt8(ascii: "\n"))
    }

    private let nullField: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "N")]

    private func appendHex(_ value: UInt64, _ digits: Int, _ out: inout [UInt8]) {
        var shift = (digits - 1) * 4
        while shift >= 0 {
            out.append(SeedGenerator.hex[Int((value >> UInt64(shift)) & 15)])
            shift -= 4
        }
    }

    private func appendUUID(high: UInt64, low: UInt64, _ out: inout [UInt8]) {
        appendHex(high >> 32, 8, &out)
        out.append(UInt8(ascii: "-"))
        appendHex((high >> 16) & 0xFFFF, 4, &out)
        out.append(UInt8(ascii: "-"))
        appendHex(high & 0xFFFF, 4, &out)
        out.append(UInt8(ascii: "-"))
        appendHex(low >> 48, 4, &out)
        out.append(UInt8(ascii: "-"))
        appendHex(low & 0xFFFF_FFFF_FFFF, 12, &out)
    }

    /// A coordinate with five decimals, clamped to what the table accepts.
    private func appendFixed(_ value: Double, _ out: inout [UInt8]) {
        let scaled = Int64((value * 100_000).rounded())
        let magnitude = scaled.magnitude
        if scaled < 0 { out.append(UInt8(ascii: "-")) }
        out += Array(String(magnitude / 100_000).utf8)
        out.append(UInt8(ascii: "."))
        let fraction = String(magnitude % 100_000)
        out += Array(repeating: UInt8(ascii: "0"), count: 5 - fraction.utf8.count) + Array(fraction.utf8)
    }
}

/// SplitMix64: small, fast, and the same on every platform, so seeds replay.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
