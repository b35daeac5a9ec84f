internal import CRdKafka
import Dispatch
import Foundation
import Synchronization

/// How a ``KafkaConsumer`` paces itself.
public struct KafkaConsumerOptions: Sendable {
    /// Messages read and not yet processed (buffered or being worked on) at which the consumer
    /// pauses its partitions, so memory stays bounded however far behind it is. Default 1,000.
    public var maximumInFlight: Int = 1_000
    /// In-flight count at or below which paused partitions resume. Default: half the maximum.
    public var resumeAtOrBelow: Int?
    /// How long the budget may stay full before the partitions are paused. Until then the poll
    /// thread only stops taking messages (librdkafka's bounded prefetch holds the rest), because
    /// a pause discards that prefetch and costs a fetch round trip to undo. Default 250 ms.
    public var pauseWhenFullFor: Duration = .milliseconds(250)
    /// How often processed offsets are committed. Default 1 s.
    public var commitInterval: Duration = .seconds(1)
    /// On revocation, how long work already handed out may take to finish before it is
    /// abandoned uncommitted. Default 2 s (keep it well under `max.poll.interval.ms`).
    public var revocationGracePeriod: Duration = .seconds(2)
    /// Where warnings go (a commit refused, a message error). Default: a JSON line on stderr.
    public var log: @Sendable (String) -> Void = KafkaConsumerOptions.logToStandardError

    /// The defaults.
    public init() {}

    /// Writes `{"level":"warning","component":"herald.kafka","message":…}` to stderr.
    public static let logToStandardError: @Sendable (String) -> Void = { message in
        var escaped = ""
        for scalar in message.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        FileHandle.standardError.write(Data("{\"level\":\"warning\",\"component\":\"herald.kafka\",\"message\":\"\(escaped)\"}\n".utf8))
    }
}

/// A change of the partitions a consumer holds, for metrics.
public enum KafkaRebalanceEvent: Sendable, Equatable {
    /// Partitions were assigned to this consumer; reading resumes from their committed offsets.
    case assigned([KafkaTopicPartition])
    /// Partitions were taken away; their unfinished work was abandoned uncommitted.
    case revoked([KafkaTopicPartition])
}

/// Counters of a consumer's life, for metrics and tests.
public struct KafkaConsumerStatistics: Sendable, Equatable {
    /// Messages handed to the application.
    public var delivered = 0
    /// Messages the application marked processed.
    public var processed = 0
    /// Processed marks ignored because the message's partition was revoked meanwhile.
    public var processedAfterRevocation = 0
    /// Messages read but dropped because their partition was revoked before they were handed out.
    public var droppedOnRevocation = 0
    /// Partitions taken back in the same rebalance that revoked them and read on from the work
    /// already processed (its commit had been refused), instead of from the last commit.
    public var resumedAfterRefusedCommit = 0
    /// Successful commits.
    public var commits = 0
    /// Refused commits (the mock cluster refuses every commit during a rebalance); retried next tick.
    public var commitFailures = 0
    /// Assignments seen.
    public var assignments = 0
    /// Revocations seen.
    public var revocations = 0
    /// Times the partitions were paused for backpressure.
    public var pauses = 0
    /// Times paused partitions were resumed.
    public var resumes = 0
    /// Message-level errors reported by librdkafka and skipped.
    public var consumeErrors = 0
    /// Messages read and not yet processed, right now.
    public var inFlight = 0
    /// Whether partitions are paused right now.
    public var isPaused = false
}

