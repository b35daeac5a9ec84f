import Foundation
import HeraldCore
import Testing

@Suite struct HTTPDateTests {
    @Test func formatsAndParsesIMFFixdate() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")  // RFC 9110's example
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(1_709_164_800) == "Thu, 29 Feb 2024 00:00:00 GMT")
    }

    @Test func agreesWithFoundationOverManyInstants() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var seconds: Int64 = 0
        while seconds < 4_102_444_800 {  // to 2100
            let text = HTTPDate.format(seconds)
            #expect(text == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))), "\(seconds)")
            #expect(HTTPDate.parse(text) == seconds, "\(text)")
            seconds += 7_654_321
        }
    }

    @Test func refusesOtherForms() {
        for text in ["", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
                     "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
                     "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nox 1994 08:49:37 GMT"] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
    }
}
