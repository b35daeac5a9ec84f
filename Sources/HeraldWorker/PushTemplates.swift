import HeraldAPNs
import HeraldCore
import HeraldPostgres

/// A shard run's renderings of its job, made once per shape of device rather than once per
/// device. Only two things of a device reach a rendered request besides its shape: its
/// subscription id (`herald.sub`, `op_message_id`, the `apns-id`) and its token. A template is the
/// request ``PushRender`` renders for a stand-in device whose id and token are markers of the same
/// lengths as the real ones; a device's request is the template with the markers replaced. It is
/// byte for byte what ``PushRender`` would render for the device, because:
/// - the shape is the template's key: provider, platform, payload dialect, language, and the
///   lengths of the id and the token (lengths decide where a long body is shortened);
/// - only ids and tokens of letters, digits, `-`, `_`, `:` and `.` are spliced (nothing to
///   escape at any depth of JSON); any other goes through ``PushRender`` on its own;
/// - a template is checked when it is made: it must give, with a second pair of markers, what
///   ``PushRender`` renders for them now and an hour from now, or it is kept for the current
///   second only (a TTL counted from now), or not at all (its key then renders per device);
/// - the app is the one the templates were made with (``AppDelivery`` is rebuilt whenever its
///   settings are re-read), and the job is the run's own.
///
/// Used by one run's task; not shared.
final class PushTemplates {
    /// What a device's request depends on besides its id and token.
    struct Key: Hashable {
        var provider: Receipt.Provider
        var platform: Platform
        var dialect: PayloadDialect
        var language: String?
        var subscriptionLength: Int
        var tokenLength: Int
    }

    /// Where a device's own value goes in a template's bytes.
    enum Slot: Equatable {
        case subscription
        case token
    }

    /// A request rendered for the markers, cut at them.
    struct Template {
        /// The rendering for the markers (its bytes are replaced per device).
        var result: PushRender.Result
        /// The request bytes between the markers: one more than `slots`.
        var segments: [[UInt8]]
        var slots: [Slot]
        /// The seconds for which the template holds.
        var validFrom: Int64
        var validThrough: Int64
    }

    /// The checked hold of a template whose rendering does not depend on the time.
    static let horizonSeconds: Int64 = 3600
    /// Markers shorter than this could occur in a job's text by chance: such ids and tokens are
    /// rendered per device.
    static let minimumMarkerLength = 16
    /// At most this many templates are kept; more (a job in a hundred languages) starts over.
    static let capacity = 256

    private var templates: [Key: Template?] = [:]
    private var jobID: String?
    private var app: AppDelivery?
    /// The marker nonces: a pair used in templates, a pair for the check.
    private let nonces: [[UInt8]]
    /// How many requests were spliced, rendered on their own, and how many templates made.
    private(set) var spliced = 0
    private(set) var renderedAlone = 0
    private(set) var made = 0

