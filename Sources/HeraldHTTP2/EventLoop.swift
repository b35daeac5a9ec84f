import Glibc
internal import CLinux
import Synchronization

/// Something an event loop calls when its file descriptor is ready.
protocol EventHandler: AnyObject {
    /// `events` is epoll's mask (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP).
    func handle(events: UInt32)
}

/// One thread running `epoll_wait` over many sockets, with timers and a task queue.
///
/// Every connection belongs to one loop and is touched only on that loop's thread, so connection
/// state needs no locks. Other threads hand work over with ``execute(_:)``.
///
/// `@unchecked Sendable`: the mutable state below `// loop thread only` is touched only on the
/// loop's own thread; the task queue is behind a `Mutex`.
public final class EventLoop: @unchecked Sendable {
    /// The time this loop's timers, and the pools and connections on it, read.
    public let clock: any LoopClock
    private let epoll: Int32
    private let wakeFD: Int32
    private let tasks = Mutex<(queue: [@Sendable () -> Void], sleeping: Bool)>(([], false))
    private let stopFlag = Atomic<Bool>(false)
    private let threadID = Atomic<UInt>(0)
    private let name: String

    // loop thread only
    private var handlers: [Int32: any EventHandler] = [:]
    private var timers = TimerHeap()
    private var nextTimerID: UInt64 = 1
    private var endOfIteration: [() -> Void] = []

    /// Creates and starts a loop on a new thread.
    /// Iterations of the loop so far: it goes round at least once a second even when idle, so a
    /// count that stops moving means a task or handler is blocking the loop (a liveness heartbeat).
    public var iterationCount: UInt64 { iterations.load(ordering: .relaxed) }
    private let iterations = Atomic<UInt64>(0)

    /// `clock` is the system's monotonic clock except in tests that move time by hand.
    public init(name: String = "herald-event-loop", clock: any LoopClock = SystemLoopClock()) throws(HTTP2Error) {
        self.name = name
        self.clock = clock
        // A peer that closes its socket must cost an EPIPE, not the process: OpenSSL writes with
        // write(2), which raises SIGPIPE. Ignoring it is process-wide, and what servers do.
        signal(SIGPIPE, SIG_IGN)
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw HTTP2Error(.protocolError, "epoll_create1 failed (errno \(errno))") }
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else { throw HTTP2Error(.protocolError, "eventfd failed (errno \(errno))") }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeFD
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, wakeFD, &event)
        let unmanaged = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            let loop = Unmanaged<EventLoop>.fromOpaque(argument).takeRetainedValue()
            loop.run()
            return nil
        }, unmanaged.toOpaque())
        guard result == 0 else {
            unmanaged.release()
            throw HTTP2Error(.protocolError, "pthread_create failed (\(result))")
        }
        pthread_detach(thread)
        while threadID.load(ordering: .acquiring) == 0 { sched_yield() }
    }

    /// Whether the caller is on this loop's thread.
    public var inEventLoop: Bool { UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))) == threadID.load(ordering: .relaxed) }

    /// Runs `task` on the loop's thread (soon; in order with other executed tasks).
    public func execute(_ task: @escaping @Sendable () -> Void) {
        let wake = tasks.withLock { state -> Bool in
            state.queue.append(task)
            // Only a sleeping loop needs the eventfd: a busy one drains the queue before sleeping.
            if state.sleeping {
                state.sleeping = false
                return true
            }
            return false
        }
        if wake {
            var one: UInt64 = 1
            _ = Glibc.write(wakeFD, &one, 8)
        }
    }

    /// Stops the loop after the current iteration. Sockets still registered are not closed.
    public func shutdown() {
        stopFlag.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    // MARK: loop thread API

    func register(_ fd: Int32, _ handler: any EventHandler, events: UInt32) {
        handlers[fd] = handler
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    func modify(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event)
    }

    func unregister(_ fd: Int32) {
        handlers[fd] = nil
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
    }

    /// The loop clock's time (nanoseconds).
    var now: UInt64 { clock.now }

    /// Runs `task` on this loop after `nanoseconds`; returns an id for ``cancelTimer(_:)``.
    @discardableResult
    func scheduleTimer(afterNanoseconds nanoseconds: UInt64, _ task: @escaping () -> Void) -> UInt64 {
        scheduleTimer(at: clock.now + nanoseconds, task)
    }

    /// Runs `task` on this loop once the loop clock reads `deadline`; returns an id for
    /// ``cancelTimer(_:)``.
    @discardableResult
    func scheduleTimer(at deadline: UInt64, _ task: @escaping () -> Void) -> UInt64 {
        let id = nextTimerID
        nextTimerID += 1
        timers.push(TimerHeap.Entry(deadline: deadline, id: id, task: task))
        return id
    }

    func cancelTimer(_ id: UInt64) {
        timers.cancel(id)
    }

    /// Runs `task` once this loop has handled the current batch of events and tasks (used to
    /// coalesce many small writes into one flush).
    func atEndOfIteration(_ task: @escaping () -> Void) {
        endOfIteration.append(task)
    }

    /// The loop whose thread this is, for ``runAtEndOfIteration(_:)``.
    private static let currentLoopKey: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    /// On an event loop's thread, runs `task` once that loop has handled the current batch of
    /// events and tasks, and returns true; elsewhere does nothing and returns false. Completion
    /// handlers use it to hand many answers from one read over together: one wake-up of their
    /// consumer instead of one per answer.
    public static func runAtEndOfIteration(_ task: @escaping () -> Void) -> Bool {
        guard let key = currentLoopKey, let pointer = pthread_getspecific(key) else { return false }
        Unmanaged<EventLoop>.fromOpaque(pointer).takeUnretainedValue().atEndOfIteration(task)
        return true
    }

    private func runEndOfIteration() {
        while !endOfIteration.isEmpty {
            let batch = endOfIteration
            endOfIteration.removeAll(keepingCapacity: true)
            for task in batch { task() }
        }
    }

    /// Gives the thread the loop's name (its first 15 bytes, the kernel's limit), so `top -H`,
    /// `perf` and `/proc/PID/task/*/comm` tell the loops from the threads that started them,
    /// whose name a new thread otherwise inherits. Through `/proc/thread-self/comm`: Glibc's
    /// module exports neither `pthread_setname_np` nor a usable `prctl`. Best effort.
    private func nameThread() {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    private func run() {
        threadID.store(UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))), ordering: .releasing)
        // The thread holds the loop (retained by `init`) for as long as it runs.
        if let key = Self.currentLoopKey { pthread_setspecific(key, Unmanaged.passUnretained(self).toOpaque()) }
        nameThread()
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while !stopFlag.load(ordering: .acquiring) {
            iterations.add(1, ordering: .relaxed)
            runTasks()
            let now = clock.now
            // Tasks run outside the heap's mutation: a timer may schedule another.
            for task in timers.popExpired(now: now) { task() }
            runEndOfIteration()
            var timeout: Int32 = 1000
            if let next = timers.nextDeadline {
                timeout = next <= now ? 0 : Int32(min(UInt64(1000), (next - now + 999_999) / 1_000_000))
            }
            let mayBlock = tasks.withLock { state -> Bool in
                if state.queue.isEmpty {
                    state.sleeping = true
                    return true
                }
                return false
            }
            let count = epoll_wait(epoll, &events, Int32(events.count), mayBlock ? timeout : 0)
            tasks.withLock { $0.sleeping = false }
            guard count > 0 else { continue }
            for index in 0..<Int(count) {
                let fd = events[index].data.fd
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeFD, &value, 8)
                    continue
                }
                handlers[fd]?.handle(events: events[index].events)
            }
            runEndOfIteration()
        }
        close(epoll)
        close(wakeFD)
    }

    private func runTasks() {
        while true {
            let batch = tasks.withLock { state -> [@Sendable () -> Void] in
                let batch = state.queue
                state.queue.removeAll(keepingCapacity: true)
                return batch
            }
            if batch.isEmpty { return }
            for task in batch { task() }
        }
    }
}

