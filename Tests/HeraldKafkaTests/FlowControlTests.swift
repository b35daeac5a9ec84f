@testable import HeraldKafka
import Testing

@Suite struct FlowControlTests {
    let start = ContinuousClock.now

    @Test func belowTheBudgetItTakesWhatFits() {
        var flow = FlowControl(maximum: 100, resumeLevel: 50, pauseAfter: .milliseconds(250))
        #expect(flow.next(inFlight: 0, now: start) == .poll(room: 100))
        #expect(flow.next(inFlight: 99, now: start) == .poll(room: 1))
    }

    @Test func aBrieflyFullBudgetHoldsOffWithoutPausing() {
        var flow = FlowControl(maximum: 100, resumeLevel: 50, pauseAfter: .milliseconds(250))
        #expect(flow.next(inFlight: 100, now: start) == .hold(until: start + .milliseconds(250)))
        #expect(flow.next(inFlight: 100, now: start + .milliseconds(200)) == .hold(until: start + .milliseconds(250)))
        // The application caught up in time: no pause, and the full-since clock starts over.
        #expect(flow.next(inFlight: 90, now: start + .milliseconds(240)) == .poll(room: 10))
        #expect(flow.next(inFlight: 100, now: start + .milliseconds(300)) == .hold(until: start + .milliseconds(550)))
        #expect(flow.next(inFlight: 100, now: start + .milliseconds(500)) == .hold(until: start + .milliseconds(550)))
        #expect(!flow.isPaused)
    }

    @Test func aBudgetFullForLongPausesThenResumesBelowTheResumeLevel() {
        var flow = FlowControl(maximum: 100, resumeLevel: 50, pauseAfter: .milliseconds(250))
        #expect(flow.next(inFlight: 100, now: start) == .hold(until: start + .milliseconds(250)))
        #expect(flow.next(inFlight: 120, now: start + .milliseconds(250)) == .pause)
        #expect(flow.isPaused)
        // Paused: it polls only to serve callbacks, and does not resume above the resume level.
        #expect(flow.next(inFlight: 120, now: start + .seconds(5)) == .poll(room: 1))
        #expect(flow.next(inFlight: 51, now: start + .seconds(6)) == .poll(room: 1))
        #expect(flow.next(inFlight: 50, now: start + .seconds(7)) == .resume(room: 50))
        #expect(!flow.isPaused)
        #expect(flow.next(inFlight: 60, now: start + .seconds(7)) == .poll(room: 40))
    }

    @Test func degenerateSettingsStaySane() {
        var flow = FlowControl(maximum: 0, resumeLevel: 10, pauseAfter: .zero)
        #expect(flow.maximum == 1 && flow.resumeLevel == 0)
        #expect(flow.next(inFlight: 1, now: start) == .pause)
        #expect(flow.next(inFlight: 0, now: start) == .resume(room: 1))
    }
}
