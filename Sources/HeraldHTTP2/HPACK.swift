internal import CNghttp2

/// One header field.
public struct HeaderField: Sendable, Equatable {
    public var name: String
    public var value: String
    /// Whether the field must never enter a compression table: secrets (device tokens in `:path`), and
    /// values unique to one request (`apns-id`), which indexing would only churn through the table.
    public var neverIndex: Bool

    /// Creates a header field.
    public init(_ name: String, _ value: String, neverIndex: Bool = false) {
        self.name = name
        self.value = value
        self.neverIndex = neverIndex
    }
}

/// An HPACK error from nghttp2.
public struct HPACKError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case compression, decompression, resources
        }
        private let base: Base

        /// A header block could not be encoded.
        public static let compression = Code(base: .compression)
        /// A header block could not be decoded (malformed, or past the limits).
        public static let decompression = Code(base: .decompression)
        /// nghttp2 could not make its deflater or inflater.
        public static let resources = Code(base: .resources)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// nghttp2's own error code.
    public let nghttp2Code: Int32
    /// Where the error was raised.
    public let file: String
    /// The line where the error was raised.
    public let line: Int

    init(_ code: Code, nghttp2Code: Int32, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.nghttp2Code = nghttp2Code
        self.file = file
        self.line = line
    }

    public var description: String { "HPACKError.\(code) \(nghttp2Code): \(String(cString: nghttp2_strerror(nghttp2Code)))" }
}

/// HPACK header compression (RFC 7541) with nghttp2's deflater and inflater: one pair per
/// direction of a connection, since each side keeps a dynamic table.
///
/// Not thread-safe: a connection's codec is used from its event loop only.
public final class HPACKEncoder {
    private let deflater: OpaquePointer

    /// Creates an encoder whose dynamic table holds at most `maxTableSize` bytes.
    public init(maxTableSize: Int = 4096) throws(HPACKError) {
        var pointer: OpaquePointer?
        let result = nghttp2_hd_deflate_new(&pointer, maxTableSize)
        guard result == 0, let pointer else { throw HPACKError(.resources, nghttp2Code: result) }
        deflater = pointer
    }

    deinit { nghttp2_hd_deflate_del(deflater) }

    /// Encodes a header block.
    public func encode(_ fields: [HeaderField]) throws(HPACKError) -> [UInt8] {
        try withNVs(fields) { (nvs: UnsafeMutableBufferPointer<nghttp2_nv>) throws(HPACKError) -> [UInt8] in
            let bound = nghttp2_hd_deflate_bound(deflater, nvs.baseAddress, nvs.count)
            var output = [UInt8](repeating: 0, count: bound)
            let written = nghttp2_hd_deflate_hd(deflater, &output, bound, nvs.baseAddress, nvs.count)
            guard written >= 0 else { throw HPACKError(.compression, nghttp2Code: Int32(written)) }
            return Array(output.prefix(written))
        }
    }
}

/// The decoding side of ``HPACKEncoder``.
public final class HPACKDecoder {
    private let inflater: OpaquePointer

    /// Creates a decoder.
    public init() throws(HPACKError) {
        var pointer: OpaquePointer?
        let result = nghttp2_hd_inflate_new(&pointer)
        guard result == 0, let pointer else { throw HPACKError(.resources, nghttp2Code: result) }
        inflater = pointer
    }

    deinit { nghttp2_hd_inflate_del(inflater) }

    /// Decodes one complete header block.
    public func decode(_ block: [UInt8]) throws(HPACKError) -> [HeaderField] {
        var fields: [HeaderField] = []
        var offset = 0
        while true {
            var nv = nghttp2_nv()
            var flags: Int32 = 0
            let consumed = block.withUnsafeBufferPointer { buffer in
                nghttp2_hd_inflate_hd2(inflater, &nv, &flags, buffer.baseAddress.map { $0 + offset }, buffer.count - offset, 1)
            }
            guard consumed >= 0 else { throw HPACKError(.decompression, nghttp2Code: Int32(consumed)) }
            offset += consumed
            if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                fields.append(HeaderField(
                    String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self),
                    neverIndex: nv.flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0
                ))
            }
            if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                nghttp2_hd_inflate_end_headers(inflater)
                return fields
            }
            if consumed == 0 && flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 {
                throw HPACKError(.decompression, nghttp2Code: Int32(NGHTTP2_ERR_HEADER_COMP.rawValue))
            }
        }
    }
}

/// Lays `fields` out as `nghttp2_nv`s whose pointers stay valid for `body`.
func withNVs<R>(_ fields: [HeaderField], _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) throws(HPACKError) -> R) throws(HPACKError) -> R {
    var storage: [UInt8] = []
    var ranges: [(name: Range<Int>, value: Range<Int>, flags: UInt8)] = []
    for field in fields {
        let nameStart = storage.count
        storage.append(contentsOf: field.name.utf8)
        let valueStart = storage.count
        storage.append(contentsOf: field.value.utf8)
        let flags = field.neverIndex ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        ranges.append((nameStart..<valueStart, valueStart..<storage.count, flags))
    }
    storage.append(0)  // never empty, so baseAddress is never nil
    return try storage.withUnsafeMutableBufferPointer { (bytes: inout UnsafeMutableBufferPointer<UInt8>) throws(HPACKError) -> R in
        let base = bytes.baseAddress ?? UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        var nvs = ranges.map { range in
            nghttp2_nv(name: base + range.name.lowerBound, value: base + range.value.lowerBound,
                       namelen: range.name.count, valuelen: range.value.count, flags: range.flags)
        }
        return try nvs.withUnsafeMutableBufferPointer { (buffer: inout UnsafeMutableBufferPointer<nghttp2_nv>) throws(HPACKError) -> R in
            try body(buffer)
        }
    }
}
