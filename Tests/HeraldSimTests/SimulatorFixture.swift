import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
import HeraldSim

/// A simulator in this process, and Herald's client pointed at it.
final class SimulatorFixture: @unchecked Sendable {
    let simulator: Simulator
    let loop: EventLoop
    let directory: URL

    init(faults: SimulatorFaults = SimulatorFaults(), maxConcurrentStreams: UInt32 = 1000, streamsBeforeToken: UInt32 = 1, logPerToken: Int = 0,
         apnsTeamBundleIDs: Set<String> = [], listenAddress: String = "127.0.0.1", publicHost: String = "127.0.0.1",
         certificateNames: CertificateNames = CertificateNames()) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-\(UUID().uuidString)")
        var configuration = Simulator.Configuration(stateDirectory: directory)
        configuration.listenAddress = listenAddress
        configuration.publicHost = publicHost
        configuration.certificateNames = certificateNames
        configuration.logPerToken = logPerToken
        configuration.apnsTeamBundleIDs = apnsTeamBundleIDs
        configuration.faults = faults
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.streamsBeforeToken = streamsBeforeToken
        simulator = try Simulator(configuration: configuration)
        loop = try EventLoop()
    }

    var caFile: String { directory.appendingPathComponent("ca.pem").path }

    /// A client of `host:port` that checks the server certificate against `serverName` (else `host`),
    /// and presents `certificate` (APNs certificate auth) when given.
    func client(port: Int, maxConnections: Int = 1, host: String = "127.0.0.1", serverName: String? = nil,
                certificate: IssuedCertificate? = nil) throws -> HTTP2Client {
        var configuration = HTTP2Client.Configuration(host: host, port: port, serverName: serverName)
        configuration.maxConnections = maxConnections
        let tls = try TLSContext(client: caFile, clientCertificatePEM: certificate?.certificatePEM, clientKeyPEM: certificate?.keyPEM)
        return HTTP2Client(configuration: configuration, tls: tls, loop: loop)
    }

    /// The APNs client certificate the simulator wrote, read from its files as a provider would.
    func apnsClientCertificate() throws -> IssuedCertificate {
        let credentials = simulator.credentials
        return IssuedCertificate(certificatePEM: try String(contentsOf: credentials.apnsClientCertificateURL, encoding: .utf8),
                                 keyPEM: try String(contentsOf: credentials.apnsClientKeyURL, encoding: .utf8))
    }

    /// A request for certificate auth: no `authorization`, and `topic` (else the bundle's for `pushType`).
    func apnsCertificateRequest(token: String, pushType: String = "alert", topic: String? = nil,
                                body: String = #"{"aps":{"alert":"hi"}}"#) throws -> HTTP2Request {
        var request = try apnsRequest(token: token, pushType: pushType, body: body)
        request.headers = request.headers.compactMap { header in
            switch header.name {
            case "authorization": nil
            case "apns-topic": topic.map { HeaderField("apns-topic", $0) } ?? header
            default: header
            }
        }
        return request
    }

    /// A request APNs accepts, for `token`.
    func apnsRequest(token: String, pushType: String = "alert", body: String = #"{"aps":{"alert":"hi"}}"#,
                     providerToken: String? = nil, extra: [HeaderField] = []) throws -> HTTP2Request {
        let bearer = try providerToken ?? simulator.credentials.apnsProviderToken()
        let suffix = ["voip": ".voip", "liveactivity": ".push-type.liveactivity"][pushType] ?? ""
        return HTTP2Request(path: "/3/device/\(token)", headers: [
            HeaderField("authorization", "bearer \(bearer)"), HeaderField("apns-topic", simulator.credentials.bundleID + suffix),
            HeaderField("apns-push-type", pushType),
        ] + extra, body: Array(body.utf8))
    }

    static func deviceToken(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    static func reason(_ response: HTTP2Response) -> String? {
        (try? JSONValue.parse(response.body))?["reason"]?.stringValue
    }

    deinit {
        simulator.stop()
        loop.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}
