@testable import HeraldHTTP2
import Testing

/// A request as the pool machine sees it, named for the assertions.
final class PoolTestRequest: HTTP2PoolRequest, CustomStringConvertible {
    let name: Int
    let deadline: UInt64
    var retries = 0

    init(_ name: Int, deadline: UInt64 = .max) {
        self.name = name
        self.deadline = deadline
    }

    var description: String { "r\(name)" }
}

typealias PoolMachine = HTTP2PoolStateMachine<PoolTestRequest>

/// The pool's rules, with no socket, loop or clock: time is a number the test moves.
@Suite struct HTTP2PoolStateMachineTests {
    static let ms: UInt64 = 1_000_000

    static func machine(maxConnections: Int = 2, maxTransparentRetries: Int = 2) -> PoolMachine {
        PoolMachine(configuration: .init(maxConnections: maxConnections, connectTimeout: 1_000 * ms, reconnectBase: 100 * ms,
                                         reconnectMax: 1_000 * ms, maxTransparentRetries: maxTransparentRetries))
    }

    static func submitted(_ action: PoolMachine.Action) -> [String] {
        action.submit.map { "\($0.0)@\($0.1)" }
    }

    static func failed(_ action: PoolMachine.Action) -> [String] {
        action.fail.map { "\($0.0):\($0.1.code)" }
    }

    @Test func theFirstRequestOpensAConnectionAndGoesOutWhenItIsReady() {
        var machine = Self.machine()
        guard case .wait(let open, let tickAt) = machine.execute(PoolTestRequest(1), now: 0) else {
            Issue.record("a pool with no connection must queue")
            return
        }
        #expect(open == .open(1, freshLookup: false, timeoutAt: 1_000 * Self.ms))
        #expect(tickAt == 50 * Self.ms, "the tick runs while anything is open or waiting")
        // A second request neither opens another connection (one is connecting) nor asks for another tick.
        guard case .wait(nil, nil) = machine.execute(PoolTestRequest(2), now: 1) else {
            Issue.record("the second request must wait without opening")
            return
        }
        let ready = machine.connectionReady(1, maxStreams: 10, now: 5)
        #expect(Self.submitted(ready) == ["r1@1", "r2@1"], "in order")
        #expect(ready.connections.isEmpty)
        #expect(machine.inFlight == 2 && machine.waitingCount == 0)
        guard case .submit(1) = machine.execute(PoolTestRequest(3), now: 6) else {
            Issue.record("a ready connection with room takes the request at once")
            return
        }
    }

    @Test func requestsPastMaxConcurrentStreamsWaitAndTakeFreedStreamsInOrder() {
        var machine = Self.machine(maxConnections: 1)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionReady(1, maxStreams: 1, now: 0)
        guard case .wait(nil, nil) = machine.execute(PoolTestRequest(2), now: 0) else {
            Issue.record("a saturated pool at its connection limit queues")
            return
        }
        _ = machine.execute(PoolTestRequest(3), now: 0)
        #expect(machine.waitingCount == 2)
        guard case .submit(let next, 1) = machine.streamEnded(on: 1) else {
            Issue.record("a freed stream takes the first waiting request")
            return
        }
        #expect(next.name == 2)
        guard case .submit(let last, 1) = machine.streamEnded(on: 1) else {
            Issue.record("and then the next")
            return
        }
        #expect(last.name == 3)
        guard case .none = machine.streamEnded(on: 1) else {
            Issue.record("nothing waits any more")
            return
        }
        #expect(machine.inFlight == 0 && machine.counters.maxStreamsInFlightOnOneConnection == 1)
    }

    @Test func anotherConnectionOpensOnlyWhenEveryLiveOneIsSaturatedAndUpToTheLimit() {
        var machine = Self.machine(maxConnections: 2)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionReady(1, maxStreams: 2, now: 0)
        guard case .submit(1) = machine.execute(PoolTestRequest(2), now: 0) else {
            Issue.record("room left on connection 1")
            return
        }
        guard case .wait(.open(2, freshLookup: false, timeoutAt: _), _) = machine.execute(PoolTestRequest(3), now: 0) else {
            Issue.record("connection 1 is saturated: open a second")
            return
        }
        #expect(Self.submitted(machine.connectionReady(2, maxStreams: 2, now: 0)) == ["r3@2"])
        // The least loaded connection takes the next request.
        guard case .submit(2) = machine.execute(PoolTestRequest(4), now: 0) else {
            Issue.record("connection 2 has the fewest streams")
            return
        }
        // Both saturated and at the limit: wait, open nothing.
        guard case .wait(nil, _) = machine.execute(PoolTestRequest(5), now: 0) else {
            Issue.record("at maxConnections nothing more opens")
            return
        }
        #expect(machine.openConnections == 2 && machine.counters.connectionsOpened == 2)
    }

