import Foundation

/// `herald bench <what> …`: benchmarks that print JSON (docs/BENCHMARKS.md records them).
enum BenchCommand {
    static let usage = "usage: herald bench kafka [--brokers B] --messages N [--size BYTES] [--partitions P] [--json]"

    static func run(_ arguments: [String]) async -> Int32 {
        switch arguments.first {
        case "kafka":
            return await BenchKafkaCommand.run(Array(arguments.dropFirst()))
        default:
            Console.error(usage)
            return 64
        }
    }
}
