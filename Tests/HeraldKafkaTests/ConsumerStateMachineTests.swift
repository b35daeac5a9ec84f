@testable import HeraldKafka
import Testing

/// The consumer's decisions, driven as its poll thread drives them, with no broker or thread.
@Suite struct ConsumerStateMachineTests {
    let start = ContinuousClock.now
    let p0 = KafkaTopicPartition(topic: "jobs", partition: 0)
    let p1 = KafkaTopicPartition(topic: "jobs", partition: 1)

    func machine(maximumInFlight: Int = 100, resumeAtOrBelow: Int? = nil) -> ConsumerStateMachine {
        var options = KafkaConsumerOptions()
        options.maximumInFlight = maximumInFlight
        options.resumeAtOrBelow = resumeAtOrBelow
        options.commitInterval = .seconds(1)
        options.revocationGracePeriod = .seconds(2)
        options.pauseWhenFullFor = .milliseconds(250)
        return ConsumerStateMachine(options: options, now: start)
    }

    func messages(_ partition: KafkaTopicPartition, _ offsets: ClosedRange<Int64>) -> [KafkaMessage] {
        offsets.map { KafkaMessage(topic: partition.topic, partition: partition.partition, offset: $0, key: nil, value: []) }
    }

    func takeAll(_ machine: inout ConsumerStateMachine) -> [KafkaMessage] {
        var taken: [KafkaMessage] = []
        while let message = machine.take() { taken.append(message) }
        return taken
    }

    @Test func offsetsCommitOnlyOverARunOfFinishedWorkAndOnlyWhenTheyMoved() {
        var machine = machine()
        _ = machine.assigned([p0])
        machine.received(messages(p0, 10...13))
        let taken = takeAll(&machine)
        #expect(taken.map(\.offset) == [10, 11, 12, 13])
        _ = machine.processed(taken[1])
        #expect(machine.offsetsToCommit().isEmpty) // 10 still unfinished
        _ = machine.processed(taken[0])
        #expect(machine.offsetsToCommit() == [p0: 12])
        machine.committed([p0: 12])
        #expect(machine.offsetsToCommit().isEmpty)
        _ = machine.processed(taken[2])
        #expect(machine.offsetsToCommit() == [p0: 13])
        machine.commitRefused()
        #expect(machine.offsetsToCommit() == [p0: 13]) // a refusal leaves them for the next tick
        #expect(machine.statistics.commits == 1 && machine.statistics.commitFailures == 1)
        #expect(machine.snapshot.inFlight == 1)
    }

    @Test func theCommitIsDueEachIntervalOrOnRequest() {
        var machine = machine()
        let answer1 = machine.commitIsDue(now: start + .milliseconds(999), requested: false)
        #expect(!answer1)
        let answer2 = machine.commitIsDue(now: start + .seconds(1), requested: false)
        #expect(answer2)
        let answer3 = machine.commitIsDue(now: start + .milliseconds(1_500), requested: false)
        #expect(!answer3)
        let answer4 = machine.commitIsDue(now: start + .milliseconds(1_500), requested: true)
        #expect(answer4)
        // A requested commit restarts the interval.
        let answer5 = machine.commitIsDue(now: start + .milliseconds(2_100), requested: false)
        #expect(!answer5)
        let answer6 = machine.commitIsDue(now: start + .milliseconds(2_500), requested: false)
        #expect(answer6)
    }

    @Test func aRevocationDropsBufferedMessagesAndIgnoresLateFinishes() {
        var machine = machine()
        _ = machine.assigned([p0, p1])
        machine.received(messages(p0, 0...2) + messages(p1, 0...1))
        let first = machine.take()
        #expect(first?.offset == 0 && first?.topicPartition == p0)
        let deadline = machine.revocationBegan([p0], lost: false, now: start)
        #expect(deadline == start + .seconds(2))
        #expect(machine.unfinished(in: [p0]) == 1)
        // p0's two buffered messages are gone; p1's are still handed out.
        #expect(takeAll(&machine).map(\.topicPartition) == [p1, p1])
        #expect(machine.statistics.droppedOnRevocation == 2)
        #expect(machine.revocationCommit([p0], lost: false) == [:])
        machine.revoked([p0], lost: false, cooperative: false)
        #expect(machine.assignment.keys.sorted { $0.partition < $1.partition } == [p1])
        // The same partition assigned again: the old message's finish must not move its offsets.
        _ = machine.assigned([p0])
        if let first { _ = machine.processed(first) }
        #expect(machine.statistics.processedAfterRevocation == 1)
        #expect(machine.offsetsToCommit(only: [p0]).isEmpty)
    }

    @Test func workFinishedDuringTheGracePeriodIsCommittedBeforeThePartitionGoes() {
        var machine = machine()
        _ = machine.assigned([p0])
        machine.received(messages(p0, 0...1))
        let taken = takeAll(&machine)
        _ = machine.revocationBegan([p0], lost: false, now: start)
        machine.awaitProgress()
        let answer7 = machine.processed(taken[0])
        #expect(answer7) // wakes the poll thread waiting out the grace period
        let answer8 = machine.processed(taken[1])
        #expect(!answer8) // once only
        #expect(machine.unfinished(in: [p0]) == 0)
        #expect(machine.revocationCommit([p0], lost: false) == [p0: 2])
        machine.committed([p0: 2])
        machine.revoked([p0], lost: false, cooperative: false)
        // Committed: the next assignment reads from the group's commit, nothing remembered.
        let answer9 = machine.assigned([p0])
        #expect(answer9.startOffsets.isEmpty)
    }

