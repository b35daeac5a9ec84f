@testable import HeraldWorker
import Testing

@Suite struct InvalidationGuardTests {
    /// Records `invalid` invalid answers, then `valid` valid ones.
    private func record(_ guardState: inout InvalidationGuard, invalid: Int, valid: Int) {
        for _ in 0..<invalid { guardState.record(invalid: true) }
        for _ in 0..<valid { guardState.record(invalid: false) }
    }

    @Test func undecidedUntilTheWindowIsFull() {
        var guardState = InvalidationGuard()
        #expect(guardState.verdict == .undecided)
        // 40 invalid of 199: within the threshold, but the window is not full yet.
        record(&guardState, invalid: 40, valid: 159)
        #expect(guardState.verdict == .undecided)
    }

    @Test func appliesAtTheWindowWhenAtMostTwentyPercentAreInvalid() {
        var guardState = InvalidationGuard()
        // 40 invalid of 200, spread out: exactly the threshold, which is still acceptable.
        for index in 0..<199 { guardState.record(invalid: index % 5 == 0) }
        #expect(guardState.verdict == .undecided)
        guardState.record(invalid: false)
        #expect(guardState.verdict == .apply)
        #expect(guardState.finalVerdict == .apply)
    }

    @Test func tripsAsSoonAsMoreThanFortyOfTheFirstTwoHundredAreInvalid() {
        var guardState = InvalidationGuard()
        record(&guardState, invalid: 40, valid: 0)
        #expect(guardState.verdict == .undecided, "40 of 200 may still turn out fine")
        guardState.record(invalid: true)
        #expect(guardState.verdict == .misconfigured, "41 invalid can no longer be 20% of the first 200")
    }

    @Test func theWindowSlidesOverTheLastTwoHundredAnswers() {
        var guardState = InvalidationGuard()
        record(&guardState, invalid: 0, valid: 1000)
        #expect(guardState.verdict == .apply)
        // A burst after many good answers: judged on the last 200, not diluted by the 1,000.
        record(&guardState, invalid: 40, valid: 0)
        #expect(guardState.verdict == .apply)
        guardState.record(invalid: true)
        #expect(guardState.verdict == .misconfigured)
    }

    @Test func invalidAnswersAgeOutOfTheWindow() {
        var guardState = InvalidationGuard()
        // 40 invalid at the start of the first window, then good answers.
        record(&guardState, invalid: 40, valid: 160)
        #expect(guardState.verdict == .apply)
        // 40 more: the first 40 have left the window, which holds 160 valid and 40 invalid.
        record(&guardState, invalid: 40, valid: 0)
        #expect(guardState.verdict == .apply, "80 invalid in all, but only 40 in the last 200")
        guardState.record(invalid: true)
        #expect(guardState.verdict == .misconfigured)
    }

    @Test func staysTrippedUntilReset() {
        var guardState = InvalidationGuard()
        record(&guardState, invalid: 41, valid: 0)
        #expect(guardState.verdict == .misconfigured)
        // Good answers later do not un-trip it: the app stays halted until someone resumes it.
        record(&guardState, invalid: 0, valid: 1000)
        #expect(guardState.verdict == .misconfigured)
        #expect(guardState.finalVerdict == .misconfigured)
        guardState.reset()
        #expect(guardState.verdict == .undecided)
        record(&guardState, invalid: 0, valid: 200)
        #expect(guardState.verdict == .apply)
    }

    @Test func finalVerdictOnSmallSamples() {
        #expect(InvalidationGuard().finalVerdict == .apply)

        var threeDead = InvalidationGuard()
        record(&threeDead, invalid: 3, valid: 0)
        #expect(threeDead.verdict == .undecided)
        #expect(threeDead.finalVerdict == .apply, "3 dead tokens of 3 is not a misconfiguration")

        var mostlyDead = InvalidationGuard()
        record(&mostlyDead, invalid: 15, valid: 5)
        #expect(mostlyDead.verdict == .undecided)
        #expect(mostlyDead.finalVerdict == .misconfigured, "15 of 20 invalid is")

        var fewDead = InvalidationGuard()
        record(&fewDead, invalid: 4, valid: 26)
        #expect(fewDead.finalVerdict == .apply)
    }

