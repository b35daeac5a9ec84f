import Foundation
import HeraldCore
import HeraldKafka
import HeraldWorker

/// `herald topics create`: every Herald topic (names from `HERALD_TOPIC_*`) through the Kafka
/// Admin API. Idempotent: topics that exist are reported and left as they are.
enum TopicsCommand {
    static let usage = """
    usage: herald topics create [--brokers B] [--partitions N] [--replication-factor R] [--dry-run] [--json]
      --partitions N          partitions per new topic (default 12)
      --replication-factor R  replicas per partition (default 3, or the broker count when the cluster has fewer)
      --dry-run               print what would be created, create nothing
      --json                  one JSON object per topic: {"topic","action","partitions"[,"replication_factor","error"]}
    """

    static func run(_ arguments: [String]) async -> Int32 {
        guard arguments.first == "create" else {
            Console.error("herald topics: the action is create\n\(usage)")
            return 64
        }
        var options = OptionParser(Array(arguments.dropFirst()), command: "herald topics create", usage: usage, flags: ["--dry-run", "--json"])
        let brokers = options.string("--brokers")
        let json = options.flag("--json")
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
                if !json { print("the cluster has \(cluster.brokers) broker\(cluster.brokers == 1 ? "" : "s"): replication factor \(replication)") }
            }
            func line(_ name: String, _ action: String, _ count: Int, error: String? = nil) {
                var members: [String: JSONValue] = ["topic": .string(name), "action": .string(action), "partitions": .int(count)]
                if action != "exists" { members["replication_factor"] = .int(Int(replication)) }
                if let error { members["error"] = .string(error) }
                print(JSONValue.object(members).serialized())
            }
            for name in names {
                if let existing = cluster.topics[name] {
                    if json { line(name, "exists", existing) } else { print("exists  \(name) (\(existing) partitions)") }
                }
            }
            let missing = names.filter { cluster.topics[$0] == nil }
            if dryRun {
                for name in missing {
                    if json { line(name, "would-create", partitions) } else { print("would create \(name) partitions=\(partitions) replication_factor=\(replication)") }
                }
                return 0
            }
            let outcomes = try await admin.createTopics(missing.map { KafkaNewTopic(name: $0, partitions: Int32(partitions), replicationFactor: replication) })
            var failed = 0
            for name in missing {
                switch outcomes[name] {
                case .created:
                    if json { line(name, "created", partitions) } else { print("created \(name) partitions=\(partitions) replication_factor=\(replication)") }
                case .alreadyExists:
                    if json { line(name, "exists", partitions) } else { print("exists  \(name) (created meanwhile)") }
                case .failed(_, let message):
                    failed += 1
                    if json { line(name, "failed", partitions, error: message) }
                    Console.error("herald topics create: \(name): \(message)")
                case nil:
                    failed += 1
                    if json { line(name, "failed", partitions, error: "no answer from the broker") }
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
