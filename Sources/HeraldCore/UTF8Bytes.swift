extension String {
    /// Calls `body` with the string's UTF-8 bytes: read in place when the string keeps them
    /// contiguous (every native Swift string), so the string is neither copied nor retained;
    /// made contiguous in a copy otherwise.
    ///
    /// `append(contentsOf: string.utf8)` and `var copy = string; copy.withUTF8 { … }` each
    /// retain and release the string's storage, which the hot send path does a few dozen times
    /// per notification.
    @inlinable
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}

extension Array where Element == UInt8 {
    /// Appends `string`'s UTF-8 bytes (``Swift/String/withUTF8Bytes(_:)``: no retain of the string).
    @inlinable
    public mutating func appendUTF8(_ string: String) {
        string.withUTF8Bytes { append(contentsOf: $0) }
    }
}
