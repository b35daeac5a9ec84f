import Foundation
import Glibc

/// A plain HTTP/1.1 exchange over a raw socket, for tests of Herald's HTTP/1.1 server (the
/// health endpoint): what is sent is exactly the bytes given, garbage included.
public enum PlainHTTP {
    /// A raw answer and the parts a test looks at.
    public struct Answer: Sendable {
        public var bytes: [UInt8]
        /// True when the server closed the connection (EOF); false when the read gave up (the
        /// client's timeout or a reset).
        public var closedByPeer: Bool = true
        public var text: String { String(decoding: bytes, as: UTF8.self) }
        public var status: Int? {
            let line = text.prefix { $0 != "\r" && $0 != "\n" }.split(separator: " ")
            return line.count >= 2 && line[0].hasPrefix("HTTP/1.1") ? Int(line[1]) : nil
        }
        public var body: String {
            guard let range = text.range(of: "\r\n\r\n") else { return "" }
            return String(text[range.upperBound...])
        }
        public func header(_ name: String) -> String? {
            for line in text.components(separatedBy: "\r\n").dropFirst() {
                if line.isEmpty { break }
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
            }
            return nil
        }
    }

    /// Connects to 127.0.0.1:`port` on a thread of its own (blocking calls stay off the
    /// cooperative pool, which the server's handler tasks need), sends `request`, and reads to
    /// EOF. Nil when the connection is refused.
    /// The default wait is long: the server's handler runs on Swift's cooperative pool, which a
    /// parallel run of every suite on two cores can keep busy for many seconds.
    public static func exchange(port: Int, _ request: [UInt8], timeoutSeconds: Int = 60) async -> Answer? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: blockingExchange(port: port, request, timeoutSeconds: timeoutSeconds))
            }
        }
    }

    public static func exchange(port: Int, _ request: String) async -> Answer? {
        await exchange(port: port, Array(request.utf8))
    }

    private static func blockingExchange(port: Int, _ request: [UInt8], timeoutSeconds: Int) -> Answer? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return nil }
        var offset = 0
        while offset < request.count {
            let sent = request.withUnsafeBytes { send(fd, $0.baseAddress.map { $0 + offset }, request.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { break } // the server may answer (431) and stop reading early
            offset += sent
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var closedByPeer = false
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 { closedByPeer = true }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return Answer(bytes: received, closedByPeer: closedByPeer)
    }
}
