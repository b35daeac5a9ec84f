import Foundation
import HeraldKafka

/// `herald dev-broker [--brokers N] [--topic NAME[:PARTITIONS]]…`: librdkafka's mock cluster on
/// 127.0.0.1 for development and tests. Prints `bootstrap.servers=HOST:PORT,…` once ready and
/// runs until SIGTERM or SIGINT. SIGUSR1 takes every broker down (clients lose their connections,
/// the data is kept) and SIGUSR2 brings them back, for failure tests.
enum DevBrokerCommand {
    static let usage = """
    usage: herald dev-broker [--brokers N] [--topic NAME[:PARTITIONS]]...
      Runs librdkafka's mock cluster on 127.0.0.1 (SIGUSR1 takes the brokers down, SIGUSR2 brings them back).
    """

    static func run(_ arguments: [String]) -> Int32 {
        var options = OptionParser(arguments, command: "herald dev-broker", usage: usage, flags: [])
        let brokers = options.int("--brokers", in: 1...16) ?? 3
        let topicTexts = options.strings("--topic")
        guard options.finish() else { return 64 }
        var topics: [(String, Int32)] = []
        for text in topicTexts {
            guard let topic = parseTopic(text) else {
                Console.error("herald dev-broker: --topic takes NAME or NAME:PARTITIONS, not \(text)\n\(usage)")
                return 64
            }
            topics.append(topic)
        }
        // Block the stop signals before librdkafka starts its threads, so they all inherit the
        // mask and this thread alone receives them in sigwait.
        let signals = SignalSet.blocking([SIGTERM, SIGINT, SIGUSR1, SIGUSR2])
        let cluster: EmbeddedKafkaCluster
        do {
            cluster = try EmbeddedKafkaCluster(brokers: brokers)
            for (name, partitions) in topics {
                try cluster.createTopic(name, partitions: partitions)
            }
        } catch {
            Console.error("herald dev-broker: \(error)")
            return 69
        }
        print("bootstrap.servers=\(cluster.bootstrapServers)")
        fflush(nil)
        var received = signals.wait()
        while received == SIGUSR1 || received == SIGUSR2 {
            do {
                if received == SIGUSR1 { try cluster.setBrokersDown() } else { try cluster.setBrokersUp() }
                Console.error("herald dev-broker: brokers \(received == SIGUSR1 ? "down" : "up")")
            } catch {
                Console.error("herald dev-broker: \(error)")
            }
            received = signals.wait()
        }
        Console.error("herald dev-broker: signal \(received), stopping")
        withExtendedLifetime(cluster) {}
        return 0
    }

    private static func parseTopic(_ text: String) -> (String, Int32)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard let name = parts.first, !name.isEmpty, parts.count <= 2 else { return nil }
        if parts.count == 2 {
            guard let partitions = Int32(parts[1]), (1...1024).contains(partitions) else { return nil }
            return (String(name), partitions)
        }
        return (String(name), 4)
    }
}

/// Signals blocked on every thread and awaited with `sigwait` on one.
struct SignalSet {
    private var set = sigset_t()

    static func blocking(_ signals: [Int32]) -> SignalSet {
        var result = SignalSet()
        sigemptyset(&result.set)
        for signal in signals { sigaddset(&result.set, signal) }
        pthread_sigmask(SIG_BLOCK, &result.set, nil)
        return result
    }

    func wait() -> Int32 {
        var set = self.set
        var received: Int32 = 0
        sigwait(&set, &received)
        return received
    }
}
