import HeraldCore

/// A request as the pool sees it: when it gives up waiting, and how often it was resent.
protocol HTTP2PoolRequest: AnyObject {
    /// When the request fails if it is still waiting for a stream (the loop clock's nanoseconds).
    var deadline: UInt64 { get }
    /// Transparent resends so far (REFUSED_STREAM, above a GOAWAY's last stream id).
    var retries: Int { get set }
}

/// The decisions of an ``HTTP2Client``'s pool, without sockets, without a loop and without a
/// clock of its own.
///
/// The client (the driver) feeds it what happened — a request to send, a connection ready, a
/// stream ended, a GOAWAY, a connection closed, a timer due, with the time — and performs what it
/// returns: submit this request on that connection, open a connection, close one, fail these
/// requests, call back at that time. So every rule below is unit-tested without a server
/// (`HTTP2PoolStateMachineTests`).
///
/// The rules:
/// - **Streams.** A request goes to the ready connection with the fewest streams in flight, never
///   past the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (which may change at any time). With a
///   queue, requests go in order: a new one never overtakes one waiting.
/// - **Connections.** Another connection opens only when every live one is saturated, none is
///   connecting, and fewer than `maxConnections` are live. Connections open on demand.
/// - **GOAWAY.** A connection going away (GOAWAY, out of stream ids, the pool shutting down)
///   takes no new stream and closes when its last stream ends; it no longer counts as live.
/// - **Backoff.** A connection that fails before it is ready (refused, TLS, no SETTINGS within
///   `connectTimeout`) pushes the next attempt out exponentially, with the driver's jitter, up to
///   `reconnectMax`; the next attempt looks the host up again. With no connection left, the
///   waiting requests fail at once rather than at their deadlines.
/// - **Resends.** Requests the server never processed go back to the front of the queue, at most
///   `maxTransparentRetries` times each.
/// - **Timeouts.** A tick every `tickInterval` while anything is open or waiting fails waiting
///   requests past their deadline and names the connections to sweep (stream deadlines, PINGs).
struct HTTP2PoolStateMachine<Request: HTTP2PoolRequest> {
    typealias ConnectionID = Int

    struct Configuration: Sendable {
        var maxConnections: Int
        var connectTimeout: UInt64
        var reconnectBase: UInt64
        var reconnectMax: UInt64
        var maxTransparentRetries: Int
        var tickInterval: UInt64 = 50_000_000
    }

    /// What to do with connections.
    enum ConnectionAction: Equatable {
        /// Open connection `id` (look the host up again when `freshLookup`), and report
        /// ``connectTimedOut(_:now:jitter:)`` at `timeoutAt` if it is not ready by then.
        case open(ConnectionID, freshLookup: Bool, timeoutAt: UInt64)
        /// Report ``reconnectDue(now:)`` at this time: the backoff holds the next connect.
        case reconnectAt(UInt64)
        /// Close connection `id` (its in-flight streams, if any, fail with the connection).
        case close(ConnectionID, HTTP2Error)
    }

    /// What to do with one new request.
    enum Execution {
        /// Submit it on this connection.
        case submit(ConnectionID)
        /// It waits; perform `connection`, and report ``tick(now:)`` at `tickAt` if set.
        case wait(ConnectionAction?, tickAt: UInt64?)
        /// Fail it.
        case fail(HTTP2Error)
    }

    /// What to do when one stream ended.
    enum StreamEnd {
        case none
        /// The freed stream takes the first waiting request.
        case submit(Request, ConnectionID)
        /// The connection was going away and is now empty.
        case close(ConnectionID, HTTP2Error)
    }

    /// What to do after any other event.
    struct Action {
        var submit: [(Request, ConnectionID)] = []
        var fail: [(Request, HTTP2Error)] = []
        var connections: [ConnectionAction] = []
        /// Report ``tick(now:)`` at this time.
        var tickAt: UInt64?
    }

    /// What a tick decided.
    struct Tick {
        /// Waiting requests past their deadline, taken off the queue: fail them with a timeout.
        var expired: [Request] = []
        /// Ready connections to sweep (stream deadlines, PINGs).
        var sweep: [ConnectionID] = []
        /// The next tick, while anything is open or waiting.
        var nextAt: UInt64?
    }

    /// Counters kept by the machine (the driver adds what only sockets know).
    struct Counters: Equatable {
        var connectionsOpened = 0
        var connectFailures = 0
        var transparentRetries = 0
        var maxStreamsInFlightOnOneConnection = 0
    }

    private struct Slot {
        let id: ConnectionID
        var ready = false
        var goingAway = false
        var inFlight = 0
        var maxStreams = 0

        var hasCapacity: Bool { ready && !goingAway && inFlight < maxStreams }
    }

    let configuration: Configuration
    private var slots: [Slot] = []
    private var waiting: [Request] = []
    private var waitingHead = 0
    private var nextID: ConnectionID = 1
    private var connectBackoff: Backoff
    private var reconnectNotBefore: UInt64 = 0
    private var reconnectPending = false
    private var lookupStale = false
    private var tickScheduled = false
    private(set) var isShutdown = false
    private(set) var counters = Counters()