    init(seed: UInt64 = UInt64.random(in: .min ... .max)) {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var generator = SplitMix64(seed: seed)
        nonces = (0..<4).map { _ in (0..<12).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] } }
    }

    /// What ``PushRender/render(_:to:token:app:now:)`` renders for `member`, from a template when
    /// the member's shape has one.
    func render(_ job: Job, to member: AudienceMember, token: String, delivery: AppDelivery, now: Timestamp) -> PushRender.Result {
        guard Self.splicable(member.id), Self.splicable(token),
              member.id.utf8.count >= Self.minimumMarkerLength, token.utf8.count >= Self.minimumMarkerLength else {
            renderedAlone += 1
            return PushRender.render(job, to: member, token: token, app: delivery.settings, now: now)
        }
        if jobID != job.id || app !== delivery || templates.count >= Self.capacity {
            templates.removeAll(keepingCapacity: true)
            jobID = job.id
            app = delivery
        }
        let provider = AppDelivery.provider(for: member, kind: job.kind)
        let profile = PayloadProfile(rawValue: delivery.settings.payloadProfile) ?? .sdk
        let key = Key(provider: provider, platform: member.platform,
                      dialect: profile.dialect(platform: member.platform, provider: provider, sdk: member.sdk),
                      language: member.language, subscriptionLength: member.id.utf8.count, tokenLength: token.utf8.count)
        let template: Template?
        if let cached = templates[key], cached.map({ (($0.validFrom)...($0.validThrough)).contains(now.seconds) }) ?? true {
            template = cached
        } else {
            template = make(job, like: member, token: token, app: delivery.settings, now: now)
            templates[key] = .some(template)
            made += 1
        }
        guard let template else {
            renderedAlone += 1
            return PushRender.render(job, to: member, token: token, app: delivery.settings, now: now)
        }
        spliced += 1
        return Self.fill(template, jobID: job.id, subscription: member.id, token: token, sandbox: member.sandbox)
    }

    /// Whether `value` can be spliced into JSON as it is, at any depth: `[A-Za-z0-9_:.-]`.
    /// (Asked of every device's id and token: the bytes are read in place and each is tested
    /// against a 128-bit mask without a branch; a table behind a lazy global, or a `switch` of
    /// ranges, cost 3% of a shard run's CPU.)
    static func splicable(_ value: String) -> Bool {
        value.withUTF8Bytes { bytes in
            var allowed: UInt64 = 1
            for byte in bytes {
                let mask = byte & 0x40 == 0 ? Self.splicableBelow64 : Self.splicableFrom64
                // Bytes from 128 up (UTF-8 beyond ASCII) are never allowed.
                allowed &= (mask >> UInt64(byte & 0x3f)) & UInt64(1 &- (byte >> 7))
            }
            return allowed == 1
        }
    }

    /// Bit `b` set: byte `b` (0–63) is `-`, `.`, a digit or `:` (literals, so no lazy global).
    static let splicableBelow64: UInt64 = 0x07ff600000000000
    /// Bit `b` set: byte `64 + b` is a letter or `_`.
    static let splicableFrom64: UInt64 = 0x07fffffe87fffffe

    /// A marker of `length` bytes from nonce `index`.
    func marker(_ index: Int, length: Int) -> String {
        var bytes = nonces[index]
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: length - bytes.count))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The template for devices shaped like `member`, checked; nil when it does not hold.
    private func make(_ job: Job, like member: AudienceMember, token: String, app: AppSettings, now: Timestamp) -> Template? {
        func render(subscription: String, token: String, at time: Timestamp) -> PushRender.Result {
            var standIn = member
            standIn.id = subscription
            standIn.token = token
            return PushRender.render(job, to: standIn, token: token, app: app, now: time)
        }
        let subscriptionMarker = marker(0, length: member.id.utf8.count)
        let tokenMarker = marker(1, length: token.utf8.count)
        let result = render(subscription: subscriptionMarker, token: tokenMarker, at: now)
        guard var template = Self.cut(result, subscription: Array(subscriptionMarker.utf8), token: Array(tokenMarker.utf8),
                                      second: now.seconds) else { return nil }
        let checkSubscription = marker(2, length: member.id.utf8.count)
        let checkToken = marker(3, length: token.utf8.count)
        let expected = Self.fill(template, jobID: job.id, subscription: checkSubscription, token: checkToken, sandbox: member.sandbox)
        guard expected == render(subscription: checkSubscription, token: checkToken, at: now) else { return nil }
        let later = Timestamp(seconds: now.seconds + Self.horizonSeconds)
        if expected == render(subscription: checkSubscription, token: checkToken, at: later) {
            template.validThrough = later.seconds
        }
        return template
    }

    /// `result`'s request bytes cut at the markers.
    static func cut(_ result: PushRender.Result, subscription: [UInt8], token: [UInt8], second: Int64) -> Template? {
        let bytes: [UInt8]
        switch result {
        case .apns(let notification): bytes = notification.payload
        case .fcm(let message): bytes = message.body
        case .failed: return Template(result: result, segments: [], slots: [], validFrom: second, validThrough: second)
        }
        var segments: [[UInt8]] = []
        var slots: [Slot] = []
        var start = 0
        var index = 0
        func matches(_ marker: [UInt8], at position: Int) -> Bool {
            position + marker.count <= bytes.count && bytes[position] == marker[0]
                && bytes[position..<(position + marker.count)].elementsEqual(marker)
        }
        while index < bytes.count {
            let slot: Slot? = matches(subscription, at: index) ? .subscription : matches(token, at: index) ? .token : nil
            guard let slot else {
                index += 1
                continue
            }
            segments.append(Array(bytes[start..<index]))
            slots.append(slot)
            index += slot == .subscription ? subscription.count : token.count
            start = index
        }
        segments.append(Array(bytes[start...]))
        return Template(result: result, segments: segments, slots: slots, validFrom: second, validThrough: second)
    }

    /// The device's request: the template's bytes with its id and token, and its own headers.
    static func fill(_ template: Template, jobID: String, subscription: String, token: String, sandbox: Bool) -> PushRender.Result {
        func splice() -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(template.segments.reduce(0) { $0 + $1.count } + template.slots.count * max(subscription.utf8.count, token.utf8.count))
            for (index, slot) in template.slots.enumerated() {
                bytes.append(contentsOf: template.segments[index])
                bytes.appendUTF8(slot == .subscription ? subscription : token)
            }
            if let last = template.segments.last { bytes.append(contentsOf: last) }
            return bytes
        }
        switch template.result {
        case .apns(var notification):
            notification.payload = splice()
            notification.deviceToken = token
            notification.apnsID = APNsNotification.apnsID(jobID: jobID, subscriptionID: subscription)
            notification.sandbox = sandbox
            return .apns(notification)
        case .fcm(var message):
            message.body = splice()
            return .fcm(message)
        case .failed:
            return template.result
        }
    }
}
