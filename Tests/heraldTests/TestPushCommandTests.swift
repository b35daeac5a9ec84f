import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// `herald send --token`: one push to a raw token through the worker's renderer, the app's
/// credentials and the simulators, and the provider's answer, with no broker and no worker.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)),
       .serialized, .timeLimit(.minutes(3)))
struct TestPushCommandTests {
    @Test func aTestPushReachesTheSimulatorAndPrintsTheProvidersAnswer() async throws {
        try await withFixture("testpush") { fixture in
            let simulator = try fixture.startSimulator()
            _ = try await fixture.seed(app: "e2e", devices: 40)
            let audience = try await fixture.audience(app: "e2e")
            var environment = fixture.baseEnvironment
            environment.removeValue(forKey: "HERALD_KAFKA_BROKERS")  // not needed: nothing goes through Kafka
            environment["HERALD_APNS_ENDPOINT"] = "https://127.0.0.1:\(simulator.apnsPort)"
            environment["HERALD_FCM_ENDPOINT"] = "https://127.0.0.1:\(simulator.fcmPort)"
            environment["HERALD_FCM_TOKEN_HOSTS"] = "127.0.0.1"
            environment["HERALD_TLS_CA_FILE"] = simulator.stateDirectory.appendingPathComponent("ca.pem").path
            let before = try await simulator.stats(.ios).accepted + simulator.stats(.android).accepted
            for platform in [Platform.ios, .android] {
                let token = try #require(audience.values.first { $0.platform == platform }?.token)
                let result = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                    "send", "--token", token, "--platform", platform.rawValue, "--app", "e2e", "--title", "Test", "--data", #"{"n":1}"#,
                ], environment: environment, timeout: 60)
                #expect(result.status == 0, "\(platform): exit \(result.status): \(result.stderr) \(result.stdout)")
                let answer = try JSONValue.parse(Array(result.stdout.utf8))
                #expect(answer["outcome"] == .string("accepted") && answer["provider_id"]?.stringValue?.isEmpty == false, "\(result.stdout)")
            }
            let after = try await simulator.stats(.ios).accepted + simulator.stats(.android).accepted
            #expect(after - before == 2, "the simulators accepted the two pushes")
            // A token APNs cannot read is the provider's refusal, exit 1, and nothing is invalidated.
            let refused = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "send", "--token", "not-hex", "--platform", "ios", "--app", "e2e",
            ], environment: environment, timeout: 60)
            #expect(refused.status == 1, "exit \(refused.status): \(refused.stdout) \(refused.stderr)")
            #expect(refused.stdout.contains(#""outcome":"unregistered""#) || refused.stdout.contains(#""outcome":"failed""#), "\(refused.stdout)")
            #expect(try await fixture.invalidated(app: "e2e").isEmpty)
            // An unknown app is named.
            let unknown = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "send", "--token", "abc", "--platform", "android", "--app", "nope",
            ], environment: environment, timeout: 60)
            #expect(unknown.status == 66 && unknown.stderr.contains("no app nope"), "\(unknown.status) \(unknown.stderr)")
        }
    }
}
