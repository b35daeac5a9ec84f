import Testing
import HeraldCore

@Suite struct MetricsReportTests {
    @Test func roundTrips() throws {
        var report = MetricsReport(workerID: "worker-a", at: Timestamp(seconds: 1_796_232_859), windowSeconds: 10)
        report.jobs = .init(started: 3, finished: 2)
        report.shards = .init(started: 40, finished: 38)
        report.notifications = [.init(provider: .apns, outcome: .accepted, count: 12_000), .init(provider: .fcm, outcome: .unregistered, count: 7)]
        report.latencyMilliseconds = [.apns: .init(p50: 4.5, p90: 9, p99: 31.25, count: 12_000)]
        report.connections = [.apns: 4, .fcm: 2]
        report.consumerLag = [.init(topic: "herald.shards", partition: 3, lag: 120)]
        report.retries = 5
        report.rebalances = 1
        report.kafkaErrors = 2
        #expect(try MetricsReport.decode(report.json.serializedBytes()) == report)
    }
}
