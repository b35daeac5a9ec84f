import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldTestSupport
import Synchronization
import Testing

/// A clock the test moves by hand (epoch seconds).
final class FakeClock: Sendable {
    private let seconds: Atomic<Int64>
    init(_ start: Int64) { seconds = Atomic(start) }
    var now: Int64 { seconds.load(ordering: .relaxed) }
    func advance(_ delta: Int64) { seconds.add(delta, ordering: .relaxed) }
    var closure: @Sendable () -> Int64 { { [self] in self.now } }
}

@Suite struct APNsProviderTokenTests {
    private func source(_ clock: FakeClock) throws -> APNsProviderToken {
        APNsProviderToken(key: try PrivateKey.generate(.ecP256), keyID: "KEY1234567", teamID: "TEAM123456", now: clock.closure)
    }

    /// 8 connections asking concurrently get one token; it is replaced at 50 minutes, and never
    /// twice within 20 minutes even when callers report it expired.
    @Test func oneTokenPerKeyAcrossEightConnections() async throws {
        let clock = FakeClock(1_800_000_000)
        let tokens = try source(clock)
        func askEight() async throws -> Set<String> {
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<8 { group.addTask { try tokens.current() } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
        }
        let first = try await askEight()
        #expect(first.count == 1)
        #expect(tokens.tokensMinted == 1)

        clock.advance(49 * 60 + 59)
        #expect(try await askEight() == first)
        #expect(tokens.tokensMinted == 1)

        clock.advance(1)  // 50 minutes
        let second = try await askEight()
        #expect(second.count == 1 && second != first)
        #expect(tokens.tokensMinted == 2)

        // ExpiredProviderToken reported on every connection, 10 minutes after the refresh:
        // too soon for another token, so all of them keep it.
        clock.advance(10 * 60)
        let rejected = try #require(second.first)
        let afterTooSoon = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try tokens.refresh(after: rejected) } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(afterTooSoon == [rejected])
        #expect(tokens.tokensMinted == 2)

        // At 20 minutes, 8 connections reporting it at once make exactly one new token.
        clock.advance(10 * 60)
        let afterRefresh = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try tokens.refresh(after: rejected) } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(afterRefresh.count == 1 && afterRefresh != [rejected])
        #expect(tokens.tokensMinted == 3)
        #expect(try await askEight() == afterRefresh)
    }

    @Test func tokenHasAPNsHeaderAndClaims() throws {
        let clock = FakeClock(1_800_000_123)
        let key = try PrivateKey.generate(.ecP256)
        let tokens = APNsProviderToken(key: key, keyID: "KEY1234567", teamID: "TEAM123456", now: clock.closure)
        let jwt = try JWT(compact: try tokens.current())
        #expect(try JSONValue.parse(jwt.headerJSON) == .object(["alg": .string("ES256"), "kid": .string("KEY1234567")]))
        #expect(try JSONValue.parse(jwt.claimsJSON) == .object(["iss": .string("TEAM123456"), "iat": .int(1_800_000_123)]))
        #expect(jwt.signature.count == 64)
        #expect(jwt.verify(with: try key.publicKey()))
    }

    /// The JWT verifies with an independent implementation: scripts/verify-apns-jwt.py (Python
    /// `cryptography`) checks header, claims and the ES256 signature against the .p8 key.
    @Test(.timeLimit(.minutes(1))) func verifiesWithPythonCryptography() async throws {
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/verify-apns-jwt.py")
        let python = try #require(Subprocess.which("python3"), "python3 is required (scripts/setup)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-jwt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try PrivateKey.generate(.ecP256)
        let p8 = directory.appendingPathComponent("AuthKey.p8")
        try key.pkcs8PEM().write(to: p8, atomically: true, encoding: .utf8)
        let tokens = try APNsProviderToken(p8: try key.pkcs8PEM(), keyID: "ABCDE12345", teamID: "TEAMID7890", now: { 1_800_000_000 })
        let token = try tokens.current()
        let arguments = [script.path, "--token", token, "--p8", p8.path, "--key-id", "ABCDE12345", "--team-id", "TEAMID7890", "--iat", "1800000000"]
        let good = try await Subprocess.runDetached(python, arguments)
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        // A tampered signature is refused, so the check is not vacuous.
        var tampered = Array(token)
        tampered[tampered.count - 2] = tampered[tampered.count - 2] == "A" ? "B" : "A"
        var bad = arguments
        bad[2] = String(tampered)
        #expect(try await Subprocess.runDetached(python, bad).status == 1)
    }
}