/// A consumer-group member with at-least-once semantics.
///
/// Messages come out of ``messages`` (an `AsyncSequence`). When the work a message names is
/// done, the application calls ``markProcessed(_:)``; offsets move forward in order per partition
/// (a later message finishing first never lets a commit skip an unfinished one) and are
/// committed about every second, on revocation (where the broker allows it) and on ``close()``.
/// Automatic commits and automatic offset stores are off.
///
/// librdkafka is driven by one dedicated thread that polls, serves rebalances, commits, and
/// pauses partitions when ``KafkaConsumerOptions/maximumInFlight`` messages stay outstanding;
/// no blocking call runs on Swift's cooperative threads.
///
/// Rebalances use librdkafka's default eager protocol (`range,roundrobin`): every rebalance
/// revokes everything and assigns afresh, which keeps the bookkeeping one simple rule (forget a
/// revoked partition, resume from its commit). A configuration choosing `cooperative-sticky`
/// works too: the callback then assigns and revokes incrementally.
///
/// Dropping a consumer without ``close()`` leaves the group *without committing*, as a crash would.
///
/// ```swift
/// let consumer = try KafkaConsumer(configuration: configuration, groupID: "herald-workers")
/// try consumer.subscribe(topics: ["herald.jobs"])
/// try await KeyOrderedRunner.run(consumer.messages, maximumConcurrency: 64, key: { $0.key }) { message in
///     await handle(message)              // idempotent: a rebalance may deliver it again
///     consumer.markProcessed(message)
/// }
/// ```
public final class KafkaConsumer: Sendable {
    let runtime: ConsumerRuntime

    /// librdkafka properties the consumer sets unless the configuration does.
    /// `queued.max.messages.kbytes` bounds librdkafka's prefetch (its default is 64 MB).
    public static let defaultProperties = ["auto.offset.reset": "earliest", "queued.max.messages.kbytes": "16384"]

    /// Joins the consumer group `groupID` (new groups start at the earliest offset).
    public init(configuration: KafkaConfiguration, groupID: String, options: KafkaConsumerOptions = KafkaConsumerOptions()) throws(KafkaError) {
        guard options.maximumInFlight >= 1 else {
            throw KafkaError(.configuration, "maximumInFlight must be at least 1")
        }
        var configuration = configuration
        configuration.properties["group.id"] = groupID
        configuration.properties["enable.auto.commit"] = "false"
        configuration.properties["enable.auto.offset.store"] = "false"
        for (name, value) in KafkaConsumer.defaultProperties where configuration.properties[name] == nil {
            configuration.properties[name] = value
        }
        runtime = try ConsumerRuntime(configuration: configuration, options: options)
        runtime.start()
    }

    /// Subscribes to `topics` (replacing any earlier subscription). Partitions arrive with the
    /// group's first rebalance. (`rd_kafka_subscribe` only hands the request to librdkafka's
    /// own thread; it does not wait for the network.)
    public func subscribe(topics: [String]) throws(KafkaError) {
        try runtime.subscribe(topics)
    }

    /// The messages, in partition order, until the consumer closes. Iterate from one task at a time.
    public var messages: KafkaConsumerMessages { KafkaConsumerMessages(runtime: runtime) }

    /// Waits up to `timeoutMilliseconds` for the next message; nil when none came in time or the
    /// consumer closed.
    public func poll(timeoutMilliseconds: Int32 = 100) async throws(KafkaError) -> KafkaMessage? {
        try await runtime.next(timeout: .milliseconds(Int64(timeoutMilliseconds)))
    }

    /// Marks `message`'s work as done. Its offset becomes committable once every earlier message
    /// of its partition is done too. Ignored (and counted) when the partition was revoked since.
    /// Mark every message, including those skipped or dead-lettered: an unmarked one holds its
    /// partition's commits (and, through the in-flight budget, eventually its reading) back.
    public func markProcessed(_ message: KafkaMessage) {
        runtime.markProcessed(message)
    }

    /// Commits every processed offset now and waits for the broker's answer (the periodic commit
    /// does this anyway). Nothing to commit is not an error; a refusal during a rebalance is a
    /// retryable `.commit` error, and the next tick tries again.
    public func commit() async throws(KafkaError) {
        try await runtime.requestCommit()
    }

    /// Commits what is processed, then leaves the group. Work not yet processed is abandoned
    /// uncommitted, so finish it first. Safe to call more than once.
    public func close() async {
        await runtime.requestClose(commit: true)
    }

