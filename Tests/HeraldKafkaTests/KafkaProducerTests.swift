import Foundation
import HeraldCore
import HeraldKafka
import HeraldTestSupport
import Testing

extension KafkaMockClusterIntegration {
    /// The producer against the in-process mock cluster: 100,000 keyed messages with headers,
    /// and what it does with tombstones, empty values, oversized messages and bad headers.
    @Suite(.timeLimit(.minutes(2))) struct KafkaProducerTests {
        @Test func hundredThousandKeyedMessagesWithHeadersAreAcknowledgedAndReadBackIntact() async throws {
            let cluster = try EmbeddedKafkaCluster(brokers: 1)
            let topic = TestEnvironment.uniqueName("produce")
            try cluster.createTopic(topic, partitions: 4)
            let configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: fastGroupProperties)
            let producer = try KafkaProducer(configuration: configuration)
            let total = 100_000
            let messages = (0..<total).map { index in
                KafkaProducerMessage(topic: topic, key: "user-\(index % 500)", value: "payload-\(index)",
                                     headers: [KafkaHeader(name: "index", string: String(index)),
                                               KafkaHeader(name: "bytes", value: [0, 255, UInt8(index % 256)])])
            }
            let producedFrom = Timestamp.now.seconds
            let reports = try await produceAll(producer, messages)
            let producedBy = Timestamp.now.seconds
            #expect(reports.count == total)
            #expect(Set(reports.map { "\($0.partition)/\($0.offset)" }).count == total)
            #expect(Set(reports.map(\.partition)) == [0, 1, 2, 3])
            #expect(await producer.flush())
            #expect(producer.queuedCount == 0)

            var options = KafkaConsumerOptions()
            options.maximumInFlight = 5_000
            let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("g"), options: options)
            try consumer.subscribe(topics: [topic])
            var seen = [Bool](repeating: false, count: total)
            var lastIndexByKey: [String: Int] = [:]
            var problems: [String] = []
            var count = 0
            let deadline = Date().addingTimeInterval(90)
            while count < total && Date() < deadline {
                guard let message = try await consumer.poll(timeoutMilliseconds: 200) else { continue }
                consumer.markProcessed(message)
                count += 1
                guard let index = message.header("index")?.valueString.flatMap({ Int($0) }), (0..<total).contains(index) else {
                    problems.append("no index header at \(message.partition)/\(message.offset)")
                    continue
                }
                if seen[index] { problems.append("\(index) twice") }
                // The producer's CreateTime, to the millisecond.
                if let seconds = message.timestamp?.seconds, (producedFrom...producedBy).contains(seconds) {} else {
                    problems.append("message \(index) stamped \(message.timestamp.map(\.description) ?? "nil")")
                }
                seen[index] = true
                let expectedHeaders = [KafkaHeader(name: "index", string: String(index)), KafkaHeader(name: "bytes", value: [0, 255, UInt8(index % 256)])]
                if message.valueString != "payload-\(index)" || message.keyString != "user-\(index % 500)" || message.headers != expectedHeaders {
                    problems.append("message \(index) altered")
                }
                // One key, one partition: its messages come back in the order they were sent.
                if let key = message.keyString, let last = lastIndexByKey[key], last > index { problems.append("key \(key) reordered") }
                lastIndexByKey[message.keyString ?? ""] = index
            }
            #expect(count == total)
            #expect(seen.allSatisfy { $0 })
            #expect(problems.isEmpty, "\(problems.prefix(5))")
            await consumer.close()
        }

        @Test func aFatalErrorIsReportedAndNothingIsSentAfterIt() async throws {
            let cluster = try EmbeddedKafkaCluster(brokers: 1)
            let topic = TestEnvironment.uniqueName("fatal")
            try cluster.createTopic(topic, partitions: 1)
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers))
            _ = try await producer.send(topic: topic, key: "k", value: "before")
            #expect(producer.fatalError == nil)
            producer.raiseFatalErrorForTesting("sequence gap")
            let error = try #require(producer.fatalError)
            #expect(error.code == .fatal && error.message.contains("sequence gap"), "\(error)")
            await #expect(throws: KafkaError.self) { try await producer.send(topic: topic, key: "k", value: "after") }
        }

        @Test func tombstonesEmptyValuesOversizedMessagesAndBadHeaders() async throws {
            let cluster = try EmbeddedKafkaCluster(brokers: 1)
            let topic = TestEnvironment.uniqueName("edge")
            try cluster.createTopic(topic, partitions: 1)
            let configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: fastGroupProperties)
            let producer = try KafkaProducer(configuration: configuration)

            await #expect { try await producer.send(topic: topic, key: nil, value: [UInt8](repeating: 1, count: 2_000_000)) } throws: { error in
                (error as? KafkaError)?.code == .messageTooLarge
            }
            await #expect { try await producer.send(topic: topic, key: "k", value: "v", headers: [KafkaHeader(name: "", string: "x")]) } throws: { error in
                (error as? KafkaError)?.code == .invalidMessage
            }
            await #expect { try await producer.send(topic: topic, key: "k", value: "v", headers: [KafkaHeader(name: "a\u{0}b", string: "x")]) } throws: { error in
                (error as? KafkaError)?.code == .invalidMessage
            }
            let batch = await producer.sendAll([
                KafkaProducerMessage(topic: topic, key: Array("gone".utf8), value: nil),
                KafkaProducerMessage(topic: topic, key: nil, value: [], headers: [KafkaHeader(name: "null", value: nil), KafkaHeader(name: "empty", value: [])]),
                KafkaProducerMessage(topic: topic, key: nil, value: Array(repeating: 2, count: 2_000_000)),
                KafkaProducerMessage(topic: topic, key: nil, value: Array("after".utf8)),
            ])
            #expect(batch.count == 4)
            #expect((try? batch[0].get())?.offset == 0)
            #expect((try? batch[1].get())?.offset == 1)
            if case .failure(let error) = batch[2] { #expect(error.code == .messageTooLarge) } else { Issue.record("oversized message accepted") }
            #expect((try? batch[3].get())?.offset == 2)

            let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("g"))
            try consumer.subscribe(topics: [topic])
            let read = try await consume(consumer, count: 3, seconds: 30)
            #expect(read.count == 3)
            #expect(read.first?.isTombstone == true && read.first?.value == [] && read.first?.keyString == "gone")
            #expect(read.dropFirst().first?.isTombstone == false && read.dropFirst().first?.value == [])
            #expect(read.dropFirst().first?.headers == [KafkaHeader(name: "null", value: nil), KafkaHeader(name: "empty", value: [])])
            #expect(read.last?.valueString == "after")
            await consumer.close()
        }

        @Test func aBatchLargerThanLibrdkafkasQueueWaitsForRoomAndAllOfItIsAcknowledged() async throws {
            let cluster = try EmbeddedKafkaCluster(brokers: 1)
            let topic = TestEnvironment.uniqueName("queue-full")
            try cluster.createTopic(topic, partitions: 2)
            var properties = fastGroupProperties
            properties["queue.buffering.max.messages"] = "50"
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: properties))
            let messages = (0..<5_000).map { KafkaProducerMessage(topic: topic, key: "k\($0 % 7)", value: "v\($0)") }
            let started = ContinuousClock.now
            let results = await producer.sendAll(messages)
            let failures = results.filter { if case .failure = $0 { true } else { false } }
            #expect(results.count == 5_000)
            #expect(failures.isEmpty, "\(failures.prefix(3))")
            // 100 queue-fulls at the least; each waits for the poll thread, not for a timer.
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }
}