    @Test func aLostAssignmentOrAClosingConsumerDoesNotWait() {
        var machine = machine()
        _ = machine.assigned([p0])
        let answer10 = machine.revocationBegan([p0], lost: true, now: start)
        #expect(answer10 == nil)
        #expect(machine.revocationCommit([p0], lost: true) == nil)
        var closing = self.machine()
        _ = closing.assigned([p0])
        closing.requestClose(.commit)
        let answer11 = closing.revocationBegan([p0], lost: false, now: start)
        #expect(answer11 == nil)
        #expect(closing.revocationCommit([p0], lost: false) == [:])
        var abandoning = self.machine()
        _ = abandoning.assigned([p0])
        abandoning.requestClose(.abandon)
        #expect(abandoning.revocationCommit([p0], lost: false) == nil)
    }

    @Test func aRefusedRevocationCommitResumesAfterTheProcessedWorkOnReassignment() {
        var machine = machine()
        _ = machine.assigned([p0])
        machine.received(messages(p0, 0...4))
        let taken = takeAll(&machine)
        for message in taken.prefix(3) { _ = machine.processed(message) }
        _ = machine.revocationBegan([p0], lost: false, now: start)
        #expect(machine.revocationCommit([p0], lost: false) == [p0: 3])
        machine.commitRefused()
        machine.revoked([p0], lost: false, cooperative: false)
        let assignment = machine.assigned([p0])
        #expect(assignment.startOffsets == [p0: 3])
        #expect(machine.statistics.resumedAfterRefusedCommit == 1)
        // The processed position is committed at the next tick, and only once.
        #expect(machine.offsetsToCommit() == [p0: 3])
        machine.committed([p0: 3])
        #expect(machine.offsetsToCommit().isEmpty)
        // Remembered for one assignment only.
        _ = machine.revocationBegan([p0], lost: false, now: start)
        machine.revoked([p0], lost: false, cooperative: false)
        let answer12 = machine.assigned([p0])
        #expect(answer12.startOffsets.isEmpty)
    }

    @Test func theCooperativeProtocolAndLostAssignmentsRememberNothing() {
        for (cooperative, lost) in [(true, false), (false, true)] {
            var machine = machine()
            _ = machine.assigned([p0])
            machine.received(messages(p0, 0...1))
            for message in takeAll(&machine) { _ = machine.processed(message) }
            _ = machine.revocationBegan([p0], lost: lost, now: start)
            machine.revoked([p0], lost: lost, cooperative: cooperative)
            let answer13 = machine.assigned([p0])
            #expect(answer13.startOffsets.isEmpty)
        }
    }

    @Test func aFullBudgetHoldsThenPausesTheHeldPartitionsThenResumes() {
        var machine = machine(maximumInFlight: 4, resumeAtOrBelow: 2)
        _ = machine.assigned([p1, p0])
        let answer14 = machine.turn(now: start)
        #expect(answer14 == .poll(room: 4, change: nil))
        machine.received(messages(p0, 0...3))
        let taken = takeAll(&machine)
        #expect(!machine.hasRoom)
        let answer15 = machine.turn(now: start)
        #expect(answer15 == .hold(until: start + .milliseconds(250)))
        let answer16 = machine.turn(now: start + .milliseconds(250))
        #expect(answer16 == .poll(room: 1, change: .pause([p0, p1])))
        #expect(machine.snapshot.isPaused && machine.statistics.pauses == 1)
        // New partitions assigned while paused start paused.
        let answer17 = machine.assigned([p1])
        #expect(answer17.paused)
        _ = machine.processed(taken[0])
        let answer18 = machine.turn(now: start + .seconds(1))
        #expect(answer18 == .poll(room: 1, change: nil)) // 3 in flight: above the resume level
        _ = machine.processed(taken[1])
        let answer19 = machine.turn(now: start + .seconds(1))
        #expect(answer19 == .poll(room: 2, change: .resume([p0, p1])))
        #expect(!machine.snapshot.isPaused && machine.statistics.resumes == 1)
    }

    @Test func aHoldEndsNoLaterThanTheNextPeriodicCommit() {
        var options = KafkaConsumerOptions()
        options.maximumInFlight = 1
        options.pauseWhenFullFor = .seconds(10)
        options.commitInterval = .milliseconds(300)
        var machine = ConsumerStateMachine(options: options, now: start)
        _ = machine.assigned([p0])
        machine.received(messages(p0, 0...0))
        let answer20 = machine.turn(now: start)
        #expect(answer20 == .hold(until: start + .milliseconds(300)))
    }

    @Test func closingWinsOverEverythingAndTheFirstModeStays() {
        var machine = machine()
        let answer21 = machine.requestClose(.abandon)
        #expect(answer21)
        let answer22 = machine.requestClose(.commit)
        #expect(!answer22)
        let answer23 = machine.turn(now: start)
        #expect(answer23 == .close(.abandon))
    }

    @Test func aRebalanceErrorForgetsTheAssignment() {
        var machine = machine()
        _ = machine.assigned([p0])
        machine.received(messages(p0, 0...1))
        let taken = takeAll(&machine)
        machine.rebalanceFailed()
        #expect(machine.assignment.isEmpty)
        _ = machine.processed(taken[0])
        #expect(machine.offsetsToCommit().isEmpty)
        #expect(machine.snapshot.inFlight == 0)
    }
}
