public import Foundation

/// Runs a program to completion and captures what it printed.
public struct Subprocess {
    /// What a finished program left.
    public struct Result: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    /// Runs `executable` with `arguments`, feeding it `input`, and waits at most `timeout` seconds
    /// (then kills it and reports status -9).
    public static func run(_ executable: URL, _ arguments: [String], input: Data? = nil,
                           environment: [String: String]? = nil, timeout: TimeInterval = 60) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
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
