import HeraldCore
import HeraldKafka
import HeraldPostgres

/// Consumes `herald.device-events` (docs/ARCHITECTURE.md): validates each event (bad ones are dead-lettered),
/// checks that its app owns the job and the subscription it names, forwards the first sighting
/// of each (type, job, subscription, action) to `herald.results`, and counts it on the job.
///
/// An event naming another app's job or subscription is dead-lettered (`foreign-event`) with
/// no receipt and no count, so it can neither inflate another tenant's counters nor take the
/// dedupe slot of the genuine device's event. An event for a job that no longer exists
/// (removed by retention) is dropped and counted in `herald_device_events_dropped_total`.
/// The receipt is published before the sighting is recorded, so no transaction waits for the
/// broker; a crash between the two repeats the receipt under the same id.
struct DeviceEventProcessor: Sendable {
    let context: PipelineContext
    let dedupe: DeviceEventDedupe

    /// A processor.
    init(context: PipelineContext, dedupe: DeviceEventDedupe) {
        self.context = context
        self.dedupe = dedupe
    }

    /// What to do with a valid event, given who owns what it names.
    enum Verdict: Equatable {
        case forward(Platform?)
        case drop
        case foreign(String)
    }

    /// Decides from the owners alone (pure).
    static func verdict(for event: DeviceEvent, owners: DeviceEventOwners) -> Verdict {
        guard let jobApp = owners.jobAppID else { return .drop }
        if jobApp != event.appID {
            return .foreign("job \(event.jobID) belongs to another app than \(event.appID)")
        }
        guard owners.subscriptionAppID == event.appID else {
            return .foreign(owners.subscriptionAppID == nil
                ? "no subscription \(event.subscriptionID)"
                : "subscription \(event.subscriptionID) belongs to another app than \(event.appID)")
        }
        return .forward(owners.platform)
    }

    /// The event's dedupe key (pure). Its action id is the button of a click only, as in the
    /// receipt id, so one receipt id is never forwarded, nor counted, twice.
    static func key(for event: DeviceEvent) -> DeviceEventKey {
        DeviceEventKey(type: event.type.rawValue, jobID: event.jobID, subscriptionID: event.subscriptionID, actionID: event.buttonID)
    }

    /// The receipt an event's first sighting becomes (pure).
    static func receipt(for event: DeviceEvent, platform: Platform?) -> Receipt {
        var receipt = Receipt(jobID: event.jobID, appID: event.appID, stage: event.type.receiptStage, subscriptionID: event.subscriptionID,
                              platform: platform, at: event.at)
        receipt.actionID = event.buttonID
        return receipt
    }

    /// Handles one event message; true when its offset may be committed.
    func handle(_ message: KafkaMessage) async -> Bool {
        let event: DeviceEvent
        do {
            event = try DeviceEvent.decode(message.value)
        } catch {
            return await PipelineDeadLetters.send(message, cause: .invalid, reason: "invalid device event: \(error)", attempts: 1, context: context)
        }
        let dedupe = self.dedupe
        let publisher = context.publisher
        let metrics = context.metrics
        let key = Self.key(for: event)
        let work = await MessageRetrier.run(message, context: context, subject: ["job_id": .string(event.jobID)]) { () async throws -> Verdict in
            let verdict = Self.verdict(for: event, owners: try await dedupe.owners(jobID: event.jobID, subscriptionID: event.subscriptionID))
            guard case .forward(let platform) = verdict else { return verdict }
            if try await dedupe.seen(key) { return verdict }
            try await publisher.publish([Self.receipt(for: event, platform: platform)])
            if try await dedupe.record(key, appID: event.appID) { metrics.deviceEvent(type: event.type.rawValue) }
            return verdict
        }
        switch work {
        case .done(.forward):
            return true
        case .done(.drop):
            context.metrics.deviceEventDropped(reason: "unknown-job")
            context.log.info("device event for a job that no longer exists; dropped", ["job_id": .string(event.jobID), "type": .string(event.type.rawValue)])
            return true
        case .done(.foreign(let why)):
            return await PipelineDeadLetters.send(message, cause: .foreignEvent, reason: "device event of app \(event.appID): \(why)", attempts: 1, context: context)
        case .stopped:
            return false
        case .gaveUp(let failure, let cause, let attempts):
            return await PipelineDeadLetters.send(message, cause: cause, reason: "device event: \(failure.detail)", attempts: attempts, context: context)
        }
    }
}

extension DeviceEvent.EventType {
    /// The receipt stage a device event of this type becomes.
    var receiptStage: Receipt.Stage {
        switch self {
        case .received: .received
        case .confirmed: .confirmed
        case .clicked: .clicked
        }
    }
}
