public import Foundation

/// Runs a program to completion and captures what it printed.
public struct Subprocess {
    /// What a finished program left.
    public struct Result: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    /// Runs `executable` with `arguments` (in `workingDirectory`, when given), feeding it `input`,
    /// and waits at most `timeout` seconds (then kills it and reports status -9).
    public static func run(_ executable: URL, _ arguments: [String], input: Data? = nil,
                           environment: [String: String]? = nil, timeout: TimeInterval = 60, workingDirectory: URL? = nil) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let workingDirectory { process.currentDirectoryURL = workingDirectory }
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let stdout = Pipe()
        let stderr = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        // Read both pipes concurrently so a chatty child never blocks on a full pipe.
        let group = DispatchGroup()
        let outBox = DataBox()
        let errBox = DataBox()
        group.enter()
        DispatchQueue.global().async { outBox.data = stdout.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        DispatchQueue.global().async { errBox.data = stderr.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        if let input { stdin.fileHandleForWriting.write(input) }
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            group.wait()
            return Result(status: -9, stdout: String(decoding: outBox.data, as: UTF8.self), stderr: String(decoding: errBox.data, as: UTF8.self))
        }
        process.waitUntilExit()
        group.wait()
        return Result(status: process.terminationStatus, stdout: String(decoding: outBox.data, as: UTF8.self), stderr: String(decoding: errBox.data, as: UTF8.self))
    }

    /// ``run(_:_:input:environment:timeout:)`` on a thread of its own, so waiting for the
    /// program never blocks Swift's cooperative threads (other tests need them meanwhile).
    public static func runDetached(_ executable: URL, _ arguments: [String], input: Data? = nil,
                                   environment: [String: String]? = nil, timeout: TimeInterval = 60) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Swift.Result { try Subprocess.run(executable, arguments, input: input, environment: environment, timeout: timeout) })
            }
        }
    }

    /// Starts a background program and reads the first line it prints (a port, a bootstrap
    /// list); its standard error goes to a pipe nobody reads unless `quietStandardError`.
    public static func startReadingFirstLine(_ executable: URL, _ arguments: [String],
                                             quietStandardError: Bool = false) throws -> (process: Process, firstLine: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = quietStandardError ? FileHandle.nullDevice : Pipe()
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        return (process, String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Stops a background program: SIGTERM, then SIGKILL after `grace` seconds. Polls
    /// `isRunning` rather than calling `waitUntilExit`, which can spin forever on Linux.
    @discardableResult
    public static func stop(_ process: Process, grace: TimeInterval = 5) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(grace)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        while process.isRunning { usleep(10_000) }
        return process.terminationStatus
    }

    /// Finds a program on PATH.
    public static func which(_ name: String) -> URL? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}

private final class DataBox: @unchecked Sendable {
    // Written by one reader thread, read after DispatchGroup.wait(): the group orders the accesses.
    var data = Data()
}

/// Ports for servers a test starts itself.
public enum TestPorts {
    /// A TCP port on 127.0.0.1 that nothing listens on right now.
    public static func free() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestEnvironment.MissingService(variable: "a socket") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw TestEnvironment.MissingService(variable: "a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits until something accepts TCP connections on 127.0.0.1:`port`.
    public static func waitUntilListening(_ port: Int, seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(fd)
            if connected { return true }
            usleep(50_000)
        }
        return false
    }
}
