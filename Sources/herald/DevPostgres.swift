import Foundation
import HeraldPostgres

/// A throwaway PostgreSQL server for `herald dev`: `initdb` and `pg_ctl` from the system's
/// PostgreSQL in a temporary directory, on a free port of 127.0.0.1, removed on stop. As root the
/// server runs as the `postgres` user (PostgreSQL refuses to run as root).
final class DevPostgres: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let directory: URL
    let binDirectory: URL
    let port: Int
    var url: String { "postgresql://postgres@127.0.0.1:\(port)/herald" }
    private let asRoot: Bool

    /// The directory holding `initdb` and `pg_ctl`: `pg_config --bindir`, else the newest
    /// `/usr/lib/postgresql/*/bin`.
    static func findBinaries() -> URL? {
        let fileManager = FileManager.default
        let base = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = ((try? fileManager.contentsOfDirectory(atPath: base.path)) ?? []).compactMap { Int($0) }.sorted(by: >)
        for version in versions {
            let bin = base.appendingPathComponent("\(version)/bin")
            if fileManager.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        return nil
    }

    /// Starts a server; throws with one sentence naming what to install or what failed.
    static func start() async throws -> DevPostgres {
        guard let bin = findBinaries() else {
            throw Failure(description: "herald dev needs PostgreSQL's server programs (initdb, pg_ctl): install them with `apt-get install postgresql` (scripts/setup does)")
        }
        let asRoot = getuid() == 0
        if asRoot && getpwnam("postgres") == nil {
            throw Failure(description: "herald dev runs PostgreSQL as the 'postgres' user when started as root, and there is none: install the `postgresql` package, which creates it")
        }
        var template = Array("/tmp/herald-dev-pg.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "cannot create a temporary directory in /tmp") }
        let directory = URL(fileURLWithPath: String(cString: made))
        if asRoot, let user = getpwnam("postgres") {
            chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        chmod(directory.path, 0o700)
        let data = directory.appendingPathComponent("data").path
        let initdb = try await DevProcess.run(bin.appendingPathComponent("initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"],
                                               asPostgres: asRoot, directory: directory)
        guard initdb.status == 0 else {
            try? FileManager.default.removeItem(at: directory)
            throw Failure(description: "initdb failed: \(initdb.output.suffix(800))")
        }
        for _ in 0..<3 {
            let port = DevPorts.free()
            let options = "-c listen_addresses=127.0.0.1 -p \(port) -k \(directory.path) -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            let started = try await DevProcess.run(bin.appendingPathComponent("pg_ctl"),
                                                   ["-D", data, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "30", "start", "-o", options],
                                                   asPostgres: asRoot, directory: directory)
            if started.status == 0 {
                let server = DevPostgres(directory: directory, binDirectory: bin, port: port, asRoot: asRoot)
                do {
                    let admin = try await PostgresConnection.connect("postgresql://postgres@127.0.0.1:\(port)/postgres")
                    try await admin.execute("CREATE DATABASE herald")
                    await admin.close()
                } catch {
                    await server.stop()
                    throw Failure(description: "could not create the database: \(error)")
                }
                return server
            }
        }
        let log = (try? String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: directory)
        throw Failure(description: "PostgreSQL did not start: \(log.suffix(800))")
    }

    private init(directory: URL, binDirectory: URL, port: Int, asRoot: Bool) {
        self.directory = directory
        self.binDirectory = binDirectory
        self.port = port
        self.asRoot = asRoot
    }

    /// Restarts the server on the same port and data (`pg_ctl restart -m fast`): every client
    /// connection is closed, and connections fail until it accepts again.
    func restart() async throws {
        let result = try await DevProcess.run(binDirectory.appendingPathComponent("pg_ctl"),
                                              ["-D", directory.appendingPathComponent("data").path, "-l", directory.appendingPathComponent("server.log").path,
                                               "-m", "fast", "-w", "-t", "60", "restart"],
                                              asPostgres: asRoot, directory: directory)
        guard result.status == 0 else { throw Failure(description: "pg_ctl restart failed: \(result.output.suffix(800))") }
    }

    /// Stops the server and removes its directory.
    func stop() async {
        _ = try? await DevProcess.run(binDirectory.appendingPathComponent("pg_ctl"),
                                      ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "stop"],
                                      asPostgres: asRoot, directory: directory)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Short-lived helper processes, waited for without blocking Swift's cooperative threads.
enum DevProcess {
    struct Result {
        let status: Int32
        let output: String
    }

    struct SpawnFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs a program to its end with posix_spawn and waitpid on a thread of its own (Foundation's
    /// `Process.waitUntilExit` can wait forever on Linux), output to a file (`pg_ctl start` leaves a
    /// server running that would hold a pipe open forever).
    static func run(_ executable: URL, _ arguments: [String], asPostgres: Bool = false, directory: URL? = nil) async throws -> Result {
        var argv = [executable.path] + arguments
        var path = executable.path
        if asPostgres {
            path = "/usr/sbin/runuser"
            argv = [path, "-u", "postgres", "--"] + argv
        }
        if let directory {
            // Start inside `directory` (the postgres user must never sit in an unreadable cwd).
            argv = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", directory.path] + argv
            path = "/bin/sh"
        }
        let outputPath = "/tmp/herald-dev-\(UUID().uuidString).out"
        defer { unlink(outputPath) }
        let spawnPath = path
        let spawnArguments = argv
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                var actions = posix_spawn_file_actions_t()
                posix_spawn_file_actions_init(&actions)
                defer { posix_spawn_file_actions_destroy(&actions) }
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
                var cArguments = spawnArguments.map { strdup($0) } + [nil]
                defer { for pointer in cArguments { free(pointer) } }
                var pid: pid_t = 0
                let spawned = posix_spawn(&pid, spawnPath, &actions, nil, &cArguments, environ)
                guard spawned == 0 else {
                    continuation.resume(throwing: SpawnFailure(description: "cannot run \(spawnPath): \(String(cString: strerror(spawned)))"))
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                let exited = (status & 0x7f) == 0
                continuation.resume(returning: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f))
            }
        }
        return Result(status: status, output: (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
    }
}

/// A long-running child (a worker) started with posix_spawn and reaped with waitpid.
final class DevChild: @unchecked Sendable {
    let pid: pid_t
    private let lock = NSLock()
    private var exitStatus: Int32?
    private var stopping = false

    init(path: String, arguments: [String], environment: [String: String], outputPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var cArguments = ([path] + arguments).map { strdup($0) } + [nil]
        var cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in cArguments { free(pointer) }
            for pointer in cEnvironment { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, &cArguments, &cEnvironment)
        guard spawned == 0 else { throw DevProcess.SpawnFailure(description: "cannot run \(path): \(String(cString: strerror(spawned)))") }
        self.pid = pid
    }

    /// Whether the child is still running (reaps it once it has exited).
    var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        if exitStatus != nil { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            return false
        }
        return true
    }

    /// The exit status once it has exited.
    var terminationStatus: Int32 {
        _ = isRunning
        lock.lock()
        defer { lock.unlock() }
        return exitStatus ?? -1
    }

    /// Whether it was stopped on purpose (a failure test's kill or SIGTERM), so its exit is expected.
    var isStoppedOnPurpose: Bool { lock.withLock { stopping } }

    /// Sends `number` and marks the exit as expected.
    func stopOnPurpose(_ number: Int32) {
        lock.withLock { stopping = true }
        signal(number)
    }

    func signal(_ number: Int32) {
        if isRunning { kill(pid, number) }
    }
}

/// Free TCP ports on 127.0.0.1.
enum DevPorts {
    static func free() -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return 0 }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
        guard bound == 0 else { return 0 }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
