import Foundation
import HeraldCrypto
import Testing

/// Client certificates on a server that requests but does not require them, over a real socket
/// pair: each side on a thread of its own, with blocking sockets.
@Suite(.timeLimit(.minutes(1))) struct TLSTests {
    private struct Unexpected: Error, CustomStringConvertible {
        let description: String
    }

    /// What each side saw: the subject of the certificate it verified on the other side.
    private struct Handshake: Sendable {
        let server: Result<CertificateSubject?, any Error>
        let client: Result<CertificateSubject?, any Error>
        /// The client's session after a successful handshake, to resume.
        let session: TLSSession?
        let resumed: Bool
    }

    private static let bundleID = "com.example.app"

    /// A server that asks for client certificates issued by its own CA.
    private func server(_ authority: CertificateAuthority, requestCertificates: Bool = true) throws -> TLSContext {
        try TLSContext(serverCertificatePEM: authority.serverCertificatePEM, keyPEM: authority.serverKeyPEM,
                       clientCertificateAuthorityPEM: requestCertificates ? authority.caCertificatePEM : nil)
    }

    /// A client that trusts `authority` and presents `certificate` if given.
    private func client(_ authority: CertificateAuthority, certificatePEM: String? = nil, keyPEM: String? = nil) throws -> TLSContext {
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("herald-tls-ca-\(UUID().uuidString).pem")
        try authority.caCertificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: caFile) }
        return try TLSContext(client: caFile.path, clientCertificatePEM: certificatePEM, clientKeyPEM: keyPEM)
    }

    /// One TLS connection over a socket pair. The server sends a byte once its handshake is
    /// done; the client reads it, since a TLS 1.3 client finishes its handshake before the
    /// server has judged its certificate and only learns the verdict on its first read.
    private func connect(server: TLSContext, client: TLSContext, resuming session: TLSSession? = nil) async throws -> Handshake {
        // A side that fails closes its socket; the other's write must fail, not kill the process.
        signal(SIGPIPE, SIG_IGN)
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let (serverFD, clientFD) = (fds[0], fds[1])
        async let serverSide = Self.onThread { () -> Result<CertificateSubject?, any Error> in
            defer { close(serverFD) }
            return Result {
                let stream = try TLSStream(context: server, fileDescriptor: serverFD, serverName: nil)
                let progress = try stream.handshake()
                guard progress == .done else { throw Unexpected(description: "server handshake: \(progress)") }
                let byte: UInt8 = 1
                _ = try withUnsafeBytes(of: byte) { try stream.write($0) }
                // A session freed without close_notify is no longer resumable.
                defer { stream.shutdown() }
                return stream.verifiedPeerSubject
            }
        }
        async let clientSide = Self.onThread { () -> (Result<CertificateSubject?, any Error>, TLSSession?, Bool) in
            defer { close(clientFD) }
            var newSession: TLSSession?
            var resumed = false
            let result = Result { () throws -> CertificateSubject? in
                let stream = try TLSStream(context: client, fileDescriptor: clientFD, serverName: "127.0.0.1")
                if let session { stream.resume(session) }
                let progress = try stream.handshake()
                guard progress == .done else { throw Unexpected(description: "client handshake: \(progress)") }
                var byte: UInt8 = 0
                let (count, readProgress) = try withUnsafeMutableBytes(of: &byte) { try stream.read(into: $0) }
                guard count == 1 else { throw Unexpected(description: "client read: \(readProgress)") }
                newSession = stream.session
                resumed = stream.resumed
                defer { stream.shutdown() }
                return stream.verifiedPeerSubject
            }
            return (result, newSession, resumed)
        }
        let (clientResult, clientSession, resumed) = await clientSide
        return Handshake(server: await serverSide, client: clientResult, session: clientSession, resumed: resumed)
    }

    private static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    @Test func aClientWithoutACertificateConnectsWithNoIdentity() async throws {
        let authority = try CertificateAuthority.generate()
        let handshake = try await connect(server: try server(authority), client: try client(authority))
        #expect(try handshake.server.get() == nil)
        // The client verified the server as usual.
        #expect(try handshake.client.get() == CertificateSubject(uid: nil, commonName: "localhost"))
    }

    @Test func theServerSeesTheBundleOfACertificateItsAuthorityIssued() async throws {
        let authority = try CertificateAuthority.generate()
        let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: Self.bundleID, caCertificatePEM: authority.caCertificatePEM,
                                                                         caKeyPEM: authority.caKeyPEM)
        let handshake = try await connect(server: try server(authority),
                                          client: try client(authority, certificatePEM: issued.certificatePEM, keyPEM: issued.keyPEM))
        #expect(try handshake.server.get() == CertificateSubject(uid: Self.bundleID, commonName: "Apple Push Services: \(Self.bundleID)"))
        #expect(try handshake.client.get() != nil)
    }

    /// Apple refuses a certificate it did not issue during the handshake; so does the server.
    @Test(arguments: ["self-signed", "another CA", "a server certificate"])
    func aCertificateTheAuthorityDidNotIssueForClientsFailsTheHandshake(kind: String) async throws {
        let authority = try CertificateAuthority.generate()
        let other = try CertificateAuthority.generate()
        let (certificatePEM, keyPEM): (String, String)
        switch kind {
        case "self-signed":
            (certificatePEM, keyPEM) = (other.caCertificatePEM, other.caKeyPEM)
        case "another CA":
            let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: Self.bundleID, caCertificatePEM: other.caCertificatePEM,
                                                                             caKeyPEM: other.caKeyPEM)
            (certificatePEM, keyPEM) = (issued.certificatePEM, issued.keyPEM)
        default:
            // Signed by the right CA, but for serverAuth only.
            (certificatePEM, keyPEM) = (authority.serverCertificatePEM, authority.serverKeyPEM)
        }
        let handshake = try await connect(server: try server(authority),
                                          client: try client(authority, certificatePEM: certificatePEM, keyPEM: keyPEM))
        #expect {
            try handshake.server.get()
        } throws: { error in
            (error as? CryptoError)?.code == .tlsHandshake && "\(error)".contains("certificate verification")
        }
        #expect(throws: (any Error).self) { try handshake.client.get() }
    }

    /// A server without a client authority never asks, so a client's certificate is not sent.
    @Test func aServerThatDoesNotAskSeesNoIdentity() async throws {
        let authority = try CertificateAuthority.generate()
        let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: Self.bundleID, caCertificatePEM: authority.caCertificatePEM,
                                                                         caKeyPEM: authority.caKeyPEM)
        let handshake = try await connect(server: try server(authority, requestCertificates: false),
                                          client: try client(authority, certificatePEM: issued.certificatePEM, keyPEM: issued.keyPEM))
        #expect(try handshake.server.get() == nil)
    }

    /// Herald's clients resume TLS sessions on reconnect: the resumed connection carries the
    /// first one's verified certificate.
    @Test func aResumedSessionKeepsTheClientIdentity() async throws {
        let authority = try CertificateAuthority.generate()
        let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: Self.bundleID, caCertificatePEM: authority.caCertificatePEM,
                                                                         caKeyPEM: authority.caKeyPEM)
        let serverContext = try server(authority)
        let clientContext = try client(authority, certificatePEM: issued.certificatePEM, keyPEM: issued.keyPEM)
        let first = try await connect(server: serverContext, client: clientContext)
        let session = try #require(first.session)
        let second = try await connect(server: serverContext, client: clientContext, resuming: session)
        #expect(second.resumed)
        #expect(try second.server.get()?.uid == Self.bundleID)
    }

    @Test func theClientAuthorityMustBeACertificate() throws {
        let authority = try CertificateAuthority.generate()
        #expect(throws: CryptoError.self) {
            try TLSContext(serverCertificatePEM: authority.serverCertificatePEM, keyPEM: authority.serverKeyPEM,
                           clientCertificateAuthorityPEM: "not a certificate")
        }
    }
}
