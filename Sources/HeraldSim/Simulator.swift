public import Foundation
import Glibc
import HeraldCore
public import HeraldCrypto
import HeraldHTTP2
import Synchronization

/// `herald sim`: the APNs and FCM simulators over TLS HTTP/2 (on 127.0.0.1 unless told), with their state
/// directory, shared fault injection and `GET /_sim/stats` (`?tokens=1` adds per-token counts;
/// `POST /_sim/reset` clears them) on both ports.
public final class Simulator: Sendable {
    /// How to run.
    public struct Configuration: Sendable {
        public var apnsPort = 0
        public var fcmPort = 0
        /// The IPv4 address both servers bind; `0.0.0.0` for every interface (other containers).
        public var listenAddress = "127.0.0.1"
        /// The host clients reach the simulator by: the service account's `token_uri` names it,
        /// and the server certificate does (a DNS name or an IPv4 address).
        public var publicHost = "127.0.0.1"
        /// More names for the server certificate, besides 127.0.0.1, localhost and `publicHost`.
        public var certificateNames = CertificateNames()
        public var stateDirectory: URL
        /// Streams per connection once a valid APNs token was seen.
        public var maxConcurrentStreams: UInt32 = 1000
        /// APNs streams per connection before the first valid token (APNs: 1). Load tools that
        /// open many streams before reading SETTINGS (h2load) want `maxConcurrentStreams` here.
        public var streamsBeforeToken: UInt32 = 1
        public var faults = SimulatorFaults()
        /// Event-loop threads serving both simulators.
        public var threads = 1
        /// Lifetime of issued FCM access tokens.
        public var fcmTokenLifetimeSeconds: Int64 = 3600
        /// Accepted requests kept per token for `GET /_sim/log` (0: no log).
        public var logPerToken = 0
        /// Other APNs bundle ids of the key's team: pushes to them are answered
        /// `DeviceTokenNotForTopic` (the devices belong to `apns.json`'s bundle).
        public var apnsTeamBundleIDs: Set<String> = []
        /// Seconds added to the `date` header of every answer: a provider whose clock is off,
        /// for `herald doctor`'s clock check.
        public var dateOffsetSeconds: Int64 = 0

        /// Creates a configuration.
        public init(stateDirectory: URL) {
            self.stateDirectory = stateDirectory
        }
    }

    public let credentials: SimulatorCredentials
    public let apnsStats = SimulatorStats()
    public let fcmStats = SimulatorStats()
    /// Accepted requests per token (`GET /_sim/log?token=…`), when enabled.
    public let apnsLog: SimulatorLog
    public let fcmLog: SimulatorLog
    private let apnsServer: HTTP2Server
    private let fcmServer: HTTP2Server
    private let group: EventLoopGroup
    /// The faults injected now; change them while it runs with ``SimulatorFaultSwitch/set(_:)``
    /// and ``SimulatorFaultSwitch/failHandshakes(forSeconds:)``.
    public let faults: SimulatorFaultSwitch
    /// The ports it listens on.
    public let apnsPort: Int
    public let fcmPort: Int

    /// Prepares the state directory and starts both servers.
    public init(configuration: Configuration) throws {
        var listenAddress = in_addr()
        guard inet_pton(AF_INET, configuration.listenAddress, &listenAddress) == 1 else {
            throw SimulatorCredentials.Failure(message: "the listen address must be an IPv4 address, not \(configuration.listenAddress.debugDescription)")
        }
        group = try EventLoopGroup(count: max(1, configuration.threads))
        // Bind first when a port is 0, so the service account can name the FCM port it got.
        let host = configuration.listenAddress
        var fcmServerConfiguration = HTTP2Server.Configuration(host: host, port: configuration.fcmPort)
        fcmServerConfiguration.maxConcurrentStreams = configuration.maxConcurrentStreams
        let offset = configuration.dateOffsetSeconds
        fcmServerConfiguration.dateHeader = { HTTPDate.format($0 + offset) }
        var apnsServerConfiguration = HTTP2Server.Configuration(host: host, port: configuration.apnsPort)
        apnsServerConfiguration.maxConcurrentStreams = configuration.maxConcurrentStreams
        apnsServerConfiguration.dateHeader = { HTTPDate.format($0 + offset) }
        if configuration.fcmPort == 0 {
            fcmServerConfiguration.listener = try HTTP2Listener(host: host)
        }
        let fcmPort = fcmServerConfiguration.listener?.port ?? configuration.fcmPort
        credentials = try SimulatorCredentials.prepare(directory: configuration.stateDirectory, fcmPort: fcmPort,
                                                       publicHost: configuration.publicHost, certificateNames: configuration.certificateNames)
        let tls = try TLSContext(serverCertificatePEM: credentials.serverCertificatePEM, keyPEM: credentials.serverKeyPEM)
        // APNs asks for client certificates (certificate auth) and refuses ones its CA did not issue.
        let apnsTLS = try TLSContext(serverCertificatePEM: credentials.serverCertificatePEM, keyPEM: credentials.serverKeyPEM,
                                     clientCertificateAuthorityPEM: credentials.caCertificatePEM)
        let faults = SimulatorFaultSwitch(configuration.faults)
        self.faults = faults
        let apnsLog = SimulatorLog(perToken: configuration.logPerToken)
        let fcmLog = SimulatorLog(perToken: configuration.logPerToken)
        self.apnsLog = apnsLog
        self.fcmLog = fcmLog
        let apns = try APNsSimulator(credentials: credentials, stats: apnsStats, maxConcurrentStreams: configuration.maxConcurrentStreams,
                                     streamsBeforeToken: configuration.streamsBeforeToken, log: apnsLog,
                                     teamBundleIDs: configuration.apnsTeamBundleIDs)
        let fcm = try FCMSimulator(credentials: credentials, stats: fcmStats, tokenLifetimeSeconds: configuration.fcmTokenLifetimeSeconds,
                                   log: fcmLog)
        let apnsStats = self.apnsStats
        let fcmStats = self.fcmStats
        apnsServer = HTTP2Server(configuration: apnsServerConfiguration, tls: apnsTLS, group: group, onConnection: { connection in
            apnsStats.recordConnection()
            connection.simulatorState.openedAt = SimulatorFaultSwitch.monotonicNow
            if faults.refusesConnections() {
                apnsStats.recordReset()
                return connection.abort()
            }
            apns.connectionOpened(connection)
        }, handler: { request in
            Simulator.serve(request, stats: apnsStats, log: apnsLog, faultSwitch: faults) { apns.handle($0, faults: $1) }
        })
        fcmServer = HTTP2Server(configuration: fcmServerConfiguration, tls: tls, group: group, onConnection: { connection in
            fcmStats.recordConnection()
            connection.simulatorState.openedAt = SimulatorFaultSwitch.monotonicNow
            if faults.refusesConnections() {
                fcmStats.recordReset()
                connection.abort()
            }
        }, handler: { request in
            Simulator.serve(request, stats: fcmStats, log: fcmLog, faultSwitch: faults) { fcm.handle($0, faults: $1) }
        })
        apnsPort = try apnsServer.start()
        self.fcmPort = try fcmServer.start()
    }

