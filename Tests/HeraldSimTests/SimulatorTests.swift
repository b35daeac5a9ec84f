import Foundation
import HeraldCrypto
import HeraldHTTP2
@testable import HeraldSim
import Testing

/// Faults changed while the simulators run (the failure suite starts them mid-job).
@Suite(.timeLimit(.minutes(2))) struct SimulatorTests {
    @Test func stallsComeEachPeriodAndEnd() {
        var faults = SimulatorFaults()
        faults.stallEverySeconds = 10
        faults.stallSeconds = 2
        let switch_ = SimulatorFaultSwitch()
        let origin = SimulatorFaultSwitch.monotonicNow
        switch_.set(faults)
        let second: UInt64 = 1_000_000_000
        // Counted from `set`: no stall in the first period, then 2 s of each 10 s.
        #expect(switch_.stallRemainingNanoseconds(now: origin + 5 * second) == 0)
        let inStall = switch_.stallRemainingNanoseconds(now: origin + 10 * second + second / 2)
        #expect(inStall > second && inStall <= 2 * second)
        #expect(switch_.stallRemainingNanoseconds(now: origin + 13 * second) == 0)
        #expect(switch_.stallRemainingNanoseconds(now: origin + 21 * second) > 0)
        switch_.set(SimulatorFaults())
        #expect(switch_.stallRemainingNanoseconds(now: origin + 21 * second) == 0)
    }

    @Test func oneReadingGivesTheFaultsTheDropAndTheDelay() {
        var faults = SimulatorFaults()
        faults.latencyMilliseconds = 200
        faults.stallEverySeconds = 10
        faults.stallSeconds = 2
        faults.goawayEvery = 7
        let switch_ = SimulatorFaultSwitch()
        let origin = SimulatorFaultSwitch.monotonicNow
        switch_.set(faults)
        let second: UInt64 = 1_000_000_000
        let calm = switch_.reading(openedAt: origin, now: origin + 5 * second)
        #expect(calm.faults.goawayEvery == 7 && !calm.drop && calm.delayNanoseconds == 200_000_000)
        let stalled = switch_.reading(openedAt: origin, now: origin + 10 * second + second / 2)
        #expect(stalled.delayNanoseconds == 200_000_000 + switch_.stallRemainingNanoseconds(now: origin + 10 * second + second / 2))
        #expect(stalled.delayNanoseconds > 200_000_000 + second)
        // Connections open when handshake failures begin are dropped; later ones are not.
        switch_.failHandshakes(forSeconds: 30)
        #expect(switch_.reading(openedAt: origin).drop)
        #expect(!switch_.reading(openedAt: SimulatorFaultSwitch.monotonicNow + second).drop)
    }

    @Test func aStallDelaysAnswersAndLosesNone() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let provider = try fixture.simulator.credentials.apnsProviderToken()
        // Connected and authenticated before the stall, so only the stall delays the next answer.
        #expect(try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(1), providerToken: provider)).status == 200)
        var faults = SimulatorFaults()
        faults.stallEverySeconds = 2
        faults.stallSeconds = 1.9
        fixture.simulator.faults.set(faults)
        // Into a stall (the first starts 2 s after `set` and lasts 1.9 s) with at least 0.5 s of it
        // left, however late the sleep wakes on a loaded machine; then send. The stall ends at a
        // fixed moment, so the answer cannot come sooner than what was left of it when the send began.
        try await Task.sleep(for: .milliseconds(2050))
        var started = ContinuousClock.now
        var remaining = fixture.simulator.faults.stallRemainingNanoseconds()
        while remaining < 500_000_000 {
            try await Task.sleep(for: .milliseconds(20))
            started = ContinuousClock.now
            remaining = fixture.simulator.faults.stallRemainingNanoseconds()
        }
        let response = try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(2), providerToken: provider))
        let waited = ContinuousClock.now - started
        #expect(response.status == 200)
        // (5 ms for the event loop's millisecond timers.)
        #expect(waited >= .nanoseconds(Int64(remaining)) - .milliseconds(5), "answered after \(waited), with \(remaining) ns of a 1.9 s stall left")
        #expect(fixture.simulator.apnsStats.snapshot.accepted == 2)
        client.shutdown()
    }

    @Test func handshakeFailuresDropOpenConnectionsThenEnd() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let provider = try fixture.simulator.credentials.apnsProviderToken()
        #expect(try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(1), providerToken: provider)).status == 200)
        fixture.simulator.faults.failHandshakes(forSeconds: 1.5)
        // The pooled connection is reset at its next request, and no new one gets through.
        await #expect(throws: HTTP2Error.self) {
            _ = try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(2), providerToken: provider))
        }
        let during = fixture.simulator.apnsStats.snapshot
        #expect(during.resets >= 1)
        #expect(during.accepted == 1)
        try await Task.sleep(for: .milliseconds(1700))
        let after = try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(3), providerToken: provider))
        #expect(after.status == 200)
        let stats = fixture.simulator.apnsStats.snapshot
        #expect(stats.accepted == 2 && stats.deliveries[SimulatorFixture.deviceToken(2)] == nil && stats.duplicateDeliveries == 0)
        client.shutdown()
    }

    // Where the simulators listen and the names their certificate carries (other containers reach
    // them as `sim`).

    private static let stats = HTTP2Request(method: "GET", path: "/_sim/stats")

    /// 127.0.0.2 is loopback too, but only a socket bound to 0.0.0.0 answers there: it shows the
    /// address was bound, not just 127.0.0.1.
    @Test func onEveryInterfaceItAnswersTLSUnderTheNamesAskedFor() async throws {
        let fixture = try SimulatorFixture(listenAddress: "0.0.0.0", publicHost: "sim", certificateNames: try CertificateNames(["sim.example"]))
        for (host, serverName) in [("127.0.0.1", "sim"), ("127.0.0.2", "sim.example"), ("127.0.0.2", "localhost"), ("127.0.0.1", nil)] {
            for port in [fixture.simulator.apnsPort, fixture.simulator.fcmPort] {
                let client = try fixture.client(port: port, host: host, serverName: serverName)
                let response = try await client.send(Self.stats)
                #expect(response.status == 200, "\(host):\(port) as \(serverName ?? host)")
                client.shutdown()
            }
        }
        // The client checks the name: one the certificate lacks fails the handshake.
        let stranger = try fixture.client(port: fixture.simulator.apnsPort, serverName: "elsewhere.example")
        let refused = await #expect(throws: HTTP2Error.self) { _ = try await stranger.send(Self.stats) }
        #expect(refused.map { "\($0)" }?.contains("certificate verification") == true, "\(String(describing: refused))")
        stranger.shutdown()
        #expect(fixture.simulator.credentials.fcmTokenURI == "https://sim:\(fixture.simulator.fcmPort)/token")
    }

    @Test func byDefaultItListensOnLoopbackOnly() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        #expect(try await client.send(Self.stats).status == 200)
        client.shutdown()
        let elsewhere = try fixture.client(port: fixture.simulator.apnsPort, host: "127.0.0.2", serverName: "127.0.0.1")
        await #expect(throws: HTTP2Error.self) { _ = try await elsewhere.send(Self.stats) }
        elsewhere.shutdown()
    }

    /// A client that loaded ca.pem before a restart with a new name trusts the new certificate.
    @Test func aRestartWithANewNameKeepsClientsOfTheOldCAWorking() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var configuration = Simulator.Configuration(stateDirectory: directory)
        let first = try Simulator(configuration: configuration)
        let trust = try TLSContext(client: directory.appendingPathComponent("ca.pem").path)
        first.stop()

        configuration.certificateNames = try CertificateNames(["sim.example"])
        let second = try Simulator(configuration: configuration)
        defer { second.stop() }
        #expect(second.credentials.certificateUpdate == .serverCertificateReissued(added: try CertificateNames(["sim.example"])))
        let client = HTTP2Client(configuration: HTTP2Client.Configuration(host: "127.0.0.1", port: second.fcmPort, serverName: "sim.example"),
                                 tls: trust, loop: loop)
        #expect(try await client.send(Self.stats).status == 200)
        client.shutdown()
    }

    @Test func aListenAddressThatIsNoIPv4AddressIsRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = Simulator.Configuration(stateDirectory: directory)
        configuration.listenAddress = "localhost"
        #expect(throws: SimulatorCredentials.Failure.self) { _ = try Simulator(configuration: configuration) }
        // Refused before anything was written.
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }
}
