import Foundation
import HeraldTestSupport
import Testing

@Suite(.timeLimit(.minutes(3))) struct DoctorCommandTests {
    /// Against the test PostgreSQL and broker: everything passes; then with PostgreSQL out of
    /// reach, the failing check is named and the exit status is 1.
    @Test(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)
                   && TestEnvironment.shouldRun(needing: TestEnvironment.kafkaVariable)))
    func passesAgainstARunningSetupAndNamesTheFailingCheck() async throws {
        try await withFixture("doctor") { fixture in
            let simulator = try fixture.startSimulator()
            _ = try await fixture.seed(app: "e2e", devices: 0)
            await fixture.producer.prepare(topics: Array(fixture.topics.values))
            var environment = fixture.baseEnvironment
            environment["HERALD_APNS_ENDPOINT"] = "https://127.0.0.1:\(simulator.apnsPort)"
            environment["HERALD_FCM_ENDPOINT"] = "https://127.0.0.1:\(simulator.fcmPort)"
            environment["HERALD_TLS_CA_FILE"] = simulator.stateDirectory.appendingPathComponent("ca.pem").path
            let good = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["doctor"], environment: environment, timeout: 60)
            #expect(good.status == 0, "\(good.stdout)\n\(good.stderr)")
            for name in ["postgres", "clock", "migrations", "credentials", "kafka", "topics", "apns", "fcm"] {
                #expect(good.stdout.contains("ok   \(name):"), "\(name): \(good.stdout)")
            }
            #expect(good.stdout.contains("clocks agree"), "the simulators send a date header: \(good.stdout)")
            // A provider out of reach is named; --skip-providers leaves both out.
            var unreachable = environment
            unreachable["HERALD_APNS_ENDPOINT"] = "https://127.0.0.1:1"
            let noAPNs = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["doctor"], environment: unreachable, timeout: 60)
            #expect(noAPNs.status == 1 && noAPNs.stdout.contains("FAIL apns: cannot reach https://127.0.0.1:1") && noAPNs.stdout.contains("ok   fcm:"),
                    "\(noAPNs.stdout)")
            let skipped = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["doctor", "--skip-providers"], environment: unreachable, timeout: 60)
            #expect(skipped.status == 0 && !skipped.stdout.contains("apns:"), "\(skipped.stdout)")
            // A provider whose clock is two minutes ahead of this host's fails the check, naming it.
            // (A simulator of its own: the fixture stops the last one it started, this one stops here.)
            let skewed = try SimProcess(binary: TestEnvironment.heraldBinary, directory: fixture.directory.appendingPathComponent("sim-skewed"),
                                        arguments: ["--date-offset", "120"], logs: fixture.directory)
            defer { skewed.terminate() }
            var skewedEnvironment = environment
            skewedEnvironment["HERALD_APNS_ENDPOINT"] = "https://127.0.0.1:\(skewed.apnsPort)"
            skewedEnvironment["HERALD_FCM_ENDPOINT"] = "https://127.0.0.1:\(skewed.fcmPort)"
            skewedEnvironment["HERALD_TLS_CA_FILE"] = skewed.stateDirectory.appendingPathComponent("ca.pem").path
            let late = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["doctor"], environment: skewedEnvironment, timeout: 60)
            #expect(late.status == 1 && late.stdout.contains("FAIL fcm: this host's clock is") && late.stdout.contains("FAIL apns: this host's clock is")
                    && late.stdout.contains("behind"), "\(late.stdout)")
            var down = environment
            down["HERALD_DATABASE_URL"] = "postgresql://herald@127.0.0.1:1/none?connect_timeout=2"
            let bad = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["doctor"], environment: down, timeout: 60)
            #expect(bad.status == 1, "\(bad.stdout)\n\(bad.stderr)")
            #expect(bad.stdout.contains("FAIL postgres:"), "\(bad.stdout)")
            #expect(bad.stdout.contains("ok   kafka:"), "the other checks still run: \(bad.stdout)")
            // A topic missing is named (these names were never created).
            var renamed = environment
            renamed["HERALD_TOPIC_METRICS"] = "doctor-missing-\(UUID().uuidString.prefix(8))"
            let missing = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["doctor"], environment: renamed, timeout: 60)
            #expect(missing.status == 1 && missing.stdout.contains("FAIL topics: missing: doctor-missing-"), "\(missing.stdout)")
        }
    }
}