    /// Rebalances as they happen (the newest 256 are kept when nobody reads).
    public var rebalanceEvents: AsyncStream<KafkaRebalanceEvent> { runtime.events }

    /// A snapshot of the counters.
    public var statistics: KafkaConsumerStatistics { runtime.statistics }

    /// The partitions held now.
    public var assignment: Set<KafkaTopicPartition> { runtime.assignment }


    /// Turns of the poll thread so far (it goes round about every 50 ms, idle or not): a count
    /// that stops moving means the thread is stuck in librdkafka (a liveness heartbeat).
    public var pollIterations: UInt64 { runtime.pollIterations.load(ordering: .relaxed) }

    /// The group's committed offsets for `partitions` as the broker reports them (partitions
    /// without a commit are left out). The wait runs on a thread of its own.
    public func committedOffsets(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32 = 5_000) async throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        try await runtime.committedOffsets(for: partitions, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The oldest and the next offset (low and high watermarks) of each of `partitions`, asked
    /// of their leaders; the wait runs on a thread of its own.
    public func watermarks(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32 = 5_000) async throws(KafkaError) -> [KafkaTopicPartition: PartitionWatermarks] {
        try await runtime.watermarks(for: partitions, timeoutMilliseconds: timeoutMilliseconds)
    }

    deinit {
        runtime.abandon()
    }
}

/// The messages of a ``KafkaConsumer``, as an `AsyncSequence`. Ends when the consumer closes;
/// throws only on a fatal librdkafka error.
public struct KafkaConsumerMessages: AsyncSequence, Sendable {
    public typealias Element = KafkaMessage
    public typealias Failure = KafkaError
    let runtime: ConsumerRuntime

    /// An iterator; suspends while no message is buffered.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let runtime: ConsumerRuntime

