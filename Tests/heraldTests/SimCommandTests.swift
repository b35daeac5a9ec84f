import Foundation
import HeraldCrypto
import HeraldTestSupport
import Testing

/// `herald sim`'s listen address and names, as the compose file runs it: `--listen 0.0.0.0
/// --public-host sim --cert-name …`.
@Suite(.timeLimit(.minutes(2))) struct SimCommandTests {
    @Test(arguments: [
        ["--listen", "localhost"], ["--listen", "1.2.3"], ["--listen", "::1"], ["--listen", ""], ["--listen=0.0.0.0.0"],
        ["--public-host", "::1"], ["--public-host", "sim,evil.example"], ["--cert-name", "sim,IP:10.0.0.1"], ["--cert-name", "sim example"],
    ])
    func anAddressOrNameItCannotUseIsAUsageError(arguments: [String]) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Subprocess.run(TestEnvironment.heraldBinary, ["sim", "--state-dir", directory.path] + arguments, timeout: 20)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        let option = arguments[0].split(separator: "=")[0]
        #expect(result.stderr.contains("\(option) takes"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path), "nothing is written on a usage error")
    }

    @Test func theComposeServiceLineWritesItsNamesAndTokenTimeLeavesThemAlone() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-sim-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = directory.appendingPathComponent("sim")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func file(_ name: String) throws -> String { try String(contentsOf: state.appendingPathComponent(name), encoding: .utf8) }

        let sim = try SimProcess(binary: TestEnvironment.heraldBinary, directory: state,
                                 arguments: ["--listen", "0.0.0.0", "--public-host", "sim", "--cert-name", "sim.example"], logs: directory)
        #expect(await sim.stop() == 0)
        let account = try JSONSerialization.jsonObject(with: Data(try file("fcm-service-account.json").utf8)) as? [String: Any]
        #expect(account?["token_uri"] as? String == "https://sim:\(sim.fcmPort)/token")
        #expect(try CertificateNames(certificatePEM: try file("server.pem"))
                == (try CertificateNames(["127.0.0.1", "localhost", "sim", "sim.example"])))
        #expect(sim.stderr.isEmpty, "\(sim.stderr)")

        // `sim token` reads the same directory: the token URI and the certificate stay.
        let before = try ["fcm-service-account.json", "server.pem", "ca.pem"].map(file)
        let token = try Subprocess.run(TestEnvironment.heraldBinary, ["sim", "token", "--state-dir", state.path], timeout: 20)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.split(separator: ".").count == 3)
        #expect(try ["fcm-service-account.json", "server.pem", "ca.pem"].map(file) == before)

        // Another name: a new server certificate from the same CA, and a line saying so.
        let again = try SimProcess(binary: TestEnvironment.heraldBinary, directory: state,
                                   arguments: ["--listen", "0.0.0.0", "--public-host", "sim",
                                               "--cert-name", "sim.example", "--cert-name", "worker.example"], logs: directory)
        #expect(await again.stop() == 0)
        #expect(again.stderr.contains("server.pem did not name worker.example; signed a new one with the same CA"), "\(again.stderr)")
        #expect(try file("ca.pem") == before[2])
        #expect(try file("server.pem") != before[1])
    }
}
