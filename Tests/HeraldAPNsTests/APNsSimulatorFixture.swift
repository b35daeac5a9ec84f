import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
import HeraldSim

/// An APNs simulator in this process and an ``APNsClient`` pointed at it (both environments go
/// to the simulator through the host override).
final class APNsSimulatorFixture: @unchecked Sendable {
    let simulator: Simulator
    let loop: EventLoop
    let directory: URL
    let tokens: APNsProviderToken
    let client: APNsClient

    init(faults: SimulatorFaults = SimulatorFaults(), tokens makeTokens: ((SimulatorCredentials) throws -> APNsProviderToken)? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-apns-\(UUID().uuidString)")
        var configuration = Simulator.Configuration(stateDirectory: directory)
        configuration.faults = faults
        simulator = try Simulator(configuration: configuration)
        loop = try EventLoop()
        let credentials = simulator.credentials
        tokens = try makeTokens?(credentials)
            ?? APNsProviderToken(key: credentials.apnsKey, keyID: credentials.apnsKeyID, teamID: credentials.teamID)
        client = try APNsClient(configuration: APNsSimulatorFixture.configuration(simulator, directory), authentication: .token(tokens), loop: loop)
    }

    /// A second client on the same simulator, with other credentials, for `bundleID` (else the simulator's).
    func client(authentication: APNsAuthentication, bundleID: String? = nil) throws -> APNsClient {
        try APNsClient(configuration: APNsSimulatorFixture.configuration(simulator, directory, bundleID: bundleID), authentication: authentication,
                       loop: loop)
    }

    /// Certificate auth with the client certificate the simulator wrote (`apns-client.pem`,
    /// `apns-client-key.pem`), read from the files as a provider would.
    func certificateAuthentication() throws -> APNsAuthentication {
        let credentials = simulator.credentials
        return .certificate(certificatePEM: try String(contentsOf: credentials.apnsClientCertificateURL, encoding: .utf8),
                            keyPEM: try String(contentsOf: credentials.apnsClientKeyURL, encoding: .utf8))
    }

    private static func configuration(_ simulator: Simulator, _ directory: URL, bundleID: String? = nil) -> APNsConfiguration {
        var apns = APNsConfiguration(bundleID: bundleID ?? simulator.credentials.bundleID)
        apns.hostOverride = "127.0.0.1"
        apns.port = simulator.apnsPort
        apns.caFile = directory.appendingPathComponent("ca.pem").path
        apns.maxConnections = 2
        apns.requestTimeoutNanoseconds = 10_000_000_000
        return apns
    }

    var violations: Int { simulator.apnsStats.snapshot.violations }

    static func deviceToken(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    deinit {
        client.shutdown()
        simulator.stop()
        loop.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}
