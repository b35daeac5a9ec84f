/// What an ``HTTP1Server``'s handler answers for a path.
public struct HTTP1Response: Sendable, Equatable {
    /// The HTTP status code (200…599; anything else is sent as 500).
    public var status: Int
    /// The `Content-Type` header.
    public var contentType: String
    /// The body, sent as UTF-8 (not sent for HEAD; `Content-Length` is always set).
    public var body: String

    /// Creates a response.
    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}

/// The bytes-to-decisions part of ``HTTP1Server``, with no socket: where a request head ends,
/// what its request line asks for, and the bytes of an answer. Outside input reaches it
/// directly, so it never traps on any bytes (the `http1-request-head` fuzz target).
public enum HTTP1Message {
    /// What a request line asks for.
    public enum Request: Equatable, Sendable {
        case get(path: String, head: Bool)
        case reject(status: Int, body: String)
    }

    /// The index just past the blank line ending the head (CRLF CRLF, or bare LF LF as some
    /// hand-typed clients send), searching from `start`.
    public static func headEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = max(0, start)
        while index < bytes.count {
            if bytes[index] == 0x0A {
                if index + 1 < bytes.count, bytes[index + 1] == 0x0A { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A { return index + 3 }
            }
            index += 1
        }
        return nil
    }

    /// Reads the request line of a complete head. GET and HEAD only (405 otherwise), HTTP/1.0
    /// and 1.1 (505 otherwise); the path loses its query string and fragment, and an absolute
    /// target (`GET http://host/metrics`, as proxies send) is reduced to its path.
    public static func parse(head: ArraySlice<UInt8>) -> Request {
        let lineEnd = head.firstIndex(of: 0x0A) ?? head.endIndex
        var line = head[head.startIndex..<lineEnd]
        if line.last == 0x0D { line = line.dropLast() }
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else {
            return .reject(status: 400, body: "malformed request line\n")
        }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = String(decoding: parts[1], as: UTF8.self)
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version.hasPrefix("HTTP/") else { return .reject(status: 400, body: "not an HTTP request\n") }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .reject(status: 505, body: "only HTTP/1.0 and HTTP/1.1\n")
        }
        guard method == "GET" || method == "HEAD" else { return .reject(status: 405, body: "only GET and HEAD\n") }
        var path = Substring(target)
        if !path.hasPrefix("/") {
            guard let scheme = path.range(of: "://") else { return .reject(status: 400, body: "bad request target\n") }
            let afterAuthority = path[scheme.upperBound...]
            path = afterAuthority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }).map { afterAuthority[$0...] } ?? "/"
            if !path.hasPrefix("/") { path = "/" + path }
        }
        if let cut = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<cut] }
        if path.isEmpty { path = "/" }
        return .get(path: String(path), head: method == "HEAD")
    }

    /// The answer's bytes: status line, `Content-Type`, `Content-Length`, `Connection: close`
    /// (and `Allow` with a 405), then the body unless `includeBody` is false (HEAD).
    public static func encode(_ response: HTTP1Response, includeBody: Bool) -> [UInt8] {
        let status = (200...599).contains(response.status) ? response.status : 500
        // A handler's content type must not be able to add headers.
        let contentType = String(response.contentType.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }.map(Character.init))
        let body = Array(response.body.utf8)
        var head = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        head += "Content-Type: \(contentType)\r\n"
        head += "Content-Length: \(body.count)\r\n"
        if status == 405 { head += "Allow: GET, HEAD\r\n" }
        head += "Connection: close\r\n\r\n"
        var bytes = Array(head.utf8)
        if includeBody { bytes += body }
        return bytes
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: status < 400 ? "OK" : "Error"
        }
    }
}
