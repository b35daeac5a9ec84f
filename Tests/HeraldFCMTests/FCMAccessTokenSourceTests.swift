import Foundation
import HeraldCore
import HeraldCrypto
@testable import HeraldFCM
import HeraldHTTP2
import HeraldSim
import Testing

@Suite(.timeLimit(.minutes(2))) struct FCMAccessTokenSourceTests {
    @Test func issuesOnceAndReusesUntilShortlyBeforeExpiry() async throws {
        let fixture = try FCMSimulatorFixture(tokenLifetimeSeconds: 100)
        let tokens = try fixture.tokenSource(refreshMarginSeconds: 30)
        let first = try await tokens.token()
        #expect(first.expiresAt.seconds == fixture.clock.now.seconds + 100)
        #expect(first.authorization == "Bearer " + first.value && !first.value.isEmpty)
        fixture.clock.advance(seconds: 60)
        #expect(try await tokens.token() == first)
        #expect(fixture.stats.tokensIssued == 1)
        #expect(await tokens.tokenRequests == 1)

        // 70 s after issue the token is within the 30 s margin of its expiry: replaced.
        fixture.clock.advance(seconds: 15)
        let second = try await tokens.token()
        #expect(second != first)
        #expect(fixture.stats.tokensIssued == 2)
        #expect(fixture.stats.violations == 0)
    }

    @Test func thousandConcurrentSendsOnAnExpiredTokenMakeOneTokenRequest() async throws {
        let fixture = try FCMSimulatorFixture(tokenLifetimeSeconds: 100)
        let client = try fixture.fcmClient(refreshMarginSeconds: 30)
        #expect(await client.send(body: FCMSimulatorFixture.body()) == .accepted(name: "projects/herald-sim/messages/0:1%1"))
        fixture.clock.advance(seconds: 80)
        let outcomes = await withTaskGroup(of: FCMOutcome.self) { group in
            for index in 0..<1000 {
                group.addTask { await client.send(body: FCMSimulatorFixture.body(token: "device-\(index)")) }
            }
            var all: [FCMOutcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        let accepted = outcomes.filter { if case .accepted = $0 { true } else { false } }
        #expect(accepted.count == 1000)
        #expect(await client.tokens.tokenRequests == 2)
        #expect(fixture.stats.tokensIssued == 2)
        #expect(fixture.stats.violations == 0)
    }

    @Test func refusedTokenIsRefreshedOnceThenSendRetried() async throws {
        // The simulator's tokens die after 10 s of real time (counted in whole seconds, so 9–10 s)
        // while the injected clock stands still, so only FCM's 401 tells the client. Long
        // enough that on a loaded machine the first send and the refreshed retry each fit in
        // their token's life.
        let fixture = try FCMSimulatorFixture(tokenLifetimeSeconds: 10)
        let client = try fixture.fcmClient(refreshMarginSeconds: 0)
        #expect(await client.send(body: FCMSimulatorFixture.body()).receiptReason == nil)
        try await Task.sleep(for: .milliseconds(10_200))
        let issuedBefore = fixture.stats.tokensIssued
        let outcome = await client.send(body: FCMSimulatorFixture.body(token: "device-2"))
        guard case .accepted = outcome else {
            Issue.record("expected accepted, got \(outcome)")
            return
        }
        // Exactly one refresh for the refused send.
        #expect(fixture.stats.tokensIssued == issuedBefore + 1)
        #expect(fixture.stats.violations == 0)
    }

    @Test func secondRefusalIsACredentialFault() async throws {
        // Tokens that are dead on arrival: every send is refused with 401.
        let fixture = try FCMSimulatorFixture(tokenLifetimeSeconds: 0)
        let client = try fixture.fcmClient(refreshMarginSeconds: 0)
        let outcome = await client.send(body: FCMSimulatorFixture.body())
        guard case .credentialFault = outcome else {
            Issue.record("expected a credential fault, got \(outcome)")
            return
        }
        #expect(outcome.receiptReason == .credentials)
        #expect(fixture.stats.tokensIssued == 2)
        #expect(fixture.stats.accepted == 0)
    }

    @Test func aHandshakeFailureAtTheTokenEndpointIsRetryableNotACredentialFault() async throws {
        // A reset during the TLS handshake (a network fault) must not halt the app's FCM sends.
        // The failures last longer than the test can (a loaded CI machine once took more than
        // 30 s between the two requests, and the second one then found a healthy endpoint).
        let fixture = try FCMSimulatorFixture()
        fixture.simulator.faults.failHandshakes(forSeconds: 3600)
        let tokens = try fixture.tokenSource()
        do {
            _ = try await tokens.token()
            Issue.record("expected the token request to fail")
        } catch {
            #expect(error.code == .transport)
            #expect(error.isRetryable)
        }
        let outcome = await FCMClient(tokens: tokens, client: fixture.http).send(body: FCMSimulatorFixture.body())
        guard case .retryable = outcome else {
            Issue.record("expected a retryable outcome, got \(outcome)")
            return
        }
        #expect(fixture.stats.tokensIssued == 0)
    }

    @Test func aKeyTheEndpointDoesNotKnowIsACredentialFault() async throws {
        let fixture = try FCMSimulatorFixture()
        var stranger = fixture.account
        stranger.privateKeyPEM = try PrivateKey.generate(.rsa(bits: 2048)).pkcs8PEM()
        let tokens = try fixture.tokenSource(account: stranger)
        await #expect(throws: FCMError.self) { try await tokens.token() }
        do {
            _ = try await tokens.token()
        } catch {
            #expect(error.code == .credentials)
            #expect(!error.isRetryable)
            #expect(!error.message.contains("PRIVATE KEY"))
        }
        let outcome = await FCMClient(tokens: tokens, client: fixture.http).send(body: FCMSimulatorFixture.body())
        guard case .credentialFault = outcome else {
            Issue.record("expected a credential fault, got \(outcome)")
            return
        }
    }

    @Test func assertionClaims() throws {
        let fixture = try FCMSimulatorFixture()
        let tokens = try fixture.tokenSource()
        let issuedAt = Timestamp(seconds: 1_796_205_600)
        let jwt = try JWT(compact: try tokens.assertion(issuedAt: issuedAt))
        let header = try JSONValue.parse(jwt.headerJSON)
        let claims = try JSONValue.parse(jwt.claimsJSON)
        #expect(header["alg"] == .string("RS256"))
        #expect(header["kid"] == fixture.account.privateKeyID.map { .string($0) })
        #expect(claims["iss"] == .string(fixture.account.clientEmail))
        #expect(claims["aud"] == .string(fixture.account.tokenURI))
        #expect(claims["scope"] == .string("https://www.googleapis.com/auth/firebase.messaging"))
        #expect(claims["iat"] == .int(1_796_205_600))
        #expect(claims["exp"] == .int(1_796_205_600 + 3600))
        #expect(jwt.verify(with: try PrivateKey(pem: fixture.account.privateKeyPEM).publicKey()))

        // scripts/test checks the same assertion with Python's `cryptography`
        // (scripts/verify-fcm-assertion.py), an implementation that shares no code with Herald's.
        if let folder = ProcessInfo.processInfo.environment["HERALD_FCM_ASSERTION_DIR"] {
            let directory = URL(fileURLWithPath: folder)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let now = Timestamp(seconds: Timestamp.now.seconds)
            try Data(try tokens.assertion(issuedAt: now).utf8).write(to: directory.appendingPathComponent("assertion.jwt"))
            try Data(contentsOf: fixture.directory.appendingPathComponent("fcm-service-account.json"))
                .write(to: directory.appendingPathComponent("service-account.json"))
        }
    }

    @Test func tokenURIPathAndFormEncoding() {
        #expect(FCMAccessTokenSource.path(of: "https://oauth2.googleapis.com/token") == "/token")
        #expect(FCMAccessTokenSource.path(of: "https://127.0.0.1:8443/o/oauth2/token") == "/o/oauth2/token")
        #expect(FCMAccessTokenSource.path(of: "https://example.com") == "/")
        #expect(FCMAccessTokenSource.formEncode("urn:ietf:params:oauth:grant-type:jwt-bearer") == "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer")
    }

    @Test func anAbsurdExpiresInIsClampedNotTrapped() throws {
        let issued = Timestamp(seconds: 1_800_000_000)
        func expiry(_ expiresIn: String, at issuedAt: Timestamp = Timestamp(seconds: 1_800_000_000)) throws -> Int64 {
            let body = Array(#"{"access_token":"ya29.x","expires_in":\#(expiresIn),"token_type":"Bearer"}"#.utf8)
            return try FCMAccessTokenSource.token(from: HTTP2Response(status: 200, body: body), issuedAt: issuedAt, clientEmail: "a@b").get().expiresAt.seconds
        }
        #expect(try expiry("3599") == issued.seconds + 3599)
        // 9223372036854775807 seconds used to overflow `issuedAt + expires_in` and trap every worker loading the app.
        #expect(try expiry("9223372036854775807") == issued.seconds + 86_400)
        #expect(try expiry("1e300") == issued.seconds + 86_400)
        #expect(try expiry("-5") == issued.seconds + 60)
        #expect(try expiry("0.5") == issued.seconds + 60)
        #expect(try expiry("86400", at: Timestamp(seconds: Int64.max - 10)) == Int64.max)
    }

    @Test func aTokenEndpointsRefusalsAreSortedIntoTroubleAndCredentials() {
        func code(_ status: Int, _ body: String) -> FCMError.Code? {
            guard case .failure(let error) = FCMAccessTokenSource.token(from: HTTP2Response(status: status, body: Array(body.utf8)),
                                                                        issuedAt: Timestamp(seconds: 0), clientEmail: "a@b") else { return nil }
            return error.code
        }
        #expect(code(503, "") == .tokenEndpoint)
        #expect(code(429, #"{"error":"rate_limited"}"#) == .tokenEndpoint)
        #expect(code(400, #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#) == .credentials)
        #expect(code(200, #"{"access_token":""}"#) == .tokenEndpoint)
        #expect(code(200, "not json") == .tokenEndpoint)
    }
}
