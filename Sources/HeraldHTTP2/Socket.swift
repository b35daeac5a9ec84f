import Glibc
internal import CLinux

/// Non-blocking TCP sockets.
enum Socket {
    /// Resolves `host` (blocking: call off the loop for names; numeric addresses are immediate).
    static func resolve(_ host: String, port: Int) throws(HTTP2Error) -> [UInt8] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let result, let address = result.pointee.ai_addr else {
            throw HTTP2Error(.connectFailed, "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(result) }
        return Array(UnsafeRawBufferPointer(start: address, count: Int(result.pointee.ai_addrlen)))
    }

    /// Starts a non-blocking connect to a resolved address; the socket becomes writable when done.
    static func connect(address: [UInt8]) throws(HTTP2Error) -> Int32 {
        let family = address.withUnsafeBytes { $0.load(as: sa_family_t.self) }
        let fd = socket(Int32(family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTP2Error(.connectFailed, "socket failed (errno \(errno))") }
        setNoDelay(fd)
        let result = address.withUnsafeBytes { buffer in
            Glibc.connect(fd, buffer.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(buffer.count))
        }
        if result != 0 && errno != EINPROGRESS {
            let error = errno
            close(fd)
            throw HTTP2Error(.connectFailed, "connect failed: \(String(cString: strerror(error)))")
        }
        return fd
    }

    /// The pending error of a connecting socket (0 when connected).
    static func pendingError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }

    /// A listening socket on `host:port` (port 0 picks a free one); returns it and the bound port.
    static func listen(host: String, port: Int, backlog: Int32 = 1024) throws(HTTP2Error) -> (fd: Int32, port: Int) {
        let address = try resolve(host, port: port)
        let family = address.withUnsafeBytes { $0.load(as: sa_family_t.self) }
        let fd = socket(Int32(family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTP2Error(.connectFailed, "socket failed (errno \(errno))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = address.withUnsafeBytes { buffer in
            bind(fd, buffer.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(buffer.count))
        }
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let error = errno
            close(fd)
            throw HTTP2Error(.connectFailed, "cannot listen on \(host):\(port): \(String(cString: strerror(error)))")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let boundPort = withUnsafeBytes(of: storage) { bytes -> Int in
            // sin_port and sin6_port sit at the same offset, in network byte order.
            Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        }
        return (fd, boundPort)
    }

    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Closes with RST instead of FIN (fault injection: an abrupt reset).
    static func abort(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
    }
}