    @Test func aRaisedStreamLimitDrainsTheQueueALoweredOneHoldsNewStreams() {
        var machine = Self.machine(maxConnections: 1)
        for name in 1...4 { _ = machine.execute(PoolTestRequest(name), now: 0) }
        #expect(Self.submitted(machine.connectionReady(1, maxStreams: 1, now: 0)) == ["r1@1"], "APNs allows one stream before a valid token")
        #expect(Self.submitted(machine.maxStreamsChanged(1, to: 3)) == ["r2@1", "r3@1"])
        #expect(machine.maxStreamsChanged(1, to: 1).submit.isEmpty)
        // Three in flight over a limit of one: two must end before the fourth goes.
        guard case .none = machine.streamEnded(on: 1), case .none = machine.streamEnded(on: 1) else {
            Issue.record("no stream is free until in-flight falls under the new limit")
            return
        }
        guard case .submit(let request, 1) = machine.streamEnded(on: 1) else {
            Issue.record("now one is")
            return
        }
        #expect(request.name == 4)
    }

    @Test func aConnectionGoingAwayTakesNoStreamAndClosesWhenItsLastEnds() {
        var machine = Self.machine(maxConnections: 2)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionReady(1, maxStreams: 10, now: 0)
        _ = machine.execute(PoolTestRequest(2), now: 0)
        #expect(machine.connectionGoingAway(1, now: 0).connections.isEmpty, "nothing waits: no new connection yet")
        guard case .wait(.open(2, freshLookup: false, timeoutAt: _), _) = machine.execute(PoolTestRequest(3), now: 0) else {
            Issue.record("a going-away connection is not live: open another")
            return
        }
        guard case .none = machine.streamEnded(on: 1) else {
            Issue.record("one stream is still in flight on connection 1")
            return
        }
        guard case .close(1, let error) = machine.streamEnded(on: 1) else {
            Issue.record("the last stream ended: close")
            return
        }
        #expect(error.code == .goaway(retryable: true))
        _ = machine.connectionClosed(1, error: error, now: 0, jitter: 1)
        #expect(Self.submitted(machine.connectionReady(2, maxStreams: 10, now: 0)) == ["r3@2"])
        #expect(machine.counters.connectFailures == 0, "a ready connection that closes is no connect failure")
    }

    @Test func anIdleConnectionGoingAwayClosesAtOnce() {
        var machine = Self.machine()
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionReady(1, maxStreams: 10, now: 0)
        _ = machine.streamEnded(on: 1)
        #expect(machine.connectionGoingAway(1, now: 0).connections == [.close(1, HTTP2Error(.goaway(retryable: true), "the server sent GOAWAY"))])
    }

    @Test func neverProcessedRequestsGoFirstAndFailAfterTheRetryLimit() {
        var machine = Self.machine(maxConnections: 1, maxTransparentRetries: 1)
        let first = PoolTestRequest(1)
        _ = machine.execute(first, now: 0)
        _ = machine.connectionReady(1, maxStreams: 1, now: 0)
        _ = machine.execute(PoolTestRequest(2), now: 0)
        // REFUSED_STREAM: the stream ends, the queue's head takes it, the refused one goes first after.
        guard case .submit(let second, 1) = machine.streamEnded(on: 1) else {
            Issue.record("the freed stream goes to the waiting request")
            return
        }
        #expect(second.name == 2)
        let requeued = machine.requeue([first], now: 0)
        #expect(requeued.submit.isEmpty && requeued.fail.isEmpty && machine.waitingCount == 1)
        guard case .submit(let again, 1) = machine.streamEnded(on: 1) else {
            Issue.record("the refused request goes out again")
            return
        }
        #expect(again === first && first.retries == 1)
        _ = machine.streamEnded(on: 1)
        #expect(Self.failed(machine.requeue([first], now: 0)) == ["r1:streamReset(7)"], "refused twice with a limit of one")
        #expect(machine.counters.transparentRetries == 2)
    }