    init(configuration: Configuration) {
        self.configuration = configuration
        connectBackoff = Backoff(first: .nanoseconds(Int64(clamping: configuration.reconnectBase)),
                                 maximum: .nanoseconds(Int64(clamping: configuration.reconnectMax)))
    }

    // MARK: queries

    /// Connections open or opening.
    var openConnections: Int { slots.count }
    /// Streams in flight over every connection.
    var inFlight: Int { slots.reduce(0) { $0 + $1.inFlight } }
    /// Requests waiting for a stream.
    var waitingCount: Int { waiting.count - waitingHead }
    /// Streams in flight on connection `id` (nil once it is gone).
    func inFlight(on id: ConnectionID) -> Int? { slots.first { $0.id == id }?.inFlight }
    /// Whether connection `id` is still wanted while it is being opened (a lookup that ends after
    /// the connect timeout, or after shutdown, must not connect).
    func isOpening(_ id: ConnectionID) -> Bool { slots.contains { $0.id == id && !$0.ready } }

    // MARK: events

    /// A new request.
    mutating func execute(_ request: Request, now: UInt64) -> Execution {
        guard !isShutdown else { return .fail(Self.shutdownError) }
        if waitingCount == 0, let index = leastLoadedWithCapacity() {
            take(index)
            return .submit(slots[index].id)
        }
        waiting.append(request)
        return .wait(openIfNeeded(now: now), tickAt: scheduleTick(now: now))
    }

    /// Connection `id` received the server's first SETTINGS.
    mutating func connectionReady(_ id: ConnectionID, maxStreams: Int, now: UInt64) -> Action {
        var action = Action()
        guard let index = index(of: id), !slots[index].ready else { return action }
        slots[index].ready = true
        slots[index].maxStreams = max(0, maxStreams)
        connectBackoff.reset()
        reconnectNotBefore = 0
        drainWaiting(into: &action)
        if waitingCount > 0, let open = openIfNeeded(now: now) { action.connections.append(open) }
        return action
    }

    /// The server changed `SETTINGS_MAX_CONCURRENT_STREAMS` on connection `id`.
    mutating func maxStreamsChanged(_ id: ConnectionID, to maxStreams: Int) -> Action {
        var action = Action()
        guard let index = index(of: id), slots[index].ready else { return action }
        slots[index].maxStreams = max(0, maxStreams)
        drainWaiting(into: &action)
        return action
    }

    /// Connection `id` takes no new stream (GOAWAY received, or out of stream ids).
    mutating func connectionGoingAway(_ id: ConnectionID, now: UInt64) -> Action {
        var action = Action()
        guard let index = index(of: id), !slots[index].goingAway else { return action }
        slots[index].goingAway = true
        if slots[index].inFlight == 0 {
            action.connections.append(.close(id, closingError))
        } else if waitingCount > 0, let open = openIfNeeded(now: now) {
            action.connections.append(open)
        }
        return action
    }

    /// One stream of connection `id` ended, whatever its outcome (answered, reset, refused,
    /// timed out, or never opened). Called once for each ``Execution/submit(_:)`` or
    /// ``StreamEnd/submit(_:_:)`` and each submit in an ``Action``, unless the connection closed.
    mutating func streamEnded(on id: ConnectionID) -> StreamEnd {
        guard let index = index(of: id), slots[index].inFlight > 0 else { return .none }
        slots[index].inFlight -= 1
        if slots[index].goingAway {
            return slots[index].inFlight == 0 ? .close(id, closingError) : .none
        }
        guard waitingCount > 0, slots[index].hasCapacity else { return .none }
        let request = waiting[waitingHead]
        popWaiting()
        take(index)
        return .submit(request, id)
    }

    /// Requests the server never processed: they go first, unless resent too often.
    mutating func requeue(_ requests: [Request], now: UInt64) -> Action {
        var action = Action()
        var front: [Request] = []
        for request in requests {
            request.retries += 1
            counters.transparentRetries += 1
            if isShutdown {
                action.fail.append((request, Self.shutdownError))
            } else if request.retries > configuration.maxTransparentRetries {
                action.fail.append((request, HTTP2Error(.streamReset(7), "refused \(request.retries) times")))
            } else {
                front.append(request)
            }
        }
        guard !front.isEmpty else { return action }
        waiting.replaceSubrange(0..<waitingHead, with: front)
        waitingHead = 0
        drainWaiting(into: &action)
        if waitingCount > 0, let open = openIfNeeded(now: now) { action.connections.append(open) }
        action.tickAt = scheduleTick(now: now)
        return action
    }

    /// Connection `id` closed. `jitter` (0.5...1.5) spreads the backoff when it never got ready.
    mutating func connectionClosed(_ id: ConnectionID, error: HTTP2Error, now: UInt64, jitter: Double) -> Action {
        var action = Action()
        guard let index = index(of: id) else { return action }
        let slot = slots.remove(at: index)
        if !slot.ready { connectFailed(error, now: now, jitter: jitter, into: &action) }
        if waitingCount > 0, let open = openIfNeeded(now: now) { action.connections.append(open) }
        return action
    }

