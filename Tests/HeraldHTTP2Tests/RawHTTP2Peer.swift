import Foundation
import Glibc
import HeraldCrypto
import Synchronization

/// A TLS peer on loopback that speaks HTTP/2 by hand, to send what a real server never would
/// (a CONTINUATION or SETTINGS flood): it accepts connections, reads the client's preface and
/// frames, answers each client HEADERS frame with `script`, and records the frame types the
/// client sent (so a test can see the client's GOAWAY and its error code).
final class RawHTTP2Peer: @unchecked Sendable {
    struct Frame: Sendable {
        let type: UInt8
        let flags: UInt8
        let stream: UInt32
        let payload: [UInt8]
    }

    let authority: CertificateAuthority
    let caFile: String
    let port: Int
    /// The throwaway CA's directory, removed with the peer.
    private let directory: URL
    private let listener: Int32
    private let received = Mutex<[Frame]>([])
    private let stopped = Atomic<Bool>(false)

    /// `initial`: frames sent right after the handshake (the server's SETTINGS);
    /// `onRequest`: frames sent when the client opens stream `id`.
    init(initial: [UInt8], onRequest: @escaping @Sendable (UInt32) -> [UInt8]) throws {
        authority = try CertificateAuthority.generate()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-raw-h2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        caFile = directory.appendingPathComponent("ca.pem").path
        try authority.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        let tls = try TLSContext(serverCertificatePEM: authority.serverCertificatePEM, keyPEM: authority.serverKeyPEM)

        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let listener = self.listener
        // Weak: the accept loop must not keep the peer alive, or its deinit (which ends the loop)
        // never runs. A connection being served holds it until the connection closes.
        Thread { [weak self] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 { return }
                guard let self, !self.stopped.load(ordering: .acquiring) else {
                    Glibc.close(fd)
                    return
                }
                Thread { [self] in serve(fd, tls: tls, initial: initial, onRequest: onRequest) }.start()
            }
        }.start()
    }

    /// The frames every client sent, in order.
    var framesFromClients: [Frame] { received.withLock { $0 } }

    private func serve(_ fd: Int32, tls: TLSContext, initial: [UInt8], onRequest: (UInt32) -> [UInt8]) {
        defer { Glibc.close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let stream = try? TLSStream(context: tls, fileDescriptor: fd, serverName: nil),
              (try? stream.handshake()) == .done else { return }
        func send(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                guard let (count, _) = try? bytes[offset...].withUnsafeBytes({ try stream.write($0) }), count > 0 else { return false }
                offset += count
            }
            return true
        }
        guard send(initial) else { return }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var prefaceSeen = false
        while !stopped.load(ordering: .acquiring) {
            guard let (count, progress) = try? chunk.withUnsafeMutableBytes({ try stream.read(into: $0) }), progress == .done, count > 0 else { return }
            buffer += chunk[0..<count]
            if !prefaceSeen {
                guard buffer.count >= 24 else { continue }
                buffer.removeFirst(24)
                prefaceSeen = true
            }
            while buffer.count >= 9 {
                let length = Int(buffer[0]) << 16 | Int(buffer[1]) << 8 | Int(buffer[2])
                guard buffer.count >= 9 + length else { break }
                let stream32 = (UInt32(buffer[5]) << 24 | UInt32(buffer[6]) << 16 | UInt32(buffer[7]) << 8 | UInt32(buffer[8])) & 0x7FFF_FFFF
                let frame = Frame(type: buffer[3], flags: buffer[4], stream: stream32, payload: Array(buffer[9..<(9 + length)]))
                buffer.removeFirst(9 + length)
                received.withLock { $0.append(frame) }
                if frame.type == 0x1, !send(onRequest(frame.stream)) { return }
            }
        }
    }

    deinit {
        stopped.store(true, ordering: .releasing)
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Frames

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// A SETTINGS frame of `count` entries (MAX_CONCURRENT_STREAMS = 100 each).
    static func settings(entries count: Int) -> [UInt8] {
        frame(type: 0x4, payload: (0..<count).flatMap { _ in [0x00, 0x03, 0x00, 0x00, 0x00, 0x64] as [UInt8] })
    }

    static let settingsAck = frame(type: 0x4, flags: 0x1)
}