    @Test func requeuedRequestsKeepTheirOrderAheadOfTheQueue() {
        var machine = Self.machine(maxConnections: 1, maxTransparentRetries: 5)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionReady(1, maxStreams: 1, now: 0)
        _ = machine.execute(PoolTestRequest(2), now: 0)
        let action = machine.requeue([PoolTestRequest(8), PoolTestRequest(9)], now: 0)
        #expect(action.submit.isEmpty)
        var order: [Int] = []
        for _ in 0..<3 {
            if case .submit(let request, _) = machine.streamEnded(on: 1) { order.append(request.name) }
        }
        #expect(order == [8, 9, 2])
    }

    @Test func connectFailuresBackOffExponentiallyAndLookTheHostUpAgain() {
        var machine = Self.machine(maxConnections: 1)
        var now: UInt64 = 0
        var delays: [UInt64] = []
        for attempt in 1...6 {
            let request = PoolTestRequest(attempt)
            switch machine.execute(request, now: now) {
            case .wait(.open(let id, let freshLookup, _), _):
                #expect(attempt == 1 && !freshLookup, "only the first attempt opens at once, with whatever address is cached")
                let failed = machine.connectionClosed(id, error: HTTP2Error(.connectFailed, "refused"), now: now, jitter: 1)
                #expect(Self.failed(failed) == ["r\(attempt):connectFailed"], "with no connection left, waiting requests fail at once")
            case .wait(.reconnectAt(let at), _):
                delays.append(at - now)
                now = at
                guard case .open(let id, freshLookup: true, timeoutAt: _)? = machine.reconnectDue(now: now).connections.first else {
                    Issue.record("the reconnect opens, with a fresh lookup")
                    return
                }
                // That connection fails too, and with it the request waiting for it.
                _ = machine.connectionClosed(id, error: HTTP2Error(.connectFailed, "refused"), now: now, jitter: 1)
            default:
                Issue.record("attempt \(attempt) neither opened nor backed off")
            }
        }
        #expect(delays == [100, 200, 400, 800, 1_000].map { $0 * Self.ms }, "doubling from 100 ms up to the 1 s cap")
        #expect(machine.counters.connectFailures == 6)
        // Jitter scales the delay and is clamped to 0.5...1.5.
        var jittered = Self.machine(maxConnections: 1)
        guard case .wait(.open(let id, _, _), _) = jittered.execute(PoolTestRequest(1), now: 0) else { return }
        _ = jittered.connectionClosed(id, error: HTTP2Error(.connectFailed, "refused"), now: 0, jitter: 9)
        guard case .wait(.reconnectAt(let at), _) = jittered.execute(PoolTestRequest(2), now: 0) else {
            Issue.record("the backoff holds the next connect")
            return
        }
        #expect(at == 150 * Self.ms)
    }

    @Test func aReadyConnectionResetsTheBackoff() {
        var machine = Self.machine(maxConnections: 1)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionClosed(1, error: HTTP2Error(.connectFailed, "refused"), now: 0, jitter: 1)
        guard case .wait(.reconnectAt(let at), _) = machine.execute(PoolTestRequest(2), now: 10) else { return }
        _ = machine.reconnectDue(now: at)
        _ = machine.connectionReady(2, maxStreams: 1, now: at)
        _ = machine.streamEnded(on: 2)
        _ = machine.connectionClosed(2, error: HTTP2Error(.connectionLost, "dropped"), now: at, jitter: 1)
        guard case .wait(.open(3, freshLookup: false, timeoutAt: _), _) = machine.execute(PoolTestRequest(3), now: at) else {
            Issue.record("after a good connection the next one opens at once, with the cached address")
            return
        }
    }

    @Test func aConnectionNotReadyByItsTimeoutIsClosedAndCountsAsAFailure() {
        var machine = Self.machine(maxConnections: 1)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        #expect(machine.isOpening(1))
        let timedOut = machine.connectTimedOut(1, now: 1_000 * Self.ms, jitter: 1)
        #expect(!machine.isOpening(1), "a lookup finishing now must not connect")
        #expect(Self.failed(timedOut) == ["r1:connectFailed"])
        #expect(machine.counters.connectFailures == 1)
        // Its socket closing later is not a second failure.
        #expect(machine.connectionClosed(1, error: HTTP2Error(.connectFailed, "closed"), now: 0, jitter: 1).fail.isEmpty)
        #expect(machine.counters.connectFailures == 1)
        // A connection that became ready ignores its old timeout.
        var ready = Self.machine()
        _ = ready.execute(PoolTestRequest(1), now: 0)
        _ = ready.connectionReady(1, maxStreams: 1, now: 0)
        #expect(ready.connectTimedOut(1, now: 1_000 * Self.ms, jitter: 1).connections.isEmpty)
    }

