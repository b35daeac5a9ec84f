public import HeraldCore
public import HeraldKafka
public import HeraldPostgres

/// Consumes `herald.device-events` (DESIGN §1): validates each event (bad ones are dead-lettered),
/// forwards the first sighting of each (type, job, subscription, action) to `herald.results`,
/// and counts it on the job, in one transaction with the dedupe row, so a repeat is dropped and
/// a failed forward is retried rather than lost.
public struct DeviceEventProcessor: Sendable {
    let context: PipelineContext
    let dedupe: DeviceEventDedupe

    /// A processor.
    public init(context: PipelineContext, dedupe: DeviceEventDedupe) {
        self.context = context
        self.dedupe = dedupe
    }

    /// Handles one event message; true when its offset may be committed.
    public func handle(_ message: KafkaMessage) async -> Bool {
        let event: DeviceEvent
        do {
            event = try DeviceEvent.decode(message.value)
        } catch {
            return await PipelineDeadLetters.send(message, reason: "invalid device event: \(error)", context: context)
        }
        let stage: Receipt.Stage
        switch event.type {
        case .received: stage = .received
        case .confirmed: stage = .confirmed
        case .clicked: stage = .clicked
        }
        var receipt = Receipt(jobID: event.jobID, appID: event.appID, stage: stage, subscriptionID: event.subscriptionID, at: event.at)
        receipt.actionID = event.actionID
        let key = DeviceEventKey(type: event.type.rawValue, jobID: event.jobID, subscriptionID: event.subscriptionID, actionID: event.actionID)
        let publisher = context.publisher
        let forward = receipt
        var delay = Duration.milliseconds(200)
        while true {
            do {
                let forwarded = try await dedupe.recordAndForward(key) {
                    do {
                        try await publisher.publish([forward])
                        return true
                    } catch {
                        return false
                    }
                }
                if forwarded { context.metrics.deviceEvent(type: event.type.rawValue) }
                return true
            } catch {
                if context.stop.isSet { return false }
                context.metrics.postgresError()
                context.log.error("device event not recorded; retrying", ["job_id": .string(event.jobID), "error": .string(error.description)])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
    }
}
