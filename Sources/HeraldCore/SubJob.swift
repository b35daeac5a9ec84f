/// Sub-jobs of a scheduled job (docs/SCHEDULING.md): what the planner derives from a job with
/// `send_after`, `local_time`, `respect_quiet_hours` or `best_hour` so each group of its
/// audience can be released on its own.
///
/// A sub-job is the job's own document with another `id` (`<job>:<tag>:<n>`), `parent_id` set to
/// the job the user sent (receipts and payloads carry that id), the timing it was planned for
/// removed from `delivery`, and (for groups) an explicit `subscription_ids` audience.
public enum SubJob {
    /// The most subscriptions in one sub-job: 5,000 ids keep the message well under the 256 KiB
    /// job limit (a UUID in JSON takes 39 bytes).
    public static let maxSubscriptions = 5_000

    /// The timing members a sub-job no longer carries once it was planned for them.
    public static let timingMembers = ["send_after", "local_time", "same_day_only", "respect_quiet_hours", "best_hour"]

    /// A derived id, `<parent>:<tag>:<number>` (or `<parent>:<tag>` without a number), within
    /// the 64 characters of a job id: a long parent is cut and made unique by a hash of it.
    public static func id(parent: String, tag: String, number: Int? = nil) -> String {
        let suffix = ":" + tag + (number.map { ":\($0)" } ?? "")
        if parent.utf8.count + suffix.utf8.count <= 64 { return parent + suffix }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a 64
        for byte in parent.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        let tail = "." + String(repeating: "0", count: 16 - hex.count) + hex + suffix
        return String(parent.utf8.prefix(64 - tail.utf8.count)).map { $0 + tail } ?? String(tail.suffix(64))
    }

    /// The sub-job document of `job`: id `id`, parent `parent`, `audience` replaced by
    /// `subscriptionIDs` when given, and `removing` members taken out of `delivery`.
    public static func document(of job: Job, id: String, parent: String, subscriptionIDs: [String]?,
                                removing: [String] = SubJob.timingMembers) -> JSONValue {
        var members = job.document.objectValue ?? [:]
        members["id"] = .string(id)
        members["parent_id"] = .string(parent)
        if let subscriptionIDs {
            members["audience"] = .object(["subscription_ids": .array(subscriptionIDs.map(JSONValue.string))])
        }
        if var delivery = members["delivery"]?.objectValue ?? (removing.contains("respect_quiet_hours") ? [:] : nil) {
            for key in removing { delivery.removeValue(forKey: key) }
            // Planned for its quiet hours already: an explicit false, so the app's default does
            // not hold it a second time.
            if removing.contains("respect_quiet_hours") { delivery["respect_quiet_hours"] = .bool(false) }
            members["delivery"] = .object(delivery)
        }
        return .object(members)
    }
}

extension Job {
    /// The job whose id receipts and payloads carry: the parent for a sub-job, else itself.
    public var reported: Job {
        guard let parentID else { return self }
        var job = self
        job.id = parentID
        return job
    }

    /// Whether it reports the `planned` event of the job the user sent: a job that was not
    /// derived, or the `<job>:sa` sub-job that carries a `send_after` job's whole audience.
    public var reportsPlan: Bool {
        guard let parentID else { return true }
        return id == SubJob.id(parent: parentID, tag: "sa")
    }

    /// Whether planning it means scheduling (at `now`): a future `send_after`, or timing per
    /// subscription (local time, quiet hours, best hour). `quietHours` is the app's policy.
    public func needsScheduling(at now: Timestamp, quietHours: AppQuietHours = AppQuietHours()) -> Bool {
        if let sendAfter = delivery.sendAfter, sendAfter > now { return true }
        return delivery.localTimeMinutes != nil || respectsQuietHours(quietHours) || delivery.bestHour
    }

    /// Whether this job is held in quiet hours: its own `respect_quiet_hours`, else the app's
    /// default. Urgent jobs and live activities never are.
    public func respectsQuietHours(_ app: AppQuietHours) -> Bool {
        if delivery.urgent || kind == .liveActivity { return false }
        return delivery.respectQuietHours ?? app.respectByDefault
    }

    /// Whether the app's quiet-hours default matters to this job (it names no
    /// `respect_quiet_hours` of its own and could be held): only then is the app read.
    public var dependsOnAppQuietHours: Bool {
        delivery.respectQuietHours == nil && !delivery.urgent && kind != .liveActivity
    }
}
