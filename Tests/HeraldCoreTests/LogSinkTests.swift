import Foundation
import Synchronization
@testable import HeraldCore
import Testing

@Suite(.timeLimit(.minutes(1))) struct LogSinkTests {
    /// Reads what arrives on a pipe until EOF, on a thread of its own started at once. Not from
    /// a task (`async let`): the tests then block their cooperative thread in `flush`, and on a
    /// loaded two-core machine the pool's other thread can be busy for longer than the flush
    /// waits, so a reader started from a task may not start in time (a CI run's failure).
    final class PipeReader: Sendable {
        private let result = Mutex<String?>(nil)
        private let finished = DispatchSemaphore(value: 0)

        init(_ fd: Int32) {
            Thread.detachNewThread { [self] in
                var data = Data()
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = read(fd, &buffer, buffer.count)
                    if count <= 0 { break }
                    data.append(contentsOf: buffer[0..<count])
                }
                result.withLock { $0 = String(decoding: data, as: UTF8.self) }
                finished.signal()
            }
        }

        /// Everything read, once the pipe's write end is closed.
        func text() async -> String {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread { [self] in
                    finished.wait()
                    continuation.resume(returning: result.withLock { $0 ?? "" })
                }
            }
        }
    }

    @Test func linesArriveInOrderOnTheirStream() async throws {
        var out: [Int32] = [0, 0]
        var err: [Int32] = [0, 0]
        try #require(pipe(&out) == 0 && pipe(&err) == 0)
        let sink = LogSink(capacity: 1000, standardOutput: out[1], standardError: err[1])
        let outRead = out[0]
        let errRead = err[0]
        let outText = PipeReader(outRead)
        let errText = PipeReader(errRead)
        for index in 0..<500 { sink.write("line \(index)", to: .standardOutput) }
        sink.write("{\"component\":\"librdkafka\"}", to: .standardError)
        #expect(sink.flush(timeout: .seconds(10)))
        close(out[1])
        close(err[1])
        let lines = await outText.text().split(separator: "\n").map(String.init)
        #expect(lines == (0..<500).map { "line \($0)" })
        #expect(await errText.text() == "{\"component\":\"librdkafka\"}\n")
        #expect(sink.dropped == 0)
    }

    /// Nobody reads standard output: writers still return at once, and what does not fit is
    /// dropped and counted; once the reader drains the pipe, the queued lines arrive.
    @Test func aStalledReaderNeverBlocksAWriter() async throws {
        var out: [Int32] = [0, 0]
        try #require(pipe(&out) == 0)
        let sink = LogSink(capacity: 100, standardOutput: out[1], standardError: out[1])
        let line = String(repeating: "x", count: 1000)
        let started = ContinuousClock.now
        // The pipe holds 64 KiB; the queue 100 lines; the rest must be dropped, not waited for.
        for _ in 0..<5000 { sink.write(line, to: .standardOutput) }
        let took = ContinuousClock.now - started
        #expect(took < .seconds(10), "5,000 writes took \(took)")
        // At most what the queue holds twice (the writer's batch in hand and the queue behind
        // it) and what the 64 KiB pipe takes got through; the rest was dropped.
        #expect(sink.dropped >= 5000 - 2 * 100 - 70, "dropped \(sink.dropped)")
        #expect(!sink.flush(timeout: .milliseconds(100)), "nothing drains the pipe yet")
        let outRead = out[0]
        let text = PipeReader(outRead)
        #expect(sink.flush(timeout: .seconds(20)))
        close(out[1])
        let written = await text.text().split(separator: "\n").count
        #expect(written + sink.dropped == 5000, "every line was written or counted as dropped")
    }

    /// Lines a stream refuses (here `/dev/full`, whose writes fail with ENOSPC) are lost, so they
    /// are counted as dropped: every line is written or counted.
    @Test func linesAStreamRefusesAreCountedAsDropped() throws {
        let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(full >= 0)
        defer { close(full) }
        let sink = LogSink(capacity: 100, standardOutput: full, standardError: full)
        for index in 0..<10 { sink.write("line \(index)", to: .standardOutput) }
        #expect(sink.flush(timeout: .seconds(10)))
        #expect(sink.dropped == 10)
    }
}
