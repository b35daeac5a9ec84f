import Dispatch
import Foundation
import Glibc

/// Plain HTTP/1.1 GETs to a worker's health port on loopback, for the dev and bench commands
/// that read `/metrics` (the blocking socket calls run on a Dispatch queue, never on Swift's
/// cooperative threads).
enum DevHTTP {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The body of `GET path` on 127.0.0.1:`port`; fails on a status other than 200 or after
    /// `timeoutSeconds` without an answer.
    static func get(port: Int, path: String, timeoutSeconds: Int = 5) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try blockingGet(port: port, path: path, timeoutSeconds: timeoutSeconds) })
            }
        }
    }

    private static func blockingGet(port: Int, path: String, timeoutSeconds: Int) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw Failure(description: "send to 127.0.0.1:\(port) failed")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 { throw Failure(description: "no answer from 127.0.0.1:\(port) within \(timeoutSeconds) s") }
            if count == 0 { break }
            answer += buffer[0..<count]
        }
        let text = String(decoding: answer, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 200"), let split = text.range(of: "\r\n\r\n") else {
            throw Failure(description: "127.0.0.1:\(port)\(path): \(text.prefix(80))")
        }
        return String(text[split.upperBound...])
    }
}
