/// An HTTP/2 request. Pseudo-headers `:scheme` and `:authority` come from the client's origin.
public struct HTTP2Request: Sendable {
    public var method: String { didSet { encoded = EncodedHeaderBlock(method: method, path: path, headers: headers) } }
    public var path: String { didSet { encoded = EncodedHeaderBlock(method: method, path: path, headers: headers) } }
    /// Request headers (lower-case names).
    public var headers: [HeaderField] { didSet { encoded = EncodedHeaderBlock(method: method, path: path, headers: headers) } }
    public var body: [UInt8]
    /// The header block laid out once for nghttp2, shared by every copy of this request (a
    /// request sent many times is encoded once).
    private(set) var encoded: EncodedHeaderBlock
    /// How long the request may take, waiting for a stream included (nanoseconds).
    public var timeoutNanoseconds: UInt64

    /// Creates a request.
    public init(method: String = "POST", path: String, headers: [HeaderField] = [], body: [UInt8] = [], timeoutNanoseconds: UInt64 = 30_000_000_000) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.encoded = EncodedHeaderBlock(method: method, path: path, headers: headers)
        self.timeoutNanoseconds = timeoutNanoseconds
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

/// Header fields as one byte buffer plus their positions: what `nghttp2_nv` entries point into.
/// Immutable after creation, hence `Sendable`.
final class EncodedHeaderBlock: Sendable {
    struct Entry: Sendable {
        let nameStart: Int
        let nameLength: Int
        let valueStart: Int
        let valueLength: Int
        let neverIndex: Bool
    }

    let storage: [UInt8]
    let entries: [Entry]

    /// `:method`, `:path` (never indexed: it carries device tokens) and `headers`.
    /// (Two allocations, the storage and the entries: one of these is made per request.)
    init(method: String, path: String, headers: [HeaderField]) {
        var storage: [UInt8] = []
        storage.reserveCapacity(headers.reduce(":method:path".utf8.count + method.utf8.count + path.utf8.count + 1) {
            $0 + $1.name.utf8.count + $1.value.utf8.count
        })
        var entries: [Entry] = []
        entries.reserveCapacity(headers.count + 2)
        EncodedHeaderBlock.add(":method", method, neverIndex: false, to: &storage, &entries)
        EncodedHeaderBlock.add(":path", path, neverIndex: true, to: &storage, &entries)
        for field in headers { EncodedHeaderBlock.add(field.name, field.value, neverIndex: field.neverIndex, to: &storage, &entries) }
        storage.append(0)  // never empty, so the base address is never nil
        self.storage = storage
        self.entries = entries
    }

    init(_ fields: [HeaderField]) {
        var storage: [UInt8] = []
        storage.reserveCapacity(fields.reduce(1) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        var entries: [Entry] = []
        entries.reserveCapacity(fields.count)
        for field in fields { EncodedHeaderBlock.add(field.name, field.value, neverIndex: field.neverIndex, to: &storage, &entries) }
        storage.append(0)  // never empty, so the base address is never nil
        self.storage = storage
        self.entries = entries
    }

    private static func add(_ name: String, _ value: String, neverIndex: Bool, to storage: inout [UInt8], _ entries: inout [Entry]) {
        let nameStart = storage.count
        storage.append(contentsOf: name.utf8)
        let valueStart = storage.count
        storage.append(contentsOf: value.utf8)
        entries.append(Entry(nameStart: nameStart, nameLength: valueStart - nameStart, valueStart: valueStart,
                             valueLength: storage.count - valueStart, neverIndex: neverIndex))
    }
}
