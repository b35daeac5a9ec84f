internal import CRdKafka
import Dispatch
import Foundation
import HeraldCore
import Synchronization

/// The driver of a ``KafkaConsumer``: one thread that performs what ``ConsumerStateMachine``
/// decides against librdkafka, and the application's waiting tasks. The machine and the
/// waiters share one mutex; the poll thread never holds it across a librdkafka call.
final class ConsumerRuntime: Sendable {
    /// Turns of the poll thread (about every 50 ms, idle or not): a liveness heartbeat.
    let pollIterations = Atomic<UInt64>(0)

    typealias Waiter = CheckedContinuation<Result<KafkaMessage?, KafkaError>, Never>

    struct State {
        var machine: ConsumerStateMachine
        var waiters: [(id: UInt64, continuation: Waiter)] = []
        var nextWaiterID: UInt64 = 0
        var commitWaiters: [CheckedContinuation<Result<Void, KafkaError>, Never>] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var ended: Result<Void, KafkaError>?
    }

    let client: RDKafkaClient
    let options: KafkaConsumerOptions
    let state: Mutex<State>
    let events: AsyncStream<KafkaRebalanceEvent>
    private let eventSink: AsyncStream<KafkaRebalanceEvent>.Continuation
    private let context: RebalanceContext
    /// Wakes the poll thread out of `rd_kafka_consumer_poll` when a command waits.
    private let wakeQueue: RDKafkaQueue
    /// Wakes the poll thread out of a wait for the application (a full budget, a revocation's
    /// grace period).
    private let progress = DispatchSemaphore(value: 0)

    init(configuration: KafkaConfiguration, options: KafkaConsumerOptions) throws(KafkaError) {
        let conf = try RDKafkaConfiguration(configuration)
        let context = RebalanceContext()
        context.install(in: conf)
        client = try RDKafkaClient(.consumer, configuration: conf, callbackContext: context)
        rd_kafka_poll_set_consumer(client.pointer)
        guard let queue = rd_kafka_queue_get_consumer(client.pointer) else {
            throw KafkaError(.clientCreation, "no consumer queue")
        }
        wakeQueue = RDKafkaQueue(pointer: queue, client: client)
        self.options = options
        self.context = context
        state = Mutex(State(machine: ConsumerStateMachine(options: options, now: .now)))
        (events, eventSink) = AsyncStream.makeStream(of: KafkaRebalanceEvent.self, bufferingPolicy: .bufferingNewest(256))
    }

    func start() {
        context.runtime = self
        let thread = Thread { [self] in pollLoop() }
        thread.name = "herald-kafka-consumer-poll"
        thread.start()
    }

    // MARK: Application side