    /// Fault injection and the stats endpoints around a simulator's handler.
    private static func serve(_ request: HTTP2ServerRequest, stats: SimulatorStats, log: SimulatorLog, faultSwitch: SimulatorFaultSwitch,
                              handler: (HTTP2ServerRequest, SimulatorFaults) -> Void) {
        if request.path.hasPrefix("/_sim/") {
            if request.path.hasPrefix("/_sim/log?token="), request.method == "GET" {
                let raw = String(request.path.dropFirst("/_sim/log?token=".count).prefix { $0 != "&" })
                let token = raw.removingPercentEncoding ?? raw
                return request.respond(status: 200, headers: [HeaderField("content-type", "application/json")],
                                       body: log.json(token: token).serializedBytes())
            }
            if request.path.hasPrefix("/_sim/stats") {
                let body = stats.snapshot.json(includeTokens: request.path.contains("tokens=1")).serializedBytes()
                return request.respond(status: 200, headers: [HeaderField("content-type", "application/json")], body: body)
            }
            if request.path == "/_sim/reset", request.method == "POST" {
                stats.reset()
                log.reset()
                return request.respond(status: 204)
            }
            return request.respond(status: 404)
        }
        let connection = request.connection
        let state = connection.simulatorState
        // A connection open when handshake failures began goes before it processes anything,
        // so the client resends the request on a new connection, which cannot handshake yet.
        // One read of the faults per request, under one lock.
        let reading = faultSwitch.reading(openedAt: state.openedAt)
        if reading.drop {
            stats.recordReset()
            return connection.abort()
        }
        // Streams after a GOAWAY's last stream id are refused, never processed: the client
        // sends them again elsewhere, and nothing is delivered twice.
        if let last = state.goawayLastStreamID, request.streamID > last { return request.refuse() }
        let faults = reading.faults
        if reading.delayNanoseconds > 0 { request.responseDelayNanoseconds = reading.delayNanoseconds }
        handler(request, faults)
        if faults.goawayEvery > 0, connection.requestCount % faults.goawayEvery == 0, state.goawayLastStreamID == nil {
            state.goawayLastStreamID = request.streamID
            connection.goAway(lastStreamID: request.streamID)
        }
        if faults.resetEvery > 0, connection.requestCount % faults.resetEvery == 0 {
            stats.recordReset()
            connection.abort()
        }
    }

    /// Stops both servers.
    public func stop() {
        apnsServer.stop()
        fcmServer.stop()
        group.shutdown()
    }

}

/// What a simulator remembers about one connection (touched only on its loop).
final class SimulatorConnectionState {
    /// APNs: a valid provider token was seen, and the team it named.
    var authenticated = false
    var teamID: String?
    /// Fault injection: the last stream id of the GOAWAY sent, if any.
    var goawayLastStreamID: Int32?
    /// When it was accepted (monotonic nanoseconds), for ``SimulatorFaultSwitch/failHandshakes(forSeconds:)``.
    var openedAt: UInt64 = 0
}

extension HTTP2ServerConnection {
    var simulatorState: SimulatorConnectionState {
        if let state = context as? SimulatorConnectionState { return state }
        let state = SimulatorConnectionState()
        context = state
        return state
    }
}
