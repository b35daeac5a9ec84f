import Synchronization

/// Decides whether "this token is unregistered" answers may be acted on (docs/ARCHITECTURE.md, suspected
/// misconfiguration). A wrong bundle id, environment or Firebase project makes every token look
/// invalid; invalidating on those answers would wipe out the app's device list. So the answers
/// about tokens are watched per app and provider over a window (the first `window` answers,
/// then the last `window`), and invalidations are applied only while the invalid share stays
/// at or under `threshold`. Above it the guard trips: the provider is halted for the app and
/// the pending invalidations are discarded.
///
/// A synchronous value type; ``InvalidationGuards`` shares one per (app, provider) in a worker.
struct InvalidationGuard: Sendable, Equatable {
    /// The verdict on unregistered answers seen so far.
    enum Verdict: Sendable, Equatable {
        /// Too few answers yet: hold the invalidations.
        case undecided
        /// The invalid share is normal: apply them.
        case apply
        /// The invalid share is suspicious: halt, apply nothing.
        case misconfigured
    }

    /// Answers in the window (default 200).
    let window: Int
    /// Largest acceptable invalid share (default 0.2).
    let threshold: Double
    /// Below `window` answers in all, a shard that ends decides on what it saw; it trips only
    /// with at least this many invalid answers, so one dead token of three is not a "misconfiguration".
    let smallSampleMinimumInvalid: Int

    private var ring: [Bool] = []
    private var next = 0
    private var invalidInWindow = 0
    private(set) var tripped = false

    /// A guard with the defaults.
    init(window: Int = 200, threshold: Double = 0.2, smallSampleMinimumInvalid: Int = 10) {
        self.window = max(1, window)
        self.threshold = min(max(threshold, 0), 1)
        self.smallSampleMinimumInvalid = max(1, smallSampleMinimumInvalid)
        ring.reserveCapacity(self.window)
    }

    /// Records one answer about a token (accepted: `invalid` false).
    mutating func record(invalid: Bool) {
        if ring.count < window {
            ring.append(invalid)
        } else {
            if ring[next] { invalidInWindow -= 1 }
            ring[next] = invalid
            next = (next + 1) % window
        }
        if invalid { invalidInWindow += 1 }
        if verdictOnWindow == .misconfigured { tripped = true }
    }

    private var verdictOnWindow: Verdict {
        // A tiny tolerance so 29 of 100 against 0.29 is "at the threshold", not above it.
        let limit = threshold * Double(window) + 1e-9
        // Already more invalid answers than the whole first window may hold: no need to wait.
        if Double(invalidInWindow) > limit { return .misconfigured }
        guard ring.count >= window else { return .undecided }
        return .apply
    }

    /// The verdict now. Once tripped it stays tripped until ``reset()`` (the provider was resumed).
    var verdict: Verdict { tripped ? .misconfigured : verdictOnWindow }

    /// The verdict for a shard that has ended while the window is not yet full: decide on the
    /// answers there are.
    var finalVerdict: Verdict {
        let current = verdict
        guard current == .undecided else { return current }
        let share = ring.isEmpty ? 0 : Double(invalidInWindow) / Double(ring.count)
        return share > threshold && invalidInWindow >= smallSampleMinimumInvalid ? .misconfigured : .apply
    }

    /// Forgets everything (after the app's provider was resumed).
    mutating func reset() {
        self = InvalidationGuard(window: window, threshold: threshold, smallSampleMinimumInvalid: smallSampleMinimumInvalid)
    }
}

/// The guards of one worker, one per (app, provider), shared by every shard of the app.
final class InvalidationGuards: Sendable {
    private struct Key: Hashable {
        var appID: String
        var provider: String
    }

    /// A guard kept by reference, so recording an answer changes it in place: no copy of its
    /// window (an allocation per answer when it went through a dictionary by value).
    private final class Slot {
        var value: InvalidationGuard
        init(_ value: InvalidationGuard) { self.value = value }
    }

    private let guards = Mutex<[Key: Slot]>([:])
    private let window: Int
    private let threshold: Double

    /// Guards with `window` and `threshold` (see ``InvalidationGuard``).
    init(window: Int = 200, threshold: Double = 0.2) {
        self.window = window
        self.threshold = threshold
    }

    /// Records an answer and returns the verdict after it.
    func record(appID: String, provider: String, invalid: Bool) -> InvalidationGuard.Verdict {
        guards.withLock { guards in
            let key = Key(appID: appID, provider: provider)
            let slot: Slot
            if let existing = guards[key] {
                slot = existing
            } else {
                slot = Slot(InvalidationGuard(window: window, threshold: threshold))
                guards[key] = slot
            }
            slot.value.record(invalid: invalid)
            return slot.value.verdict
        }
    }

    /// The verdict now (`final`: for a shard that has ended).
    func verdict(appID: String, provider: String, final: Bool = false) -> InvalidationGuard.Verdict {
        guards.withLock { guards in
            let current = guards[Key(appID: appID, provider: provider)]?.value ?? InvalidationGuard(window: window, threshold: threshold)
            return final ? current.finalVerdict : current.verdict
        }
    }

    /// Forgets the app's answers on `provider` (its halt was lifted).
    func reset(appID: String, provider: String) {
        _ = guards.withLock { $0.removeValue(forKey: Key(appID: appID, provider: provider)) }
    }
}