    @Test func customWindowAndThreshold() {
        var guardState = InvalidationGuard(window: 10, threshold: 0.5)
        record(&guardState, invalid: 0, valid: 5)
        record(&guardState, invalid: 5, valid: 0)
        #expect(guardState.verdict == .apply, "5 of 10 is at the threshold")
        guardState.record(invalid: true)  // a valid answer leaves the window: 6 of 10
        #expect(guardState.verdict == .misconfigured)
    }
}

@Suite struct InvalidationGuardsTests {
    @Test func appsAndProvidersAreJudgedApart() {
        let guards = InvalidationGuards()
        for _ in 0..<41 { _ = guards.record(appID: "a", provider: "apns", invalid: true) }
        #expect(guards.verdict(appID: "a", provider: "apns") == .misconfigured)
        #expect(guards.verdict(appID: "a", provider: "fcm") == .undecided, "the other provider goes on")
        #expect(guards.verdict(appID: "b", provider: "apns") == .undecided, "another app is not affected")
        for _ in 0..<200 { _ = guards.record(appID: "a", provider: "fcm", invalid: false) }
        #expect(guards.verdict(appID: "a", provider: "fcm") == .apply)
        #expect(guards.verdict(appID: "a", provider: "apns") == .misconfigured)
        guards.reset(appID: "a", provider: "apns")
        #expect(guards.verdict(appID: "a", provider: "apns") == .undecided)
        #expect(guards.verdict(appID: "a", provider: "fcm") == .apply, "a reset touches one provider")
    }

    @Test func recordReturnsTheVerdictAfterTheAnswer() {
        let guards = InvalidationGuards(window: 5, threshold: 0.2)
        #expect(guards.record(appID: "a", provider: "apns", invalid: true) == .undecided)
        #expect(guards.record(appID: "a", provider: "apns", invalid: true) == .misconfigured)
    }

    @Test func finalVerdictUsesTheSmallSampleRule() {
        let guards = InvalidationGuards()
        for _ in 0..<3 { _ = guards.record(appID: "a", provider: "apns", invalid: true) }
        #expect(guards.verdict(appID: "a", provider: "apns") == .undecided)
        #expect(guards.verdict(appID: "a", provider: "apns", final: true) == .apply)
        for _ in 0..<12 { _ = guards.record(appID: "a", provider: "apns", invalid: true) }
        for _ in 0..<5 { _ = guards.record(appID: "a", provider: "apns", invalid: false) }
        #expect(guards.verdict(appID: "a", provider: "apns", final: true) == .misconfigured)
    }

    /// Many shards of one app record at once: no answer is lost. 20 tasks send 50 answers each
    /// into a 1,000-answer window, 200 of them invalid (exactly the threshold): with every answer
    /// counted the window is full and the verdict is `apply`; a lost update would leave it
    /// undecided, a double count would trip it.
    @Test func safeFromManyTasks() async {
        let guards = InvalidationGuards(window: 1000, threshold: 0.2)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<20 {
                group.addTask {
                    for index in 0..<50 {
                        _ = guards.record(appID: "app", provider: "apns", invalid: index < 10)
                        // Other apps at the same time, on the same lock.
                        _ = guards.record(appID: "other-\(task % 4)", provider: "fcm", invalid: true)
                    }
                }
            }
        }
        #expect(guards.verdict(appID: "app", provider: "apns") == .apply)
        #expect(guards.verdict(appID: "other-0", provider: "fcm") == .misconfigured)
        #expect(guards.verdict(appID: "app", provider: "fcm") == .undecided)
    }
}