    /// The connect timeout of connection `id` came.
    mutating func connectTimedOut(_ id: ConnectionID, now: UInt64, jitter: Double) -> Action {
        var action = Action()
        guard let index = index(of: id), !slots[index].ready else { return action }
        slots.remove(at: index)
        let error = HTTP2Error(.connectFailed, "no HTTP/2 connection within \(configuration.connectTimeout / 1_000_000) ms")
        action.connections.append(.close(id, error))
        connectFailed(error, now: now, jitter: jitter, into: &action)
        if waitingCount > 0, let open = openIfNeeded(now: now) { action.connections.append(open) }
        return action
    }

    /// The backoff of ``ConnectionAction/reconnectAt(_:)`` is over.
    mutating func reconnectDue(now: UInt64) -> Action {
        var action = Action()
        reconnectPending = false
        if waitingCount > 0, let open = openIfNeeded(now: now) { action.connections.append(open) }
        return action
    }

    /// The tick asked for came.
    mutating func tick(now: UInt64) -> Tick {
        tickScheduled = false
        var tick = Tick()
        if waitingCount > 0 {
            var kept: [Request] = []
            kept.reserveCapacity(waitingCount)
            for request in waiting[waitingHead...] {
                if request.deadline <= now { tick.expired.append(request) } else { kept.append(request) }
            }
            waiting = kept
            waitingHead = 0
        }
        tick.sweep = slots.filter(\.ready).map(\.id)
        tick.nextAt = scheduleTick(now: now)
        return tick
    }

    /// Stop: waiting requests fail, idle connections close, busy ones close when their streams end.
    mutating func shutdown() -> Action {
        var action = Action()
        guard !isShutdown else { return action }
        isShutdown = true
        for request in waiting[waitingHead...] { action.fail.append((request, Self.shutdownError)) }
        waiting.removeAll()
        waitingHead = 0
        for index in slots.indices {
            slots[index].goingAway = true
            if slots[index].inFlight == 0 { action.connections.append(.close(slots[index].id, Self.shutdownError)) }
        }
        return action
    }

    // MARK: rules

    static var shutdownError: HTTP2Error { HTTP2Error(.shutdown, "the client was shut down") }

    private var closingError: HTTP2Error {
        isShutdown ? HTTP2Error(.shutdown, "closed by the client") : HTTP2Error(.goaway(retryable: true), "the server sent GOAWAY")
    }

    private func index(of id: ConnectionID) -> Int? { slots.firstIndex { $0.id == id } }

    private func leastLoadedWithCapacity() -> Int? {
        var best: Int?
        for index in slots.indices where slots[index].hasCapacity {
            if let current = best, slots[current].inFlight <= slots[index].inFlight { continue }
            best = index
        }
        return best
    }

    private mutating func take(_ index: Int) {
        slots[index].inFlight += 1
        counters.maxStreamsInFlightOnOneConnection = max(counters.maxStreamsInFlightOnOneConnection, slots[index].inFlight)
    }

    private mutating func popWaiting() {
        waitingHead += 1
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 4096 {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    private mutating func drainWaiting(into action: inout Action) {
        while waitingCount > 0, let index = leastLoadedWithCapacity() {
            action.submit.append((waiting[waitingHead], slots[index].id))
            popWaiting()
            take(index)
        }
    }

    private mutating func openIfNeeded(now: UInt64) -> ConnectionAction? {
        guard !isShutdown, !reconnectPending else { return nil }
        var live = 0
        for slot in slots where !slot.goingAway {
            // One connection at a time, and only when every live one is saturated.
            if !slot.ready || slot.hasCapacity { return nil }
            live += 1
        }
        guard live < configuration.maxConnections else { return nil }
        if now < reconnectNotBefore {
            reconnectPending = true
            return .reconnectAt(reconnectNotBefore)
        }
        let id = nextID
        nextID += 1
        slots.append(Slot(id: id))
        counters.connectionsOpened += 1
        let freshLookup = lookupStale
        lookupStale = false
        return .open(id, freshLookup: freshLookup, timeoutAt: now + configuration.connectTimeout)
    }

    private mutating func connectFailed(_ error: HTTP2Error, now: UInt64, jitter: Double, into action: inout Action) {
        guard !isShutdown else { return }
        counters.connectFailures += 1
        lookupStale = true  // an uncached lookup before the next connect, as Apple asks
        let base = UInt64(max(0, connectBackoff.next().nanoseconds))
        reconnectNotBefore = now + UInt64(Double(base) * min(1.5, max(0.5, jitter)))
        // With no connection at all, the waiting requests learn now rather than at their deadline.
        if slots.isEmpty {
            for request in waiting[waitingHead...] { action.fail.append((request, error)) }
            waiting.removeAll()
            waitingHead = 0
        }
    }

    private mutating func scheduleTick(now: UInt64) -> UInt64? {
        guard !tickScheduled, !slots.isEmpty || waitingCount > 0 else { return nil }
        tickScheduled = true
        return now + configuration.tickInterval
    }
}
