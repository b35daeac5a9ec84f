public import Foundation

/// An instant, read from and written as RFC 3339 (`2026-12-02T17:34:19.250Z`).
///
/// Kept as whole seconds plus nanoseconds since the Unix epoch, so it round-trips exactly and
/// compares without floating-point surprises. Years 0001–9999, as RFC 3339 allows.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    public var seconds: Int64
    /// Nanoseconds within the second, 0..<1_000_000_000.
    public var nanoseconds: Int32

    /// Creates a timestamp from seconds and nanoseconds since the epoch.
    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// Creates a timestamp from a `Date` (microsecond precision).
    public init(_ date: Date) {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        let whole = Int64((micros / 1_000_000).rounded(.down))
        self.seconds = whole
        self.nanoseconds = Int32((Int64(micros) - whole * 1_000_000) * 1000)
    }

    /// The current time.
    public static var now: Timestamp { Timestamp(Date()) }

    /// The same instant as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9) }

    /// Milliseconds since the epoch.
    public var unixMilliseconds: Int64 { seconds * 1000 + Int64(nanoseconds / 1_000_000) }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    /// This instant moved by `interval` seconds.
    public func adding(seconds interval: Int64) -> Timestamp {
        Timestamp(seconds: seconds + interval, nanoseconds: nanoseconds)
    }

    /// Parses RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `t`, `z` and a
    /// space for `T` are accepted as RFC 3339 §5.6 allows. A leap second (`:60`) is read as the
    /// following second. Impossible dates (February 30) are refused.
    public init?(rfc3339 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for offset in start..<(start + count) {
                let byte = bytes[offset]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = digits(0, 4), bytes[4] == UInt8(ascii: "-"),
              let month = digits(5, 2), bytes[7] == UInt8(ascii: "-"),
              let day = digits(8, 2),
              [UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")].contains(bytes[10]),
              let hour = digits(11, 2), bytes[13] == UInt8(ascii: ":"),
              let minute = digits(14, 2), bytes[16] == UInt8(ascii: ":"),
              let second = digits(17, 2)
        else { return nil }
        guard year >= 1, (1...12).contains(month), day >= 1, day <= Timestamp.daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var index = 19
        var nanos = 0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                if index - start < 9 { nanos = nanos * 10 + Int(bytes[index] - 0x30) }
                index += 1
            }
            let count = index - start
            guard count >= 1 else { return nil }
            if count < 9 { for _ in count..<9 { nanos *= 10 } }
        }
        guard index < bytes.count else { return nil }
        var offsetSeconds = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            guard index + 6 == bytes.count, let offsetHour = digits(index + 1, 2), bytes[index + 3] == UInt8(ascii: ":"),
                  let offsetMinute = digits(index + 4, 2), offsetHour <= 23, offsetMinute <= 59
            else { return nil }
            offsetSeconds = sign * (offsetHour * 3600 + offsetMinute * 60)
            index += 6
        default:
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = Timestamp.daysFromCivil(year: year, month: month, day: day)
        let local = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        self.seconds = local - Int64(offsetSeconds)
        self.nanoseconds = Int32(nanos)
    }

    /// RFC 3339 in UTC, with as many fraction digits as needed (none, 3, 6 or 9).
    public var rfc3339: String {
        var out: [UInt8] = []
        out.reserveCapacity(30)
        appendRFC3339(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends ``rfc3339``'s UTF-8 bytes to `out`, without an intermediate string (a receipt
    /// writes one per notification).
    public func appendRFC3339(to out: inout [UInt8]) {
        let days = Int((Double(seconds) / 86_400).rounded(.down))
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = Timestamp.civilFromDays(days)
        func digits(_ value: Int, _ width: Int) {
            guard value >= 0 else {
                out.append(UInt8(ascii: "-"))
                out.append(contentsOf: String(-value).utf8)
                return
            }
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            // Wider values (a year past 9999) keep all their digits.
            while value / divisor >= 10 { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        if nanoseconds != 0 {
            let nanos = Int(nanoseconds)
            out.append(UInt8(ascii: "."))
            if nanos % 1_000_000 == 0 {
                digits(nanos / 1_000_000, 3)
            } else if nanos % 1000 == 0 {
                digits(nanos / 1000, 6)
            } else {
                digits(nanos, 9)
            }
        }
        out.append(UInt8(ascii: "Z"))
    }

    public var description: String { rfc3339 }

    static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp + (mp < 10 ? 3 : -9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
