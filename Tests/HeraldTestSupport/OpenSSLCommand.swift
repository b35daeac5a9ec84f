public import Foundation

/// The `openssl` program: reads back what Herald wrote with an implementation other than Herald's.
public enum OpenSSLCommand {
    /// Runs `openssl arguments` with `input` on its standard input, where an argument that names
    /// one of `files` is replaced by the path of a temporary file holding its bytes.
    public static func run(_ arguments: [String], files: [String: [UInt8]] = [:], input: String? = nil) async throws -> Subprocess.Result {
        guard let program = Subprocess.which("openssl") else { throw NotInstalled() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-openssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, bytes) in files { try Data(bytes).write(to: directory.appendingPathComponent(name)) }
        return try await Subprocess.runDetached(program, arguments.map { files[$0] != nil ? directory.appendingPathComponent($0).path : $0 },
                                                  input: input.map { Data($0.utf8) })
    }

    /// No `openssl` on PATH (Debian: the openssl package).
    public struct NotInstalled: Error, CustomStringConvertible {
        public var description: String { "these tests read files back with the openssl program, which is not on PATH" }
    }
}