    @Test func ticksFailWaitingRequestsPastTheirDeadlineAndStopWhenIdle() {
        var machine = Self.machine(maxConnections: 1)
        _ = machine.execute(PoolTestRequest(1, deadline: 500 * Self.ms), now: 0)
        _ = machine.connectionReady(1, maxStreams: 1, now: 0)
        _ = machine.execute(PoolTestRequest(2, deadline: 100 * Self.ms), now: 0)
        _ = machine.execute(PoolTestRequest(3, deadline: 900 * Self.ms), now: 0)
        let early = machine.tick(now: 50 * Self.ms)
        #expect(early.expired.isEmpty && early.sweep == [1] && early.nextAt == 100 * Self.ms)
        let due = machine.tick(now: 100 * Self.ms)
        #expect(due.expired.map(\.name) == [2], "only the waiting request past its deadline; in-flight ones are the connection's sweep")
        #expect(machine.waitingCount == 1)
        guard case .submit(let request, 1) = machine.streamEnded(on: 1) else { return }
        #expect(request.name == 3)
        _ = machine.streamEnded(on: 1)
        _ = machine.connectionClosed(1, error: HTTP2Error(.connectionLost, "idle"), now: 0, jitter: 1)
        #expect(machine.tick(now: 150 * Self.ms).nextAt == nil, "nothing open or waiting: the tick stops")
        guard case .wait(_, tickAt: 200 * Self.ms) = machine.execute(PoolTestRequest(4), now: 150 * Self.ms) else {
            Issue.record("and starts again with the next request")
            return
        }
    }

    @Test func shutdownFailsTheQueueClosesIdleConnectionsAndDrainsBusyOnes() {
        var machine = Self.machine(maxConnections: 2)
        _ = machine.execute(PoolTestRequest(1), now: 0)
        _ = machine.connectionReady(1, maxStreams: 1, now: 0)
        _ = machine.execute(PoolTestRequest(2), now: 0)
        _ = machine.connectionReady(2, maxStreams: 1, now: 0)
        _ = machine.streamEnded(on: 2)
        _ = machine.execute(PoolTestRequest(3), now: 0)
        _ = machine.execute(PoolTestRequest(4), now: 0)
        let action = machine.shutdown()
        #expect(Self.failed(action) == ["r4:shutdown"])
        #expect(action.connections.isEmpty, "both connections have a stream in flight")
        guard case .close(1, let error) = machine.streamEnded(on: 1) else {
            Issue.record("a drained connection closes")
            return
        }
        #expect(error.code == .shutdown)
        guard case .fail(let refused) = machine.execute(PoolTestRequest(5), now: 0) else {
            Issue.record("a shut-down pool takes nothing")
            return
        }
        #expect(refused.code == .shutdown)
        #expect(Self.failed(machine.requeue([PoolTestRequest(6)], now: 0)) == ["r6:shutdown"])
        #expect(machine.tick(now: 0).nextAt != nil, "connection 2 still drains: its streams still time out")
    }

    /// Random events against the machine and a model of the connections it drives: whatever the
    /// order, every request is in exactly one place, no connection carries more than its limit,
    /// nothing waits while a connection has room, and the live connections stay within bounds.
    @Test(arguments: 0..<200) func randomEventsKeepEveryRequestAccountedFor(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var machine = Self.machine(maxConnections: 3, maxTransparentRetries: 3)
        var now: UInt64 = 0
        var nextName = 0
        var finished = Set<Int>()
        var onConnection: [Int: [PoolTestRequest]] = [:]
        var limits: [Int: Int] = [:]
        var opening: Set<Int> = []
        var goingAway: Set<Int> = []
        var pendingReconnect: UInt64?

        func place(_ request: PoolTestRequest, on id: Int) {
            let count = onConnection[id]?.count ?? 0
            #expect(count < (limits[id] ?? 0) && !goingAway.contains(id),
                    "seed \(seed): r\(request.name) went to connection \(id) with \(count) of \(limits[id] ?? 0) streams, going away: \(goingAway.contains(id))")
            onConnection[id, default: []].append(request)
        }
        func finish(_ request: PoolTestRequest) {
            #expect(finished.insert(request.name).inserted, "seed \(seed): r\(request.name) finished twice")
        }
        func perform(_ action: PoolMachine.ConnectionAction) {
            switch action {
            case .open(let id, _, _): opening.insert(id)
            case .reconnectAt(let at): pendingReconnect = at
            case .close(let id, let error):
                opening.remove(id)
                closeConnection(id, error: error)
                goingAway.remove(id)
            }
        }
        func perform(_ action: PoolMachine.Action) {
            for (request, id) in action.submit { place(request, on: id) }
            for (request, _) in action.fail { finish(request) }
            for connection in action.connections { perform(connection) }
        }
        func closeConnection(_ id: Int, error: HTTP2Error) {
            let carried = onConnection.removeValue(forKey: id) ?? []
            limits[id] = nil
            perform(machine.connectionClosed(id, error: error, now: now, jitter: 1))
            // Some carried requests were never processed and go again; the rest fail.
            let split = carried.isEmpty ? 0 : Int(random.next() % UInt64(carried.count + 1))
            goingAway.remove(id)
            carried.prefix(split).forEach(finish)
            if split < carried.count { perform(machine.requeue(Array(carried.dropFirst(split)), now: now)) }
        }
        func endStream(_ id: Int, refused: Bool) {
            guard var carried = onConnection[id], !carried.isEmpty else { return }
            let request = carried.remove(at: Int(random.next() % UInt64(carried.count)))
            onConnection[id] = carried
            switch machine.streamEnded(on: id) {
            case .none: break
            case .submit(let next, let on): place(next, on: on)
            case .close(let on, let error): closeConnection(on, error: error)
            }
            if refused { perform(machine.requeue([request], now: now)) } else { finish(request) }
        }