        public mutating func next() async throws(KafkaError) -> KafkaMessage? {
            try await runtime.next(timeout: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(KafkaError) -> KafkaMessage? {
            try await runtime.next(timeout: nil)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(runtime: runtime) }
}

/// Points librdkafka's rebalance callback at the runtime. `@unchecked Sendable`: `runtime` is
/// set once, before the poll thread starts, and only the poll thread reads it afterwards.
final class RebalanceContext: @unchecked Sendable {
    weak var runtime: ConsumerRuntime?
}

/// Everything a consumer shares between its poll thread and the application's tasks: the client
/// (thread-safe), and the state under one mutex.
final class ConsumerRuntime: Sendable {
    enum CloseMode: Sendable { case commit, abandon }

    /// Turns of the poll thread (about every 50 ms, idle or not): a liveness heartbeat.
    let pollIterations = Atomic<UInt64>(0)

    typealias Waiter = CheckedContinuation<Result<KafkaMessage?, KafkaError>, Never>

    struct State {
        var buffer = MessageBuffer()
        var waiters: [(id: UInt64, continuation: Waiter)] = []
        var nextWaiterID: UInt64 = 0
        var tracker = OffsetTracker()
        /// Partitions held, each with the epoch of its assignment.
        var assignment: [KafkaTopicPartition: UInt64] = [:]
        /// Partitions being revoked: nothing more is handed out, finishing work still counts.
        var revoking: Set<KafkaTopicPartition> = []
        var nextEpoch: UInt64 = 1
        var lastCommitted: [KafkaTopicPartition: Int64] = [:]
        /// Processed offsets of just-revoked partitions whose commit was refused; used (and
        /// cleared) by the next assignment only.
        var processedButUncommitted: [KafkaTopicPartition: Int64] = [:]
        var commitWaiters: [CheckedContinuation<Result<Void, KafkaError>, Never>] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var closeMode: CloseMode?
        var ended: Result<Void, KafkaError>?
        var statistics = KafkaConsumerStatistics()

        var inFlight: Int { buffer.count + tracker.unfinishedCount }

        /// The next message to hand out, skipping those of partitions no longer held.
        mutating func take() -> KafkaMessage? {
            while let message = buffer.popFirst() {
                let partition = message.topicPartition
                guard assignment[partition] == message.assignmentEpoch, !revoking.contains(partition) else {
                    statistics.droppedOnRevocation += 1
                    continue
                }
                tracker.delivered(partition, offset: message.offset)
                statistics.delivered += 1
                return message
            }
            return nil
        }
    }

    let client: RDKafkaClient
    let options: KafkaConsumerOptions
    let state: Mutex<State>
    let events: AsyncStream<KafkaRebalanceEvent>
    private let eventSink: AsyncStream<KafkaRebalanceEvent>.Continuation
    private let context: RebalanceContext
    /// Wakes the poll thread out of `rd_kafka_consumer_poll` when a command waits.
    private let wakeQueue: RDKafkaQueue

    init(configuration: KafkaConfiguration, options: KafkaConsumerOptions) throws(KafkaError) {
        let conf = try configuration.makeHandle()
        let context = RebalanceContext()
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(context).toOpaque())
        rd_kafka_conf_set_rebalance_cb(conf) { handle, error, partitions, opaque in
            guard let opaque, let handle else { return }
            let context = Unmanaged<RebalanceContext>.fromOpaque(opaque).takeUnretainedValue()
            if let runtime = context.runtime {
                runtime.rebalance(error, partitions)
            } else {
                // No runtime (being torn down): release everything so librdkafka can go on.
                if String(cString: rd_kafka_rebalance_protocol(handle)) == "COOPERATIVE" {
                    if error == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS, let failure = rd_kafka_incremental_unassign(handle, partitions) {
                        rd_kafka_error_destroy(failure)
                    }
                } else {
                    _ = rd_kafka_assign(handle, nil)
                }
            }
        }
        client = try RDKafkaClient(type: RD_KAFKA_CONSUMER, conf: conf, callbackContext: context)
        rd_kafka_poll_set_consumer(client.pointer)
        guard let queue = rd_kafka_queue_get_consumer(client.pointer) else {
            throw KafkaError(.clientCreation, "no consumer queue")
        }
        wakeQueue = RDKafkaQueue(pointer: queue, client: client)
        self.options = options
        self.context = context
        state = Mutex(State())
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
        guard let list = rd_kafka_topic_partition_list_new(Int32(topics.count)) else {
            throw KafkaError(.subscribe, "cannot allocate a topic list")
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics {
            rd_kafka_topic_partition_list_add(list, topic, herald_rdkafka_partition_ua())
        }
        let error = rd_kafka_subscribe(client.pointer, list)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.subscribe, rdkafkaErrorText(error), rdkafkaCode: error.rawValue)
        }
    }

    func next(timeout: Duration?) async throws(KafkaError) -> KafkaMessage? {
        enum Immediate { case message(KafkaMessage?), failure(KafkaError), wait }
        let immediate: Immediate = state.withLock { state in
            if let message = state.take() { return .message(message) }
            switch state.ended {
            case .success?: return .message(nil)
            case .failure(let error)?: return .failure(error)
            case nil: return .wait
            }
        }
        switch immediate {
        case .message(let message): return message
        case .failure(let error): throw error
        case .wait: break
        }
        let id: UInt64 = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        let result: Result<KafkaMessage?, KafkaError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let resumeNow: Result<KafkaMessage?, KafkaError>? = state.withLock { state in
                    if let message = state.take() { return .success(message) }
                    if let ended = state.ended { return ended.map { _ -> KafkaMessage? in nil } }
                    if Task.isCancelled { return .success(nil) }
                    state.waiters.append((id: id, continuation: continuation))
                    return nil
                }
                if let resumeNow {
                    continuation.resume(returning: resumeNow)
                } else if let timeout {
                    let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
                    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(max(0, nanoseconds)))) { [self] in
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
        state.withLock { state in
            let partition = message.topicPartition
            guard state.assignment[partition] == message.assignmentEpoch else {
                state.statistics.processedAfterRevocation += 1
                return
            }
            _ = state.tracker.finished(partition, offset: message.offset)
            state.statistics.processed += 1
        }
    }

