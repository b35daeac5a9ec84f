import Foundation
import HeraldKafka
import HeraldWorker

/// `herald run`: one worker of the pool, configured by `HERALD_*` environment variables
/// (docs/CONFIGURATION.md), until SIGTERM or SIGINT.
enum RunCommand {
    static let usage = """
        usage: herald run
          Configuration comes from the environment (HERALD_KAFKA_BROKERS, HERALD_DATABASE_URL,
          HERALD_CREDENTIALS_KEY, …; see docs/CONFIGURATION.md). Stops cleanly on SIGTERM/SIGINT.
        """

    static func run(_ arguments: [String]) async -> Int32 {
        if arguments == ["--help"] || arguments == ["-h"] {
            print(usage)
            return 0
        }
        guard arguments.isEmpty else {
            Console.error("herald run: takes no arguments (configuration is HERALD_* environment variables)\n\(usage)")
            return 64
        }
        var configuration: WorkerConfiguration
        do {
            configuration = try WorkerConfiguration(environment: ProcessInfo.processInfo.environment)
        } catch {
            Console.error("herald run: \(error)")
            return 78
        }
        // A worker's log is its standard output; librdkafka's lines join it there.
        KafkaLogOutput.useStandardOutput(true)
        configuration.buildVersion = HeraldVersion.string
        configuration.buildRevision = HeraldVersion.revision
        let worker = Worker(configuration: configuration)
        do {
            return try await worker.run()
        } catch {
            Console.error("herald run: \(error.message)")
            return error.exitStatus
        }
    }
}
