import Foundation
import Testing
import HeraldCore
import HeraldHTTP2
@testable import HeraldWorker

@Suite struct SendInboxTests {
    @Test func takeIsEmptyUntilSomethingIsPostedAndThenHandsEverythingOver() {
        let inbox = SendInbox()
        #expect(inbox.take().isEmpty)
        inbox.post(.tick)
        inbox.post(.tick)
        #expect(inbox.take().count == 2)
        #expect(inbox.take().isEmpty)
    }

    @Test func aWaitingRunIsWokenByThePostAndGetsIt() async {
        let inbox = SendInbox()
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.05)
            inbox.post(.tick)
        }
        // Into a batch of the run's own, as a shard run waits (`next()` takes this path too).
        var batch: [SendInbox.Item] = []
        await inbox.next(into: &batch)
        #expect(batch.count == 1)
        #expect(inbox.take().isEmpty)
    }

    @Test func postsFromManyThreadsAreAllTakenOnceInBatches() async {
        let inbox = SendInbox()
        let threads = 8
        let perThread = 5_000
        for _ in 0..<threads {
            Thread.detachNewThread {
                for _ in 0..<perThread { inbox.post(.tick) }
            }
        }
        var received = 0
        var batches = 0
        while received < threads * perThread {
            received += await inbox.next().count
            batches += 1
        }
        #expect(received == threads * perThread)
        #expect(inbox.take().isEmpty)
        // Answers that arrive while the run works come together: far fewer batches than posts.
        #expect(batches < received)
    }

    /// Answers posted on an event loop while the run waits wake it once, at the end of the loop's
    /// iteration, with all of them: one batch per read, not one wake-up per answer.
    @Test func postsOfOneLoopIterationWakeTheRunOnceWithAllOfThem() async throws {
        let loop = try EventLoop(name: "send-inbox-test")
        defer { loop.shutdown() }
        let inbox = SendInbox()
        let waiting = Task { await inbox.next() }
        while !inbox.isWaiting { await Task.yield() }
        loop.execute { for _ in 0..<100 { inbox.post(.tick) } }
        let items = await waiting.value
        #expect(items.count == 100)
        #expect(inbox.take().isEmpty)
        #expect(!inbox.isWaiting)
    }

    /// A run that hands back its emptied batch makes two buffers alternate: after the first
    /// batches, no take allocates (the storage seen by the run is one of two, again and again).
    @Test func takingIntoAnEmptiedBatchAlternatesTwoBuffers() {
        let inbox = SendInbox()
        var batch: [SendInbox.Item] = []
        var storages: Set<UInt> = []
        for round in 0..<20 {
            for _ in 0..<50 { inbox.post(.tick) }
            inbox.take(into: &batch)
            #expect(batch.count == 50)
            if round >= 2 { _ = batch.withUnsafeBufferPointer { storages.insert(UInt(bitPattern: $0.baseAddress)) } }
            batch.removeAll(keepingCapacity: true)
        }
        #expect(storages.count == 2)
        // A batch that is not empty gets the posts appended.
        inbox.post(.tick)
        batch.append(.tick)
        inbox.take(into: &batch)
        #expect(batch.count == 2)
        #expect(inbox.take().isEmpty)
    }

    /// A send's answer reaches the run's inbox carrying the send itself, its outcome and a
    /// duration measured from when it started.
    @Test func aSentRequestPostsItsOutcomeWithTheSendAndHowLongItTook() {
        let inbox = SendInbox()
        let send = ShardRunState.Send(member: World.member(3), token: World.member(3).token, attempts: 1,
                                      firstAttemptAt: Timestamp(seconds: 1_800_000_000), isRetry: false)
        let request = SentRequest(send, inbox: inbox, started: .now - .milliseconds(20))
        request.answer(.accepted(providerID: "apns-1"))
        let items = inbox.take()
        #expect(items.count == 1)
        guard case .sent(let answered, let outcome, let seconds)? = items.first else { Issue.record("not a send"); return }
        #expect(answered === request && answered.send == send)
        #expect(outcome == .accepted(providerID: "apns-1"))
        #expect(seconds >= 0.02 && seconds < 60)
    }
}
