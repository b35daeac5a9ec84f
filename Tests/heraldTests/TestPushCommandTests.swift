import Foundation
import HeraldCore
import HeraldSim
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
            // Half the tokens unregistered: the test picks tokens either side (UnregisteredShare).
            let simulator = try fixture.startSimulator(["--unregistered-share", "0.5"])
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
                let token = try #require(audience.values.first { $0.platform == platform && !UnregisteredShare(0.5).isUnregistered($0.token) }?.token)
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

            // --validate-only: FCM checks the message under validate_only and delivers nothing.
            let android = try #require(audience.values.first { $0.platform == .android && !UnregisteredShare(0.5).isUnregistered($0.token) }?.token)
            let fcmBefore = try await simulator.stats(.android)
            let checked = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "send", "--token", android, "--platform", "android", "--app", "e2e", "--title", "Dry", "--validate-only",
            ], environment: environment, timeout: 60)
            #expect(checked.status == 0, "exit \(checked.status): \(checked.stderr) \(checked.stdout)")
            let checkedAnswer = try JSONValue.parse(Array(checked.stdout.utf8))
            #expect(checkedAnswer["outcome"] == .string("valid") && checkedAnswer["sent"] == .bool(false)
                    && checkedAnswer["provider"] == .string("fcm"), "\(checked.stdout)")
            let fcmAfter = try await simulator.stats(.android)
            #expect(fcmAfter.validated == fcmBefore.validated + 1 && fcmAfter.accepted == fcmBefore.accepted,
                    "validated \(fcmBefore.validated)→\(fcmAfter.validated), accepted \(fcmBefore.accepted)→\(fcmAfter.accepted)")
            // FCM's refusals still come back under validate_only: a token the simulator has unregistered.
            let gone = try #require(audience.values.first { $0.platform == .android && UnregisteredShare(0.5).isUnregistered($0.token) }?.token)
            let refusedDry = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "send", "--token", gone, "--platform", "android", "--app", "e2e", "--validate-only",
            ], environment: environment, timeout: 60)
            #expect(refusedDry.status == 1 && refusedDry.stdout.contains(#""outcome":"unregistered""#), "\(refusedDry.status) \(refusedDry.stdout) \(refusedDry.stderr)")

            // On APNs, which has no such mode, the request is rendered and checked, and nothing reaches Apple.
            let ios = try #require(audience.values.first { $0.platform == .ios && !UnregisteredShare(0.5).isUnregistered($0.token) }?.token)
            let apnsBefore = try await simulator.stats(.ios)
            let rendered = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "send", "--token", ios, "--platform", "ios", "--app", "e2e", "--title", "Dry", "--validate-only",
            ], environment: environment, timeout: 60)
            #expect(rendered.status == 0, "exit \(rendered.status): \(rendered.stderr) \(rendered.stdout)")
            let renderedAnswer = try JSONValue.parse(Array(rendered.stdout.utf8))
            #expect(renderedAnswer["outcome"] == .string("valid") && renderedAnswer["sent"] == .bool(false)
                    && renderedAnswer["push_type"] == .string("alert") && renderedAnswer["payload"]?["aps"] != nil, "\(rendered.stdout)")
            #expect(renderedAnswer["topic"]?.stringValue?.isEmpty == false, "\(rendered.stdout)")
            let apnsAfter = try await simulator.stats(.ios)
            #expect(apnsAfter.requests == apnsBefore.requests, "APNs saw \(apnsAfter.requests - apnsBefore.requests) requests")

            // Certificate auth end to end: `herald apps add` reads the simulator's .p12 (its
            // password from a variable), and the push goes out on a TLS connection that presents
            // the certificate, with no provider token; the simulator accepts it for the bundle.
            var withPassword = environment
            withPassword["SIM_P12_PASSWORD"] = SimulatorCredentials.apnsClientPKCS12Password
            let p12 = simulator.stateDirectory.appendingPathComponent(SimulatorCredentials.apnsClientPKCS12File).path
            let added = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "apps", "add", "--id", "cert", "--name", "Certificate app", "--apns-certificate", p12,
                "--apns-certificate-password-env", "SIM_P12_PASSWORD", "--apns-environment", "sandbox",
            ], environment: withPassword, timeout: 60)
            #expect(added.status == 0, "\(added.stderr)")
            let certificateBefore = try await simulator.stats(.ios)
            let viaCertificate = try await Subprocess.runDetached(TestEnvironment.heraldBinary, [
                "send", "--token", ios, "--platform", "ios", "--app", "cert", "--title", "Signed by certificate",
            ], environment: environment, timeout: 60)
            #expect(viaCertificate.status == 0 && viaCertificate.stdout.contains(#""outcome":"accepted""#),
                    "exit \(viaCertificate.status): \(viaCertificate.stdout) \(viaCertificate.stderr)")
            #expect(try await simulator.stats(.ios).accepted == certificateBefore.accepted + 1)
        }
    }
}
