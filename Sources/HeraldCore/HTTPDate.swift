/// The HTTP `date` header's IMF-fixdate form (RFC 9110 §5.6.7), "Sun, 06 Nov 1994 08:49:37 GMT":
/// written by the simulators (through `HTTP2Server.Configuration.dateHeader`), read by `herald doctor` to compare this host's clock with a
/// provider's. Pure and allocation-light; whole seconds, as the header carries.
public enum HTTPDate {
    private static let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The IMF-fixdate of `seconds` since the Unix epoch (UTC).
    public static func format(_ seconds: Int64) -> String {
        let day = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let second = seconds - day * 86_400
        let civil = Timestamp.civilFromDays(Int(day))
        let (year, month, dayOfMonth) = (Int64(civil.year), Int64(civil.month), Int64(civil.day))
        let weekday = days[Int(((day % 7) + 7) % 7)]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(dayOfMonth)) \(months[Int(month) - 1]) \(year) \(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60)) GMT"
    }

    /// Seconds since the Unix epoch of an IMF-fixdate, or nil for anything else (the obsolete
    /// RFC 850 and asctime forms included: HTTP/2 servers send IMF-fixdate).
    public static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), days.contains(String(parts[0].dropLast())), parts[5] == "GMT",
              parts[1].count == 2, let dayOfMonth = Int64(parts[1]), (1...31).contains(dayOfMonth),
              let monthIndex = months.firstIndex(of: String(parts[2])),
              parts[3].count == 4, let year = Int64(parts[3]), year >= 1970 else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let hour = Int64(clock[0]), let minute = Int64(clock[1]), let second = Int64(clock[2]),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let month = Int64(monthIndex + 1)
        let day = Int64(Timestamp.daysFromCivil(year: Int(year), month: Int(month), day: Int(dayOfMonth)))
        // The date must exist (no 31 Feb): it round-trips to the same calendar day.
        let civil = Timestamp.civilFromDays(Int(day))
        guard (Int64(civil.year), Int64(civil.month), Int64(civil.day)) == (year, month, dayOfMonth) else { return nil }
        return day * 86_400 + hour * 3600 + minute * 60 + second
    }
}
