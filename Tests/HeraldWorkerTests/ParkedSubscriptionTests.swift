import HeraldCore
import HeraldPostgres
@testable import HeraldWorker
import Testing

/// `shard_retries.last_reason` is shared by old and new workers during a rolling upgrade: the
/// typed ``ParkReason`` reads what earlier workers wrote and writes what they read.
@Suite struct ParkedSubscriptionTests {
    /// Strings as the workers before ``ParkReason`` wrote them (`ParkedSubscription.parked`:
    /// the provider reason cut to 200, `"verdict:" + reason`, `"halted:<provider>:<detail ≤ 150>"`).
    static let written: [(String, ParkReason)] = [
        ("TooManyRequests", .retry(providerReason: "TooManyRequests")),
        ("verdict:unregistered", .awaitingVerdict(.unregistered)),
        ("verdict:expired-token", .awaitingVerdict(.expiredToken)),
        ("halted:apns:InvalidProviderToken", .halted(.apns, detail: "InvalidProviderToken")),
        ("halted:fcm:suspected-misconfiguration", .halted(.fcm, detail: "suspected-misconfiguration")),
        ("halted:apns:a detail: with colons", .halted(.apns, detail: "a detail: with colons")),
    ]

    @Test func readsWhatEarlierWorkersWrote() {
        for (text, reason) in Self.written {
            #expect(ParkReason(stored: text) == reason, "\(text)")
        }
        #expect(ParkReason(stored: nil) == .retry(providerReason: ""))
        #expect(ParkReason(stored: "halted:webpush:x") == .halted(nil, detail: "x"), "a provider this build does not know")
    }

    @Test func writesWhatEarlierWorkersRead() {
        for (text, reason) in Self.written {
            #expect(reason.stored == text)
        }
        // Earlier workers told rows apart by these prefixes alone (and JobAdministration finds
        // halted rows with LIKE 'halted%').
        #expect(ParkReason.halted(.apns, detail: "x").stored.hasPrefix("halted:"))
        #expect(ParkReason.awaitingVerdict(.unregistered).stored.hasPrefix("verdict:"))
        #expect(ParkReason.retry(providerReason: String(repeating: "r", count: 300)).stored.count == 200)
        #expect(ParkReason.halted(.fcm, detail: String(repeating: "d", count: 300)).stored == "halted:fcm:" + String(repeating: "d", count: 150))
    }

    @Test func aRowIsDueAsItsKindSays() {
        let now = Timestamp(seconds: 1_800_000_000)
        let member = AudienceMember(id: "00000000-0000-4000-8000-000000000001", platform: .ios, token: "t", sandbox: false, sdk: true,
                                    language: nil, timeZone: nil, voipToken: nil)
        var entry = ParkedSubscription(member: member, kind: .retry, attempts: 0, due: Timestamp(seconds: now.seconds + 30),
                                       lastReason: "InternalServerError", firstAttemptAt: now)
        #expect(entry.row(now: now) == ParkedRetry(subscriptionID: member.id, attempts: 1, nextAttemptAt: Timestamp(seconds: now.seconds + 30),
                                                   lastReason: "InternalServerError"))
        entry.kind = .awaitingVerdict(reason: .unregistered, providerReason: "Unregistered", timestamp: nil)
        #expect(entry.row(now: now).nextAttemptAt == now && entry.row(now: now).lastReason == "verdict:unregistered")
        entry.kind = .halted(.apns)
        entry.lastReason = "credentials"
        #expect(entry.row(now: now).lastReason == "halted:apns:credentials")
        #expect(entry.row(now: now).nextAttemptAt.seconds > now.seconds + 300 * 24 * 3600)
    }
}
