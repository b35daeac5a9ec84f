import Foundation
import HeraldKafka

/// `herald bench kafka [--brokers B] --messages N [--size BYTES] [--partitions P] [--json]`:
/// produces N messages of BYTES bytes with Herald's producer (idempotent, lz4, acknowledged),
/// then reads them back with Herald's consumer group (each marked processed, offsets committed),
/// and prints the rates. Without `--brokers` it runs against an embedded mock cluster.
enum BenchKafkaCommand {
    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald bench kafka", usage: BenchCommand.usage)
        var brokers = options.string("--brokers")
        let count = options.int("--messages", in: 1...Int(Int32.max)) ?? 100_000
        let size = options.int("--size", in: 0...900_000) ?? 100
        let partitions = Int32(options.int("--partitions", in: 1...256) ?? 4)
        let json = options.flag("--json")
        guard options.finish() else { return 64 }
        if brokers?.isEmpty == true { return usage("--brokers takes HOST:PORT[,…]") }

        var cluster: EmbeddedKafkaCluster?
        let topic = "herald-bench-\(UInt32.random(in: 0...UInt32.max))"
        do {
            if brokers == nil {
                let embedded = try EmbeddedKafkaCluster(brokers: 1)
                try embedded.createTopic(topic, partitions: partitions)
                brokers = embedded.bootstrapServers
                cluster = embedded
            }
            guard let brokers else { return 70 }
            var configuration = KafkaConfiguration(bootstrapServers: brokers, properties: ["log_level": "3"])
            configuration.addPassThroughProperties(from: ProcessInfo.processInfo.environment)

            // Produce: every message acknowledged by the broker.
            let producer = try KafkaProducer(configuration: configuration)
            let value = (0..<size).map { UInt8(ascii: "a") &+ UInt8($0 % 26) }
            let produceStart = ContinuousClock.now
            var sent = 0
            while sent < count {
                let chunk = min(100_000, count - sent)
                let results = await producer.sendAll(Array(repeating: KafkaProducerMessage(topic: topic, key: nil, value: value), count: chunk))
                for result in results { _ = try result.get() }
                sent += chunk
            }
            let produceSeconds = BenchMeasure.seconds(ContinuousClock.now - produceStart)

            // Consume: a fresh group from the earliest offset, every message marked processed.
            var consumerConfiguration = configuration
            consumerConfiguration.properties["session.timeout.ms"] = "6000"
            consumerConfiguration.properties["heartbeat.interval.ms"] = "500"
            let consumer = try KafkaConsumer(configuration: consumerConfiguration, groupID: "herald-bench-\(UInt32.random(in: 0...UInt32.max))")
            let consumeStart = ContinuousClock.now
            try consumer.subscribe(topics: [topic])
            // Messages that never come end the run instead of hanging it: closing ends the sequence.
            let watchdog = Task {
                try await Task.sleep(for: .seconds(60) + .milliseconds(count / 10))
                await consumer.close()
            }
            defer { watchdog.cancel() }
            var received = 0
            var firstMessage: ContinuousClock.Instant?
            var bytes = 0
            for try await message in consumer.messages {
                if firstMessage == nil { firstMessage = ContinuousClock.now }
                bytes += message.value.count
                consumer.markProcessed(message)
                received += 1
                if received == count { break }
            }
            let consumeEnd = ContinuousClock.now
            await consumer.close()
            guard received == count, let firstMessage else {
                Console.error("herald bench kafka: consumed \(received) of \(count) messages")
                return 70
            }
            let steadySeconds = BenchMeasure.seconds(consumeEnd - firstMessage)
            let totalSeconds = BenchMeasure.seconds(consumeEnd - consumeStart)
            let statistics = consumer.statistics
            let rss = BenchMeasure.residentMegabytes()
            if json {
                print("{\"messages\":\(count),\"produce_per_second\":\(Int(Double(count) / produceSeconds)),\"consume_per_second\":\(Int(Double(count) / steadySeconds)),"
                    + "\"consume_per_second_including_group_join\":\(Int(Double(count) / totalSeconds)),\"size\":\(size),"
                    + "\"produce_seconds\":\(rounded(produceSeconds)),\"consume_seconds\":\(rounded(steadySeconds)),\"group_join_seconds\":\(rounded(totalSeconds - steadySeconds)),"
                    + "\"pauses\":\(statistics.pauses),\"commits\":\(statistics.commits),\"rss_mb\":\(rss),\"embedded_broker\":\(cluster != nil)}")
            } else {
                print("produced \(count) × \(size) B in \(rounded(produceSeconds)) s: \(Int(Double(count) / produceSeconds)) msg/s (acknowledged)")
                print("consumed \(count) (\(bytes) B) in \(rounded(steadySeconds)) s after \(rounded(totalSeconds - steadySeconds)) s of group join: \(Int(Double(count) / steadySeconds)) msg/s")
                print("pauses \(statistics.pauses), commits \(statistics.commits), RSS \(rss) MB, broker \(cluster != nil ? "embedded" : brokers)")
            }
            withExtendedLifetime(cluster) {}
            return 0
        } catch {
            Console.error("herald bench kafka: \(error)")
            return 69
        }
    }

    private static func usage(_ problem: String) -> Int32 {
        Console.error("herald bench kafka: \(problem)\n\(BenchCommand.usage)")
        return 64
    }


    private static func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

}