        for _ in 0..<300 {
            now += random.next() % (40 * Self.ms)
            switch random.next() % 10 {
            case 0, 1, 2:
                nextName += 1
                let request = PoolTestRequest(nextName, deadline: now + 200 * Self.ms + random.next() % (800 * Self.ms))
                switch machine.execute(request, now: now) {
                case .submit(let id): place(request, on: id)
                case .wait(let action, _): if let action { perform(action) }
                case .fail: finish(request)
                }
            case 3, 4:
                if let id = onConnection.keys.sorted().randomElement(using: &random) { endStream(id, refused: random.next() % 4 == 0) }
            case 5:
                if let id = opening.sorted().randomElement(using: &random) {
                    opening.remove(id)
                    if random.next() % 3 == 0 {
                        closeConnection(id, error: HTTP2Error(.connectFailed, "refused"))
                    } else {
                        let limit = Int(random.next() % 4)
                        limits[id] = limit
                        perform(machine.connectionReady(id, maxStreams: limit, now: now))
                    }
                }
            case 6:
                if let id = limits.keys.sorted().randomElement(using: &random) {
                    let limit = Int(random.next() % 5)
                    limits[id] = limit
                    perform(machine.maxStreamsChanged(id, to: limit))
                }
            case 7:
                if let id = limits.keys.sorted().randomElement(using: &random) {
                    if random.next() % 2 == 0 {
                        goingAway.insert(id)
                        perform(machine.connectionGoingAway(id, now: now))
                    } else {
                        closeConnection(id, error: HTTP2Error(.connectionLost, "dropped"))
                    }
                }
            case 8:
                machine.tick(now: now).expired.forEach(finish)
                if let at = pendingReconnect, at <= now {
                    pendingReconnect = nil
                    perform(machine.reconnectDue(now: now))
                }
            default:
                if let id = opening.sorted().randomElement(using: &random) { perform(machine.connectTimedOut(id, now: now, jitter: 1)) }
            }
            let carried = onConnection.values.reduce(0) { $0 + $1.count }
            #expect(finished.count + carried + machine.waitingCount == nextName, "seed \(seed): a request was lost or counted twice")
            #expect(machine.inFlight == carried, "seed \(seed): the machine's in-flight count matches the connections'")
            let live = Set(limits.keys).union(opening).subtracting(goingAway)
            #expect(live.count <= 3, "seed \(seed): live connections stay within maxConnections")
            #expect(machine.openConnections == limits.count + opening.count, "seed \(seed): the machine knows the connections there are")
            for (id, limit) in limits {
                let count = onConnection[id]?.count ?? 0
                if machine.waitingCount > 0, !goingAway.contains(id) {
                    #expect(count >= limit, "seed \(seed): a request waits while connection \(id) has room (\(count) of \(limit))")
                }
            }
        }
        // Shut down and end every stream: everything finishes exactly once.
        perform(machine.shutdown())
        for id in Array(onConnection.keys) {
            while onConnection[id]?.isEmpty == false { endStream(id, refused: false) }
        }
        #expect(finished.count == nextName, "seed \(seed): after shutdown every request finished")
        #expect(machine.waitingCount == 0 && machine.inFlight == 0)
    }
}

/// A small, seeded generator: a failing seed replays exactly.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
