import Foundation
import HeraldCore
@testable import HeraldWorker
import Synchronization
import Testing

@Suite struct WorkerLogTests {
    /// Lines written, in order.
    private final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    private func object(_ line: String) throws -> [String: Any] {
        #expect(!line.contains("\n"), "one object per line")
        let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(parsed as? [String: Any])
    }

    @Test func linesAreJSONWithLevelTimeWorkerAndMessage() throws {
        let lines = Lines()
        let log = WorkerLog(workerID: "worker-7", sink: { lines.append($0) })
        let before = Timestamp.now
        let awkward = "quote \" backslash \\ newline \n tab \t bell \u{07} nul \u{0} emoji 🎉 é"
        log.info(awkward, ["job_id": .string("job-1"), "shard": .int(3), "note": .string("line\u{2028}separator")])
        let written = lines.all
        try #require(written.count == 1)
        let fields = try object(written[0])
        #expect(fields["level"] as? String == "info")
        #expect(fields["worker"] as? String == "worker-7")
        #expect(fields["message"] as? String == awkward)
        #expect(fields["job_id"] as? String == "job-1")
        #expect((fields["shard"] as? NSNumber)?.intValue == 3)
        #expect(fields["note"] as? String == "line\u{2028}separator")
        let time = try #require((fields["time"] as? String).flatMap { Timestamp(rfc3339: $0) })
        #expect(time >= before.adding(seconds: -1) && time <= Timestamp.now.adding(seconds: 1))
    }

    @Test func fieldsCannotForgeTheStandardKeys() throws {
        let lines = Lines()
        let log = WorkerLog(workerID: "worker-7", sink: { lines.append($0) })
        log.error("real", ["level": .string("debug"), "worker": .string("someone-else"), "message": .string("forged")])
        let fields = try object(try #require(lines.all.first))
        #expect(fields["level"] as? String == "error")
        #expect(fields["worker"] as? String == "worker-7")
        #expect(fields["message"] as? String == "real")
    }

    @Test func levelsBelowTheMinimumAreDropped() throws {
        let lines = Lines()
        let log = WorkerLog(workerID: "w", minimum: .warning, sink: { lines.append($0) })
        log.debug("d")
        log.info("i")
        log.warning("w")
        log.error("e")
        log.log(.info, "i2")
        let levels = try lines.all.map { try object($0)["level"] as? String }
        #expect(levels == ["warning", "error"])

        let verbose = Lines()
        let debug = WorkerLog(workerID: "w", minimum: .debug, sink: { verbose.append($0) })
        for level in WorkerLog.Level.allCases { debug.log(level, "x") }
        #expect(try verbose.all.map { try object($0)["level"] as? String } == ["debug", "info", "warning", "error"])
    }

    @Test func defaultMinimumIsInfo() {
        let lines = Lines()
        let log = WorkerLog(workerID: "w", sink: { lines.append($0) })
        log.debug("hidden")
        log.info("shown")
        #expect(lines.all.count == 1)
    }

    /// A device token or key in a log line is cut to 6 characters (a third of a short one) plus its length.
    @Test(arguments: [
        "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
        "fcm-token:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx",
        "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQg\n-----END PRIVATE KEY-----",
        "ключ-секретный-длинный",
        "1234567",
    ])
    func redactKeepsAtMostSixCharacters(secret: String) {
        let redacted = WorkerLog.redact(secret)
        let length = "(\(secret.utf8.count))"
        #expect(redacted.hasSuffix(length), "the length tells two secrets apart")
        let shown = redacted.dropLast(length.count)
        #expect(String(shown) == String(secret.prefix(min(6, secret.count / 3))) + "…", "\(redacted)")
        #expect(!redacted.contains(String(secret.prefix(7))))
    }

    /// A short secret is never shown whole.
    @Test func shortSecretsAreNotShownWhole() {
        #expect(WorkerLog.redact("abc") == "a…(3)")
        #expect(WorkerLog.redact("ab") == "…(2)")
        #expect(!WorkerLog.redact("secret").contains("secret"))
    }

    @Test func levelNamesParse() {
        #expect(WorkerLog.Level(name: "debug") == .debug)
        #expect(WorkerLog.Level(name: "info") == .info)
        #expect(WorkerLog.Level(name: "warning") == .warning)
        #expect(WorkerLog.Level(name: "warn") == .warning)
        #expect(WorkerLog.Level(name: "error") == .error)
        #expect(WorkerLog.Level(name: "ERROR") == .error)
        #expect(WorkerLog.Level(name: "Info") == .info)
        for bad in ["", "verbose", "trace", "fatal", "info "] { #expect(WorkerLog.Level(name: bad) == nil, "\(bad)") }
        #expect(WorkerLog.Level.allCases.sorted() == [.debug, .info, .warning, .error])
    }
}
