import Foundation
import HeraldKafka
import HeraldWorker

/// `herald topics create`: every Herald topic (names from `HERALD_TOPIC_*`) through the Kafka
/// Admin API. Idempotent: topics that exist are reported and left as they are.
enum TopicsCommand {
    static let usage = """
    usage: herald topics create [--brokers B] [--partitions N] [--replication-factor R] [--dry-run]
      --partitions N          partitions per new topic (default 12)
      --replication-factor R  replicas per partition (default 3, or the broker count when the cluster has fewer)
      --dry-run               print what would be created, create nothing
    """

    static func run(_ arguments: [String]) async -> Int32 {
        guard arguments.first == "create" else {
            Console.error("herald topics: the action is create\n\(usage)")
            return 64
        }
        var options = OptionParser(Array(arguments.dropFirst()), command: "herald topics create", usage: usage, flags: ["--dry-run"])
        let brokers = options.string("--brokers")
        let partitions = options.int("--partitions", in: 1...10_000) ?? 12
        let replicationFlag = options.int("--replication-factor", in: 1...32)
        let dryRun = options.flag("--dry-run")
        guard options.finish() else { return 64 }

        let names: [String]
        let configuration: KafkaConfiguration
        do {
            names = Array(Set(try CommandEnvironment.topics().all)).sorted()
            configuration = try CommandEnvironment.kafka(brokers: brokers)
        } catch {
            Console.error("herald topics create: \(error)")
            return 78
        }
        do throws(KafkaError) {
            let admin = try KafkaAdmin(configuration: configuration)
            let cluster = try await admin.metadata()
            var replication = Int32(replicationFlag ?? 3)
            if replicationFlag == nil && cluster.brokers < 3 {
                replication = Int32(max(cluster.brokers, 1))
                print("the cluster has \(cluster.brokers) broker\(cluster.brokers == 1 ? "" : "s"): replication factor \(replication)")
            }
            for name in names {
                if let existing = cluster.topics[name] { print("exists  \(name) (\(existing) partitions)") }
            }
            let missing = names.filter { cluster.topics[$0] == nil }
            if dryRun {
                for name in missing { print("would create \(name) partitions=\(partitions) replication_factor=\(replication)") }
                return 0
            }
            let outcomes = try await admin.createTopics(missing.map { KafkaNewTopic(name: $0, partitions: Int32(partitions), replicationFactor: replication) })
            var failed = 0
            for name in missing {
                switch outcomes[name] {
                case .created: print("created \(name) partitions=\(partitions) replication_factor=\(replication)")
                case .alreadyExists: print("exists  \(name) (created meanwhile)")
                case .failed(_, let message):
                    failed += 1
                    Console.error("herald topics create: \(name): \(message)")
                case nil:
                    failed += 1
                    Console.error("herald topics create: \(name): the broker did not answer for it")
                }
            }
            return failed == 0 ? 0 : 69
        } catch {
            if error.code == .unsupported {
                Console.error("""
                    herald topics create: \(error.message). With herald dev-broker, topics auto-create with 4 partitions \
                    on first use, or start it with --topic NAME:PARTITIONS
                    """)
            } else {
                Console.error("herald topics create: \(error)")
            }
            return error.code == .configuration ? 78 : 69
        }
    }
}

extension WorkerConfiguration.Topics {
    /// Every topic name, urgent lanes, metrics and dead letters included.
    var all: [String] { [jobs, jobsUrgent, shards, shardsUrgent, results, deviceEvents, metrics, deadLetters] }
}
