import Dispatch
import Foundation
import Synchronization

/// The process's one writer of log lines: Herald's JSON lines (`WorkerLog`) and librdkafka's.
///
/// A caller queues a line and returns at once; a thread of its own writes the lines, in the
/// order queued, to standard output or standard error. A stalled reader (a full pipe nobody
/// drains, a terminal paused with ^S) therefore blocks only that thread, never a shard: once
/// `capacity` lines wait, new ones are dropped and counted (``dropped``,
/// `herald_log_lines_dropped_total`), as are lines a closed or broken stream refuses. Before the
/// process exits, ``flush(timeout:)`` writes what is queued.
public final class LogSink: Sendable {
    /// Where a line goes.
    public enum Stream: Sendable {
        case standardOutput
        case standardError
    }

    /// The process's sink, on descriptors 1 and 2, holding at most 10,000 lines.
    public static let shared = LogSink(capacity: 10_000)

    private struct State {
        var queue: [(stream: Stream, bytes: [UInt8])] = []
        var dropped = 0
        var writing = false
        var started = false
    }

    /// The most lines waiting to be written.
    public let capacity: Int
    private let output: Int32
    private let error: Int32
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let drained = DispatchSemaphore(value: 0)

    /// A sink writing to `standardOutput` and `standardError` (descriptors; tests pass pipes).
    public init(capacity: Int, standardOutput: Int32 = 1, standardError: Int32 = 2) {
        self.capacity = max(1, capacity)
        self.output = standardOutput
        self.error = standardError
    }

    /// Lines dropped so far: because `capacity` lines were waiting, or because their stream
    /// refused the write (closed, broken).
    public var dropped: Int { state.withLock { $0.dropped } }

    /// Queues `line` (a newline is added) for `stream`; never blocks.
    public func write(_ line: String, to stream: Stream) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        let start = state.withLock { state -> Bool in
            guard state.queue.count < capacity else {
                state.dropped += 1
                return false
            }
            state.queue.append((stream, bytes))
            defer { state.started = true }
            return !state.started
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "herald-log"
            thread.start()
        }
        wake.signal()
    }

    /// Waits until every queued line is written, at most `timeout`; true when they were.
    @discardableResult
    public func flush(timeout: Duration) -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(max(.zero, timeout).nanoseconds))
        while true {
            let empty = state.withLock { $0.queue.isEmpty && !$0.writing }
            if empty { return true }
            if drained.wait(timeout: deadline) == .timedOut {
                return state.withLock { $0.queue.isEmpty && !$0.writing }
            }
        }
    }

    private func run() {
        while true {
            wake.wait()
            let batch = state.withLock { state -> [(stream: Stream, bytes: [UInt8])] in
                defer { state.queue.removeAll(keepingCapacity: true) }
                state.writing = !state.queue.isEmpty
                return state.queue
            }
            var failed = 0
            for (stream, bytes) in batch where !Self.writeAll(stream == .standardOutput ? output : error, bytes) { failed += 1 }
            state.withLock { state in
                state.dropped += failed
                state.writing = false
            }
            drained.signal()
        }
    }

    /// write(2) until every byte is out; gives up on a closed or broken descriptor.
    /// Whether the whole line went out (a line cut short counts as not written).
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(fd, base + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
    }
}
