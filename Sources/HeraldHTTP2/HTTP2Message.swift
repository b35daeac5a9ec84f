/// An HTTP/2 request. Pseudo-headers `:scheme` and `:authority` come from the client's origin.
///
/// The header block laid out for nghttp2 (``EncodedHeaderBlock``) is the request's one copy of
/// its method, path and header fields: `method`, `path` and `headers` read it, and setting one
/// lays it out again. A request sent many times is laid out once (copies share the block).
public struct HTTP2Request: Sendable {
    public var method: String {
        get { encoded.pseudoHeader(at: 0) }
        set { encoded = EncodedHeaderBlock(method: newValue, path: path, headers: headers) }
    }
    public var path: String {
        get { encoded.pseudoHeader(at: 1) }
        set { encoded = EncodedHeaderBlock(method: method, path: newValue, headers: headers) }
    }
    /// Request headers (lower-case names).
    public var headers: [HeaderField] {
        get { encoded.regularFields }
        set { encoded = EncodedHeaderBlock(method: method, path: path, headers: newValue) }
    }
    public var body: [UInt8]
    /// `:method`, `:path` and the header fields, laid out for nghttp2.
    private(set) var encoded: EncodedHeaderBlock
    /// How long the request may take, waiting for a stream included (nanoseconds).
    public var timeoutNanoseconds: UInt64

    /// Creates a request.
    public init(method: String = "POST", path: String, headers: [HeaderField] = [], body: [UInt8] = [], timeoutNanoseconds: UInt64 = 30_000_000_000) {
        self.body = body
        self.encoded = EncodedHeaderBlock(method: method, path: path, headers: headers)
        self.timeoutNanoseconds = timeoutNanoseconds
    }

    /// Creates a request whose `:path` is `pathPrefix` followed by `pathSuffix` and whose header
    /// fields `writeHeaders` writes straight into the header block: no array of fields and no
    /// string per field or for the path (the provider clients' per-notification requests).
    public init(method: String = "POST", pathPrefix: String, pathSuffix: String, body: [UInt8], timeoutNanoseconds: UInt64,
                headers writeHeaders: (inout HTTP2HeaderWriter) -> Void) {
        var writer = HTTP2HeaderWriter(method: method, pathPrefix: pathPrefix, pathSuffix: pathSuffix)
        writeHeaders(&writer)
        self.body = body
        self.encoded = EncodedHeaderBlock(bytes: writer.bytes)
        self.timeoutNanoseconds = timeoutNanoseconds
    }
}

/// Writes a request's header fields into its header block (``HTTP2Request/init(method:pathPrefix:pathSuffix:body:timeoutNanoseconds:headers:)``).
public struct HTTP2HeaderWriter {
    fileprivate var bytes: [UInt8] = []

    fileprivate init(method: String, pathPrefix: String, pathSuffix: String) {
        // A provider request's block (a bearer token, an id, a few short fields) fits: one allocation.
        bytes.reserveCapacity(640)
        EncodedHeaderBlock.add(":method", method, neverIndex: false, to: &bytes)
        // `:path` is never indexed: it carries device tokens.
        EncodedHeaderBlock.appendLengths(name: 5, value: pathPrefix.utf8.count + pathSuffix.utf8.count, neverIndex: true, to: &bytes)
        bytes.appendUTF8(":path")
        bytes.appendUTF8(pathPrefix)
        bytes.appendUTF8(pathSuffix)
    }

    /// Adds a field (lower-case `name`); `neverIndex`: kept out of both ends' HPACK tables.
    public mutating func add(_ name: String, _ value: String, neverIndex: Bool = false) {
        EncodedHeaderBlock.add(name, value, neverIndex: neverIndex, to: &bytes)
    }

    /// Adds a field whose value is `value` in decimal (a small string up to 15 digits: no allocation).
    public mutating func add(_ name: String, _ value: Int64) {
        add(name, String(value))
    }
}

