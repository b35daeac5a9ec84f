import HeraldCore
import Foundation
import Synchronization

/// The worker's log: one JSON object per line on standard output (docs/operations.md) with `level`,
/// `time`, `worker`, `message` and the fields given (job id, shard, …). Device tokens and
/// credentials never go in whole: pass them through ``redact(_:)``.
struct WorkerLog: Sendable {
    /// Severity, lowest first.
    enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error

        var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }

        /// `HERALD_LOG_LEVEL` values: debug, info, warning (or warn), error.
        init?(name: String) {
            switch name.lowercased() {
            case "debug": self = .debug
            case "info": self = .info
            case "warning", "warn": self = .warning
            case "error": self = .error
            default: return nil
            }
        }

        static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The worker id written on every line.
    let workerID: String
    /// Lines below this level are not written.
    let minimum: Level
    private let sink: @Sendable (String) -> Void

    /// A log for `workerID` writing to standard output through the process's ``LogSink``
    /// (or to `sink`, for tests).
    init(workerID: String, minimum: Level = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.workerID = workerID
        self.minimum = minimum
        self.sink = sink ?? { line in LogSink.shared.write(line, to: .standardOutput) }
    }

    /// Writes a line.
    func log(_ level: Level, _ message: String, _ fields: [String: JSONValue] = [:]) {
        guard level >= minimum else { return }
        var object = fields
        object["level"] = .string(level.name)
        object["time"] = .string(Timestamp.now.description)
        object["worker"] = .string(workerID)
        object["message"] = .string(message)
        sink(JSONValue.object(object).serialized())
    }

    func debug(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.debug, message, fields) }
    func info(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.info, message, fields) }
    func warning(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.warning, message, fields) }
    func error(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.error, message, fields) }

    /// A secret or device token shortened to its first 6 characters (at most a third of it, for
    /// short ones) and its length, enough to tell two apart in a log and useless to send with.
    static func redact(_ secret: String) -> String {
        "\(secret.prefix(min(6, secret.count / 3)))…(\(secret.utf8.count))"
    }
}
