/// The decisions of a ``KafkaConsumer``, without I/O and without a clock of its own.
///
/// The poll thread (`ConsumerRuntime`, under `RDKafka/`) feeds it what happened — messages
/// read, work finished, a rebalance, a commit's answer, the time — and performs what it
/// returns: poll for so many messages, pause or resume partitions, commit these offsets, wait
/// for the application. Nothing here calls librdkafka, sleeps or reads the time, so every rule
/// below is unit-tested without a broker (`ConsumerStateMachineTests`).
///
/// The rules:
/// - **Order.** Offsets become committable in order per partition (``OffsetTracker``); a commit
///   carries only what moved since the last one, of partitions still held.
/// - **Epochs.** Each assignment of a partition gets a new epoch, stamped on the messages read
///   under it; a message of an older epoch is neither handed out nor allowed to move offsets.
/// - **Revocation.** A revoked partition's buffered messages are dropped at once; work already
///   handed out may finish for `revocationGracePeriod` (not when the assignment was lost or the
///   consumer is closing), then its processed offsets are committed (not when abandoning).
/// - **Refused commit.** Under the eager protocol a revocation and the next assignment are one
///   rebalance, so when the broker refused the revocation's commit the same partitions, assigned
///   again, start after the work already processed instead of re-reading it.
/// - **Backpressure.** ``FlowControl``: hold, then pause, then resume with hysteresis.
struct ConsumerStateMachine: Sendable {
    enum CloseMode: Sendable, Equatable { case commit, abandon }

    /// What the poll thread does on one turn.
    enum Turn: Sendable, Equatable {
        /// Close the consumer (committing first with `.commit`).
        case close(CloseMode)
        /// Take nothing; wait until the application finishes some work or `until` comes.
        case hold(until: ContinuousClock.Instant)
        /// Poll for at most `room` messages, after pausing or resuming the held partitions.
        case poll(room: Int, change: PauseChange?)
    }

    /// A backpressure change to apply to the held partitions before polling.
    enum PauseChange: Sendable, Equatable {
        case pause([KafkaTopicPartition])
        case resume([KafkaTopicPartition])
    }

    /// What an assignment needs from librdkafka.
    struct Assignment: Sendable, Equatable {
        /// Start offsets replacing the group's committed ones (see "Refused commit" above).
        var startOffsets: [KafkaTopicPartition: Int64]
        /// Whether to pause the new partitions at once (the in-flight budget is full).
        var paused: Bool
    }

    let commitInterval: Duration
    let revocationGracePeriod: Duration
    private var flow: FlowControl
    private var nextCommit: ContinuousClock.Instant

    private var buffer = MessageBuffer()
    private var tracker = OffsetTracker()
    /// Partitions held, each with the epoch of its assignment.
    private(set) var assignment: [KafkaTopicPartition: UInt64] = [:]
    /// Partitions being revoked: nothing more is handed out, finishing work still counts.
    private var revoking: Set<KafkaTopicPartition> = []
    private var nextEpoch: UInt64 = 1
    /// The offset last committed of each held partition.
    private(set) var lastCommitted: [KafkaTopicPartition: Int64] = [:]
    /// Processed offsets of just-revoked partitions whose commit was refused; used (and cleared)
    /// by the next assignment only.
    private var processedButUncommitted: [KafkaTopicPartition: Int64] = [:]
    /// Set while the poll thread waits for the application: the next finished message wakes it.
    private var awaitsProgress = false
    private(set) var closeMode: CloseMode?
    private(set) var statistics = KafkaConsumerStatistics()

    init(options: KafkaConsumerOptions, now: ContinuousClock.Instant) {
        commitInterval = options.commitInterval
        revocationGracePeriod = options.revocationGracePeriod
        flow = FlowControl(maximum: options.maximumInFlight, resumeLevel: options.resumeAtOrBelow ?? options.maximumInFlight / 2,
                           pauseAfter: options.pauseWhenFullFor)
        nextCommit = now.advanced(by: options.commitInterval)
    }

    /// Messages read and not yet processed (buffered or being worked on).
    var inFlight: Int { buffer.count + tracker.unfinishedCount }

    /// Whether the in-flight budget has room for another message.
    var hasRoom: Bool { inFlight < flow.maximum }

    /// The counters, with ``KafkaConsumerStatistics/inFlight`` filled in.
    var snapshot: KafkaConsumerStatistics {
        var snapshot = statistics
        snapshot.inFlight = inFlight
        snapshot.isPaused = flow.isPaused
        return snapshot
    }

    // MARK: The poll loop

