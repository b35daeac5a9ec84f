import Foundation
import HeraldCrypto
import HeraldHTTP2
import HeraldSim
import HeraldTestSupport
import Testing

/// Independent HTTP/2 implementations (nghttp2's h2load, nghttp, nghttpd) against Herald's
/// server and client, over TLS with ALPN h2. scripts/setup installs them.
@Suite(.timeLimit(.minutes(2))) struct InteropTests {
    private func tool(_ name: String) throws -> URL {
        try #require(Subprocess.which(name), "\(name) is not installed: scripts/setup installs nghttp2-client and nghttp2-server")
    }

    @Test func h2loadAndNghttpAgainstTheAPNsSimulator() async throws {
        // h2load opens its streams before it reads the server's SETTINGS, so the simulator
        // allows them all from the start (APNs itself allows one until a valid token).
        let fixture = try SimulatorFixture(streamsBeforeToken: 1000)
        let port = fixture.simulator.apnsPort
        let token = try fixture.simulator.credentials.apnsProviderToken()
        let body = fixture.directory.appendingPathComponent("body.json")
        try Data(#"{"aps":{"alert":"interop"}}"#.utf8).write(to: body)
        let headers = ["-H", "authorization: bearer \(token)", "-H", "apns-topic: \(fixture.simulator.credentials.bundleID)", "-H", "apns-push-type: alert"]
        let url = "https://127.0.0.1:\(port)/3/device/\(SimulatorFixture.deviceToken(42))"

        let nghttp = try await Subprocess.runDetached(try tool("nghttp"), ["-v", "-d", body.path] + headers + [url], timeout: 30)
        #expect(nghttp.status == 0, "\(nghttp.stderr)")
        #expect(nghttp.stdout.contains(":status: 200"))
        #expect(nghttp.stdout.contains("h2"), "ALPN did not negotiate h2")

        let load = try await Subprocess.runDetached(try tool("h2load"), ["-n", "5000", "-c", "2", "-m", "50", "-t", "1", "-d", body.path] + headers + [url], timeout: 60)
        #expect(load.status == 0, "\(load.stderr)")
        #expect(load.stdout.contains("5000 succeeded, 0 failed"), "\(load.stdout)")
        #expect(load.stdout.contains("status codes: 5000 2xx"))
        #expect(fixture.simulator.apnsStats.snapshot.accepted == 5001)
    }

    @Test func heraldClientAgainstNghttpd() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-nghttpd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("www"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try CertificateAuthority.generate()
        try authority.caCertificatePEM.write(to: directory.appendingPathComponent("ca.pem"), atomically: true, encoding: .utf8)
        try authority.serverCertificatePEM.write(to: directory.appendingPathComponent("cert.pem"), atomically: true, encoding: .utf8)
        try authority.serverKeyPEM.write(to: directory.appendingPathComponent("key.pem"), atomically: true, encoding: .utf8)
        let content = Data((0..<100_000).map { UInt8($0 % 253) })
        try content.write(to: directory.appendingPathComponent("www/file.bin"))

        let port = try TestPorts.free()
        let server = Process()
        server.executableURL = try tool("nghttpd")
        server.arguments = ["-d", directory.appendingPathComponent("www").path, "-m", "100", "--address=127.0.0.1", String(port),
                            directory.appendingPathComponent("key.pem").path, directory.appendingPathComponent("cert.pem").path]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { Subprocess.stop(server, grace: 1) }
        #expect(TestPorts.waitUntilListening(port))

        let loop = try EventLoop()
        defer { loop.shutdown() }
        var configuration = HTTP2Client.Configuration(host: "127.0.0.1", port: port)
        configuration.maxConnections = 2
        let client = HTTP2Client(configuration: configuration, tls: try TLSContext(client: directory.appendingPathComponent("ca.pem").path), loop: loop)
        let bodies = try await withThrowingTaskGroup(of: HTTP2Response.self) { group in
            for _ in 0..<200 { group.addTask { try await client.send(HTTP2Request(method: "GET", path: "/file.bin")) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(bodies.count == 200)
        #expect(bodies.allSatisfy { $0.status == 200 && $0.body == Array(content) })
        let missing = try await client.send(HTTP2Request(method: "GET", path: "/absent"))
        #expect(missing.status == 404)
        client.shutdown()
    }
}