    func requestCommit() async throws(KafkaError) {
        let result: Result<Void, KafkaError> = await withCheckedContinuation { continuation in
            let closed = state.withLock { state in
                guard state.ended == nil, state.closeMode == nil else { return true }
                state.commitWaiters.append(continuation)
                return false
            }
            if closed {
                continuation.resume(returning: .failure(KafkaError(.closed, "the consumer is closed")))
            } else {
                wakeQueue.wake()
            }
        }
        try result.get()
    }

    func requestClose(commit: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyEnded = state.withLock { state in
                guard state.ended == nil else { return true }
                if state.closeMode == nil { state.closeMode = commit ? .commit : .abandon }
                state.closeWaiters.append(continuation)
                return false
            }
            if alreadyEnded { continuation.resume() } else { wakeQueue.wake() }
        }
    }

    func abandon() {
        state.withLock { state in
            if state.ended == nil && state.closeMode == nil { state.closeMode = .abandon }
        }
        wakeQueue.wake()
    }

    var statistics: KafkaConsumerStatistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.inFlight = state.inFlight
            return statistics
        }
    }

    var assignment: Set<KafkaTopicPartition> { state.withLock { Set($0.assignment.keys) } }

    func committedOffsets(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) async throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        let client = self.client
        let result: Result<[KafkaTopicPartition: Int64], KafkaError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                guard let list = PartitionList(partitions) else {
                    continuation.resume(returning: .failure(KafkaError(.consume, "cannot allocate a partition list")))
                    return
                }
                let error = rd_kafka_committed(client.pointer, list.pointer, timeoutMilliseconds)
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    continuation.resume(returning: .failure(KafkaError(.commit, rdkafkaErrorText(error), rdkafkaCode: error.rawValue, isRetryable: true)))
                    return
                }
                var offsets: [KafkaTopicPartition: Int64] = [:]
                for (partition, offset) in list.entries where offset >= 0 { offsets[partition] = offset }
                continuation.resume(returning: .success(offsets))
            }
        }
        return try result.get()
    }

    func watermarks(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) async throws(KafkaError) -> [KafkaTopicPartition: PartitionWatermarks] {
        let client = self.client
        let result: Result<[KafkaTopicPartition: PartitionWatermarks], KafkaError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var marks: [KafkaTopicPartition: PartitionWatermarks] = [:]
                for partition in partitions {
                    var low: Int64 = -1
                    var high: Int64 = -1
                    let error = rd_kafka_query_watermark_offsets(client.pointer, partition.topic, partition.partition, &low, &high, timeoutMilliseconds)
                    guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                        continuation.resume(returning: .failure(KafkaError(.consume, "watermarks of \(partition): \(rdkafkaErrorText(error))",
                                                                           rdkafkaCode: error.rawValue, isRetryable: true)))
                        return
                    }
                    marks[partition] = PartitionWatermarks(low: low, high: high)
                }
                continuation.resume(returning: .success(marks))
            }
        }
        return try result.get()
    }

    // MARK: Poll thread

    private func pollLoop() {
        let clock = ContinuousClock()
        var nextCommit = clock.now.advanced(by: options.commitInterval)
        var flow = FlowControl(maximum: options.maximumInFlight, resumeLevel: options.resumeAtOrBelow ?? options.maximumInFlight / 2,
                               pauseAfter: options.pauseWhenFullFor)
        var batch: [KafkaMessage] = []
        batch.reserveCapacity(256)
        while true {
            pollIterations.add(1, ordering: .relaxed)
            if let mode = state.withLock({ $0.closeMode }) {
                shutDown(mode)
                return
            }
            // Commands: commit requests.
            let commitWaiters = state.withLock { state in
                defer { state.commitWaiters.removeAll() }
                return state.commitWaiters
            }
            if !commitWaiters.isEmpty {
                let result = commitProcessed(only: nil)
                for waiter in commitWaiters { waiter.resume(returning: result) }
                nextCommit = clock.now.advanced(by: options.commitInterval)
            } else if clock.now >= nextCommit {
                _ = commitProcessed(only: nil)
                nextCommit = clock.now.advanced(by: options.commitInterval)
            }
            // Backpressure.
            let (inFlight, held) = state.withLock { state in (state.inFlight, Array(state.assignment.keys)) }
            var room: Int
            switch flow.next(inFlight: inFlight, now: clock.now) {
            case .hold:
                // The application is draining what it has: take nothing more for a moment.
                usleep(1_000)
                continue
            case .pause:
                setPaused(true, held)
                room = 1 // callbacks only: paused partitions deliver nothing new
            case .resume(let free):
                setPaused(false, held)
                room = free
            case .poll(let free):
                room = free
            }
            // Poll: wait for one message, then take what is already there, up to the budget.
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

    /// Copies a message out of librdkafka; nil for error events (counted, logged, skipped),
    /// except a fatal error, which ends the consumer.
    private func readMessage(_ raw: UnsafeMutablePointer<rd_kafka_message_t>) -> KafkaMessage? {
        let message = raw.pointee
        if message.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            if message.err == RD_KAFKA_RESP_ERR__PARTITION_EOF { return nil }
            let text = rdkafkaErrorText(message.err)
            state.withLock { $0.statistics.consumeErrors += 1 }
            if message.err == RD_KAFKA_RESP_ERR__FATAL {
                options.log("kafka consumer: fatal error: \(text)")
                end(.failure(KafkaError(.consume, text, rdkafkaCode: message.err.rawValue)))
            } else if message.err != RD_KAFKA_RESP_ERR__TRANSPORT && message.err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN {
                options.log("kafka consumer: skipped an error event: \(text)")
            }
            return nil
        }
        let topic = message.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        let key: [UInt8]? = message.key.map { Array(UnsafeRawBufferPointer(start: $0, count: message.key_len)) }
        let value: [UInt8] = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: message.len)) } ?? []
        var headers: [KafkaHeader] = []
        var headerList: OpaquePointer?
        if rd_kafka_message_headers(raw, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            var index = 0
            var name: UnsafePointer<CChar>?
            var valuePointer: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(headerList, index, &name, &valuePointer, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let headerValue = valuePointer.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }
                headers.append(KafkaHeader(name: name.map { String(cString: $0) } ?? "", value: headerValue))
                index += 1
            }
        }
        return KafkaMessage(topic: topic, partition: message.partition, offset: message.offset, key: key, value: value,
                            isTombstone: message.payload == nil, headers: headers, assignmentEpoch: 0)
    }

    /// Buffers messages (stamped with their partition's assignment) and serves waiting readers.
    private func hand(_ messages: [KafkaMessage]) {
        let served: [(Waiter, KafkaMessage)] = state.withLock { state in
            for var message in messages {
                message.assignmentEpoch = state.assignment[message.topicPartition] ?? 0
                state.buffer.append(message)
            }
            var served: [(Waiter, KafkaMessage)] = []
            while !state.waiters.isEmpty, let message = state.take() {
                served.append((state.waiters.removeFirst().continuation, message))
            }
            return served
        }
        for (waiter, message) in served { waiter.resume(returning: .success(message)) }
    }

    private func setPaused(_ pause: Bool, _ partitions: [KafkaTopicPartition]) {
        if !partitions.isEmpty, let list = PartitionList(partitions) {
            let error = pause ? rd_kafka_pause_partitions(client.pointer, list.pointer) : rd_kafka_resume_partitions(client.pointer, list.pointer)
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                options.log("kafka consumer: \(pause ? "pause" : "resume") failed: \(rdkafkaErrorText(error))")
            }
        }
        state.withLock { state in
            state.statistics.isPaused = pause
            if pause { state.statistics.pauses += 1 } else { state.statistics.resumes += 1 }
        }
    }

    /// Commits the processed offsets that moved since the last commit (of `only` partitions when
    /// given), synchronously on the poll thread.
    private func commitProcessed(only: Set<KafkaTopicPartition>?) -> Result<Void, KafkaError> {
        let offsets: [KafkaTopicPartition: Int64] = state.withLock { state in
            state.tracker.committable.filter { partition, offset in
                state.assignment[partition] != nil && state.lastCommitted[partition] != offset && (only?.contains(partition) ?? true)
            }
        }
        guard !offsets.isEmpty else { return .success(()) }
        guard let list = PartitionList(offsets.map { ($0.key, $0.value) }) else {
            return .failure(KafkaError(.commit, "cannot allocate a partition list"))
        }
        let error = rd_kafka_commit(client.pointer, list.pointer, 0)
        if error == RD_KAFKA_RESP_ERR_NO_ERROR || error == RD_KAFKA_RESP_ERR__NO_OFFSET {
            state.withLock { state in
                state.statistics.commits += 1
                for (partition, offset) in offsets where state.assignment[partition] != nil {
                    state.lastCommitted[partition] = offset
                }
            }
            return .success(())
        }
        state.withLock { $0.statistics.commitFailures += 1 }
        let retryable = error == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS || error == RD_KAFKA_RESP_ERR__TRANSPORT
            || error == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || error == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID
        options.log("kafka consumer: commit of \(offsets.count) partition(s) refused, retrying next tick: \(rdkafkaErrorText(error))")
        return .failure(KafkaError(.commit, rdkafkaErrorText(error), rdkafkaCode: error.rawValue, isRetryable: retryable))
    }

    /// librdkafka's rebalance callback, on the poll thread (inside `rd_kafka_consumer_poll` or
    /// `rd_kafka_consumer_close`).
    fileprivate func rebalance(_ error: rd_kafka_resp_err_t, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) {
        let partitions = list.map { PartitionList.entries(of: $0).map(\.0) } ?? []
        let cooperative = String(cString: rd_kafka_rebalance_protocol(client.pointer)) == "COOPERATIVE"
        switch error {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            let paused = state.withLock { state in
                // Work finished before the revocation of this same rebalance, whose commit the
                // broker refused: nobody else can have held these partitions since, so resume
                // after that work instead of re-reading it, and commit it at the next tick.
                let remembered = state.processedButUncommitted
                state.processedButUncommitted.removeAll()
                state.tracker.remove(partitions)
                for partition in partitions {
                    state.assignment[partition] = state.nextEpoch
                    state.nextEpoch += 1
                    state.revoking.remove(partition)
                    state.lastCommitted.removeValue(forKey: partition)
                    if let offset = remembered[partition] {
                        state.tracker.resume(partition, after: offset)
                    }
                }
                if let list, let elements = list.pointee.elems {
                    for index in 0..<Int(list.pointee.cnt) {
                        let element = elements[index]
                        let partition = KafkaTopicPartition(topic: element.topic.map { String(cString: $0) } ?? "", partition: element.partition)
                        if let offset = remembered[partition] {
                            elements[index].offset = offset
                            state.statistics.resumedAfterRefusedCommit += 1
                        }
                    }
                }
                state.statistics.assignments += 1
                return state.statistics.isPaused
            }
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
                _ = paused ? rd_kafka_pause_partitions(client.pointer, list) : rd_kafka_resume_partitions(client.pointer, list)
            }
            eventSink.yield(.assigned(partitions))
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            let lost = rd_kafka_assignment_lost(client.pointer) != 0
            let mode = state.withLock { state in
                state.revoking.formUnion(partitions)
                state.statistics.droppedOnRevocation += state.buffer.removeAll { state.revoking.contains($0.topicPartition) }
                return state.closeMode
            }
            if !lost && mode == nil {
                // Let work already handed out finish, up to the grace period.
                let deadline = ContinuousClock.now.advanced(by: options.revocationGracePeriod)
                while ContinuousClock.now < deadline, state.withLock({ $0.tracker.unfinishedCount(in: partitions) }) > 0 {
                    usleep(2_000)
                }
            }
            if !lost && mode != .abandon {
                // Brokers refuse this while the group rebalances (the mock cluster always does);
                // the new owner then re-reads a little, which idempotent processing absorbs.
                _ = commitProcessed(only: Set(partitions))
            }
            state.withLock { state in
                // Eager protocol only: its revocation and next assignment are one rebalance, so
                // nobody else can take these partitions in between. (Not after a lost assignment.)
                if !cooperative && !lost {
                    let revoked = Set(partitions)
                    for (partition, offset) in state.tracker.committable where revoked.contains(partition) && state.lastCommitted[partition] != offset {
                        state.processedButUncommitted[partition] = offset
                    }
                }
                for partition in partitions {
                    state.assignment.removeValue(forKey: partition)
                    state.revoking.remove(partition)
                    state.lastCommitted.removeValue(forKey: partition)
                }
                state.tracker.remove(partitions)
                state.statistics.revocations += 1
            }
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
            state.withLock { state in
                state.tracker.remove(Array(state.assignment.keys))
                state.assignment.removeAll()
                state.lastCommitted.removeAll()
            }
            _ = rd_kafka_assign(client.pointer, nil)
        }
    }

    private func shutDown(_ mode: CloseMode) {
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
            if state.closeMode == nil { state.closeMode = .commit }
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

/// A FIFO of messages with O(1) removal from the front.
struct MessageBuffer {
    private var storage: [KafkaMessage] = []
    private var head = 0

    var count: Int { storage.count - head }

    mutating func append(_ message: KafkaMessage) { storage.append(message) }

    mutating func popFirst() -> KafkaMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 4_096 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    /// Removes the messages `shouldRemove` selects; returns how many.
    mutating func removeAll(where shouldRemove: (KafkaMessage) -> Bool) -> Int {
        storage.removeFirst(head)
        head = 0
        let before = storage.count
        storage.removeAll(where: shouldRemove)
        return before - storage.count
    }
}

/// Owns an `rd_kafka_topic_partition_list_t`.
final class PartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init?(_ partitions: [KafkaTopicPartition]) {
        guard let list = rd_kafka_topic_partition_list_new(Int32(max(1, partitions.count))) else { return nil }
        pointer = list
        for partition in partitions { rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition) }
    }

    init?(_ offsets: [(KafkaTopicPartition, Int64)]) {
        guard let list = rd_kafka_topic_partition_list_new(Int32(max(1, offsets.count))) else { return nil }
        pointer = list
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset
        }
    }

    var entries: [(KafkaTopicPartition, Int64)] { PartitionList.entries(of: pointer) }

    static func entries(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> [(KafkaTopicPartition, Int64)] {
        guard let elements = list.pointee.elems else { return [] }
        return (0..<Int(list.pointee.cnt)).map { index in
            let element = elements[index]
            return (KafkaTopicPartition(topic: element.topic.map { String(cString: $0) } ?? "", partition: element.partition), element.offset)
        }
    }

    deinit { rd_kafka_topic_partition_list_destroy(pointer) }
}

/// Owns an `rd_kafka_queue_t` reference. `@unchecked Sendable`: `rd_kafka_queue_yield` is
/// thread-safe and the pointer never changes. Holds the client so the queue is released first.
final class RDKafkaQueue: @unchecked Sendable {
    let pointer: OpaquePointer
    let client: RDKafkaClient

    init(pointer: OpaquePointer, client: RDKafkaClient) {
        self.pointer = pointer
        self.client = client
    }

    /// Makes a blocked `rd_kafka_consumer_poll` return at once.
    func wake() { rd_kafka_queue_yield(pointer) }

    deinit { rd_kafka_queue_destroy(pointer) }
}
