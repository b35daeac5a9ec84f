public import Foundation

/// A subscription's quiet window, local wall-clock minutes after midnight; it may wrap midnight
/// (20:00–08:00). Equal start and end is no window.
public struct QuietWindow: Sendable, Equatable {
    public var startMinutes: Int
    public var endMinutes: Int

    /// A window from `startMinutes` to `endMinutes` (0..<1440 each).
    public init(startMinutes: Int, endMinutes: Int) {
        self.startMinutes = startMinutes
        self.endMinutes = endMinutes
    }

    /// 20:00–08:00, for subscriptions without their own settings.
    public static let `default` = QuietWindow(startMinutes: 20 * 60, endMinutes: 8 * 60)

    /// Whether `minutes` after local midnight fall inside the window.
    public func contains(minutes: Int) -> Bool {
        if startMinutes == endMinutes { return false }
        if startMinutes < endMinutes { return minutes >= startMinutes && minutes < endMinutes }
        return minutes >= startMinutes || minutes < endMinutes
    }
}

/// An app's quiet hours (`apps.quiet_start`/`quiet_end`/`respect_quiet_hours`): the window of
/// devices without their own, and whether jobs that do not say are held by it.
public struct AppQuietHours: Sendable, Equatable {
    /// The window of subscriptions without their own (20:00–08:00 unless the app sets one).
    public var window: QuietWindow
    /// Whether a job without `respect_quiet_hours` respects quiet hours (off by default, so
    /// producers see no change unless the app opts in).
    public var respectByDefault: Bool

    /// An app's policy.
    public init(window: QuietWindow = .default, respectByDefault: Bool = false) {
        self.window = window
        self.respectByDefault = respectByDefault
    }
}

/// What the scheduling rules need to know about one subscription.
public struct SubscriptionTiming: Sendable, Equatable {
    public var id: String
    public var platform: Platform?
    /// IANA zone name; nil uses the app's default zone.
    public var timeZone: String?
    /// The device's quiet window; nil uses the app's (``AppQuietHours/window``).
    public var quiet: QuietWindow?
    /// The device turned quiet hours off (BV Garner's `disableQuietHours`): never held.
    public var quietDisabled: Bool = false
    /// Sessions per local hour, 24 counts (hour h is element h); nil when unknown.
    public var histogram: [Int]?

    /// A subscription's timing facts.
    public init(id: String, platform: Platform? = nil, timeZone: String?, quiet: QuietWindow?, histogram: [Int]?,
                quietDisabled: Bool = false) {
        self.quietDisabled = quietDisabled
        self.id = id
        self.platform = platform
        self.timeZone = timeZone
        self.quiet = quiet
        self.histogram = histogram
    }
}

/// When one subscription gets a scheduled job.
public enum PlannedRelease: Sendable, Equatable {
    /// Send at `at` (may be now). `reason` says what decided the instant (local-time,
    /// best-hour, quiet-hours), nil when nothing did; `reported` is true when it must be reported at once
    /// as `deferred` (quiet hours).
    case at(Timestamp, reason: Receipt.Reason?, reported: Bool)
    /// Not sent: the local time has passed today and the job is `same_day_only`.
    case drop(Receipt.Reason)
}

/// The scheduling rules of issue 10: local time, quiet hours and best hour, for one subscription
/// at an injected instant. Zones and their daylight-saving rules come from the time-zone
/// database through Foundation's `TimeZone`, never from fixed offsets. Pure: no I/O, no clock.
public enum DeliveryTiming {
    /// Resolves a zone name; unknown names fall back to `fallback`, then UTC.
    public static func zone(_ name: String?, fallback: String) -> TimeZone {
        if let name, let zone = TimeZone(identifier: name) { return zone }
        return TimeZone(identifier: fallback) ?? TimeZone(identifier: "UTC") ?? .current
    }

    static func calendar(_ zone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar
    }

