import Foundation
import HeraldCore
import Testing

@Suite struct DeliveryTimingTests {
    static let zones = [
        "UTC", "Europe/London", "Europe/Paris", "Europe/Moscow", "Asia/Dubai", "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu",
        "Asia/Dhaka", "Asia/Bangkok", "Asia/Shanghai", "Asia/Tokyo", "Australia/Adelaide", "Australia/Sydney", "Pacific/Auckland",
        "Pacific/Kiritimati", "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Denver", "America/Chicago",
        "America/New_York", "America/St_Johns", "America/Sao_Paulo",
    ]

    static func at(_ text: String) throws -> Timestamp { try #require(Timestamp(rfc3339: text)) }

    /// Hour, minute and second on the wall clock of `zone` at `instant`, read by Foundation.
    static func wallClock(_ instant: Timestamp, _ zone: String) throws -> (Int, Int, Int) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: zone))
        let parts = calendar.dateComponents([.hour, .minute, .second], from: instant.date)
        return (parts.hour ?? -1, parts.minute ?? -1, parts.second ?? -1)
    }

    @Test func nineOClockInTwentyFourZonesIsTheNextLocalNineOnTheDSTChangeDay() throws {
        // 2026-03-08 02:00Z: the day the United States move to summer time (02:00 local).
        let now = try Self.at("2026-03-08T02:00:00Z")
        for name in Self.zones {
            let zone = try #require(TimeZone(identifier: name))
            let due = try #require(DeliveryTiming.localTime(9 * 60, zone: zone, now: now, sameDayOnly: false))
            let (hour, minute, second) = try Self.wallClock(due, name)
            #expect(hour == 9 && minute == 0 && second == 0, "\(name): \(due)")
            #expect(due >= now && due.seconds - now.seconds < 24 * 3600, "\(name): the next 09:00, not a later one")
        }
        let zone = { (name: String) in TimeZone(identifier: name) ?? .current }
        // New York is on EDT (-4) by 09:00 that day, though EST (-5) at planning time.
        #expect(DeliveryTiming.localTime(540, zone: zone("America/New_York"), now: now, sameDayOnly: false) == (try Self.at("2026-03-08T13:00:00Z")))
        // +05:45: Kathmandu is at 07:45, so 09:00 is 03:15Z.
        #expect(DeliveryTiming.localTime(540, zone: zone("Asia/Kathmandu"), now: now, sameDayOnly: false) == (try Self.at("2026-03-08T03:15:00Z")))
        // Tokyo's 09:00 passed at 00:00Z: tomorrow, or not at all when same_day_only.
        #expect(DeliveryTiming.localTime(540, zone: zone("Asia/Tokyo"), now: now, sameDayOnly: false) == (try Self.at("2026-03-09T00:00:00Z")))
        #expect(DeliveryTiming.localTime(540, zone: zone("Asia/Tokyo"), now: now, sameDayOnly: true) == nil)
        // A time skipped by the change (02:30 on 2026-03-08 in New York) goes just after it.
        let skipped = try #require(DeliveryTiming.localTime(150, zone: zone("America/New_York"), now: now, sameDayOnly: false))
        #expect(skipped == (try Self.at("2026-03-08T07:30:00Z")))
    }

    @Test func quietWindowsHoldUntilTheirEndIncludingAcrossMidnight() throws {
        let paris = try #require(TimeZone(identifier: "Europe/Paris"))
        // 23:30 in Paris (CET, +1): the default 20:00–08:00 ends at 08:00 tomorrow.
        let evening = try Self.at("2026-01-15T22:30:00Z")
        #expect(DeliveryTiming.quietEnd(.default, zone: paris, at: evening) == (try Self.at("2026-01-16T07:00:00Z")))
        // 06:00 in Paris: the same window ends at 08:00 today.
        #expect(DeliveryTiming.quietEnd(.default, zone: paris, at: try Self.at("2026-01-16T05:00:00Z")) == (try Self.at("2026-01-16T07:00:00Z")))
        // 12:00 in Paris is not quiet by default; a 12:00–14:00 window holds it until 14:00.
        let noon = try Self.at("2026-01-16T11:00:00Z")
        #expect(DeliveryTiming.quietEnd(.default, zone: paris, at: noon) == nil)
        #expect(DeliveryTiming.quietEnd(QuietWindow(startMinutes: 720, endMinutes: 840), zone: paris, at: noon) == (try Self.at("2026-01-16T13:00:00Z")))
        #expect(!QuietWindow(startMinutes: 600, endMinutes: 600).contains(minutes: 600), "equal ends: no window")
    }

    @Test func bestHourIsTheMostActiveHourWithinADayOrNowWithoutHistory() throws {
        var histogram = Array(repeating: 1, count: 24)
        histogram[18] = 40
        histogram[7] = 40
        #expect(DeliveryTiming.bestHour(histogram) == 7, "the earliest of equals")
        histogram[7] = 0
        #expect(DeliveryTiming.bestHour(histogram) == 18)
        #expect(DeliveryTiming.bestHour(nil) == nil && DeliveryTiming.bestHour(Array(repeating: 0, count: 24)) == nil)

        let now = try Self.at("2026-06-01T12:10:00Z")  // 14:10 in Paris (CEST)
        var delivery = Delivery()
        delivery.bestHour = true
        let active = SubscriptionTiming(id: "a", timeZone: "Europe/Paris", quiet: nil, histogram: histogram)
        #expect(DeliveryTiming.release(active, delivery: delivery, defaultZone: "UTC", now: now)
                == .at(try Self.at("2026-06-01T16:00:00Z"), reason: .bestHour, reported: false))
        let unknown = SubscriptionTiming(id: "b", timeZone: "Europe/Paris", quiet: nil, histogram: nil)
        #expect(DeliveryTiming.release(unknown, delivery: delivery, defaultZone: "UTC", now: now) == .at(now, reason: nil, reported: false))
        // Under way: the best hour is 14 and it is 14:10, so now.
        var fourteen = Array(repeating: 0, count: 24)
        fourteen[14] = 3
        let current = SubscriptionTiming(id: "c", timeZone: "Europe/Paris", quiet: nil, histogram: fourteen)
        #expect(DeliveryTiming.release(current, delivery: delivery, defaultZone: "UTC", now: now) == .at(now, reason: .bestHour, reported: false))
    }

    @Test func quietHoursApplyAtTheInstantTheJobWouldGoAndUnknownZonesUseTheAppDefault() throws {
        let now = try Self.at("2026-01-15T22:30:00Z")
        var delivery = Delivery()
        delivery.respectQuietHours = true
        // No zone: the app's default (Europe/Paris, 23:30) is quiet until 08:00.
        let plain = SubscriptionTiming(id: "a", timeZone: nil, quiet: nil, histogram: nil)
        #expect(DeliveryTiming.release(plain, delivery: delivery, defaultZone: "Europe/Paris", now: now)
                == .at(try Self.at("2026-01-16T07:00:00Z"), reason: .quietHours, reported: true))
        // New York is at 17:30: not quiet, goes now.
        let newYork = SubscriptionTiming(id: "b", timeZone: "America/New_York", quiet: nil, histogram: nil)
        #expect(DeliveryTiming.release(newYork, delivery: delivery, defaultZone: "Europe/Paris", now: now) == .at(now, reason: nil, reported: false))
        // local_time 21:00 in New York falls in its quiet window: held to 08:00 there.
        delivery.localTimeMinutes = 21 * 60
        #expect(DeliveryTiming.release(newYork, delivery: delivery, defaultZone: "UTC", now: now)
                == .at(try Self.at("2026-01-16T13:00:00Z"), reason: .quietHours, reported: true))
    }

    @Test func theAppsQuietHoursApplyWhenTheJobDoesNotSayAndTheDeviceHasNotTurnedThemOff() throws {
        let now = try Self.at("2026-01-15T22:30:00Z")  // 23:30 in Paris
        let paris = SubscriptionTiming(id: "a", timeZone: "Europe/Paris", quiet: nil, histogram: nil)
        let app = AppQuietHours(window: QuietWindow(startMinutes: 22 * 60, endMinutes: 7 * 60), respectByDefault: true)
        let silent = Delivery()
        // The job says nothing: the app's default holds it, to the end of the app's window (07:00).
        #expect(DeliveryTiming.release(paris, delivery: silent, defaultZone: "UTC", quietHours: app, now: now)
                == .at(try Self.at("2026-01-16T06:00:00Z"), reason: .quietHours, reported: true))
        // Without the app's opt-in nothing changes for producers.
        #expect(DeliveryTiming.release(paris, delivery: silent, defaultZone: "UTC", now: now) == .at(now, reason: nil, reported: false))
        // The job's own false wins over the app's default.
        var optOut = Delivery()
        optOut.respectQuietHours = false
        #expect(DeliveryTiming.release(paris, delivery: optOut, defaultZone: "UTC", quietHours: app, now: now) == .at(now, reason: nil, reported: false))
        // A device that turned quiet hours off is never held; one with its own window uses it.
        var disabled = paris
        disabled.quietDisabled = true
        #expect(DeliveryTiming.release(disabled, delivery: silent, defaultZone: "UTC", quietHours: app, now: now) == .at(now, reason: nil, reported: false))
        var own = paris
        own.quiet = QuietWindow(startMinutes: 23 * 60, endMinutes: 6 * 60)
        #expect(DeliveryTiming.release(own, delivery: silent, defaultZone: "UTC", quietHours: app, now: now)
                == .at(try Self.at("2026-01-16T05:00:00Z"), reason: .quietHours, reported: true))
        // Urgent jobs are never held, even when they ask.
        var urgent = Delivery()
        urgent.urgent = true
        urgent.respectQuietHours = true
        #expect(DeliveryTiming.release(paris, delivery: urgent, defaultZone: "UTC", quietHours: app, now: now) == .at(now, reason: nil, reported: false))
    }
}
