import Foundation
import HeraldCore

/// `herald validate-job [FILE|-]` and `herald validate [FILE|-]`.
enum ValidateCommand {
    static func run(_ arguments: [String], jobsOnly: Bool) -> Int32 {
        let name = jobsOnly ? "validate-job" : "validate"
        guard arguments.count <= 1 else {
            Console.error("usage: herald \(name) [FILE|-]")
            return 64
        }
        let path = arguments.first ?? "-"
        let bytes: [UInt8]
        do {
            bytes = try InputFile.read(path)
        } catch {
            Console.error("herald \(name): cannot read \(path): \(error.localizedDescription)")
            return 66
        }
        do {
            if jobsOnly {
                let job = try Job.decode(bytes)
                print("valid herald.job.v1 id=\(job.id) app_id=\(job.appID) kind=\(job.kind.rawValue)")
            } else {
                let message = try Message.decode(bytes)
                print("valid \(describe(message))")
            }
            return 0
        } catch {
            Console.error("invalid: \(error)")
            return 65
        }
    }

    private static func describe(_ message: Message) -> String {
        switch message {
        case .job(let job): "\(Job.schemaName) id=\(job.id)"
        case .shard(let shard): "\(Shard.schemaName) job_id=\(shard.jobID) shard_no=\(shard.shardNo)"
        case .receipt(let receipt): "\(Receipt.schemaName) id=\(receipt.id)"
        case .deviceEvent(let event): "\(DeviceEvent.schemaName) type=\(event.type.rawValue)"
        case .metrics(let report): "\(MetricsReport.schemaName) worker_id=\(report.workerID)"
        case .deadLetter(let letter): "\(DeadLetter.schemaName) source=\(letter.source.topic)/\(letter.source.partition)@\(letter.source.offset)"
        }
    }
}
