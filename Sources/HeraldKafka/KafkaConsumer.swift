import Foundation

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
/// no blocking call runs on Swift's cooperative threads. What that thread does is decided by
/// `ConsumerStateMachine` (pure, unit-tested without a broker); `ConsumerRuntime` under
/// `RDKafka/` performs it.
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
    /// group's first rebalance. (librdkafka's subscribe only hands the request to its own
    /// thread; it does not wait for the network.)
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

    /// Messages on the partitions held now that this consumer has not committed
    /// (`herald_consumer_lag`), read from librdkafka's cached watermarks and this consumer's own
    /// commits, never with a request: for each partition, the high watermark librdkafka last saw
    /// minus the offset this consumer last committed, or, before its first commit, its fetch
    /// position (which runs ahead of the committed offset, so the figure is then a floor).
    /// Partitions whose watermark is not known yet count 0.
    public var lag: Int64 { runtime.lag }


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