    /// What to do on this turn of the poll loop (after any commit it asked for).
    mutating func turn(now: ContinuousClock.Instant) -> Turn {
        if let closeMode { return .close(closeMode) }
        let held = assignment.keys.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) }
        switch flow.next(inFlight: inFlight, now: now) {
        case .hold(let until):
            return .hold(until: min(until, nextCommit))
        case .pause:
            statistics.pauses += 1
            return .poll(room: 1, change: .pause(held)) // callbacks only: paused partitions deliver nothing new
        case .resume(let room):
            statistics.resumes += 1
            return .poll(room: room, change: .resume(held))
        case .poll(let room):
            return .poll(room: room, change: nil)
        }
    }

    /// Whether to commit now: on request, or when the commit interval has passed. Either way
    /// the next periodic commit is then an interval away.
    mutating func commitIsDue(now: ContinuousClock.Instant, requested: Bool) -> Bool {
        guard requested || now >= nextCommit else { return false }
        nextCommit = now.advanced(by: commitInterval)
        return true
    }

    /// Buffers messages read from the broker, stamped with their partition's current epoch.
    mutating func received(_ messages: some Sequence<KafkaMessage>) {
        for var message in messages {
            message.assignmentEpoch = assignment[message.topicPartition] ?? 0
            buffer.append(message)
        }
    }

    /// Counts an error event librdkafka reported instead of a message.
    mutating func consumeErrorSeen() { statistics.consumeErrors += 1 }

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

    /// Records finished work. Returns true when the poll thread waits for progress and should
    /// be woken.
    mutating func processed(_ message: KafkaMessage) -> Bool {
        let partition = message.topicPartition
        guard assignment[partition] == message.assignmentEpoch else {
            statistics.processedAfterRevocation += 1
            return false
        }
        _ = tracker.finished(partition, offset: message.offset)
        statistics.processed += 1
        defer { awaitsProgress = false }
        return awaitsProgress
    }

    /// Marks that the poll thread is about to wait for the application; the next
    /// ``processed(_:)`` reports that it should be woken.
    mutating func awaitProgress() { awaitsProgress = true }

    /// Asks the poll loop to close. Returns false when a close was already asked for.
    @discardableResult
    mutating func requestClose(_ mode: CloseMode) -> Bool {
        guard closeMode == nil else { return false }
        closeMode = mode
        return true
    }

    // MARK: Commits

    /// The processed offsets that moved since the last commit, of held partitions (of `only`
    /// when given). Empty: nothing to commit.
    func offsetsToCommit(only: Set<KafkaTopicPartition>? = nil) -> [KafkaTopicPartition: Int64] {
        tracker.committable.filter { partition, offset in
            assignment[partition] != nil && lastCommitted[partition] != offset && (only?.contains(partition) ?? true)
        }
    }

    /// The broker accepted the commit of `offsets`.
    mutating func committed(_ offsets: [KafkaTopicPartition: Int64]) {
        statistics.commits += 1
        for (partition, offset) in offsets where assignment[partition] != nil {
            lastCommitted[partition] = offset
        }
    }

    /// The broker refused a commit; the next one carries the same offsets again.
    mutating func commitRefused() { statistics.commitFailures += 1 }

    // MARK: Rebalances

    /// Partitions were assigned. Returns what librdkafka's assign needs.
    mutating func assigned(_ partitions: [KafkaTopicPartition]) -> Assignment {
        let remembered = processedButUncommitted
        processedButUncommitted.removeAll()
        tracker.remove(partitions)
        var startOffsets: [KafkaTopicPartition: Int64] = [:]
        for partition in partitions {
            assignment[partition] = nextEpoch
            nextEpoch += 1
            revoking.remove(partition)
            lastCommitted.removeValue(forKey: partition)
            if let offset = remembered[partition] {
                tracker.resume(partition, after: offset)
                startOffsets[partition] = offset
                statistics.resumedAfterRefusedCommit += 1
            }
        }
        statistics.assignments += 1
        return Assignment(startOffsets: startOffsets, paused: flow.isPaused)
    }

    /// A revocation of `partitions` begins: their buffered messages are dropped. Returns the
    /// instant until which handed-out work may finish, or nil when it may not wait (the
    /// assignment was lost, or the consumer is closing).
    mutating func revocationBegan(_ partitions: [KafkaTopicPartition], lost: Bool, now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        revoking.formUnion(partitions)
        statistics.droppedOnRevocation += buffer.removeAll { revoking.contains($0.topicPartition) }
        guard !lost, closeMode == nil else { return nil }
        return now.advanced(by: revocationGracePeriod)
    }

    /// Messages of `partitions` handed out and not yet finished.
    func unfinished(in partitions: [KafkaTopicPartition]) -> Int { tracker.unfinishedCount(in: partitions) }

    /// The offsets to commit before `partitions` go, or nil when nothing may be committed (a
    /// lost assignment, or a consumer abandoning its work).
    func revocationCommit(_ partitions: [KafkaTopicPartition], lost: Bool) -> [KafkaTopicPartition: Int64]? {
        guard !lost, closeMode != .abandon else { return nil }
        return offsetsToCommit(only: Set(partitions))
    }

    /// The revocation of `partitions` is done: they are forgotten. Under the eager protocol,
    /// processed offsets whose commit did not happen are remembered for the next assignment.
    mutating func revoked(_ partitions: [KafkaTopicPartition], lost: Bool, cooperative: Bool) {
        if !cooperative && !lost {
            let revoked = Set(partitions)
            for (partition, offset) in tracker.committable where revoked.contains(partition) && lastCommitted[partition] != offset {
                processedButUncommitted[partition] = offset
            }
        }
        for partition in partitions {
            assignment.removeValue(forKey: partition)
            revoking.remove(partition)
            lastCommitted.removeValue(forKey: partition)
        }
        tracker.remove(partitions)
        statistics.revocations += 1
    }

    /// librdkafka reported a rebalance error: everything held is forgotten.
    mutating func rebalanceFailed() {
        tracker.remove(Array(assignment.keys))
        assignment.removeAll()
        lastCommitted.removeAll()
    }
}
