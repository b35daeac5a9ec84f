import HeraldCore
import HeraldPostgres

/// Settles jobs whose `expires_at` passed while their shards waited behind a halted provider.
/// No shard runs while its app is halted (the runner parks every subscription and hands the
/// shard back), so until `herald jobs resume` nothing would give those subscriptions their
/// terminal receipt. Every `interval` this produces such shards again; the runner that claims
/// one drops each subscription it still holds as `expired`, finishes it, and the job completes
/// with totals that add up. Every worker runs one; a shard with a live lease is skipped, and a
/// shard produced twice is harmless (the lease decides who runs it).
struct HaltedJobSweeper: Sendable {
    let administration: JobAdministration
    let publisher: ReceiptPublisher
    let log: WorkerLog
    let interval: Duration

    /// A sweeper over `administration`, producing shards through `publisher` every `interval`.
    init(administration: JobAdministration, publisher: ReceiptPublisher, log: WorkerLog, interval: Duration = .seconds(60)) {
        self.administration = administration
        self.publisher = publisher
        self.log = log
        self.interval = interval
    }

    /// Sweeps every `interval` until `stop` is set; a failed sweep is logged and tried again.
    func run(stop: StopSignal) async {
        while !stop.isSet {
            await stop.sleep(for: interval)
            if stop.isSet { return }
            do {
                let shards = try await sweep()
                if !shards.isEmpty {
                    log.info("expired jobs behind a halted provider: shards produced again to settle them", [
                        "shards": .int(shards.count), "jobs": .array(Array(Set(shards.map(\.jobID))).sorted().map(JSONValue.string)),
                    ])
                }
            } catch {
                log.warning("halted-job sweep failed; trying again next round", ["error": .string("\(error)")])
            }
        }
    }

    /// One sweep: the shards produced.
    func sweep() async throws -> [Shard] {
        let found = try await administration.expiredHaltedShards()
        for urgent in [false, true] {
            let shards = found.filter { $0.urgent == urgent }.map(\.shard)
            if !shards.isEmpty { try await publisher.publish(shards: shards, urgent: urgent) }
        }
        return found.map(\.shard)
    }
}

extension HaltedJobSweeper: Service {
    var name: String { "halted-job-sweeper" }
}
