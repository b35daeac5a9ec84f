import HeraldCore
import HeraldKafka
import HeraldPostgres

/// How one message's work ended.
enum MessageWork<Value: Sendable>: Sendable {
    /// It succeeded.
    case done(Value)
    /// It failed for good: dead-letter the message with `cause`.
    case gaveUp(MessageFailure, cause: DeadLetter.Cause, attempts: Int)
    /// The worker is stopping: leave the message uncommitted, to be read again.
    case stopped
}

/// Runs one message's work until it succeeds, fails for good, or the worker stops, with the
/// decisions of ``MessageRetryBudget`` (the only place a lane retries a message's work).
enum MessageRetrier {
    /// Runs `work`; `subject` names the message in the log (`job_id`, `shard`).
    static func run<Value: Sendable>(_ message: KafkaMessage, context: PipelineContext, subject: [String: JSONValue],
                                     _ work: () async throws -> Value) async -> MessageWork<Value> {
        var budget = MessageRetryBudget(budget: context.settings.messageRetryBudget)
        let lane = context.publisher.topics.lane(of: message.topic)
        while true {
            do {
                return .done(try await work())
            } catch {
                if context.stop.isSet { return .stopped }
                if error is PostgresError { context.metrics.postgresError() } else if error is PublishError || error is KafkaError { context.metrics.kafkaError() }
                let failure = MessageFailure.classify(error)
                switch budget.failed(failure, at: .now) {
                case .deadLetter(let cause):
                    return .gaveUp(failure, cause: cause, attempts: budget.attempts)
                case .retry(let delay):
                    var fields = subject
                    fields["lane"] = .string(lane)
                    fields["error"] = .string(failure.detail)
                    fields["failure"] = .string(failure.kind == .outage ? "outage" : "temporary")
                    fields["attempts"] = .int(budget.attempts)
                    fields["retry_in_ms"] = .int(Int(delay.milliseconds))
                    context.log.error("message failed; retrying", fields)
                    await context.stop.sleep(for: delay)
                    if context.stop.isSet { return .stopped }
                }
            }
        }
    }
}
