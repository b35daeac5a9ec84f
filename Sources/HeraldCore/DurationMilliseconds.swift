extension Duration {
    /// Whole milliseconds, rounded toward zero: what SQL timeouts, leases and `retry_in_ms` log
    /// fields take. The one conversion every module uses.
    public var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