    func subscribe(_ topics: [String]) throws(KafkaError) {
        guard let list = PartitionList(topics.map { KafkaTopicPartition(topic: $0, partition: herald_rdkafka_partition_ua()) }) else {
            throw KafkaError(.subscribe, "cannot allocate a topic list")
        }
        let error = rd_kafka_subscribe(client.pointer, list.pointer)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.subscribe, rdkafkaErrorText(error), rdkafkaCode: error.rawValue)
        }
    }

    func next(timeout: Duration?) async throws(KafkaError) -> KafkaMessage? {
        enum Immediate { case message(KafkaMessage?), failure(KafkaError), wait(UInt64) }
        let immediate: Immediate = state.withLock { state in
            if let message = state.machine.take() { return .message(message) }
            switch state.ended {
            case .success?: return .message(nil)
            case .failure(let error)?: return .failure(error)
            case nil:
                defer { state.nextWaiterID += 1 }
                return .wait(state.nextWaiterID)
            }
        }
        let id: UInt64
        switch immediate {
        case .message(let message): return message
        case .failure(let error): throw error
        case .wait(let waiterID): id = waiterID
        }
        let result: Result<KafkaMessage?, KafkaError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let resumeNow: Result<KafkaMessage?, KafkaError>? = state.withLock { state in
                    if let message = state.machine.take() { return .success(message) }
                    if let ended = state.ended { return ended.map { _ -> KafkaMessage? in nil } }
                    if Task.isCancelled { return .success(nil) }
                    state.waiters.append((id: id, continuation: continuation))
                    return nil
                }
                if let resumeNow {
                    continuation.resume(returning: resumeNow)
                } else if let timeout {
                    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: max(0, timeout.nanoseconds)))) { [self] in
                        cancelWaiter(id)
                    }
                }
            }
        } onCancel: {
            cancelWaiter(id)
        }
        return try result.get()
    }

    private func cancelWaiter(_ id: UInt64) {
        let waiter: Waiter? = state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        waiter?.resume(returning: .success(nil))
    }

    func markProcessed(_ message: KafkaMessage) {
        if state.withLock({ $0.machine.processed(message) }) { progress.signal() }
    }

    func requestCommit() async throws(KafkaError) {
        let result: Result<Void, KafkaError> = await withCheckedContinuation { continuation in
            let closed = state.withLock { state in
                guard state.ended == nil, state.machine.closeMode == nil else { return true }
                state.commitWaiters.append(continuation)
                return false
            }
            if closed {
                continuation.resume(returning: .failure(KafkaError(.closed, "the consumer is closed")))
            } else {
                wake()
            }
        }
        try result.get()
    }

    func requestClose(commit: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyEnded = state.withLock { state in
                guard state.ended == nil else { return true }
                state.machine.requestClose(commit ? .commit : .abandon)
                state.closeWaiters.append(continuation)
                return false
            }
            if alreadyEnded { continuation.resume() } else { wake() }
        }
    }

    func abandon() {
        state.withLock { state in
            if state.ended == nil { state.machine.requestClose(.abandon) }
        }
        wake()
    }

    /// Wakes the poll thread wherever it waits.
    private func wake() {
        wakeQueue.wake()
        progress.signal()
    }

    var statistics: KafkaConsumerStatistics { state.withLock { $0.machine.snapshot } }

    var assignment: Set<KafkaTopicPartition> { state.withLock { Set($0.machine.assignment.keys) } }

    func committedOffsets(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) async throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        let client = self.client
        return try await offPool { client.committedOffsets(for: partitions, timeoutMilliseconds: timeoutMilliseconds) }
    }

    func watermarks(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) async throws(KafkaError) -> [KafkaTopicPartition: PartitionWatermarks] {
        let client = self.client
        return try await offPool { client.watermarks(for: partitions, timeoutMilliseconds: timeoutMilliseconds) }
    }

    /// Runs a blocking librdkafka request on a Dispatch thread, never on the cooperative pool.
    private func offPool<Value: Sendable>(_ request: @escaping @Sendable () -> Result<Value, KafkaError>) async throws(KafkaError) -> Value {
        let result: Result<Value, KafkaError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: request()) }
        }
        return try result.get()
    }

    // MARK: Poll thread

    private func pollLoop() {
        var batch: [KafkaMessage] = []
        batch.reserveCapacity(256)
        while true {
            pollIterations.add(1, ordering: .relaxed)
            let (commitWaiters, commitDue) = state.withLock { state in
                defer { state.commitWaiters.removeAll() }
                let due = state.machine.closeMode == nil
                    && state.machine.commitIsDue(now: .now, requested: !state.commitWaiters.isEmpty)
                return (state.commitWaiters, due)
            }
            if commitDue {
                let result = commitProcessed(only: nil)
                for waiter in commitWaiters { waiter.resume(returning: result) }
            }
            switch state.withLock({ $0.machine.turn(now: .now) }) {
            case .close(let mode):
                shutDown(mode)
                return
            case .hold(let until):
                // The application is draining what it has: take nothing until it finishes some.
                awaitProgress(until: until) { $0.machine.hasRoom || $0.machine.closeMode != nil || !$0.commitWaiters.isEmpty }
                continue
            case .poll(var room, let change):
                switch change {
                case .pause(let partitions)?: setPaused(true, partitions)
                case .resume(let partitions)?: setPaused(false, partitions)
                case nil: break
                }
                // Wait for one message, then take what is already there, up to the budget.
                var timeout: Int32 = 50
                batch.removeAll(keepingCapacity: true)
                while room > 0 && batch.count < 256, let raw = rd_kafka_consumer_poll(client.pointer, timeout) {
                    timeout = 0
                    if let message = readMessage(raw) {
                        batch.append(message)
                        room -= 1
                    }
                    rd_kafka_message_destroy(raw)
                }
                if !batch.isEmpty { hand(batch) }
            }
        }
    }

    /// Waits until `isDone` holds or `until` comes; `isDone` is checked under the lock first
    /// and again each time the application finishes work (or a command wakes the thread).
    private func awaitProgress(until: ContinuousClock.Instant, isDone: (State) -> Bool) {
        while true {
            let done = state.withLock { state in
                if isDone(state) { return true }
                state.machine.awaitProgress()
                return false
            }
            let left = ContinuousClock.now.duration(to: until)
            guard !done, left > .zero else { return }
            if progress.wait(timeout: .now() + .nanoseconds(Int(clamping: left.nanoseconds))) == .timedOut { return }
        }
    }

    /// Copies a message out of librdkafka; nil for error events (counted, logged, skipped),
    /// except a fatal error, which ends the consumer.
    private func readMessage(_ raw: UnsafeMutablePointer<rd_kafka_message_t>) -> KafkaMessage? {
        switch RDKafkaMessage.read(raw) {
        case .message(let message):
            return message
        case .endOfPartition:
            return nil
        case .error(let code, let text):
            state.withLock { $0.machine.consumeErrorSeen() }
            if code == RD_KAFKA_RESP_ERR__FATAL {
                options.log("kafka consumer: fatal error: \(text)")
                end(.failure(KafkaError(.consume, text, rdkafkaCode: code.rawValue)))
            } else if code != RD_KAFKA_RESP_ERR__TRANSPORT && code != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN {
                options.log("kafka consumer: skipped an error event: \(text)")
            }
            return nil
        }
    }

    /// Buffers messages and serves waiting readers.
    private func hand(_ messages: [KafkaMessage]) {
        let served: [(Waiter, KafkaMessage)] = state.withLock { state in
            state.machine.received(messages)
            var served: [(Waiter, KafkaMessage)] = []
            while !state.waiters.isEmpty, let message = state.machine.take() {
                served.append((state.waiters.removeFirst().continuation, message))
            }
            return served
        }
        for (waiter, message) in served { waiter.resume(returning: .success(message)) }
    }

    private func setPaused(_ pause: Bool, _ partitions: [KafkaTopicPartition]) {
        guard !partitions.isEmpty, let list = PartitionList(partitions) else { return }
        let error = pause ? rd_kafka_pause_partitions(client.pointer, list.pointer) : rd_kafka_resume_partitions(client.pointer, list.pointer)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            options.log("kafka consumer: \(pause ? "pause" : "resume") failed: \(rdkafkaErrorText(error))")
        }
    }

    /// Commits what the machine says (of `only` partitions when given), synchronously on the
    /// poll thread, and tells the machine the answer.
    private func commitProcessed(only: Set<KafkaTopicPartition>?) -> Result<Void, KafkaError> {
        commit(state.withLock { $0.machine.offsetsToCommit(only: only) })
    }

    private func commit(_ offsets: [KafkaTopicPartition: Int64]) -> Result<Void, KafkaError> {
        guard !offsets.isEmpty else { return .success(()) }
        guard let list = PartitionList(offsets.map { ($0.key, $0.value) }) else {
            return .failure(KafkaError(.commit, "cannot allocate a partition list"))
        }
        let error = rd_kafka_commit(client.pointer, list.pointer, 0)
        if error == RD_KAFKA_RESP_ERR_NO_ERROR || error == RD_KAFKA_RESP_ERR__NO_OFFSET {
            state.withLock { $0.machine.committed(offsets) }
            return .success(())
        }
        state.withLock { $0.machine.commitRefused() }
        let retryable = error == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS || error == RD_KAFKA_RESP_ERR__TRANSPORT
            || error == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || error == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID
        options.log("kafka consumer: commit of \(offsets.count) partition(s) refused, retrying next tick: \(rdkafkaErrorText(error))")
        return .failure(KafkaError(.commit, rdkafkaErrorText(error), rdkafkaCode: error.rawValue, isRetryable: retryable))
    }

    /// librdkafka's rebalance callback, on the poll thread (inside `rd_kafka_consumer_poll` or
    /// `rd_kafka_consumer_close`).
    func rebalance(_ error: rd_kafka_resp_err_t, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) {
        let partitions = list.map { PartitionList.entries(of: $0).map(\.0) } ?? []
        let cooperative = String(cString: rd_kafka_rebalance_protocol(client.pointer)) == "COOPERATIVE"
        switch error {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            let assignment = state.withLock { $0.machine.assigned(partitions) }
            if let list { PartitionList.setOffsets(assignment.startOffsets, in: list) }
            if cooperative {
                if let failure = rd_kafka_incremental_assign(client.pointer, list) {
                    options.log("kafka consumer: incremental assign failed: \(String(cString: rd_kafka_error_string(failure)))")
                    rd_kafka_error_destroy(failure)
                }
            } else {
                let result = rd_kafka_assign(client.pointer, list)
                if result != RD_KAFKA_RESP_ERR_NO_ERROR {
                    options.log("kafka consumer: assign failed: \(rdkafkaErrorText(result))")
                }
            }
            // Newly assigned partitions start fetching; keep them quiet while the budget is full.
            if let list {
                _ = assignment.paused ? rd_kafka_pause_partitions(client.pointer, list) : rd_kafka_resume_partitions(client.pointer, list)
            }
            eventSink.yield(.assigned(partitions))
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            let lost = rd_kafka_assignment_lost(client.pointer) != 0
            if let deadline = state.withLock({ $0.machine.revocationBegan(partitions, lost: lost, now: .now) }) {
                // Let work already handed out finish, up to the grace period.
                awaitProgress(until: deadline) { $0.machine.unfinished(in: partitions) == 0 }
            }
            if let offsets = state.withLock({ $0.machine.revocationCommit(partitions, lost: lost) }) {
                // Brokers refuse this while the group rebalances (the mock cluster always does);
                // the new owner then re-reads a little, which idempotent processing absorbs.
                _ = commit(offsets)
            }
            state.withLock { $0.machine.revoked(partitions, lost: lost, cooperative: cooperative) }
            if cooperative {
                if let failure = rd_kafka_incremental_unassign(client.pointer, list) {
                    options.log("kafka consumer: incremental unassign failed: \(String(cString: rd_kafka_error_string(failure)))")
                    rd_kafka_error_destroy(failure)
                }
            } else {
                _ = rd_kafka_assign(client.pointer, nil)
            }
            eventSink.yield(.revoked(partitions))
        default:
            options.log("kafka consumer: rebalance error: \(rdkafkaErrorText(error))")
            state.withLock { $0.machine.rebalanceFailed() }
            _ = rd_kafka_assign(client.pointer, nil)
        }
    }

    private func shutDown(_ mode: ConsumerStateMachine.CloseMode) {
        if mode == .commit {
            _ = commitProcessed(only: nil)
        }
        // Serves the final revocation through `rebalance`, which skips its grace period while
        // closing and commits only when closing with commit.
        let error = rd_kafka_consumer_close(client.pointer)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            options.log("kafka consumer: close: \(rdkafkaErrorText(error))")
        }
        end(.success(()))
    }

    /// Ends the message sequence and answers everyone waiting.
    private func end(_ result: Result<Void, KafkaError>) {
        let (waiters, commitWaiters, closeWaiters) = state.withLock { state in
            if state.ended == nil { state.ended = result }
            state.machine.requestClose(.commit)
            defer {
                state.waiters.removeAll()
                state.commitWaiters.removeAll()
                state.closeWaiters.removeAll()
            }
            return (state.waiters.map(\.continuation), state.commitWaiters, state.closeWaiters)
        }
        for waiter in waiters { waiter.resume(returning: result.map { _ -> KafkaMessage? in nil }) }
        for waiter in commitWaiters { waiter.resume(returning: .failure(KafkaError(.closed, "the consumer is closed"))) }
        for waiter in closeWaiters { waiter.resume() }
        eventSink.finish()
    }
}
