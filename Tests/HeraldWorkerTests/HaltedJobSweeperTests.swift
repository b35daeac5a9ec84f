import Foundation
import HeraldCore
import HeraldKafka
import HeraldPostgres
import HeraldTestSupport
@testable import HeraldWorker
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .timeLimit(.minutes(2)))
struct HaltedJobSweeperTests {
    let log = WorkerLog(workerID: "test", minimum: .error)

    /// A job that expired while its shard waited behind a halt: the sweep produces that shard
    /// again on its lane (the urgent one here), once per sweep while nobody claims it, and
    /// nothing for a job that has not expired.
    @Test func aShardOfAJobThatExpiredBehindAHaltIsProducedAgain() async throws {
        let database = try await WorkerTestDatabase.migrated(apps: ["app"])
        let pool = database.pool()
        let jobs = JobRepository(pool: pool)
        for (id, expires) in [("stale", Timestamp.now.adding(seconds: -60)), ("fresh", Timestamp.now.adding(seconds: 3600))] {
            _ = try await jobs.insert(id: id, appID: "app", kind: "notification", body: #"{"id":"\#(id)"}"#, createdAt: .now,
                                      expiresAt: expires, urgent: true)
            try await jobs.plan(jobID: id, ranges: [.everything], audienceEstimate: 1)
            guard case .claimed(var lease) = try await jobs.claim(jobID: id, shardNo: 0, shardCount: 1, range: .everything, holder: "w") else {
                Issue.record("not claimed")
                continue
            }
            try await jobs.checkpoint(&lease, cursor: nil, counts: ShardCounts(),
                                      park: [ParkedRetry(subscriptionID: "00000000-0000-4000-8000-000000000001", attempts: 1,
                                                         nextAttemptAt: .now, lastReason: "halted:credentials")])
            _ = try await jobs.release(lease)
        }
        let topics = try WorkerConfiguration.Topics(environment: [
            "HERALD_TOPIC_SHARDS": TestEnvironment.uniqueName("halt.shards"),
            "HERALD_TOPIC_SHARDS_URGENT": TestEnvironment.uniqueName("halt.shards.urgent"),
        ])
        let configuration = KafkaConfiguration(bootstrapServers: try TestEnvironment.require(TestEnvironment.kafkaVariable))
        let producer = try KafkaProducer(configuration: configuration)
        let sweeper = HaltedJobSweeper(administration: JobAdministration(pool: pool),
                                       publisher: ReceiptPublisher(producer: producer, topics: topics, log: log), log: log)
        let swept = try await sweeper.sweep()
        #expect(swept.map(\.jobID) == ["stale"])

        let consumer = try KafkaConsumer(configuration: configuration, groupID: TestEnvironment.uniqueName("halt.reader"))
        try consumer.subscribe(topics: [topics.shardsUrgent])
        var read: [Shard] = []
        let deadline = Date().addingTimeInterval(20)
        while read.isEmpty && Date() < deadline {
            guard let message = try await consumer.poll(timeoutMilliseconds: 200) else { continue }
            consumer.markProcessed(message)
            read.append(try Shard.decode(message.value))
        }
        await consumer.close()
        #expect(read.map(\.jobID) == ["stale"] && read.first?.shardNo == 0, "the shard message a worker will read")
        _ = await producer.flush(timeoutMilliseconds: 5_000)
        await pool.close()
        await database.drop()
    }
}