/// An HTTP/2 response.
///
/// Header fields are kept as the raw bytes they arrived in and turned into strings only when
/// asked for: at a hundred thousand responses a second, building strings nobody reads is what
/// the client would spend its time on.
public struct HTTP2Response: Sendable {
    public var status: Int
    public var body: [UInt8]
    /// `name`, `value` pairs, each as a 16-bit big-endian length and its bytes.
    var rawHeaders: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [HeaderField] = [], body: [UInt8] = []) {
        self.status = status
        self.body = body
        var raw: [UInt8] = []
        for field in headers { HTTP2Response.append(Array(field.name.utf8), Array(field.value.utf8), to: &raw) }
        self.rawHeaders = raw
    }

    init(status: Int, rawHeaders: [UInt8], body: [UInt8]) {
        self.status = status
        self.rawHeaders = rawHeaders
        self.body = body
    }

    static func append(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>, to raw: inout [UInt8]) {
        let nameCount = min(name.count, 0xFFFF)
        let valueCount = min(value.count, 0xFFFF)
        raw.append(UInt8(nameCount >> 8))
        raw.append(UInt8(nameCount & 0xFF))
        raw.append(contentsOf: UnsafeBufferPointer(rebasing: name[0..<nameCount]))
        raw.append(UInt8(valueCount >> 8))
        raw.append(UInt8(valueCount & 0xFF))
        raw.append(contentsOf: UnsafeBufferPointer(rebasing: value[0..<valueCount]))
    }

    static func append(_ name: [UInt8], _ value: [UInt8], to raw: inout [UInt8]) {
        name.withUnsafeBufferPointer { nameBuffer in
            value.withUnsafeBufferPointer { valueBuffer in append(nameBuffer, valueBuffer, to: &raw) }
        }
    }

    /// Every header field (lower-case names), in order.
    public var headers: [HeaderField] {
        var fields: [HeaderField] = []
        forEachHeader { name, value in
            fields.append(HeaderField(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
            return true
        }
        return fields
    }

    /// The first header named `name` (lower-case).
    public func header(_ name: String) -> String? {
        var found: String?
        forEachHeader { fieldName, value in
            if fieldName.elementsEqual(name.utf8) {
                found = String(decoding: value, as: UTF8.self)
                return false
            }
            return true
        }
        return found
    }

    private func forEachHeader(_ body: (ArraySlice<UInt8>, ArraySlice<UInt8>) -> Bool) {
        var index = 0
        while index + 2 <= rawHeaders.count {
            let nameLength = Int(rawHeaders[index]) << 8 | Int(rawHeaders[index + 1])
            let nameStart = index + 2
            let valueHeader = nameStart + nameLength
            guard valueHeader + 2 <= rawHeaders.count else { return }
            let valueLength = Int(rawHeaders[valueHeader]) << 8 | Int(rawHeaders[valueHeader + 1])
            let valueStart = valueHeader + 2
            guard valueStart + valueLength <= rawHeaders.count else { return }
            guard body(rawHeaders[nameStart..<valueHeader], rawHeaders[valueStart..<(valueStart + valueLength)]) else { return }
            index = valueStart + valueLength
        }
    }
}

/// Header fields laid out in one byte buffer, each as a flag byte (never indexed or not), the
/// name's and the value's lengths (4 bytes each, little-endian), then the name and the value:
/// what `nghttp2_nv` entries point into. One allocation per request. Immutable after creation,
/// hence `Sendable`.
struct EncodedHeaderBlock: Sendable {
    /// The fields, laid out as above.
    let bytes: [UInt8]

    /// A field's place in ``bytes``.
    struct Field {
        let nameStart: Int
        let nameLength: Int
        let valueStart: Int
        let valueLength: Int
        let neverIndex: Bool
    }

    /// Bytes laid out as above.
    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// `:method`, `:path` (never indexed: it carries device tokens) and `headers`.
    init(method: String, path: String, headers: [HeaderField]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headers.reduce(":method:path".utf8.count + method.utf8.count + path.utf8.count + 18) {
            $0 + $1.name.utf8.count + $1.value.utf8.count + 9
        })
        EncodedHeaderBlock.add(":method", method, neverIndex: false, to: &bytes)
        EncodedHeaderBlock.add(":path", path, neverIndex: true, to: &bytes)
        // By index: `for field in headers` copies each field out (a retain of its name and value).
        for index in headers.indices {
            EncodedHeaderBlock.add(headers[index].name, headers[index].value, neverIndex: headers[index].neverIndex, to: &bytes)
        }
        self.bytes = bytes
    }

    init(_ fields: [HeaderField]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 9 })
        for field in fields { EncodedHeaderBlock.add(field.name, field.value, neverIndex: field.neverIndex, to: &bytes) }
        self.bytes = bytes
    }

    static func add(_ name: String, _ value: String, neverIndex: Bool, to bytes: inout [UInt8]) {
        appendLengths(name: name.utf8.count, value: value.utf8.count, neverIndex: neverIndex, to: &bytes)
        bytes.appendUTF8(name)
        bytes.appendUTF8(value)
    }

    /// A field's flag byte and lengths, which its name and value follow.
    static func appendLengths(name: Int, value: Int, neverIndex: Bool, to bytes: inout [UInt8]) {
        bytes.append(neverIndex ? 1 : 0)
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: name).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// The value of the field at `index` (0 `:method`, 1 `:path`), or "" when there is none.
    func pseudoHeader(at index: Int) -> String {
        var found = ""
        var seen = 0
        forEachField { field in
            if seen == index { found = string(field.valueStart, field.valueLength) }
            seen += 1
        }
        return found
    }

    /// Every field after `:method` and `:path`, in order.
    var regularFields: [HeaderField] {
        var fields: [HeaderField] = []
        var seen = 0
        forEachField { field in
            if seen >= 2 { fields.append(HeaderField(string(field.nameStart, field.nameLength), string(field.valueStart, field.valueLength), neverIndex: field.neverIndex)) }
            seen += 1
        }
        return fields
    }

    private func string(_ start: Int, _ count: Int) -> String {
        String(decoding: bytes[start..<(start + count)], as: UTF8.self)
    }

    /// Calls `body` with each field's place, in order.
    func forEachField(_ body: (Field) -> Void) {
        bytes.withUnsafeBufferPointer { bytes in
            var index = 0
            while index + 9 <= bytes.count {
                func length(at offset: Int) -> Int {
                    Int(UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24)
                }
                let nameLength = length(at: index + 1), valueLength = length(at: index + 5)
                let nameStart = index + 9
                body(Field(nameStart: nameStart, nameLength: nameLength, valueStart: nameStart + nameLength, valueLength: valueLength,
                           neverIndex: bytes[index] != 0))
                index = nameStart + nameLength + valueLength
            }
        }
    }
}
