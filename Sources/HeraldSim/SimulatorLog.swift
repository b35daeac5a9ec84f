public import HeraldCore
import Synchronization

/// What a simulator accepted, per device token and in the order it accepted it
/// (`GET /_sim/log?token=…`), so a test can check what a device would have seen and in which
/// order: live-activity sequences, timestamps, channel ids. Off unless asked for
/// (`herald sim --log`), and bounded: at most `perToken` entries per token (the oldest go first)
/// and `maxTokens` tokens (a token beyond that is not logged).
public final class SimulatorLog: Sendable {
    /// Entries kept per token.
    public let perToken: Int
    /// Tokens logged.
    public let maxTokens: Int
    private let entries = Mutex<[String: [JSONValue]]>([:])

    /// A log; `perToken` 0 logs nothing.
    public init(perToken: Int = 0, maxTokens: Int = 10_000) {
        self.perToken = perToken
        self.maxTokens = maxTokens
    }

    /// Whether anything is logged.
    public var isEnabled: Bool { perToken > 0 }

    /// Appends an accepted request for `token`.
    public func record(token: String, _ entry: @autoclosure () -> JSONValue) {
        guard isEnabled else { return }
        let value = entry()
        entries.withLock { entries in
            guard entries[token] != nil || entries.count < maxTokens else { return }
            entries[token, default: []].append(value)
            if let count = entries[token]?.count, count > perToken { entries[token]?.removeFirst(count - perToken) }
        }
    }

    /// The entries for `token`, oldest first.
    public func entries(token: String) -> [JSONValue] {
        entries.withLock { $0[token] ?? [] }
    }

    /// The `/_sim/log` answer for `token`.
    public func json(token: String) -> JSONValue {
        .object(["token": .string(token), "enabled": .bool(isEnabled), "entries": .array(entries(token: token))])
    }

    /// Forgets everything.
    public func reset() { entries.withLock { $0.removeAll() } }
}