/// Several loops, handed out in turn.
public final class EventLoopGroup: Sendable {
    /// The loops.
    public let loops: [EventLoop]
    private let counter = Atomic<Int>(0)

    /// Starts `count` loops (default: one per core).
    public init(count: Int = EventLoopGroup.coreCount) throws(HTTP2Error) {
        var loops: [EventLoop] = []
        for index in 0..<max(1, count) {
            loops.append(try EventLoop(name: "herald-loop-\(index)"))
        }
        self.loops = loops
    }

    /// Online cores.
    public static var coreCount: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// The next loop, round robin.
    public func next() -> EventLoop {
        loops[counter.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Stops every loop.
    public func shutdown() {
        loops.forEach { $0.shutdown() }
    }
}

/// The time an ``EventLoop`` reads: nanoseconds of a clock that never goes back.
///
/// Timers, request deadlines, connect backoff and idle PINGs all read the loop's clock, so a
/// test can move time by hand (the loop still wakes at least once a second, or when a task is
/// executed on it, to look at the clock).
public protocol LoopClock: Sendable {
    var now: UInt64 { get }
}

/// CLOCK_MONOTONIC in nanoseconds.
public struct SystemLoopClock: LoopClock {
    public init() {}

    public var now: UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}

/// A binary min-heap of timers with lazy cancellation.
struct TimerHeap {
    struct Entry {
        let deadline: UInt64
        let id: UInt64
        let task: () -> Void
    }

    private var entries: [Entry] = []
    private var cancelled = Set<UInt64>()

    var nextDeadline: UInt64? { entries.first?.deadline }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func cancel(_ id: UInt64) {
        cancelled.insert(id)
    }

    mutating func popExpired(now: UInt64) -> [() -> Void] {
        var due: [() -> Void] = []
        while let first = entries.first, first.deadline <= now {
            let entry = pop()
            if cancelled.remove(entry.id) != nil { continue }
            due.append(entry.task)
        }
        if entries.isEmpty { cancelled.removeAll() }
        return due
    }

    private mutating func pop() -> Entry {
        let top = entries[0]
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < entries.count, entries[left].deadline < entries[smallest].deadline { smallest = left }
                if right < entries.count, entries[right].deadline < entries[smallest].deadline { smallest = right }
                if smallest == parent { break }
                entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}