    /// The instant at which the clock in `zone` reads `minutes` after midnight on the local date
    /// of `day` moved by `dayOffset` days. A time skipped by a daylight-saving change is taken
    /// as the same distance past the change, as the tz database's calendar does.
    static func instant(localMinutes minutes: Int, onLocalDateOf day: Timestamp, plusDays dayOffset: Int, zone: TimeZone) -> Timestamp? {
        let calendar = calendar(zone)
        let date = calendar.dateComponents([.year, .month, .day], from: day.date)
        guard let year = date.year, let month = date.month, let dayOfMonth = date.day else { return nil }
        var target = DateComponents()
        target.year = year
        target.month = month
        target.day = dayOfMonth + dayOffset
        target.hour = minutes / 60
        target.minute = minutes % 60
        target.second = 0
        return calendar.date(from: target).map { Timestamp(seconds: Int64($0.timeIntervalSince1970.rounded(.down))) }
    }

    /// Minutes after local midnight at `instant` in `zone`.
    public static func localMinutes(at instant: Timestamp, zone: TimeZone) -> Int {
        let parts = calendar(zone).dateComponents([.hour, .minute], from: instant.date)
        return (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
    }

    /// The next time (at or after `now`, whole seconds) the clock in `zone` reads `minutes`
    /// after midnight: today, or tomorrow when today's has passed; nil when it has passed and
    /// `sameDayOnly`.
    public static func localTime(_ minutes: Int, zone: TimeZone, now: Timestamp, sameDayOnly: Bool) -> Timestamp? {
        let floor = Timestamp(seconds: now.seconds)
        if let today = instant(localMinutes: minutes, onLocalDateOf: now, plusDays: 0, zone: zone), today >= floor { return today }
        if sameDayOnly { return nil }
        return instant(localMinutes: minutes, onLocalDateOf: now, plusDays: 1, zone: zone)
    }

    /// The end of the quiet window when `instant` falls inside it, else nil.
    public static func quietEnd(_ window: QuietWindow, zone: TimeZone, at instant: Timestamp) -> Timestamp? {
        let minutes = localMinutes(at: instant, zone: zone)
        guard window.contains(minutes: minutes) else { return nil }
        // Evening part of a window wrapping midnight: it ends tomorrow morning.
        let tomorrow = window.startMinutes > window.endMinutes && minutes >= window.startMinutes
        return DeliveryTiming.instant(localMinutes: window.endMinutes, onLocalDateOf: instant, plusDays: tomorrow ? 1 : 0, zone: zone)
    }

    /// The most active local hour of a histogram (the earliest of equals); nil without history.
    public static func bestHour(_ histogram: [Int]?) -> Int? {
        guard let histogram, histogram.count == 24, let top = histogram.max(), top > 0 else { return nil }
        return histogram.firstIndex(of: top)
    }

    /// The start of the next `hour` in `zone` within 24 hours of `now`: now when that hour is
    /// under way.
    public static func nextHour(_ hour: Int, zone: TimeZone, now: Timestamp) -> Timestamp {
        if localMinutes(at: now, zone: zone) / 60 == hour { return Timestamp(seconds: now.seconds) }
        return localTime(hour * 60, zone: zone, now: now, sameDayOnly: false) ?? Timestamp(seconds: now.seconds)
    }

    /// When `subscription` gets a job with `delivery`, planned at `now`: local time or best
    /// hour first, then held to the end of its quiet window when that instant falls inside it
    /// (when the job respects quiet hours, by its own flag or the app's default, and the device
    /// has not turned them off; never for an urgent job).
    public static func release(_ subscription: SubscriptionTiming, delivery: Delivery, defaultZone: String,
                               quietHours: AppQuietHours = AppQuietHours(), now: Timestamp) -> PlannedRelease {
        let zone = zone(subscription.timeZone, fallback: defaultZone)
        let start = Timestamp(seconds: now.seconds)
        var at = start
        var reason: Receipt.Reason?
        if let minutes = delivery.localTimeMinutes {
            guard let local = localTime(minutes, zone: zone, now: now, sameDayOnly: delivery.sameDayOnly) else { return .drop(.expired) }
            at = local
            reason = .localTime
        } else if delivery.bestHour, let hour = bestHour(subscription.histogram) {
            at = nextHour(hour, zone: zone, now: now)
            reason = .bestHour
        }
        let respect = !delivery.urgent && (delivery.respectQuietHours ?? quietHours.respectByDefault)
        if respect, !subscription.quietDisabled, let end = quietEnd(subscription.quiet ?? quietHours.window, zone: zone, at: at) {
            return .at(end, reason: .quietHours, reported: true)
        }
        return .at(at, reason: reason, reported: false)
    }
}
