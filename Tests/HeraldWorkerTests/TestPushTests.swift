import HeraldCore
import HeraldPostgres
@testable import HeraldWorker
import Testing

/// `TestPush` against the simulators runs in `TestPushCommandTests` (through `herald send
/// --token`); here, what needs no socket.
@Suite struct TestPushTests {
    @Test func placeholderSubscriptionIDsAreVersionFourUUIDs() {
        var seen = Set<String>()
        for _ in 0..<100 {
            let id = UUIDv4.random()
            seen.insert(id)
            #expect(id.count == 36 && id == id.lowercased())
            let parts = id.split(separator: "-").map(\.count)
            #expect(parts == [8, 4, 4, 4, 12], "\(id)")
            #expect(id[id.index(id.startIndex, offsetBy: 14)] == "4", "version 4: \(id)")
            #expect("89ab".contains(id[id.index(id.startIndex, offsetBy: 19)]), "RFC 4122 variant: \(id)")
        }
        #expect(seen.count == 100)
    }

    @Test func anAppWithoutCredentialsForTheProviderIsAFailureNotACrash() async throws {
        let job = try Job.decode(Array(#"""
            {"schema":"herald.job.v1","id":"t","app_id":"a","kind":"notification","created_at":"2026-12-02T10:00:00Z",
             "audience":{"subscription_ids":["00000000-0000-4000-8000-000000000000"]},"content":{"title":"T"}}
            """#.utf8))
        let outcome = try await TestPush.send(job, to: TestPush.Device(token: "abc", platform: .android),
                                              app: AppSettings(id: "a", name: "A"), endpoints: ProviderEndpoints())
        #expect(outcome == .provider(.failed(reason: .noCredentials, providerReason: "the app has no FCM credentials"), provider: .fcm))
        // Validate-only on APNs checks the credentials before rendering and never sends.
        let dry = try await TestPush.send(job, to: TestPush.Device(token: "abc", platform: .ios), app: AppSettings(id: "a", name: "A"),
                                          endpoints: ProviderEndpoints(), validateOnly: true)
        #expect(dry == .provider(.failed(reason: .noCredentials, providerReason: "the app has no APNs credentials"), provider: .apns))
    }
}
