import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP2
import HeraldSim
import Synchronization

/// A clock tests move by hand.
final class FakeClock: Sendable {
    private let current: Mutex<Timestamp>
    init(_ start: Timestamp = Timestamp(seconds: Timestamp.now.seconds)) { current = Mutex(start) }
    var now: Timestamp { current.withLock { $0 } }
    func advance(seconds: Int64) { current.withLock { $0 = Timestamp(seconds: $0.seconds + seconds) } }
    var closure: @Sendable () -> Timestamp { { [self] in self.now } }
}

/// An FCM simulator in this process, the service account it trusts, and Herald's FCM client
/// pointed at it.
final class FCMSimulatorFixture: @unchecked Sendable {
    let simulator: Simulator
    let loop: EventLoop
    let directory: URL
    let account: FCMServiceAccount
    let clock: FakeClock
    let http: HTTP2Client

    init(faults: SimulatorFaults = SimulatorFaults(), tokenLifetimeSeconds: Int64 = 3600) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-fcm-\(UUID().uuidString)")
        var configuration = Simulator.Configuration(stateDirectory: directory)
        configuration.faults = faults
        configuration.fcmTokenLifetimeSeconds = tokenLifetimeSeconds
        simulator = try Simulator(configuration: configuration)
        loop = try EventLoop()
        account = try FCMServiceAccount(json: Array(try Data(contentsOf: directory.appendingPathComponent("fcm-service-account.json"))))
        clock = FakeClock()
        http = try Self.client(port: simulator.fcmPort, caFile: directory.appendingPathComponent("ca.pem").path, loop: loop)
    }

    static func client(port: Int, caFile: String, loop: EventLoop, maxConnections: Int = 2) throws -> HTTP2Client {
        var configuration = HTTP2Client.Configuration(host: "127.0.0.1", port: port)
        configuration.maxConnections = maxConnections
        configuration.maxTransparentRetries = 0
        return HTTP2Client(configuration: configuration, tls: try TLSContext(client: caFile), loop: loop)
    }

    func tokenSource(account: FCMServiceAccount? = nil, refreshMarginSeconds: Int64 = 300) throws -> FCMAccessTokenSource {
        try FCMAccessTokenSource(account: account ?? self.account, client: http, refreshMarginSeconds: refreshMarginSeconds, now: clock.closure)
    }

    func fcmClient(account: FCMServiceAccount? = nil, refreshMarginSeconds: Int64 = 300) throws -> FCMClient {
        FCMClient(tokens: try tokenSource(account: account, refreshMarginSeconds: refreshMarginSeconds), client: http)
    }

    var stats: SimulatorStats.Snapshot { simulator.fcmStats.snapshot }

    /// A data-only message the simulator accepts.
    static func body(token: String = "device-1", data: String = #"{"herald_id":"job-1","title":"Hi"}"#) -> [UInt8] {
        Array(#"{"message":{"token":"\#(token)","data":\#(data),"android":{"priority":"high"}}}"#.utf8)
    }

    deinit {
        http.shutdown()
        simulator.stop()
        loop.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}
