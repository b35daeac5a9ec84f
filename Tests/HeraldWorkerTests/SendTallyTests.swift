import HeraldCore
import Testing

@testable import HeraldWorker

@Suite struct SendTallyTests {
    @Test func aTallyAddsWhatEachSendWouldHaveAddedAndEmpties() throws {
        let oneByOne = WorkerMetrics(workerID: "a")
        let tallied = WorkerMetrics(workerID: "b")
        var tally = SendTally()
        var generator = SplitMix64(seed: 19)
        for index in 0..<500 {
            let provider: Receipt.Provider = index % 3 == 0 ? .fcm : .apns
            let result = ["accepted", "unregistered", "retried"][Int(generator.next() % 3)]
            let seconds = Double(generator.next() % 3000) / 1000 - 0.1
            oneByOne.adjustInFlight(1)
            tally.started()
            if index % 7 == 0 { continue }  // still in flight
            oneByOne.adjustInFlight(-1)
            oneByOne.sendDuration(provider: provider.rawValue, seconds: seconds)
            oneByOne.sendAttempt(provider: provider.rawValue, result: result)
            tally.answered(provider: provider, result: result, seconds: seconds)
            if index % 50 == 0 { tallied.add(&tally) }
        }
        tallied.add(&tally)
        #expect(tally.isEmpty)

        let expected = oneByOne.snapshot(), got = tallied.snapshot()
        #expect(got.inFlight == expected.inFlight && got.inFlight == 72)
        #expect(got.sendAttempts == expected.sendAttempts)
        #expect(got.sendDurations.keys.sorted() == ["apns", "fcm"])
        for (provider, histogram) in expected.sendDurations {
            let merged = try #require(got.sendDurations[provider])
            #expect(merged.bucketCounts == histogram.bucketCounts && merged.count == histogram.count)
            #expect(abs(merged.sum - histogram.sum) < 1e-6)
        }
    }

    @Test func aNonFiniteDurationIsNotObservedButTheAnswerCounts() {
        var tally = SendTally()
        tally.started()
        tally.answered(provider: .apns, result: "accepted", seconds: .nan)
        #expect(tally.inFlight == 0 && tally.durations.isEmpty)
        #expect(tally.attempts[SendTally.Attempt(provider: .apns, result: "accepted")] == 1)
        #expect(!tally.isEmpty)
    }
}
