/// Where a job is (`jobs.state`): received → scheduled | planned → running → completed; or
/// cancelled, halted (a provider's credential fault), expired (`expires_at` passed). The raw
/// values are the column's, which the `jobs_state_check` constraint allows.
public enum JobState: String, Sendable, CaseIterable {
    case received
    case scheduled
    case planned
    case running
    case completed
    case cancelled
    case halted
    case expired

    /// Whether nothing more is sent for the job: completed, cancelled or expired.
    public var isFinal: Bool {
        self == .completed || self == .cancelled || self == .expired
    }
}
