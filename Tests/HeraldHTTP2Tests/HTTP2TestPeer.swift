import Foundation
import HeraldCrypto
import HeraldHTTP2

/// A TLS HTTP/2 server on loopback with a throwaway CA, and a client pool that trusts it.
final class HTTP2TestPeer: @unchecked Sendable {
    let authority: CertificateAuthority
    let caFile: String
    /// The throwaway CA's directory, removed with the peer.
    private let directory: URL
    let serverGroup: EventLoopGroup
    let server: HTTP2Server
    let clientLoop: EventLoop

    /// With `requestClientCertificates`, the server asks clients for a certificate its CA issued.
    /// `clientClock` is the client loop's clock (a ``ManualLoopClock`` to move time by hand).
    /// `listener`: a socket bound ahead for the server to serve.
    init(maxConcurrentStreams: UInt32 = 1000, requestClientCertificates: Bool = false, clientClock: any LoopClock = SystemLoopClock(),
         listener: HTTP2Listener? = nil,
         onConnection: (@Sendable (HTTP2ServerConnection) -> Void)? = nil, handler: @escaping HTTP2RequestHandler) throws {
        authority = try CertificateAuthority.generate()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-h2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        caFile = directory.appendingPathComponent("ca.pem").path
        try authority.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        serverGroup = try EventLoopGroup(count: 1)
        var configuration = HTTP2Server.Configuration()
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.listener = listener
        server = HTTP2Server(configuration: configuration,
                             tls: try TLSContext(serverCertificatePEM: authority.serverCertificatePEM, keyPEM: authority.serverKeyPEM,
                                                 clientCertificateAuthorityPEM: requestClientCertificates ? authority.caCertificatePEM : nil),
                             group: serverGroup, onConnection: onConnection, handler: handler)
        try server.start()
        clientLoop = try EventLoop(clock: clientClock)
    }

    /// A client that trusts the server, presenting `certificate` when given.
    func client(maxConnections: Int = 1, certificate: IssuedCertificate? = nil,
                configure: (inout HTTP2Client.Configuration) -> Void = { _ in }) throws -> HTTP2Client {
        var configuration = HTTP2Client.Configuration(host: "127.0.0.1", port: server.port)
        configuration.maxConnections = maxConnections
        configure(&configuration)
        let tls = try TLSContext(client: caFile, clientCertificatePEM: certificate?.certificatePEM, clientKeyPEM: certificate?.keyPEM)
        return HTTP2Client(configuration: configuration, tls: tls, loop: clientLoop)
    }

    deinit {
        server.stop()
        serverGroup.shutdown()
        clientLoop.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}
