extension Duration {
    /// Whole milliseconds, rounded toward zero: what SQL timeouts, leases and `retry_in_ms` log
    /// fields take. The one conversion every module uses.
    public var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Whole nanoseconds, clamped to `Int64`: what `DispatchTime` deadlines take.
    public var nanoseconds: Int64 {
        let (seconds, overflow) = components.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return components.seconds < 0 ? .min : .max }
        let (total, overflowAgain) = seconds.addingReportingOverflow(components.attoseconds / 1_000_000_000)
        return overflowAgain ? (seconds < 0 ? .min : .max) : total
    }
}
