/// An HTTP/2 request. Pseudo-headers `:scheme` and `:authority` come from the client's origin.
public struct HTTP2Request: Sendable {
    public var method: String
    public var path: String
    /// Request headers (lower-case names).
    public var headers: [HeaderField]
    public var body: [UInt8]
    /// How long the request may take, waiting for a stream included (nanoseconds).
    public var timeoutNanoseconds: UInt64

    /// Creates a request.
    public init(method: String = "POST", path: String, headers: [HeaderField] = [], body: [UInt8] = [], timeoutNanoseconds: UInt64 = 30_000_000_000) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.timeoutNanoseconds = timeoutNanoseconds
    }
}

/// An HTTP/2 response.
public struct HTTP2Response: Sendable {
    public var status: Int
    public var headers: [HeaderField]
    public var body: [UInt8]

    /// The first header named `name` (lower-case).
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}
